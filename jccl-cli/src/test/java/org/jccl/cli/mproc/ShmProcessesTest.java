package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The shared-memory transport between real processes of one host: it is chosen (and logged) by
 * itself, leaves no file behind after a clean run or after a rank is killed, fails the survivor of a
 * dead peer instead of letting it spin, and turns a full /dev/shm into a clear error at creation
 * (a 1 MiB tmpfs mounted in a private mount namespace with {@code unshare -m}).
 */
class ShmProcessesTest {
    private Path dir;

    @BeforeEach
    void makeDir() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-mproc-shm-");
    }

    @AfterEach
    void removeDir() throws IOException {
        for (String f : files()) {
            Files.deleteIfExists(dir.resolve(f));
        }
        Files.deleteIfExists(dir);
    }

    private List<String> files() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).toList();
        }
    }

    private Map<String, String> env(String commId, String token, int rank, int size, String... more) {
        Map<String, String> e = new java.util.HashMap<>(Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(rank),
                "JCCL_WORLD_SIZE", Integer.toString(size), "JCCL_AUTH_TOKEN", token, "JCCL_SHM_DIR", dir.toString(),
                "JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "INIT,SHM"));
        for (int i = 0; i < more.length; i += 2) {
            e.put(more[i], more[i + 1]);
        }
        return e;
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void processesOfOneHostUseShmAndLeaveNoFile() throws IOException {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 2; r++) {
                procs.start("rank" + r, Processes.collectiveCheck("--counts", "0,7,1000,300000", "--types", "float32,int64",
                        "--reduce-ops", "sum,max", "--collectives", "allreduce,broadcast,allgather,reducescatter,sendrecv"),
                        env(commId, token, r, 2, "JCCL_SHM_CHUNK", "64K", "JCCL_SHM_SLOTS", "4"));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(80));
            String all = procs.outputs();
            assertEquals(List.of(0, 0), codes, all);
            Processes.checkOk(all);
            assertTrue(procs.get(0).output().contains("rank 0 -> rank 1 via SHM"), all);
            assertTrue(procs.get(1).output().contains("rank 1 -> rank 0 via SHM"), all);
            assertEquals(List.of(), files(), all);
        }
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void survivorOfAKilledPeerFailsAndNoFileRemains() throws IOException {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            long t0 = System.nanoTime();
            for (int r = 0; r < 2; r++) {
                procs.start("rank" + r, Processes.javaMain(DyingRank.class.getName(), "1", "3"), env(commId, token, r, 2,
                        "JCCL_CONNECT_TIMEOUT", "10"));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
            String all = procs.outputs();
            assertEquals(List.of(DyingRank.SURVIVOR_EXIT, 3), codes, all);
            assertFalse(all.contains("BARRIER COMPLETED"), all);
            // JVM starts and init; the survivor notices the dead pid within its liveness period, not a timeout.
            assertTrue(seconds < 25, "took " + seconds + " s\n" + all);
            String survivor = procs.get(0).output();
            assertTrue(survivor.contains("rank 0 -> rank 1 via SHM"), survivor);
            assertTrue(survivor.contains("SURVIVOR FAILED org.jccl.PeerFailedException"), survivor);
            assertTrue(survivor.contains("SHM connection from rank 0 to rank 1") && survivor.contains("no longer exists"), survivor);
            assertEquals(List.of(), files(), all);
        }
    }

    /** Whether this process may make a mount namespace and mount a tmpfs in it (root with CAP_SYS_ADMIN). */
    private static String unshareUnavailable() {
        try {
            Process p = new ProcessBuilder("unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm")
                    .redirectErrorStream(true).start();
            if (!p.waitFor(20, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "unshare -m did not finish in 20 s";
            }
            String out = new String(p.getInputStream().readAllBytes());
            return p.exitValue() == 0 ? null : "unshare -m / mount -t tmpfs not permitted here (exit " + p.exitValue() + "): " + out.trim();
        } catch (IOException e) {
            return "no unshare command: " + e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void aFullDevShmFailsCreationWithTheSizesAndTheFix() {
        String why = unshareUnavailable();
        Assumptions.assumeTrue(why == null, () -> "skipped: " + why);
        List<String> cmd = new ArrayList<>(List.of("unshare", "-m", "sh", "-c",
                "mount -t tmpfs -o size=1m tmpfs /dev/shm && exec \"$0\" \"$@\""));
        cmd.addAll(Processes.javaMain(ShmFullCheck.class.getName()));
        try (Processes procs = new Processes()) {
            // JCCL_SHM_DIR is unset on purpose: the default /dev/shm, as seen inside the namespace.
            procs.start("full", cmd, Map.of("JCCL_DEBUG", "WARN"));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            String out = procs.outputs();
            assertEquals(List.of(ShmFullCheck.EXIT_FAILED), codes, out);
            assertTrue(out.contains("INIT FAILED org.jccl.ResourceException"), out);
            // 8 slots x 512 KiB + one header page per ring, one ring per peer.
            assertTrue(out.contains("not enough shared memory for the SHM transport in /dev/shm: this rank needs 4198400 bytes"), out);
            Matcher m = Pattern.compile("/dev/shm has (\\d+) bytes free").matcher(out);
            assertTrue(m.find(), out);
            assertTrue(Long.parseLong(m.group(1)) <= 1 << 20, out);
            assertTrue(out.contains("--shm-size") && out.contains("emptyDir") && out.contains("medium: Memory")
                    && out.contains("JCCL_SHM_DIR"), out);
            assertFalse(out.contains("SIGBUS"), out);
        }
    }
}
