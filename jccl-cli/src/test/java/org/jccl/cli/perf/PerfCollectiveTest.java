package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class PerfCollectiveTest {

    @Test
    void parsesNamesAndBinaryNames() {
        assertEquals(Collective.ALL_REDUCE, Collective.parse("all_reduce"));
        assertEquals(Collective.ALL_REDUCE, Collective.parse("all_reduce_perf"));
        assertEquals(Collective.ALL_REDUCE, Collective.parse("allreduce"));
        assertEquals(Collective.ALL_REDUCE, Collective.parse("All-Reduce"));
        assertEquals(Collective.ALL_GATHER, Collective.parse("all_gather_perf"));
        assertEquals(Collective.BROADCAST, Collective.parse("broadcast"));
        assertEquals(Collective.REDUCE, Collective.parse("reduce_perf"));
        assertEquals(Collective.REDUCE_SCATTER, Collective.parse("reduce_scatter"));
        assertEquals(Collective.ALLTOALL, Collective.parse("alltoall_perf"));
        assertEquals(Collective.SENDRECV, Collective.parse("sendrecv_perf"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Collective.parse("allreduc"));
        assertTrue(e.getMessage().contains("all_reduce all_gather broadcast reduce reduce_scatter alltoall sendrecv"),
                e.getMessage());
    }

    @Test
    void countsForWholeBufferCollectives() {
        for (Collective c : new Collective[] {Collective.ALL_REDUCE, Collective.BROADCAST, Collective.REDUCE, Collective.SENDRECV}) {
            Collective.Counts k = c.counts(33554432, 4, 4);
            assertEquals(new Collective.Counts(8388608, 8388608, 8388608, 0, 0), k, c.name());
            assertEquals(33554432, k.sizeBytes(4));
            // sizes that are not a multiple of the type size round down to whole elements
            assertEquals(2, c.counts(10, 4, 3).paramCount());
            assertEquals(8, c.counts(10, 4, 3).sizeBytes(4));
        }
    }

    @Test
    void allGatherSizeIsTheGatheredTotal() {
        // nccl-tests on 4 ranks, float: the anchor table's all_gather rows
        assertEquals(0, Collective.ALL_GATHER.counts(8, 4, 4).sizeBytes(4));
        assertEquals(0, Collective.ALL_GATHER.counts(32, 4, 4).sizeBytes(4));
        assertEquals(128, Collective.ALL_GATHER.counts(128, 4, 4).sizeBytes(4));
        Collective.Counts k = Collective.ALL_GATHER.counts(33554432, 4, 4);
        assertEquals(new Collective.Counts(2097152, 8388608, 2097152, 2097152, 0), k);
        assertEquals(33554432, k.sizeBytes(4));
        // 3 ranks: per-rank block rounded down to a multiple of 16 bytes (4 floats)
        Collective.Counts three = Collective.ALL_GATHER.counts(1000, 4, 3);
        assertEquals(80, three.paramCount()); // 250/3 = 83 -> 80
        assertEquals(960, three.sizeBytes(4));
        // 16 bytes is 16 int8, 8 halves, 2 doubles
        assertEquals(32, Collective.ALL_GATHER.counts(100, 1, 3).paramCount()); // 33 -> 32
        assertEquals(16, Collective.ALL_GATHER.counts(100, 2, 3).paramCount()); // 50/3=16 -> 16
        assertEquals(4, Collective.ALL_GATHER.counts(100, 8, 3).paramCount()); // 12/3=4 -> 4
        assertEquals(2, Collective.ALL_GATHER.counts(88, 8, 3).paramCount()); // 11/3=3 -> 2
    }

    @Test
    void reduceScatterAndAlltoallCounts() {
        Collective.Counts rs = Collective.REDUCE_SCATTER.counts(4096, 4, 4);
        assertEquals(new Collective.Counts(1024, 256, 256, 0, 256), rs);
        assertEquals(4096, rs.sizeBytes(4));
        Collective.Counts a2a = Collective.ALLTOALL.counts(4096, 4, 4);
        assertEquals(new Collective.Counts(1024, 1024, 256, 0, 0), a2a);
        assertEquals(4096, a2a.sizeBytes(4));
        // the anchor's alltoall rows: 8 and 32 bytes on 4 ranks become 0
        assertEquals(0, Collective.ALLTOALL.counts(32, 4, 4).sizeBytes(4));
        assertEquals(128, Collective.ALLTOALL.counts(128, 4, 4).sizeBytes(4));
        // one rank: everything is its own block
        assertEquals(new Collective.Counts(1024, 1024, 1024, 0, 1024), Collective.REDUCE_SCATTER.counts(4096, 4, 1));
    }

    @Test
    void busBandwidthFactors() {
        assertEquals(1.5, Collective.ALL_REDUCE.busBwFactor(4));
        assertEquals(2.0 * 2 / 3, Collective.ALL_REDUCE.busBwFactor(3));
        assertEquals(0.0, Collective.ALL_REDUCE.busBwFactor(1));
        for (Collective c : new Collective[] {Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALLTOALL}) {
            assertEquals(0.75, c.busBwFactor(4), c.name());
            assertEquals(7.0 / 8, c.busBwFactor(8), c.name());
        }
        for (Collective c : new Collective[] {Collective.BROADCAST, Collective.REDUCE, Collective.SENDRECV}) {
            assertEquals(1.0, c.busBwFactor(4), c.name());
        }
    }

    @Test
    void algorithmBandwidthMatchesTheAnchorTable() {
        // NCCL on 4x H200, all_reduce 32 MiB: 174.44 us -> algbw 192.36, busbw 288.53
        double alg = Collective.ALL_REDUCE.algBw(8388608, 4, 174.44e-6, 4);
        assertEquals("192.36", CFormat.fixed(alg, 2));
        assertEquals("288.53", CFormat.fixed(alg * Collective.ALL_REDUCE.busBwFactor(4), 2));
        // all_gather 32 MiB total: count is per rank, algbw uses count * n: 106.66 us -> 314.58 / 235.94
        Collective.Counts k = Collective.ALL_GATHER.counts(33554432, 4, 4);
        double ag = Collective.ALL_GATHER.algBw(k.paramCount(), 4, 106.66e-6, 4);
        assertEquals("314.59", CFormat.fixed(ag, 2)); // the anchor's 314.58 came from an unrounded time
        assertEquals(ag * 0.75, ag * Collective.ALL_GATHER.busBwFactor(4));
    }

    @Test
    void columnsWithoutMeaning() {
        assertFalse(Collective.ALL_GATHER.hasOp());
        assertFalse(Collective.ALLTOALL.hasOp());
        assertFalse(Collective.BROADCAST.hasOp());
        assertTrue(Collective.SENDRECV.hasOp(), "nccl-tests labels sendrecv rows with the op");
        assertFalse(Collective.SENDRECV.reduces());
        assertTrue(Collective.BROADCAST.hasRoot());
        assertTrue(Collective.REDUCE.hasRoot());
        assertFalse(Collective.ALL_REDUCE.hasRoot());
        assertTrue(Collective.ALLTOALL.inPlaceUnchecked());
        assertTrue(Collective.SENDRECV.inPlaceUnchecked());
        assertFalse(Collective.ALL_GATHER.inPlaceUnchecked());
    }
}
