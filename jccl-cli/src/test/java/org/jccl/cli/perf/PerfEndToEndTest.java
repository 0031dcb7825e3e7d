package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The benchmark over jccl's real runtime: three in-process ranks from {@link Jccl#initLocal},
 * every collective with the data check on. Every element must come back right and times must be
 * positive and finite.
 */
class PerfEndToEndTest {

    private static PerfTesting.Run runLocal(int n, PerfOptions o) throws Exception {
        List<Communicator> comms = Jccl.initLocal(n);
        try {
            return PerfTesting.runRanks(comms, o);
        } finally {
            comms.forEach(Communicator::close);
        }
    }

    private static void assertCorrectAndSane(PerfTesting.Run r, Collective c) {
        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("# Out of bounds values : 0 OK"), r.out());
        assertTrue(!r.rows().isEmpty(), r.out());
        for (String row : r.rows()) {
            String[] f = PerfTesting.fields(row);
            assertEquals(13, f.length, row);
            assertEquals("0", f[8], "out-of-place #wrong: " + row);
            assertEquals(c.inPlaceUnchecked() ? "N/A" : "0", f[12], "in-place #wrong: " + row);
            for (int k : new int[] {5, 9}) {
                double us = Double.parseDouble(f[k]);
                assertTrue(us > 0 && us < 10e6, "time " + f[k] + " us: " + row);
            }
            for (int k : new int[] {6, 7, 10, 11}) {
                double bw = Double.parseDouble(f[k]);
                assertTrue(bw >= 0 && Double.isFinite(bw), "bandwidth " + f[k] + ": " + row);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Collective.class)
    @Timeout(120)
    void everyCollectiveOnThreeRanks(Collective c) throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(c);
        o.min = 8;
        o.max = 1 << 20;
        o.factor = 8;
        o.iters = 5;
        PerfTesting.Run r = runLocal(3, o.build());
        assertCorrectAndSane(r, c);
        assertEquals(6, r.rows().size(), r.out()); // 8 64 512 4K 32K 256K
    }

    @ParameterizedTest
    @EnumSource(value = Collective.class, names = {"ALL_REDUCE", "REDUCE_SCATTER", "REDUCE"})
    @Timeout(180)
    void everyTypeAndOpOnThreeRanks(Collective c) throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(c);
        o.min = 4096;
        o.max = 4096;
        o.iters = 2;
        o.types = PerfOptions.ALL_TYPES;
        o.ops = PerfOptions.ALL_OPS;
        o.root = PerfOptions.ALL_ROOTS;
        PerfTesting.Run r = runLocal(3, o.build());
        assertCorrectAndSane(r, c);
        assertEquals(10 * 5 * (c.hasRoot() ? 3 : 1), r.rows().size());
    }

    @Test
    @Timeout(120)
    void copiesInEveryTypeWithTwoChecksAndBlocking() throws Exception {
        for (Collective c : new Collective[] {Collective.ALL_GATHER, Collective.BROADCAST, Collective.ALLTOALL, Collective.SENDRECV}) {
            PerfTesting.Opts o = new PerfTesting.Opts().coll(c);
            o.min = 1000;
            o.max = 100_000;
            o.factor = 10;
            o.iters = 3;
            o.check = 2;
            o.blocking = 1;
            o.types = PerfOptions.ALL_TYPES;
            o.root = PerfOptions.ALL_ROOTS;
            PerfTesting.Run r = runLocal(3, o.build());
            assertCorrectAndSane(r, c);
        }
    }

    @Test
    @Timeout(120)
    void oneRankAndFourRanks() throws Exception {
        for (int n : new int[] {1, 4}) {
            for (Collective c : Collective.values()) {
                PerfTesting.Opts o = new PerfTesting.Opts().coll(c);
                o.min = 64;
                o.max = 64 << 10;
                o.factor = 32;
                o.iters = 3;
                o.types = List.of(DataType.BFLOAT16);
                o.ops = List.of(ReduceOp.AVG);
                assertCorrectAndSane(runLocal(n, o.build()), c);
            }
        }
    }
}
