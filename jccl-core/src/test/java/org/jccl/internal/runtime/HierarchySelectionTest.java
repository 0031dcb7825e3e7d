package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.internal.log.Log;
import org.jccl.internal.tune.AlgoSelector;
import org.jccl.internal.tune.AlgoSelector.Algo;
import org.jccl.internal.tune.AlgoSelector.Coll;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * JCCL_HOSTID makes ranks of one JVM stand for ranks of several hosts: which transport each pair
 * gets (TCP across "hosts", the in-JVM transport or SHM within one), the layout the hierarchical
 * collectives see, the tuner's choice of {@code hier} (logged under TUNING), and the errors of a
 * host-id list that does not fit and of {@code hier} forced where it cannot apply.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HierarchySelectionTest {
    private Path dir;
    private Log.Options saved;

    @BeforeEach
    void makeDir() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-hiertest-");
        saved = Log.options();
    }

    @AfterEach
    void removeDir() throws IOException {
        Log.configure(saved);
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.toList()) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(dir);
    }

    private Config shm(String hostIds) {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DIR", dir.toString()).with("JCCL_SHM_CHUNK", "64K")
                .with("JCCL_SHM_SLOTS", "4").with("JCCL_HOSTID", hostIds);
    }

    private static CommunicatorImpl impl(Communicator c) {
        return (CommunicatorImpl) c;
    }

    private static void closeAll(List<Communicator> cs) {
        cs.forEach(Communicator::close);
    }

    @Test
    void differentHostIdsTalkOverTcpAndSameIdsOverTheInJvmTransport() {
        List<Communicator> cs = Jccl.initLocal(4, Config.defaults().with("JCCL_HOSTID", "a,b,a,b"));
        try {
            for (Communicator c : cs) {
                for (int p = 0; p < 4; p++) {
                    if (p != c.rank()) {
                        assertEquals((p - c.rank()) % 2 == 0 ? "LOCAL" : "TCP", impl(c).transportName(p), "rank " + c.rank() + " -> " + p);
                    }
                }
            }
            Hierarchy h = impl(cs.get(3)).hierarchy();
            assertNotNull(h);
            assertEquals(2, h.hosts());
            assertArrayEquals(new int[] {0, 2}, h.members(0));
            assertArrayEquals(new int[] {1, 3}, h.members(1));
            assertEquals(1, h.myHost());
            assertEquals(1, h.myLocal());
            assertArrayEquals(new int[] {1, 3}, h.intraGroup());
            assertArrayEquals(new int[] {2, 3}, h.sliceGroup());
            assertArrayEquals(new int[] {0, 3}, h.leaders(3));
            assertArrayEquals(new int[] {0, 1}, h.leaders(0));
            assertTrue(h.equalHosts());
        } finally {
            closeAll(cs);
        }
    }

    @Test
    void sameHostIdsUseShmWhenTheInJvmTransportIsOff() throws IOException {
        Path log = dir.resolve("init.%r.log");
        Log.configure(new Log.Options(Log.Level.INFO, EnumSet.of(Log.Subsys.INIT), log.toString(), false));
        List<Communicator> cs = Jccl.initLocal(4, shm("a,a,b,b"));
        try {
            assertEquals("SHM", impl(cs.get(0)).transportName(1));
            assertEquals("TCP", impl(cs.get(0)).transportName(2));
            assertEquals("TCP", impl(cs.get(1)).transportName(3));
            assertEquals("SHM", impl(cs.get(3)).transportName(2));
        } finally {
            closeAll(cs);
        }
        String r0 = Files.readString(dir.resolve("init.0.log"));
        assertTrue(r0.contains("rank 0 -> rank 1 via SHM"), r0);
        assertTrue(r0.contains("rank 0 -> rank 2 via TCP"), r0);
        assertTrue(r0.contains("rank 0 -> rank 3 via TCP"), r0);
    }

    @Test
    void repeatedHostIdsMakeUnequalHosts() {
        assertEquals(List.of("a", "a", "b", "b", "b"), org.jccl.internal.config.HostId.parse("a*2, b*3"));
        // NCCL's name means the same
        assertEquals("b", org.jccl.internal.config.HostId.resolve(Config.defaults().with("NCCL_HOSTID", "a,b"), 1, 2));
        List<Communicator> cs = Jccl.initLocal(5, Config.defaults().with("JCCL_HOSTID", "a*2,b*3"));
        try {
            Hierarchy h = impl(cs.get(4)).hierarchy();
            assertArrayEquals(new int[] {0, 1}, h.members(0));
            assertArrayEquals(new int[] {2, 3, 4}, h.members(1));
            assertFalse(h.equalHosts());
            assertEquals("TCP", impl(cs.get(1)).transportName(2));
            assertEquals("LOCAL", impl(cs.get(2)).transportName(4));
        } finally {
            closeAll(cs);
        }
    }

    @Test
    void noHierarchyOnOneHostOrWithOneRankPerHost() {
        for (String ids : new String[] {"a", "a,b,c"}) {
            List<Communicator> cs = Jccl.initLocal(3, Config.defaults().with("JCCL_HOSTID", ids));
            try {
                for (Communicator c : cs) {
                    assertNull(impl(c).hierarchy(), "JCCL_HOSTID=" + ids);
                }
            } finally {
                closeAll(cs);
            }
        }
    }

    @Test
    void tunerPicksHierForLargeAllReducesAndFlatForSmallOnes() throws IOException {
        Path log = dir.resolve("tune.%r.log");
        Log.configure(new Log.Options(Log.Level.INFO, EnumSet.of(Log.Subsys.TUNING), log.toString(), false));
        List<Communicator> cs = Jccl.initLocal(4, shm("a,a,b,b"));
        int big = 2 << 20;
        try {
            Ranks.run(cs, Duration.ofSeconds(90), c -> {
                for (int count : new int[] {2, big}) {
                    float[] x = new float[count];
                    java.util.Arrays.fill(x, c.rank() + 1);
                    c.allReduce(Buffer.of(x), Buffer.of(x), ReduceOp.SUM);
                    for (int i = 0; i < count; i += 4099) {
                        assertEquals(10f, x[i], "element " + i + " of " + count);
                    }
                }
            });
        } finally {
            closeAll(cs);
        }
        String r0 = Files.readString(dir.resolve("tune.0.log"));
        assertTrue(r0.contains("hierarchical collectives over 2 hosts: 0, 1 | 2, 3"), r0);
        assertTrue(r0.contains("all_reduce " + 4L * big + " B 4 ranks via same-host + cross-host stages: hier (model"), r0);
        // The flat model is the slowest pair's: TCP (SHM has TCP's constants; of equal ones the network's name is shown).
        assertTrue(r0.matches("(?s).*all_reduce 8 B 4 ranks via TCP: rd \\(model [^)]*hier [0-9.]+ us\\).*"), r0);
        // the cross-host stage (the slice form's all-reduce among one rank per host) logs its own choice
        assertTrue(r0.contains("all_reduce " + 2L * big + " B 2 ranks via TCP, cross-host stage: "), r0);
    }

    @Test
    void excludedHierIsNeverChosen() throws IOException {
        Path log = dir.resolve("excl.%r.log");
        Log.configure(new Log.Options(Log.Level.INFO, EnumSet.of(Log.Subsys.TUNING), log.toString(), false));
        List<Communicator> cs = Jccl.initLocal(4, shm("a,a,b,b").with("JCCL_ALGO", "allreduce:^hier"));
        try {
            Ranks.run(cs, Duration.ofSeconds(90), c -> {
                float[] x = new float[2 << 20];
                java.util.Arrays.fill(x, 1);
                c.allReduce(Buffer.of(x), Buffer.of(x), ReduceOp.SUM);
                assertEquals(4f, x[x.length - 1]);
            });
        } finally {
            closeAll(cs);
        }
        String r0 = Files.readString(dir.resolve("excl.0.log"));
        assertTrue(r0.matches("(?s).*all_reduce 8388608 B 4 ranks via TCP: (rd|rabenseifner|ring) \\(model.*"), r0);
        assertFalse(r0.contains(": hier (model"), r0);
        assertFalse(r0.contains("cross-host stage:"), r0);
    }

    @Test
    void hierarchicalCollectivesPassTheSignatureCheck() {
        // JCCL_CHECK=1 signs every connection an operation uses: the stages use subsets of them.
        List<Communicator> cs = Jccl.initLocal(5, shm("a,b,a,b,b").with("JCCL_CHECK", "1")
                .with("JCCL_ALGO", "allreduce:hier;broadcast:hier;reduce:hier;allgather:hier"));
        try {
            Ranks.run(cs, Duration.ofSeconds(90), c -> {
                for (int count : new int[] {3, 70_001}) {
                    double[] x = new double[count];
                    java.util.Arrays.fill(x, c.rank());
                    c.allReduce(Buffer.of(x), Buffer.of(x), ReduceOp.AVG);
                    assertEquals(2.0, x[count - 1], 1e-12);
                    double[] y = new double[count];
                    java.util.Arrays.fill(y, c.rank() + 1);
                    c.reduce(Buffer.of(y), c.rank() == 3 ? Buffer.of(y) : null, ReduceOp.MAX, 3);
                    if (c.rank() == 3) {
                        assertEquals(5.0, y[0]);
                    }
                    c.broadcast(Buffer.of(y), Buffer.of(y), 3);
                    assertEquals(5.0, y[count - 1]);
                    double[] all = new double[5 * count];
                    c.allGather(Buffer.of(x), Buffer.of(all));
                    for (int r = 0; r < 5; r++) {
                        assertEquals(2.0, all[r * count], "block of rank " + r);
                    }
                }
            });
        } finally {
            closeAll(cs);
        }
    }

    @Test
    void aLeaderThatGoesAwayFailsEveryOtherRankInsteadOfHangingThem() throws Exception {
        // Rank 2 leads "host" b: rank 3 waits for it in the same-host stage, ranks 0 and 1 in (or
        // behind) the cross-host stage. Its abort must fail all three, none may wait forever.
        List<Communicator> cs = Jccl.initLocal(4, shm("a,a,b,b").with("JCCL_ALGO", "allreduce:hier").with("JCCL_PEER_TIMEOUT", "5"));
        try {
            List<org.jccl.Work> works = new java.util.ArrayList<>();
            for (int r : new int[] {0, 1, 3}) {
                float[] x = new float[1 << 20];
                works.add(cs.get(r).allReduceAsync(Buffer.of(x), Buffer.of(x), ReduceOp.SUM));
            }
            Thread.sleep(300);
            for (org.jccl.Work w : works) {
                assertFalse(w.isDone(), "an all-reduce finished without rank 2");
            }
            long t0 = System.nanoTime();
            cs.get(2).abort();
            for (org.jccl.Work w : works) {
                org.jccl.JcclException e = assertThrows(org.jccl.JcclException.class, w::join);
                assertTrue(e.code() == org.jccl.ErrorCode.PEER_FAILED || e.code() == org.jccl.ErrorCode.ABORTED, e.toString());
            }
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
            assertTrue(seconds < 30, "the survivors took " + seconds + " s to fail");
        } finally {
            cs.forEach(Communicator::abort);
            closeAll(cs);
        }
    }

    @Test
    void aHostIdListMustHaveOneIdPerRank() {
        ConfigException e = assertThrows(ConfigException.class, () -> Jccl.initLocal(3, Config.defaults().with("JCCL_HOSTID", "a,b")));
        assertTrue(e.getMessage().startsWith("JCCL_HOSTID='a,b' lists 2 host ids but the job has 3 ranks; give one id per rank"),
                e.getMessage());
        ConfigException many = assertThrows(ConfigException.class, () -> Jccl.initLocal(3, Config.defaults().with("JCCL_HOSTID", "a*2,b*2")));
        assertTrue(many.getMessage().startsWith("JCCL_HOSTID='a*2,b*2' lists 4 host ids but the job has 3 ranks"), many.getMessage());
        ConfigException star = assertThrows(ConfigException.class, () -> Config.defaults().with("JCCL_HOSTID", "a*0,b").validate());
        assertTrue(star.getMessage().contains("JCCL_HOSTID='a*0,b' repeats a host id '0' times; after * give a count from 1 to"),
                star.getMessage());
        ConfigException empty = assertThrows(ConfigException.class, () -> Config.defaults().with("JCCL_HOSTID", "a,,b").validate());
        assertTrue(empty.getMessage().contains("JCCL_HOSTID='a,,b' has an empty host id"), empty.getMessage());
    }

    @Test
    void hierForcedOnOneHostSaysWhyItCannotApply() {
        List<Communicator> cs = Jccl.initLocal(2, Config.defaults().with("JCCL_ALGO", "allreduce:hier"));
        try {
            AssertionError e = assertThrows(AssertionError.class, () -> Ranks.run(cs, Duration.ofSeconds(60),
                    c -> c.allReduce(Buffer.of(new float[4]), Buffer.of(new float[4]), ReduceOp.SUM)));
            String msg = String.valueOf(e.getCause() == null ? e.getMessage() : e.getCause().getMessage());
            assertTrue(msg.contains("JCCL_ALGO excludes every algorithm allreduce has (rd, rabenseifner, ring); hier applies only"
                    + " when the ranks span several hosts and some host has more than one"), msg);
        } finally {
            cs.forEach(Communicator::abort);
            closeAll(cs);
        }
    }

    @Test
    void hierIsAnAlgorithmNameAndItsStagesUseTheOthers() {
        AlgoSelector only = AlgoSelector.parse("allreduce:hier");
        assertTrue(only.allowed(Coll.ALLREDUCE, Algo.HIER));
        assertFalse(only.allowed(Coll.ALLREDUCE, Algo.RD));
        assertTrue(only.stages().allowed(Coll.ALLREDUCE, Algo.RD));
        assertFalse(only.stages().allowed(Coll.ALLREDUCE, Algo.HIER));
        AlgoSelector ring = AlgoSelector.parse("allreduce:ring,hier");
        assertTrue(ring.stages().allowed(Coll.ALLREDUCE, Algo.RING));
        assertFalse(ring.stages().allowed(Coll.ALLREDUCE, Algo.RD));
        assertFalse(AlgoSelector.parse("^hier").allowed(Coll.BROADCAST, Algo.HIER));
        ConfigException e = assertThrows(ConfigException.class, () -> AlgoSelector.parse("allreduce:hierarchical"));
        assertTrue(e.getMessage().contains("names algorithm 'hierarchical', which jccl does not have; allowed names: ring, rd, tree,"
                + " pairwise, direct, rabenseifner, bruck, scatter_allgather, shared, hier"), e.getMessage());
    }
}
