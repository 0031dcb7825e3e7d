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
 * (a 1 MiB tmpfs mounted in a private mount namespace with {@code unshare -m}), while a /dev/shm
 * as small as Docker's default (64 MiB) still brings up 4 ranks with a smaller shared collective
 * segment.
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

    /** {@link ShmFullCheck} with {@code args} inside a private mount namespace whose /dev/shm is a fresh tmpfs of {@code size}. */
    private static List<String> inSmallDevShm(String size, String... args) {
        List<String> cmd = new ArrayList<>(List.of("unshare", "-m", "sh", "-c",
                "mount -t tmpfs -o size=" + size + " tmpfs /dev/shm && exec \"$0\" \"$@\""));
        cmd.addAll(Processes.javaMain(ShmFullCheck.class.getName(), args));
        return cmd;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void dockersDefaultDevShmBringsUpFourRanksWithASmallerSegment() {
        String why = unshareUnavailable();
        Assumptions.assumeTrue(why == null, () -> "skipped: " + why);
        try (Processes procs = new Processes()) {
            // 4 ranks: 12 rings of 8 x 512 KiB take 48 MiB of the 64; 4 x 16 MiB of segment cannot fit.
            procs.start("docker", inSmallDevShm("64m", "4"), Map.of("JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "SHM"));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            String out = procs.outputs();
            assertEquals(List.of(0), codes, out);
            assertTrue(out.contains("INIT OK"), out);
            Matcher m = Pattern.compile("a shared collective segment of 4 x 16777216 bytes \\(JCCL_SHM_COLL_BUFFER\\) does not fit in"
                    + " /dev/shm \\((\\d+) bytes free after the rings\\); using 4 x (\\d+) bytes instead").matcher(out);
            assertTrue(m.find(), out);
            long free = Long.parseLong(m.group(1));
            long area = Long.parseLong(m.group(2));
            // What was left after the rings, shared out: whole pages, the header page aside.
            assertTrue(free < 16 << 20 && free > 15 << 20, out);
            assertEquals((free - 4096) / 4 / 4096 * 4096, area, out);
            assertTrue(out.contains("mapped the shared collective segment (4 areas of " + area + " B"), out);
            assertFalse(out.contains("SIGBUS"), out);
        }
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void aDevShmWithoutRoomForTheSmallestSegmentFailsCreationWithTheSizesAndTheFix() {
        String why = unshareUnavailable();
        Assumptions.assumeTrue(why == null, () -> "skipped: " + why);
        try (Processes procs = new Processes()) {
            // Rings of 4 x 64 KiB (+ a header page) fit in 1 MiB; two areas of 256 KiB (+ a header page) do not.
            procs.start("small", inSmallDevShm("1m"), Map.of("JCCL_DEBUG", "WARN", "JCCL_SHM_CHUNK", "64K", "JCCL_SHM_SLOTS", "4"));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            String out = procs.outputs();
            assertEquals(List.of(ShmFullCheck.EXIT_FAILED), codes, out);
            assertTrue(out.contains("INIT FAILED org.jccl.ResourceException"), out);
            assertTrue(out.contains("not enough shared memory for the shared collective segment in /dev/shm: it needs 528384 bytes (2 ranks"
                    + " x 262144 bytes, the smallest area it falls back to from JCCL_SHM_COLL_BUFFER=16777216)"), out);
            Matcher m = Pattern.compile("/dev/shm has (\\d+) bytes free").matcher(out);
            assertTrue(m.find(), out);
            assertTrue(Long.parseLong(m.group(1)) < 528384, out);
            assertTrue(out.contains("--shm-size") && out.contains("JCCL_SHM_COLL_BUFFER smaller or 0"), out);
            assertFalse(out.contains("SIGBUS"), out);
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
