package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
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
 * it lost, between half and twice {@code JCCL_PEER_TIMEOUT}. A delay well below the timeout slows
 * the all-reduces but trips nothing, in two variants: a fixed {@code tc netem} delay on every rank
 * (needs the kernel's sch_netem), and a {@code tc tbf} queue on both ends of rank 2's link that
 * holds its data and its heartbeats alike for up to about 1.9 s (needs only sch_tbf, built into
 * kernels that lack netem, like the development VM's), checked against the kernel's own RTT
 * estimates. Needs root and iproute2 (CI has both); each test skips with the reason naming the
 * missing facility otherwise (no root, no ip/tc, no namespaces, veth or bridge, no sch_netem, no
 * sch_tbf).
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

    /** {@code OK <iterations> <epoch ms> <slowest ms>} lines of a LoopRank's output from {@code fromMs} on. */
    private static List<long[]> oks(String out, long fromMs) {
        List<long[]> oks = new ArrayList<>();
        Matcher m = Pattern.compile("(?m)^OK (\\d+) (\\d+) (\\d+)$").matcher(out);
        while (m.find()) {
            long t = Long.parseLong(m.group(2));
            if (t >= fromMs) {
                oks.add(new long[] {Long.parseLong(m.group(1)), t, Long.parseLong(m.group(3))});
            }
        }
        return oks;
    }

    /**
     * The delay variant that needs no sch_netem: a token bucket ({@code tc tbf}, built into kernels
     * that lack netem, like the development VM's) on both ends of rank 2's veth pair, 1.6 Mbit/s each
     * way, queueing up to 5 s of bytes. Every packet rank 2 sends or receives — all-reduce data and
     * the control channel's heartbeats alike, they share the queue — waits behind whatever backlog
     * is there; the backlog is at most about one all-reduce's worth (the ranks cannot run ahead of
     * one another), so about 375 kB at 200 kB/s: up to about 1.9 s, well below the 10 s
     * {@code JCCL_PEER_TIMEOUT}. No packet is dropped (asserted from tbf's counters), so none waited
     * longer than tbf's 5 s bound either, and with heartbeats every 2.5 s no rank can go 10 s
     * without hearing from another. The ranks' TCP uses Reno, set in their namespaces: a loss-based
     * congestion control fills the queue as most TCP does on a congested link, where BBR (this VM's
     * default) would pace at the bottleneck and keep the queue, and so the heartbeats' delay, short.
     *
     * <p>Asserted: the all-reduces go on with right results and no rank throws; they are measurably
     * slower than before the shaping (mean time per all-reduce at least 3 times the unshaped one and
     * at least 0.5 s); the kernel's RTT estimate ({@code ss -ti}) of the control connection between
     * rank 2 and the hub and of rank 2's data connections reaches at least 200 ms (they are well
     * under 10 ms unshaped), so the heartbeats themselves were delayed; tbf throttled packets and
     * dropped none.
     */
    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aTbfQueueOnOneRanksLinkDelaysItsDataAndHeartbeatsBelowThePeerTimeoutAndTripsNothing() throws Exception {
        int timeout = 10;
        long rate = 1_600_000; // bit/s: 200 kB/s each way
        int burst = 3000; // two full-size frames: beyond that, packets wait for tokens
        int latencyMs = 5000; // tbf's queue holds 5 s of bytes at the rate and drops beyond: the worst wait
        int floats = 65_536; // 256 KiB all-reduces: a ring moves 4/3 of that through each rank's link each way
        try (NetNamespaces net = NetNamespaces.create(RANKS)) {
            net.assumeTbf();
            net.congestionControl("reno");
            try (Processes procs = start(net, floats, timeout)) {
                running(procs);
                Thread.sleep(2000); // past the JIT's warm-up
                long baseFrom = System.currentTimeMillis();
                Thread.sleep(5000);
                long baseTo = System.currentTimeMillis();
                int dataPort2 = dataPort(procs.get(0).output(), 2);
                double[] baseRtt = rank2Rtts(net, dataPort2);

                net.shape(2, rate, burst, latencyMs);
                long shapedFrom = System.currentTimeMillis() + 3000; // the all-reduce in flight when the shaping lands has finished
                double[] shapedRtt = {0, 0};
                StringBuilder samples = new StringBuilder();
                for (int k = 0; k < 6; k++) {
                    Thread.sleep(4000);
                    double[] now = rank2Rtts(net, dataPort2);
                    shapedRtt[0] = Math.max(shapedRtt[0], now[0]);
                    shapedRtt[1] = Math.max(shapedRtt[1], now[1]);
                    samples.append(String.format(Locale.ROOT, " %.0f/%.0f", now[0], now[1]));
                }
                long shapedTo = System.currentTimeMillis();
                Files.createFile(dir.resolve("stop"));
                List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
                assertEquals(List.of(0, 0, 0), codes, procs.outputs());
                List<NetNamespaces.TbfStats> tbf = net.tbfStats(2);

                StringBuilder report = new StringBuilder("tbf " + rate / 1000 + " kbit/s burst " + burst + " B latency " + latencyMs
                        + " ms on rank 2's link, JCCL_PEER_TIMEOUT " + timeout + " s:");
                for (int r = 0; r < RANKS; r++) {
                    String out = procs.get(r).output();
                    assertTrue(out.contains("\nDONE "), out);
                    assertTrue(!out.contains("Exception") && !out.contains("FAILED") && !out.contains("WRONG"), out);
                    double base = meanOpMs(oks(out, baseFrom), baseTo);
                    List<long[]> shaped = oks(out, shapedFrom);
                    double slow = meanOpMs(shaped, shapedTo);
                    long slowest = shaped.stream().filter(o -> o[1] <= shapedTo).mapToLong(o -> o[2]).max().orElse(0);
                    report.append(String.format(Locale.ROOT, "%n  rank %d: %.1f ms per all-reduce unshaped, %.0f ms shaped (slowest %d ms)",
                            r, base, slow, slowest));
                    String what = "rank " + r + ": " + base + " ms per all-reduce unshaped, " + slow + " ms shaped\n" + out;
                    assertTrue(base > 0 && slow >= 500 && slow >= 3 * base, what);
                    assertTrue(slowest < timeout * 1000L, what);
                }
                report.append(String.format(Locale.ROOT, "%n  rank 2's kernel RTT estimates (ms, control/data): unshaped %.1f/%.1f,"
                        + " shaped%s", baseRtt[0], baseRtt[1], samples));
                for (NetNamespaces.TbfStats st : tbf) {
                    report.append("\n  ").append(st.where()).append(": sent ").append(st.sentBytes()).append(" B in ")
                            .append(st.sentPackets()).append(" packets, dropped ").append(st.dropped()).append(", overlimits ")
                            .append(st.overlimits());
                }
                System.out.println(report);
                // The heartbeats waited in the queue too: the kernel's smoothed RTT of the control
                // connection, sampled every 4 s, reached 200 ms at least once.
                assertTrue(shapedRtt[0] >= 200 && shapedRtt[1] >= 200, report.toString());
                for (NetNamespaces.TbfStats st : tbf) {
                    assertTrue(st.dropped() == 0 && st.overlimits() > 0 && st.sentBytes() > 10L * 4 * floats, st.raw() + "\n" + report);
                }
            }
        }
    }

    /** The port rank {@code peer} accepts data connections on, from a rank's {@code -> rank <peer> via TCP addr:port} line. */
    private static int dataPort(String out, int peer) {
        Matcher m = Pattern.compile("-> rank " + peer + " via TCP /?" + Pattern.quote(NetNamespaces.address(peer)) + ":(\\d+) ")
                .matcher(out);
        assertTrue(m.find(), out);
        return Integer.parseInt(m.group(1));
    }

    /**
     * The kernel's smoothed RTT (ms) of rank 2's control connection to the hub (rank 0) and the
     * largest of its data connections' (those on rank 2's data port, {@code dataPort}), as rank 2
     * and rank 0 see them: of each connection, the larger of its two ends' estimates.
     */
    private static double[] rank2Rtts(NetNamespaces net, int dataPort) throws Exception {
        double control = -1;
        double data = -1;
        String all = "";
        for (int r : new int[] {2, 0, 1}) {
            for (NetNamespaces.TcpConn c : net.tcp(r)) {
                all += "rank " + r + ": " + c.raw() + "\n";
                boolean toData2 = r == 2 ? c.localPort() == dataPort : c.peer().equals(NetNamespaces.address(2)) && c.peerPort() == dataPort;
                boolean control2 = r == 2 ? c.peer().equals(NetNamespaces.address(0)) && c.localPort() != dataPort
                        : r == 0 && c.peer().equals(NetNamespaces.address(2)) && c.peerPort() != dataPort;
                if (toData2) {
                    data = Math.max(data, c.rttMs());
                } else if (control2) {
                    control = Math.max(control, c.rttMs());
                }
            }
        }
        assertTrue(control >= 0 && data >= 0, "no control or data connection of rank 2 in ss -ti:\n" + all);
        return new double[] {control, data};
    }

    /** Milliseconds per all-reduce over progress lines {@code oks} up to {@code toMs}. */
    private static double meanOpMs(List<long[]> oks, long toMs) {
        List<long[]> in = oks.stream().filter(o -> o[1] <= toMs).toList();
        assertTrue(in.size() >= 2, "fewer than two progress lines in the window");
        long[] first = in.get(0);
        long[] last = in.get(in.size() - 1);
        assertTrue(last[0] - first[0] >= 3, "fewer than 3 all-reduces in the window: " + (last[0] - first[0]));
        return (double) (last[1] - first[1]) / (last[0] - first[0]);
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
                List<long[]> oks = oks(out, delayedFrom);
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
