package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jccl.internal.log.Log;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Communicator.shrink between real processes: 4 JVMs all-reduce in a loop, the test kills one with
 * SIGKILL while the others are inside an all-reduce, each survivor gets a PeerFailedException naming
 * the dead rank, shrinks without it and finishes an all-reduce with the right sum on the new 3-rank
 * communicator. Over TCP and over shared memory; a middle rank, and rank 0: the hub of the control
 * channel and the host of the original bootstrap root (the new root opens on the lowest survivor's
 * former TCP port). And two failures at once: 5 JVMs, two SIGKILLed together (rank 0 and a middle
 * rank over TCP, two non-zero ranks over SHM); the 3 survivors shrink excluding both.
 */
class ShrinkProcessesTest {
    private static final int SIZE = 4;

    private static Map<String, String> env(String commId, String token, int rank, String transport, Path shmDir) {
        return env(commId, token, rank, SIZE, transport, shmDir);
    }

    private static Map<String, String> env(String commId, String token, int rank, int size, String transport, Path shmDir) {
        Map<String, String> e = new HashMap<>(Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(rank), "JCCL_WORLD_SIZE",
                Integer.toString(size), "JCCL_AUTH_TOKEN", token, "JCCL_SOCKET_IFNAME", "lo", "JCCL_PEER_TIMEOUT", "10",
                "JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "INIT"));
        if (transport.equals("TCP")) {
            e.put("JCCL_SHM_DISABLE", "1");
        } else {
            e.put("JCCL_SHM_DIR", shmDir.toString());
        }
        return e;
    }

    static Stream<Arguments> cases() {
        return Stream.of("TCP", "SHM").flatMap(t -> Stream.of(Arguments.of(t, 2), Arguments.of(t, 0)));
    }

    private static void awaitAll(Processes procs, Duration limit, String text) throws InterruptedException {
        awaitAll(procs, SIZE, limit, text);
    }

    private static void awaitAll(Processes procs, int size, Duration limit, String text) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        while (true) {
            boolean all = true;
            for (int r = 0; r < size; r++) {
                all &= procs.get(r).output().contains(text + r);
            }
            if (all) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within " + limit.toSeconds() + " s: '" + text + "<rank>' from every rank\n" + procs.outputs());
            }
            Thread.sleep(100);
        }
    }

    @ParameterizedTest(name = "{0}, rank {1} killed")
    @MethodSource("cases")
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void survivorsOfASigkillShrinkAndFinishAnAllReduce(String transport, int dead) throws Exception {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        Path shmDir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-mproc-shrink-");
        try (Processes procs = new Processes()) {
            for (int r = 0; r < SIZE; r++) {
                procs.start("rank" + r, Processes.javaMain(ShrinkRank.class.getName(), Integer.toString(dead)),
                        env(commId, token, r, transport, shmDir));
            }
            awaitAll(procs, Duration.ofSeconds(90), "LOOPING rank ");
            for (int r = 0; r < SIZE; r++) {
                // the parent communicator runs over the transport under test (rank r's link to its ring neighbour)
                String out = procs.get(r).output();
                assertTrue(out.contains("rank " + r + " -> rank " + ((r + 1) % SIZE) + " via " + transport), out);
            }
            Thread.sleep(300); // the others are inside one of the looped all-reduces
            long deadPid = procs.get(dead).process().pid();
            procs.get(dead).process().destroyForcibly(); // SIGKILL
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(120));
            List<Integer> want = new ArrayList<>(List.of(0, 0, 0, 0));
            want.set(dead, 137);
            assertEquals(want, codes, procs.outputs());

            double x0 = 0;
            for (int q = 0; q < SIZE; q++) {
                if (q != dead) {
                    x0 += ShrinkRank.childValue(q, 0);
                }
            }
            Pattern failed = Pattern.compile("FAILED peer (-?\\d+) org\\.jccl\\.PeerFailedException \\[PEER_FAILED]: (.*)");
            for (int r = 0; r < SIZE; r++) {
                if (r == dead) {
                    continue;
                }
                String out = procs.get(r).output();
                Matcher m = failed.matcher(out);
                assertTrue(m.find(), "rank " + r + " failed with no PeerFailedException:\n" + out);
                assertEquals(dead, Integer.parseInt(m.group(1)), out);
                assertTrue(m.group(2).contains("rank " + dead + " (host " + Log.host() + ", pid " + deadPid + ")")
                        || m.group(2).contains("rank " + dead + " (" + Log.host() + " pid " + deadPid + ")"), m.group(2));
                int newRank = r < dead ? r : r - 1;
                String line = "SHRUNK old rank " + r + " new rank " + newRank + " size 3 x0 " + x0 + " wrong 0";
                assertTrue(out.contains(line), "want '" + line + "' from rank " + r + ":\n" + out);
            }
        } finally {
            try (Stream<Path> left = Files.list(shmDir)) {
                for (Path f : left.toList()) {
                    Files.deleteIfExists(f); // the killed rank's segments: its survivors may not own them
                }
            }
            Files.deleteIfExists(shmDir);
        }
    }
    static Stream<Arguments> twoDead() {
        return Stream.of(Arguments.of("TCP", 0, 3), Arguments.of("SHM", 1, 4));
    }

    @ParameterizedTest(name = "{0}, ranks {1} and {2} killed")
    @MethodSource("twoDead")
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void survivorsOfTwoSigkillsShrinkExcludingBothAndFinishAnAllReduce(String transport, int deadA, int deadB) throws Exception {
        int size = 5;
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        Path shmDir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-mproc-shrink2-");
        try (Processes procs = new Processes()) {
            for (int r = 0; r < size; r++) {
                procs.start("rank" + r, Processes.javaMain(ShrinkRank.class.getName(), deadA + "," + deadB),
                        env(commId, token, r, size, transport, shmDir));
            }
            awaitAll(procs, size, Duration.ofSeconds(120), "LOOPING rank ");
            for (int r = 0; r < size; r++) {
                String out = procs.get(r).output();
                assertTrue(out.contains("rank " + r + " -> rank " + ((r + 1) % size) + " via " + transport), out);
            }
            Thread.sleep(300); // the others are inside one of the looped all-reduces
            long pidA = procs.get(deadA).process().pid();
            long pidB = procs.get(deadB).process().pid();
            procs.get(deadA).process().destroyForcibly(); // SIGKILL, both at once
            procs.get(deadB).process().destroyForcibly();
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(150));
            List<Integer> want = new ArrayList<>(List.of(0, 0, 0, 0, 0));
            want.set(deadA, 137);
            want.set(deadB, 137);
            assertEquals(want, codes, procs.outputs());

            double x0 = 0;
            List<Integer> survivors = new ArrayList<>();
            for (int q = 0; q < size; q++) {
                if (q != deadA && q != deadB) {
                    x0 += ShrinkRank.childValue(q, 0);
                    survivors.add(q);
                }
            }
            Pattern failed = Pattern.compile("FAILED peer (-?\\d+) org\\.jccl\\.PeerFailedException \\[PEER_FAILED]: (.*)");
            for (int r : survivors) {
                String out = procs.get(r).output();
                Matcher m = failed.matcher(out);
                assertTrue(m.find(), "rank " + r + " failed with no PeerFailedException:\n" + out);
                int peer = Integer.parseInt(m.group(1));
                assertTrue(peer == deadA || peer == deadB, "rank " + r + " blames rank " + peer + ":\n" + out);
                long pid = peer == deadA ? pidA : pidB;
                assertTrue(m.group(2).contains("rank " + peer + " (host " + Log.host() + ", pid " + pid + ")")
                        || m.group(2).contains("rank " + peer + " (" + Log.host() + " pid " + pid + ")"), m.group(2));
                int newRank = survivors.indexOf(r);
                String line = "SHRUNK old rank " + r + " new rank " + newRank + " size 3 x0 " + x0 + " wrong 0";
                assertTrue(out.contains(line), "want '" + line + "' from rank " + r + ":\n" + out);
            }
        } finally {
            try (Stream<Path> left = Files.list(shmDir)) {
                for (Path f : left.toList()) {
                    Files.deleteIfExists(f);
                }
            }
            Files.deleteIfExists(shmDir);
        }
    }
}
