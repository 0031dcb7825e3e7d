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
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The control plane against a real network: three ranks as JVMs in three network namespaces joined
 * by a bridge ({@link NetNamespaces}), all-reducing in a loop over TCP on their veth interfaces
 * ({@code JCCL_SOCKET_IFNAME}, shared memory off). A partition (rank 2's switch port down: packets
 * vanish, no connection closes) fails every rank with {@code JcclTimeoutException} naming the peer
 * it lost, between half and twice {@code JCCL_PEER_TIMEOUT}; a {@code tc netem} delay well below
 * the timeout slows the all-reduces but trips nothing. Needs root and iproute2 (CI has both);
 * skips with the reason otherwise, and the delay test also when the kernel has no sch_netem.
 */
class NetworkFaultProcessesTest {
    private static final int RANKS = 3;
    private static final int PORT = 29_500; // every namespace has its own ports: nothing else listens there

    @TempDir
    Path dir;

    private Map<String, String> env(String token, int rank, int timeoutSeconds) {
        Map<String, String> e = new HashMap<>();
        e.put("JCCL_COMM_ID", NetNamespaces.address(0) + ":" + PORT);
        e.put("JCCL_RANK", Integer.toString(rank));
        e.put("JCCL_WORLD_SIZE", Integer.toString(RANKS));
        e.put("JCCL_AUTH_TOKEN", token);
        e.put("JCCL_DUMP_DIR", dir.toString());
        e.put("JCCL_SOCKET_IFNAME", NetNamespaces.IFNAME);
        e.put("JCCL_SHM_DISABLE", "1"); // the namespaces share /dev/shm: the data must cross the network
        e.put("JCCL_PEER_TIMEOUT", Integer.toString(timeoutSeconds));
        e.put("JCCL_DEBUG", "INFO");
        e.put("JCCL_DEBUG_SUBSYS", "INIT,NET"); // NET: the address of every TCP connection
        return e;
    }

    private Processes start(NetNamespaces net, int floats, int timeoutSeconds) {
        String token = Processes.newToken();
        Processes procs = new Processes();
        for (int r = 0; r < RANKS; r++) {
            procs.start("rank" + r, net.inHost(r, Processes.javaMain(LoopRank.class.getName(), Integer.toString(floats),
                    dir.resolve("stop").toString())), env(token, r, timeoutSeconds));
        }
        return procs;
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

    private static boolean everyRank(Processes procs, Predicate<String> ok) {
        for (int r = 0; r < RANKS; r++) {
            if (!ok.test(procs.get(r).output())) {
                return false;
            }
        }
        return true;
    }

    /** Waits until every rank has all-reduced for a while; checks the data goes over the veth addresses; returns the pids. */
    private static long[] running(Processes procs) throws InterruptedException {
        await(procs, Duration.ofSeconds(90), "every rank READY and looping", p -> everyRank(p, o -> o.contains("\nOK ")
                || o.startsWith("OK ")));
        long[] pids = new long[RANKS];
        for (int r = 0; r < RANKS; r++) {
            String out = procs.get(r).output();
            Matcher m = Pattern.compile("READY rank " + r + " pid (\\d+)").matcher(out);
            assertTrue(m.find(), out);
            pids[r] = Long.parseLong(m.group(1));
            // The data path is TCP between the namespaces' addresses, not loopback or shared memory.
            // (Connections are made when first used: each rank has at least one.)
            Matcher tcp = Pattern.compile("rank " + r + " -> rank (\\d+) via TCP /?([0-9.]+):\\d+ ").matcher(out);
            int connections = 0;
            while (tcp.find()) {
                connections++;
                assertEquals(NetNamespaces.address(Integer.parseInt(tcp.group(1))), tcp.group(2), out);
            }
            assertTrue(connections > 0, "no TCP connection logged:\n" + out);
            assertTrue(!out.contains("via SHM"), out);
        }
        return pids;
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aPartitionedRankAndTheOthersTimeOutNamingEachOtherWithinHalfToTwiceThePeerTimeout() throws Exception {
        int timeout = 6;
        try (NetNamespaces net = NetNamespaces.create(RANKS); Processes procs = start(net, 65_536, timeout)) {
            long[] pids = running(procs);
            Thread.sleep(2000); // a couple of seconds of steady all-reduces, then the cut lands in one
            String host = org.jccl.internal.log.Log.host();
            long before = System.currentTimeMillis();
            net.cut(2);
            long after = System.currentTimeMillis();
            await(procs, Duration.ofSeconds(4L * timeout), "every rank fails", p -> everyRank(p, o -> o.contains("\nLATER ")));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(30));
            assertEquals(List.of(LoopRank.FAILED_EXIT, LoopRank.FAILED_EXIT, LoopRank.FAILED_EXIT), codes, procs.outputs());
            for (int r = 0; r < RANKS; r++) {
                String out = procs.get(r).output();
                Matcher m = Pattern.compile("FAILED_AT_MS=(\\d+) org\\.jccl\\.JcclTimeoutException \\[TIMEOUT]: (.*)").matcher(out);
                assertTrue(m.find(), out);
                long at = Long.parseLong(m.group(1));
                assertTrue(at - after >= timeout * 500L && at - before <= timeout * 2000L, "rank " + r + " timed out " + (at - before)
                        + " ms after the cut (JCCL_PEER_TIMEOUT " + timeout + " s)\n" + out);
                String msg = m.group(2);
                assertTrue(msg.matches("rank " + r + ": allReduce #\\d+ \\(262144 B float sum\\) on communicator .*"), msg);
                // The others lost rank 2; rank 2 lost the hub, rank 0.
                int lost = r == 2 ? 0 : 2;
                assertTrue(msg.contains("rank " + lost + " (host " + host + ", pid " + pids[lost] + ") sent nothing on the control"
                        + " channel for "), msg);
                assertTrue(msg.contains("cut off by the network"), msg);
                assertTrue(out.contains("LATER org.jccl.JcclTimeoutException"), out);
                assertTrue(!out.contains("WRONG"), out);
            }
        }
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aNetemDelayBelowThePeerTimeoutSlowsTheAllReducesButTripsNothing() throws Exception {
        int timeout = 4;
        int delayMs = 200;
        try (NetNamespaces net = NetNamespaces.create(RANKS)) {
            net.assumeNetem();
            delayed(net, timeout, delayMs);
        }
    }

    private void delayed(NetNamespaces net, int timeout, int delayMs) throws Exception {
        try (Processes procs = start(net, 1024, timeout)) {
            running(procs);
            for (int r = 0; r < RANKS; r++) {
                net.delay(r, delayMs);
                assertTrue(net.qdisc(r).contains("delay 200"), net.qdisc(r));
            }
            long delayedFrom = System.currentTimeMillis() + 1000; // what was in flight has drained by then
            Thread.sleep(3L * timeout * 1000);
            Files.createFile(dir.resolve("stop"));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            assertEquals(List.of(0, 0, 0), codes, procs.outputs());
            for (int r = 0; r < RANKS; r++) {
                String out = procs.get(r).output();
                assertTrue(out.contains("\nDONE "), out);
                assertTrue(!out.contains("Exception") && !out.contains("FAILED") && !out.contains("WRONG"), out);
                // Progress under the delay, at the rate the delay allows: every all-reduce waits for at
                // least one message that spent 200 ms in netem, so at most 5 per second.
                List<long[]> oks = new ArrayList<>();
                Matcher m = Pattern.compile("(?m)^OK (\\d+) (\\d+)$").matcher(out);
                while (m.find()) {
                    long t = Long.parseLong(m.group(2));
                    if (t >= delayedFrom) {
                        oks.add(new long[] {Long.parseLong(m.group(1)), t});
                    }
                }
                assertTrue(oks.size() >= 2, "fewer than two progress lines under the delay:\n" + out);
                long[] first = oks.get(0);
                long[] last = oks.get(oks.size() - 1);
                long ops = last[0] - first[0];
                double perSecond = ops * 1000.0 / (last[1] - first[1]);
                assertTrue(ops >= 1 && perSecond <= 1000.0 / delayMs * 1.1, "rank " + r + ": " + ops + " all-reduces in "
                        + (last[1] - first[1]) + " ms under a " + delayMs + " ms delay\n" + out);
            }
        }
    }
}
