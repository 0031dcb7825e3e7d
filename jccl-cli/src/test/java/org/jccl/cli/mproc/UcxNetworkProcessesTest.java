package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.ucx.Ucx;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * UCX between "hosts" that are network namespaces joined by veth pairs and a bridge ({@link NetNamespaces}), each
 * with its own host identity ({@code JCCL_HOSTID}: the namespaces share the boot id and host name): ranks reach each other only over UCX's tcp on the namespaces'
 * interface ({@code JCCL_NET=UCX}, {@code JCCL_UCX_TLS=tcp}, {@code UCX_NET_DEVICES=jccl0}, shared memory off). Every
 * collective is right (CollectiveCheck), and a partition (one rank's switch port down mid-run) ends every rank with
 * the bounded, named JcclTimeoutException within half to twice {@code JCCL_PEER_TIMEOUT}, as over jccl's TCP. Needs
 * root, iproute2 and UCX; skips naming what is missing.
 */
class UcxNetworkProcessesTest {
    private static final int PORT = 29_500;

    @TempDir
    Path dir;

    private Map<String, String> env(String token, int rank, int ranks, int timeoutSeconds) {
        Map<String, String> e = new HashMap<>();
        e.put("JCCL_COMM_ID", NetNamespaces.address(0) + ":" + PORT);
        e.put("JCCL_RANK", Integer.toString(rank));
        e.put("JCCL_WORLD_SIZE", Integer.toString(ranks));
        e.put("JCCL_AUTH_TOKEN", token);
        e.put("JCCL_DUMP_DIR", dir.toString());
        e.put("JCCL_SOCKET_IFNAME", NetNamespaces.IFNAME);
        e.put("JCCL_SHM_DISABLE", "1"); // the namespaces share /dev/shm: the data must cross the network
        e.put("JCCL_NET", "UCX");
        // Each namespace a host of its own: jccl's host identity is the boot id and host name, which the namespaces share.
        e.put("JCCL_HOSTID", String.join(",", java.util.stream.IntStream.range(0, ranks).mapToObj(i -> "ns" + i).toList()));
        e.put("JCCL_UCX_TLS", "tcp");
        e.put("UCX_NET_DEVICES", NetNamespaces.IFNAME);
        e.put("JCCL_PEER_TIMEOUT", Integer.toString(timeoutSeconds));
        e.put("JCCL_DEBUG", "INFO");
        e.put("JCCL_DEBUG_SUBSYS", "INIT");
        return e;
    }

    private static void assumeUcx() {
        Ucx.Status s = Ucx.status();
        Assumptions.assumeTrue(s.available(), () -> "UCX is not usable here (" + s.reason() + "); apt-get install libucx0 to run this test");
    }

    private static void assertViaUcx(Processes procs, int ranks) {
        for (int r = 0; r < ranks; r++) {
            String out = procs.get(r).output();
            for (int p = 0; p < ranks; p++) {
                if (p != r) {
                    assertTrue(out.contains("rank " + r + " -> rank " + p + " via UCX"), "rank " + r + " -> rank " + p + " not via UCX:\n" + out);
                }
            }
            assertTrue(out.contains("UCX transports tcp/" + NetNamespaces.IFNAME), "UCX did not use " + NetNamespaces.IFNAME + ":\n" + out);
        }
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void threeHostsRunEveryCollectiveRightOverUcx() throws Exception {
        assumeUcx();
        int ranks = 3;
        try (NetNamespaces net = NetNamespaces.create(ranks); Processes procs = new Processes()) {
            String token = Processes.newToken();
            for (int r = 0; r < ranks; r++) {
                procs.start("rank" + r, net.inHost(r, Processes.collectiveCheck("--counts", "0,7,1000,300001", "--types",
                        "float32,int32,bf16", "--reduce-ops", "sum,max,avg")), env(token, r, ranks, 10));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(200));
            assertEquals(List.of(0, 0, 0), codes, procs.outputs());
            Processes.checkOk(procs.outputs());
            assertViaUcx(procs, ranks);
        }
    }

    private static boolean everyRank(Processes procs, int ranks, Predicate<String> ok) {
        for (int r = 0; r < ranks; r++) {
            if (!ok.test(procs.get(r).output())) {
                return false;
            }
        }
        return true;
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

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aPartitionedRankAndTheOthersTimeOutNamingEachOtherWithinHalfToTwiceThePeerTimeout() throws Exception {
        assumeUcx();
        int ranks = 3;
        int timeout = 6;
        try (NetNamespaces net = NetNamespaces.create(ranks); Processes procs = new Processes()) {
            String token = Processes.newToken();
            for (int r = 0; r < ranks; r++) {
                procs.start("rank" + r, net.inHost(r, Processes.javaMain(LoopRank.class.getName(), "65536",
                        dir.resolve("stop").toString())), env(token, r, ranks, timeout));
            }
            await(procs, Duration.ofSeconds(90), "every rank READY and looping", p -> everyRank(p, ranks, o -> o.contains("\nOK ")));
            assertViaUcx(procs, ranks);
            long[] pids = new long[ranks];
            for (int r = 0; r < ranks; r++) {
                Matcher m = Pattern.compile("READY rank " + r + " pid (\\d+)").matcher(procs.get(r).output());
                assertTrue(m.find(), procs.get(r).output());
                pids[r] = Long.parseLong(m.group(1));
            }
            Thread.sleep(2000);
            String host = org.jccl.internal.log.Log.host();
            long before = System.currentTimeMillis();
            net.cut(2);
            long after = System.currentTimeMillis();
            await(procs, Duration.ofSeconds(4L * timeout), "every rank fails", p -> everyRank(p, ranks, o -> o.contains("\nLATER ")));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(30));
            assertEquals(List.of(LoopRank.FAILED_EXIT, LoopRank.FAILED_EXIT, LoopRank.FAILED_EXIT), codes, procs.outputs());
            for (int r = 0; r < ranks; r++) {
                String out = procs.get(r).output();
                Matcher m = Pattern.compile("FAILED_AT_MS=(\\d+) org\\.jccl\\.JcclTimeoutException \\[TIMEOUT]: (.*)").matcher(out);
                assertTrue(m.find(), out);
                long at = Long.parseLong(m.group(1));
                assertTrue(at - after >= timeout * 500L && at - before <= timeout * 2000L, "rank " + r + " timed out " + (at - before)
                        + " ms after the cut (JCCL_PEER_TIMEOUT " + timeout + " s)\n" + out);
                String msg = m.group(2);
                int lost = r == 2 ? 0 : 2;
                assertTrue(msg.contains("rank " + lost + " (host " + host + ", pid " + pids[lost] + ") sent nothing on the control"
                        + " channel for "), msg);
                assertTrue(msg.contains("cut off by the network"), msg);
                assertTrue(!out.contains("WRONG"), out);
            }
        }
    }
}
