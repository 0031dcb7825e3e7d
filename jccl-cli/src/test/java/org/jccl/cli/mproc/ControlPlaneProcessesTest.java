package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jccl.cli.JcclCli;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine;

/**
 * The control plane between real processes: a rank held back is named by every other rank's stall
 * line within JCCL_STALL_WARN, dumps appear and {@code jccl status} reports the stall; a rank killed
 * with SIGKILL, or whose JVM exits (System.exit) in the middle of an operation, fails the survivors'
 * pending operation with PeerFailedException naming it; a rank
 * stopped with SIGSTOP fails them with JcclTimeoutException between half and twice JCCL_PEER_TIMEOUT,
 * also when it is rank 0, the hub of the control channel.
 */
class ControlPlaneProcessesTest {

    @TempDir
    Path dumps;

    private Map<String, String> env(String commId, String token, int rank, int size, String... more) {
        Map<String, String> e = new HashMap<>(Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(rank),
                "JCCL_WORLD_SIZE", Integer.toString(size), "JCCL_AUTH_TOKEN", token, "JCCL_DUMP_DIR", dumps.toString(),
                "JCCL_SHM_DISABLE", "1", "JCCL_SOCKET_IFNAME", "lo"));
        for (int i = 0; i < more.length; i += 2) {
            e.put(more[i], more[i + 1]);
        }
        return e;
    }

    private static void await(Processes procs, Duration limit, String what, Predicate<Processes> ok) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!ok.test(procs)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within " + limit.toSeconds() + " s: " + what + "\n" + procs.outputs());
            }
            Thread.sleep(100);
        }
    }

    private static long pid(Processes procs, int i) {
        return procs.get(i).process().pid();
    }

    private static String host() {
        return org.jccl.internal.log.Log.host();
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void aRankHeldBackIsNamedByEveryOtherRankAndJcclStatusReportsIt() throws Exception {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        Path go = dumps.resolve("go");
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 4; r++) {
                procs.start("rank" + r, Processes.javaMain(ControlRank.class.getName(), "hold", "3", go.toString()),
                        env(commId, token, r, 4, "JCCL_STALL_WARN", "2"));
            }
            await(procs, Duration.ofSeconds(60), "every rank READY", p -> {
                for (int r = 0; r < 4; r++) {
                    if (!p.get(r).output().contains("READY rank " + r)) {
                        return false;
                    }
                }
                return true;
            });
            long t0 = System.nanoTime();
            String tail = "ranks 0-2 wait; rank 3 (host " + host() + ", pid " + pid(procs, 3) + ") last at #0 broadcast";
            await(procs, Duration.ofSeconds(40), "the stall line on ranks 0-2", p -> {
                for (int r = 0; r < 3; r++) {
                    if (!p.get(r).output().contains("all_reduce #1 stalled ")) {
                        return false;
                    }
                }
                return true;
            });
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
            // READY comes just before the all-reduce starts; 2 s of JCCL_STALL_WARN plus a loaded machine's margin.
            assertTrue(seconds < 20, "stall lines " + seconds + " s after READY\n" + procs.outputs());
            Pattern line = Pattern.compile("JCCL WARN comm [0-9a-f]{8} all_reduce #1 stalled \\d+\\.\\d s: (.*)");
            for (int r = 0; r < 3; r++) {
                String out = procs.get(r).output();
                Matcher m = line.matcher(out);
                assertTrue(m.find(), out);
                assertEquals(tail, m.group(1), out);
                assertTrue(!m.find(), "one stall line per rank:\n" + out);
            }
            assertTrue(!procs.get(3).output().contains("stalled"), procs.get(3).output());
            await(procs, Duration.ofSeconds(20), "four dump files", p -> dumpFiles().size() == 4);

            // jccl status against the live, stalled job.
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            CommandLine cl = new CommandLine(new JcclCli());
            cl.setOut(new PrintWriter(buf, true, StandardCharsets.UTF_8));
            int code = cl.execute("status", "--dir", dumps.toString());
            String status = buf.toString(StandardCharsets.UTF_8);
            assertEquals(1, code, status);
            assertTrue(status.contains("STALLED: all_reduce #1 stalled ") && status.contains(tail), status);
            assertTrue(status.contains("  rank 3 (host " + host() + ", pid " + pid(procs, 3) + "): idle; last issued #0 broadcast"), status);
            assertTrue(status.contains("  rank 1 (host " + host() + ", pid " + pid(procs, 1) + "): in #1 all_reduce 4096 B float sum, RUNNING"),
                    status);

            Files.createFile(go);
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(40));
            assertEquals(List.of(0, 0, 0, 0), codes, procs.outputs());
            for (int r = 0; r < 4; r++) {
                assertTrue(procs.get(r).output().contains("DONE sum 4.0"), procs.get(r).output());
            }
            ByteArrayOutputStream after = new ByteArrayOutputStream();
            CommandLine cl2 = new CommandLine(new JcclCli());
            cl2.setOut(new PrintWriter(after, true, StandardCharsets.UTF_8));
            assertEquals(2, cl2.execute("status", "--dir", dumps.toString()), after.toString(StandardCharsets.UTF_8));
        }
    }

    private List<Path> dumpFiles() {
        try (Stream<Path> s = Files.list(dumps)) {
            return s.filter(p -> p.getFileName().toString().startsWith("jccl-flight-") && p.getFileName().toString().endsWith(".json"))
                    .toList();
        } catch (IOException e) {
            return List.of();
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aKilledRankFailsTheSurvivorsNamingIt() throws Exception {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        int timeout = 10;
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 3; r++) {
                procs.start("rank" + r, Processes.javaMain(ControlRank.class.getName(), "victim", "2"),
                        env(commId, token, r, 3, "JCCL_PEER_TIMEOUT", Integer.toString(timeout)));
            }
            await(procs, Duration.ofSeconds(60), "every rank READY", p -> p.get(0).output().contains("READY")
                    && p.get(1).output().contains("READY") && p.get(2).output().contains("READY"));
            Thread.sleep(500); // ranks 0 and 1 are inside all-reduce #1
            long victimPid = pid(procs, 2);
            long killedAt = System.currentTimeMillis();
            procs.get(2).process().destroyForcibly(); // SIGKILL
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            assertEquals(List.of(ControlRank.FAILED_EXIT, ControlRank.FAILED_EXIT, 137), codes, procs.outputs());
            for (int r = 0; r < 2; r++) {
                String out = procs.get(r).output();
                Matcher m = Pattern.compile("FAILED_AT_MS=(\\d+) org\\.jccl\\.PeerFailedException \\[PEER_FAILED]: (.*)").matcher(out);
                assertTrue(m.find(), out);
                long ms = Long.parseLong(m.group(1)) - killedAt;
                assertTrue(ms < timeout * 1000L, "failed " + ms + " ms after the kill\n" + out);
                String msg = m.group(2);
                assertTrue(msg.startsWith("rank " + r + ": allReduce #1 (4096 B float sum) on communicator "), msg);
                assertTrue(msg.contains("rank 2 (host " + host() + ", pid " + victimPid + ")")
                        || msg.contains("rank 2 (" + host() + " pid " + victimPid + ")"), msg);
                assertTrue(out.contains("LATER org.jccl.PeerFailedException"), out);
            }
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aRankWhoseJvmExitsMidOperationFailsTheSurvivorsNamingIt() throws Exception {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        int timeout = 10;
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 3; r++) {
                procs.start("rank" + r, Processes.javaMain(ControlRank.class.getName(), "exit", "2"),
                        env(commId, token, r, 3, "JCCL_PEER_TIMEOUT", Integer.toString(timeout)));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(90));
            assertEquals(List.of(ControlRank.FAILED_EXIT, ControlRank.FAILED_EXIT, ControlRank.EXIT_CODE), codes, procs.outputs());
            Matcher exiting = Pattern.compile("EXITING_AT_MS=(\\d+)").matcher(procs.get(2).output());
            assertTrue(exiting.find(), procs.outputs());
            long exitedAt = Long.parseLong(exiting.group(1));
            long victimPid = pid(procs, 2);
            for (int r = 0; r < 2; r++) {
                String out = procs.get(r).output();
                Matcher m = Pattern.compile("FAILED_AT_MS=(\\d+) org\\.jccl\\.PeerFailedException \\[PEER_FAILED]: (.*)").matcher(out);
                assertTrue(m.find(), out);
                long ms = Long.parseLong(m.group(1)) - exitedAt;
                assertTrue(ms < timeout * 1000L, "failed " + ms + " ms after the exit (JCCL_PEER_TIMEOUT " + timeout + " s)\n" + out);
                String msg = m.group(2);
                assertTrue(msg.startsWith("rank " + r + ": allReduce #1 (4096 B float sum) on communicator "), msg);
                assertTrue(msg.contains("rank 2 (host " + host() + ", pid " + victimPid + ")")
                        || msg.contains("rank 2 (" + host() + " pid " + victimPid + ")"), msg);
                assertTrue(out.contains("LATER org.jccl.PeerFailedException"), out);
            }
        }
    }

    @ParameterizedTest(name = "stopped rank {0}")
    @ValueSource(ints = {2, 0})
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aStoppedRankTimesOutTheOthersWithinHalfToTwiceThePeerTimeout(int victim) throws Exception {
        stopAndExpectTimeouts(victim, new int[] {6, 6, 6});
    }

    /**
     * The stopped hub cannot relay why a rank left: rank 1 (timeout 3 s) times out on it first and
     * closes its links while rank 2 (6 s) still hears nothing. Rank 2's broken link to rank 1 is a
     * consequence; it must still name rank 0, when its own timer fires.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aNeighbourThatTimesOutFirstOnAStoppedHubDoesNotHideTheHub() throws Exception {
        stopAndExpectTimeouts(0, new int[] {6, 3, 6});
    }

    /**
     * Starts 3 ranks with the given {@code JCCL_PEER_TIMEOUT}s, SIGSTOPs {@code victim} while the
     * others wait in an all-reduce, and asserts that each survivor fails with a timeout naming the
     * victim, between half and twice its own timeout after the stop.
     */
    private void stopAndExpectTimeouts(int victim, int[] timeouts) throws Exception {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 3; r++) {
                procs.start("rank" + r, Processes.javaMain(ControlRank.class.getName(), "victim", Integer.toString(victim)),
                        env(commId, token, r, 3, "JCCL_PEER_TIMEOUT", Integer.toString(timeouts[r])));
            }
            await(procs, Duration.ofSeconds(60), "every rank READY", p -> p.get(0).output().contains("READY")
                    && p.get(1).output().contains("READY") && p.get(2).output().contains("READY"));
            Thread.sleep(500);
            long victimPid = pid(procs, victim);
            long stoppedAt = System.currentTimeMillis();
            Process stop = new ProcessBuilder("kill", "-STOP", Long.toString(victimPid)).inheritIO().start();
            assertEquals(0, stop.waitFor());
            int[] survivors = victim == 0 ? new int[] {1, 2} : new int[] {0, 1};
            int longest = Math.max(timeouts[survivors[0]], timeouts[survivors[1]]);
            await(procs, Duration.ofSeconds(4L * longest), "the survivors fail", p -> {
                for (int r : survivors) {
                    if (!p.get(r).output().contains("LATER")) {
                        return false;
                    }
                }
                return true;
            });
            for (int r : survivors) {
                int timeout = timeouts[r];
                String out = procs.get(r).output();
                Matcher m = Pattern.compile("FAILED_AT_MS=(\\d+) org\\.jccl\\.JcclTimeoutException \\[TIMEOUT]: (.*)").matcher(out);
                assertTrue(m.find(), out);
                long ms = Long.parseLong(m.group(1)) - stoppedAt;
                assertTrue(ms >= timeout * 500L && ms <= timeout * 2000L, "timed out " + ms + " ms after SIGSTOP (JCCL_PEER_TIMEOUT "
                        + timeout + " s)\n" + out);
                String msg = m.group(2);
                assertTrue(msg.startsWith("rank " + r + ": allReduce #1 (4096 B float sum) on communicator "), msg);
                assertTrue(msg.contains("rank " + victim + " (host " + host() + ", pid " + victimPid + ") sent nothing on the control"
                        + " channel for "), msg);
                assertTrue(out.contains("LATER org.jccl.JcclTimeoutException"), out);
            }
            new ProcessBuilder("kill", "-CONT", Long.toString(victimPid)).start().waitFor();
        }
    }
}
