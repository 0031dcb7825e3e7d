package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jccl.examples.CollectiveCheck;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link CollectiveCheck} started by Open MPI's {@code mpirun}: the ranks take their rank and size
 * from {@code OMPI_COMM_WORLD_RANK}/{@code OMPI_COMM_WORLD_SIZE} and the bootstrap root from
 * {@code JCCL_COMM_ID} or {@code MASTER_ADDR}/{@code MASTER_PORT}, exported with {@code -x} as a user
 * would. Skipped, saying so, where {@code mpirun} is not installed (CI installs it: {@code .ci/run}).
 */
class MpirunTest {

    private static Path mpirun;

    @BeforeAll
    static void findMpirun() {
        mpirun = onPath("mpirun");
    }

    private static Path onPath(String program) {
        String path = System.getenv("PATH");
        if (path == null) {
            return null;
        }
        for (String dir : path.split(File.pathSeparator)) {
            Path p = Path.of(dir.isEmpty() ? "." : dir, program);
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }

    /**
     * mpirun with what this test environment needs: root is allowed (CI containers run as root),
     * more ranks than cores (2-core machines), no binding (a JVM pinned to one core starves its own
     * threads), and the {@code isolated} launcher, which starts local processes without ssh.
     */
    private static List<String> mpirunCommand(int np, Map<String, String> exported, List<String> program) {
        List<String> cmd = new ArrayList<>(List.of(mpirun.toString(), "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                "--mca", "plm", "isolated", "--mca", "btl", "self,tcp", "-np", Integer.toString(np)));
        exported.forEach((k, v) -> {
            cmd.add("-x");
            cmd.add(k + "=" + v);
        });
        cmd.addAll(program);
        return cmd;
    }

    private static void runUnderMpirun(int np, Map<String, String> exported, String... checkArgs) {
        assumeTrue(mpirun != null, "mpirun not found: apt-get install openmpi-bin");
        try (Processes procs = new Processes()) {
            List<String> program = new ArrayList<>(Processes.collectiveCheck(checkArgs));
            program.add("--verbose");
            procs.start("mpirun", mpirunCommand(np, exported, program), Map.of());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "mpirun exited " + codes.getFirst() + "\n" + out);
            Processes.checkOk(out);
            // The ranks' identity came from Open MPI's variables, not from anything jccl-specific.
            for (int r = 0; r < np; r++) {
                assertTrue(out.contains("rank " + r + " of " + np + ": joined through the Open MPI launcher convention"), out);
            }
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void collectiveCheckUnderMpirunWithJcclCommId() {
        runUnderMpirun(4, Map.of("JCCL_AUTH_TOKEN", Processes.newToken(), "JCCL_COMM_ID", "127.0.0.1:" + Processes.freePort()),
                "--counts", "0,7,1000", "--types", "float32,int32,bfloat16", "--reduce-ops", "sum,max");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void collectiveCheckUnderMpirunWithMasterAddrAndPort() {
        runUnderMpirun(2, Map.of("JCCL_AUTH_TOKEN", Processes.newToken(), "MASTER_ADDR", "127.0.0.1", "MASTER_PORT",
                Integer.toString(Processes.freePort())),
                "--counts", "1,1000", "--types", "float64,uint8", "--reduce-ops", "sum,prod");
    }

    /**
     * {@code jccl perf} without -np is one rank of a job a launcher started: under mpirun every rank
     * runs it, they form one job from Open MPI's variables, and only rank 0 prints the table.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void perfUnderMpirunPrintsOneTableFromRankZero() {
        assumeTrue(mpirun != null, "mpirun not found: apt-get install openmpi-bin");
        try (Processes procs = new Processes()) {
            List<String> program = Processes.javaMain("org.jccl.cli.JcclCli", "perf", "all_reduce", "-b", "8", "-e", "64K", "-f", "8",
                    "-n", "5", "--jit-warmup", "0");
            procs.start("mpirun", mpirunCommand(2, Map.of("JCCL_AUTH_TOKEN", Processes.newToken(), "JCCL_COMM_ID",
                    "127.0.0.1:" + Processes.freePort()), program), Map.of());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "mpirun exited " + codes.getFirst() + "\n" + out);
            assertEquals(1, count(out, "# Collective test starting: all_reduce_perf"), "one table, from rank 0:\n" + out);
            assertEquals(1, count(out, "# Out of bounds values : 0 OK"), out);
            for (String size : new String[] {"8", "64", "512", "4096", "32768"}) {
                assertTrue(out.lines().anyMatch(l -> l.trim().startsWith(size + " ")), "row for " + size + " bytes:\n" + out);
            }
            assertTrue(out.contains("Rank  1 Group  0"), "both ranks listed under Using devices:\n" + out);
        }
    }

    /**
     * What issue 18 asks for: mpirun with no {@code -x} and no JCCL variable at all. Rank 0's
     * address and the job secret go through mpirun's PMIx server; the ranks' home directory
     * ({@code user.home}) is an empty directory, and no secret file appears in it (the secret did not
     * come from the per-user file). Every collective is checked.
     */
    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void collectiveCheckUnderMpirunWithNothingExtra() throws Exception {
        assumeTrue(mpirun != null, "mpirun not found: apt-get install openmpi-bin");
        Path home = Files.createTempDirectory("jccl-mpirun-home");
        try (Processes procs = new Processes()) {
            List<String> program = new ArrayList<>(Processes.collectiveCheck("--counts", "0,7,1000", "--types", "float32,int64,bfloat16",
                    "--reduce-ops", "sum,min"));
            program.add(1, "-Duser.home=" + home);
            program.add("--verbose");
            procs.start("mpirun", mpirunCommand(3, Map.of(), program), Map.of());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(130));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "mpirun exited " + codes.getFirst() + "\n" + out);
            Processes.checkOk(out);
            for (int r = 0; r < 3; r++) {
                assertTrue(out.contains("rank " + r + " of 3: joined through the Open MPI launcher convention"), out);
                assertTrue(out.contains("rank " + r + ": rank 0's address through the PMIx server of Open MPI (namespace "), out);
            }
            assertTrue(!Files.exists(home.resolve(".jccl")), "a secret file was made in " + home + ": the secret did not come through PMIx");
        } finally {
            Files.deleteIfExists(home.resolve(".jccl/secret"));
            Files.deleteIfExists(home.resolve(".jccl"));
            Files.deleteIfExists(home);
        }
    }

    /** Two Jccl.init in a row in the same processes: each runs its own exchange through PMIx (a fresh key), both all-reduce right. */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void twoInitsInTheSameProcessesThroughPmix() {
        assumeTrue(mpirun != null, "mpirun not found: apt-get install openmpi-bin");
        try (Processes procs = new Processes()) {
            procs.start("mpirun", mpirunCommand(2, Map.of(), Processes.javaMain(InitTwiceRank.class.getName(), "twice")), Map.of());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "mpirun exited " + codes.getFirst() + "\n" + out);
            assertTrue(out.contains("TWICE OK rank 0") && out.contains("TWICE OK rank 1"), out);
        }
    }

    /**
     * A rank that never reaches Jccl.init within JCCL_INIT_TIMEOUT (5 s here): the others do not
     * hang in the PMIx fence; they fail once the deadline passes, naming the channel.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aRankThatNeverArrivesFailsTheOthersInThePmixFence() {
        assumeTrue(mpirun != null, "mpirun not found: apt-get install openmpi-bin");
        try (Processes procs = new Processes()) {
            long t0 = System.nanoTime();
            procs.start("mpirun", mpirunCommand(2, Map.of("JCCL_INIT_TIMEOUT", "5"),
                    Processes.javaMain(InitTwiceRank.class.getName(), "late", "1", "90")), Map.of());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            long seconds = (System.nanoTime() - t0) / 1_000_000_000L;
            String out = procs.outputs();
            assertTrue(codes.getFirst() != 0, "mpirun succeeded although rank 1 never joined\n" + out);
            assertTrue(out.contains("INIT FAILED after ") && out.contains("JcclTimeoutException") && out.contains("PMIx_Fence")
                    && out.contains("the PMIx server of Open MPI"), out);
            assertTrue(seconds < 60, "took " + seconds + " s: rank 0 should give up about 5 s after it arrived\n" + out);
        }
    }

    /**
     * jccl's PMIx client (libpmix through FFM) against mpirun's PMIx server: 3 ranks put, commit,
     * fence and read each other's values, twice.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void pmixPutFenceGetBetweenThreeRanks() {
        assumeTrue(mpirun != null, "mpirun not found: apt-get install openmpi-bin");
        try (Processes procs = new Processes()) {
            procs.start("mpirun", mpirunCommand(3, Map.of(), Processes.javaMain(PmixProbe.class.getName(), "3")), Map.of());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "mpirun exited " + codes.getFirst() + "\n" + out);
            for (int r = 0; r < 3; r++) {
                assertTrue(out.contains("PMIX OK rank " + r + " of 3 ns "), out);
            }
        }
    }

    private static int count(String text, String what) {
        int n = 0;
        for (int i = text.indexOf(what); i >= 0; i = text.indexOf(what, i + 1)) {
            n++;
        }
        return n;
    }
}
