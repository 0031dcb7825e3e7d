package org.jccl.internal.tune;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.TreeMap;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.Jccl;
import org.jccl.internal.transport.local.LocalTransport;
import org.jccl.internal.transport.shm.ShmTransport;
import org.jccl.internal.transport.tcp.TcpTransport;
import org.jccl.internal.tune.AlgoSelector.Algo;
import org.jccl.internal.tune.AlgoSelector.Coll;
import org.jccl.spi.LinkCosts;
import org.junit.jupiter.api.Test;

/** The tuner's choices for given constants, their crossovers, and JCCL_ALGO over them. */
class TunerTest {
    /** alpha 10 us, beta = gamma = copy = 1 ns/B: round numbers whose crossovers are easy to derive by hand. */
    static final Tuner.Model M = new Tuner.Model("TEST", 10e-6, 1e-9, 1e-9, 1e-9);
    static final long CHUNK = 512 * 1024;

    static Tuner tuner(int n, String algo) {
        return new Tuner(AlgoSelector.parse(algo), n, CHUNK, M, 0);
    }

    static Algo allReduce(Tuner t, long bytes) {
        return t.choose(Coll.ALLREDUCE, bytes, Algo.RD, Algo.RABENSEIFNER, Algo.RING);
    }

    @Test
    void allReduceSwitchesFromRdToRabenseifnerAtFourRanks() {
        // n = 4: rd 2a + 2m(b+g); rabenseifner 4a + 1.5mb + 0.75mg; ring 6a + 1.5mb + 0.75mg (never below rabenseifner
        // at a power of two); rd = rabenseifner at m = 2a / (0.5b + 1.25g) = 11429 B
        Tuner t = tuner(4, null);
        assertEquals(Algo.RD, allReduce(t, 8));
        assertEquals(Algo.RD, allReduce(t, 11_000));
        assertEquals(Algo.RABENSEIFNER, allReduce(t, 12_000));
        assertEquals(Algo.RABENSEIFNER, allReduce(t, 64L << 20));
    }

    @Test
    void allReduceAtSixRanksGoesRdThenRabenseifnerThenRing() {
        // n = 6 (p = 4, folded): rd 4a + 4mb + 3mg; rabenseifner 6a + 3.5mb + 1.75mg; ring 10a + 5/3 mb + 5/6 mg
        // rd = rabenseifner at 2a / (0.5b + 1.25g) = 11429 B; rabenseifner = ring at 4a / (11/6 b + 11/12 g) = 14545 B
        Tuner t = tuner(6, null);
        assertEquals(Algo.RD, allReduce(t, 11_000));
        assertEquals(Algo.RABENSEIFNER, allReduce(t, 12_000));
        assertEquals(Algo.RABENSEIFNER, allReduce(t, 14_000));
        assertEquals(Algo.RING, allReduce(t, 15_000));
        assertEquals(Algo.RING, allReduce(t, 64L << 20));
    }

    @Test
    void allReduceSwitchesFromRdToRingAtThreeRanks() {
        // n = 3 (folded): rd 3a + 3mb + 2mg; rabenseifner 4a + 3mb + 1.5mg; ring 4a + 4/3 mb + 2/3 mg
        // rd = ring at m = a / (5/3 b + 4/3 g) = 3333 B; ring stays below rabenseifner
        Tuner t = tuner(3, null);
        assertEquals(Algo.RD, allReduce(t, 3_000));
        assertEquals(Algo.RING, allReduce(t, 3_500));
        assertEquals(Algo.RING, allReduce(t, 64L << 20));
    }

    @Test
    void allGatherPrefersLogStepsForSmallMessagesAndRingNeverLoses() {
        // n = 6: ring 5a + 5/6 mb; bruck 3a + 5/6 mb (fewer steps, same bytes); rd (folded) 2a + 3/4 mb + 2a + 7/6 mb
        Tuner t = tuner(6, null);
        assertEquals(Algo.BRUCK, t.choose(Coll.ALLGATHER, 600, Algo.RING, Algo.RD, Algo.BRUCK));
        assertEquals(Algo.BRUCK, t.choose(Coll.ALLGATHER, 6L << 20, Algo.RING, Algo.RD, Algo.BRUCK));
        // two ranks: all three cost a + m/2 b; the tie goes to the first (ring)
        assertEquals(Algo.RING, tuner(2, null).choose(Coll.ALLGATHER, 1 << 20, Algo.RING, Algo.RD, Algo.BRUCK));
        // a power of two: rd and bruck tie and rd (listed first) wins over ring for small messages
        assertEquals(Algo.RD, tuner(8, null).choose(Coll.ALLGATHER, 800, Algo.RING, Algo.RD, Algo.BRUCK));
    }

    @Test
    void broadcastSwitchesToScatterAllGatherForLargeMessages() {
        // n = 8: tree 3a + 3mb; scatter_allgather 3a + 7/8 mb + (rd all-gather 3a + 7/8 mb) = 6a + 1.75mb:
        // equal at m = 3a / 1.25b = 24000 B
        Tuner t = tuner(8, null);
        assertEquals(Algo.TREE, t.choose(Coll.BROADCAST, 23_000, Algo.TREE, Algo.SCATTER_ALLGATHER));
        assertEquals(Algo.SCATTER_ALLGATHER, t.choose(Coll.BROADCAST, 25_000, Algo.TREE, Algo.SCATTER_ALLGATHER));
        // two ranks: tree a + mb, scatter_allgather 2a + mb: the tree always
        assertEquals(Algo.TREE, tuner(2, null).choose(Coll.BROADCAST, 64L << 20, Algo.TREE, Algo.SCATTER_ALLGATHER));
    }

    @Test
    void allToAllSwitchesFromBruckToPairwise() {
        // n = 8: pairwise 7a + 7/8 mb; bruck 3a + 1.5 mb + 5m copy: equal at m = 4a / (5.625 ns) = 7111 B
        Tuner t = tuner(8, null);
        assertEquals(Algo.BRUCK, t.choose(Coll.ALLTOALL, 7_000, Algo.PAIRWISE, Algo.BRUCK));
        assertEquals(Algo.PAIRWISE, t.choose(Coll.ALLTOALL, 7_200, Algo.PAIRWISE, Algo.BRUCK));
    }

    @Test
    void jcclAlgoOverridesTheModel() {
        assertEquals(Algo.RING, allReduce(tuner(4, "allreduce:ring"), 8));
        assertEquals(Algo.RABENSEIFNER, allReduce(tuner(4, "^rd"), 8));
        assertEquals(Algo.RD, allReduce(tuner(4, "allreduce:rd;broadcast:tree"), 64L << 20));
        assertEquals(Algo.SCATTER_ALLGATHER,
                tuner(2, "broadcast:scatter_allgather").choose(Coll.BROADCAST, 8, Algo.TREE, Algo.SCATTER_ALLGATHER));
        assertEquals(Algo.PAIRWISE, tuner(8, "alltoall:pairwise").choose(Coll.ALLTOALL, 8, Algo.PAIRWISE, Algo.BRUCK));
        // a list restricts every collective; one that has none of the listed algorithms is an error naming its own
        ConfigException e = assertThrows(ConfigException.class,
                () -> tuner(4, "ring,rd").choose(Coll.ALLTOALL, 8, Algo.PAIRWISE, Algo.BRUCK));
        assertTrue(e.getMessage().contains("pairwise, bruck"), e.getMessage());
    }

    @Test
    void unknownTokenIsAnErrorNamingItAndTheAllowedNames() {
        ConfigException e = assertThrows(ConfigException.class, () -> AlgoSelector.parse("allreduce:ring;broadcast:fancy"));
        assertTrue(e.getMessage().contains("'fancy'"), e.getMessage());
        for (Algo a : Algo.values()) {
            assertTrue(e.getMessage().contains(a.token()), e.getMessage());
        }
        ConfigException c = assertThrows(ConfigException.class, () -> AlgoSelector.parse("allreduc:ring"));
        assertTrue(c.getMessage().contains("'allreduc'"), c.getMessage());
        assertThrows(ConfigException.class, () -> AlgoSelector.parse("^"));
        // through the public API: communicator creation fails with the same message
        RuntimeException r = assertThrows(RuntimeException.class,
                () -> Jccl.initLocal(2, Config.defaults().with("JCCL_ALGO", "bruk")).forEach(org.jccl.Communicator::close));
        String all = r.toString() + (r.getCause() == null ? "" : " " + r.getCause());
        assertTrue(all.contains("'bruk'") && all.contains("bruck"), all);
    }

    @Test
    void aliasesAndCase() {
        assertTrue(AlgoSelector.parse("allreduce:Recursive_Doubling").allowed(Coll.ALLREDUCE, Algo.RD));
        assertTrue(AlgoSelector.parse("broadcast:scatter-allgather").allowed(Coll.BROADCAST, Algo.SCATTER_ALLGATHER));
        assertTrue(AlgoSelector.parse("all_gather:BRUCK").allowed(Coll.ALLGATHER, Algo.BRUCK));
    }

    @Test
    void modelsFromTheCostsTransportsDeclare() {
        Tuner.Model tcp = Tuner.model("TCP", TcpTransport.COSTS);
        assertEquals("TCP", tcp.transport());
        assertEquals(TcpTransport.COSTS.latencySeconds(), tcp.alpha());
        assertEquals(TcpTransport.COSTS.secondsPerByte(), tcp.beta());
        // the memory constants are the machine's, the same whatever the transport
        assertEquals(Tuner.GAMMA, tcp.gamma());
        assertEquals(Tuner.COPY, Tuner.model("LOCAL", LocalTransport.COSTS).copy());
        // SHM's were measured inside real algorithms: cheaper than TCP per step and per byte, but a
        // step dearer than the shared segment's one synchronisation (which must win small all-reduces)
        Tuner.Model shm = Tuner.model("SHM", ShmTransport.COSTS);
        assertTrue(shm.alpha() < tcp.alpha() && shm.beta() < tcp.beta());
        assertTrue(shm.alpha() > Tuner.SHARED.alpha());
        assertTrue(LocalTransport.COSTS.latencySeconds() < TcpTransport.COSTS.latencySeconds());
        // a communicator whose pairs use several transports is modelled by the slowest, by costs, not by name
        Tuner.Model none = Tuner.model("none", TcpTransport.COSTS);
        assertEquals("TCP", Tuner.slowest(new TreeMap<>(Map.of("SHM", ShmTransport.COSTS, "TCP", TcpTransport.COSTS)), none).transport());
        assertEquals("TCP", Tuner.slowest(new TreeMap<>(Map.of("LOCAL", LocalTransport.COSTS, "TCP", TcpTransport.COSTS)), none).transport());
        assertEquals("LOCAL", Tuner.slowest(Map.of("LOCAL", LocalTransport.COSTS), none).transport());
        LinkCosts slowNew = new LinkCosts(50e-6, 1e-9, "test");
        assertEquals("UCX", Tuner.slowest(new TreeMap<>(Map.of("UCX", slowNew, "TCP", TcpTransport.COSTS)), none).transport());
        assertEquals("none", Tuner.slowest(Map.of(), none).transport());
    }

    @Test
    void linkCostsRefuseNonsense() {
        assertThrows(IllegalArgumentException.class, () -> new LinkCosts(-1, 0, "x"));
        assertThrows(IllegalArgumentException.class, () -> new LinkCosts(0, Double.NaN, "x"));
        assertThrows(IllegalArgumentException.class, () -> new LinkCosts(Double.POSITIVE_INFINITY, 0, "x"));
        assertEquals("6.43 us, 1.7 GB/s", TcpTransport.COSTS.toString());
        assertEquals(6.43e-6 + 1024 * 5.79e-10, TcpTransport.COSTS.seconds(1024), 1e-15);
    }
}
