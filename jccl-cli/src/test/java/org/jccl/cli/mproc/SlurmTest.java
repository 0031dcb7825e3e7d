package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * jccl under a real Slurm: one node, this host, started for this class ({@link SingleHostSlurm}:
 * munged, slurmctld, slurmd) and stopped after it. Skipped, naming what is missing, without root
 * or without Debian's slurm-wlm and munge ({@code .ci/run} installs them).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class SlurmTest {

    private static SingleHostSlurm slurm;

    @BeforeAll
    static void startSlurm() throws Exception {
        slurm = SingleHostSlurm.start();
    }

    /**
     * Stops the cluster with a job still running, as after a failed test, and checks that nothing
     * is left: no daemon, no slurmstepd, no task (its pid recorded by the job), no directory.
     */
    @AfterAll
    static void stopSlurm() throws Exception {
        if (slurm == null) {
            return;
        }
        Path dir = slurm.dir();
        Path pidFile = dir.resolve("sleeper.pid");
        Processes procs = new Processes();
        try {
            procs.start("srun-sleeper", srun("-n", "1", "sh", "-c", "echo $$ > " + pidFile + "; exec sleep 600"), slurm.env());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!(Files.exists(pidFile) && !Files.readString(pidFile).isBlank()) && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            assertTrue(Files.exists(pidFile), "the sleeping job did not start\n" + procs.outputs() + slurm.logs());
            long task = Long.parseLong(Files.readString(pidFile).strip());
            assertTrue(ProcessHandle.of(task).isPresent(), "the task runs");
            slurm.close();
            assertFalse(ProcessHandle.of(task).map(ProcessHandle::isAlive).orElse(false), "task " + task + " survived the cluster");
            assertFalse(Files.exists(dir), "the test cluster's directory " + dir + " was not removed");
        } finally {
            slurm.close();
            procs.close();
        }
    }

    private static List<String> srun(String... args) {
        List<String> c = new ArrayList<>(List.of(SingleHostSlurm.tool("srun"), "--kill-on-bad-exit=1", "--time=5"));
        c.addAll(List.of(args));
        return c;
    }

    /** CollectiveCheck's program with {@code user.home} set to {@code home} (where a per-user secret file would be made). */
    private static List<String> collectiveCheck(Path home) {
        List<String> p = new ArrayList<>(Processes.collectiveCheck("--counts", "0,7,1000", "--types", "float32,int32,float16",
                "--reduce-ops", "sum,max", "--verbose"));
        p.add(1, "-Duser.home=" + home);
        return p;
    }

    private static void assertJoined(String out, int n, String channel) {
        Processes.checkOk(out);
        for (int r = 0; r < n; r++) {
            assertTrue(out.contains("rank " + r + " of " + n + ": joined through the Slurm launcher convention"), out);
            assertTrue(out.contains("rank " + r + ": rank 0's address through " + channel), out);
        }
    }

    /**
     * Plain srun, nothing extra set: rank 0's address from the step's node list and the port derived
     * from the job and step ids; the secret from the per-user file, which the first rank made and
     * every rank read. Every collective is checked.
     */
    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void collectiveCheckUnderPlainSrun() throws Exception {
        Path home = Files.createDirectories(slurm.dir().resolve("home-plain"));
        try (Processes procs = new Processes()) {
            List<String> cmd = srun("-n", "3");
            cmd.addAll(collectiveCheck(home));
            procs.start("srun", cmd, slurm.env());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(130));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "srun exited " + codes.getFirst() + "\n" + out + slurm.logs());
            assertJoined(out, 3, "Slurm step ");
            assertTrue(out.contains(": first node " + slurm.host() + " of SLURM_STEP_NODELIST=" + slurm.host() + ", port "), out);
            assertTrue(Files.exists(home.resolve(".jccl/secret")), "the per-user secret file was not made in " + home);
        }
    }

    /**
     * srun --mpi=pmix, nothing extra set: rank 0's address and the secret through Slurm's PMIx
     * server; no secret file is made. Every collective is checked.
     */
    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void collectiveCheckUnderSrunWithPmix() throws Exception {
        String problem = slurm.pmixProblem();
        assumeTrue(problem == null, problem);
        Path home = Files.createDirectories(slurm.dir().resolve("home-pmix"));
        try (Processes procs = new Processes()) {
            List<String> cmd = srun("--mpi=pmix", "-n", "3");
            cmd.addAll(collectiveCheck(home));
            procs.start("srun", cmd, slurm.env());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(130));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "srun exited " + codes.getFirst() + "\n" + out + slurm.logs());
            assertJoined(out, 3, "the PMIx server of Slurm (namespace slurm.pmix.");
            assertFalse(Files.exists(home.resolve(".jccl")), "a secret file was made: the secret did not come through PMIx");
        }
    }

    /**
     * sbatch with a batch script that runs the job with srun, as a user would submit it: sbatch
     * --wait returns the job's exit code; the job's output file holds the check's result.
     */
    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void collectiveCheckInAnSbatchScript() throws Exception {
        Path home = Files.createDirectories(slurm.dir().resolve("home-sbatch"));
        Path script = slurm.dir().resolve("job.sh");
        Path output = slurm.dir().resolve("job.out");
        StringBuilder line = new StringBuilder("srun");
        for (String a : collectiveCheck(home)) {
            line.append(" '").append(a.replace("'", "'\\''")).append('\'');
        }
        Files.writeString(script, "#!/bin/sh\n#SBATCH --ntasks=3\n#SBATCH --time=5\n" + line + "\n");
        try (Processes procs = new Processes()) {
            procs.start("sbatch", List.of(SingleHostSlurm.tool("sbatch"), "--wait", "--output=" + output, script.toString()), slurm.env());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(130));
            String out = procs.outputs() + "\n----- job output -----\n" + (Files.exists(output) ? Files.readString(output) : "(none)");
            assertEquals(0, codes.getFirst(), "sbatch --wait exited " + codes.getFirst() + "\n" + out + slurm.logs());
            assertJoined(Files.readString(output), 3, "Slurm step ");
        }
    }

    /** jccl's PMIx client against Slurm's PMIx server (srun --mpi=pmix): 3 tasks put, commit, fence and read each other's values. */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void pmixPutFenceGetUnderSrun() throws Exception {
        String problem = slurm.pmixProblem();
        assumeTrue(problem == null, problem);
        try (Processes procs = new Processes()) {
            List<String> cmd = srun("--mpi=pmix", "-n", "3");
            cmd.addAll(Processes.javaMain(PmixProbe.class.getName(), "3"));
            procs.start("srun", cmd, slurm.env());
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "srun exited " + codes.getFirst() + "\n" + out + slurm.logs());
            for (int r = 0; r < 3; r++) {
                assertTrue(out.contains("PMIX OK rank " + r + " of 3 ns slurm.pmix."), out + slurm.logs());
            }
        }
    }
}
