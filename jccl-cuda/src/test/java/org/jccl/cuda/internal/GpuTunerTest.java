package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.cuda.internal.GpuTuner.AllReduce;
import org.jccl.cuda.internal.GpuTuner.AllToAll;
import org.jccl.cuda.internal.GpuTuner.Broadcast;
import org.jccl.cuda.internal.GpuTuner.Grid;
import org.jccl.cuda.internal.GpuTuner.ReduceScatter;
import org.junit.jupiter.api.Test;

/**
 * Without a GPU: the GPU tuner's table. Every threshold at its boundary, every forced variant
 * (including where a forced one cannot run and another takes over), the grids, and the errors of
 * bad setting values, word for word.
 */
class GpuTunerTest {
    private static final long K = 1 << 10;
    private static final long M = 1 << 20;
    private static final long G = 1L << 30;
    private static final int SMS = 132;

    /** A tuner for {@code size} ranks with the settings {@code kv} ("NAME", "value", ...) over the defaults. */
    private static GpuTuner tuner(int size, String... kv) {
        Config c = Config.defaults();
        for (int i = 0; i < kv.length; i += 2) {
            c = c.with(kv[i], kv[i + 1]);
        }
        return new GpuTuner(GpuSettings.from(c), size, SMS);
    }

    /** The all-reduce of {@code bytes} bytes of float32. */
    private static AllReduce ar(GpuTuner t, long bytes) {
        return t.allReduce(bytes / 4, bytes);
    }

    @Test
    void autoAllReduceIsOneShotThenPushThenRingAtTheThresholds() {
        GpuTuner four = tuner(4);
        assertEquals(AllReduce.ONESHOT, ar(four, 4));
        assertEquals(AllReduce.ONESHOT, ar(four, 256 * K), "JCCL_CUDA_ONESHOT_MAX (256K) itself is one-shot");
        assertEquals(AllReduce.PUSH, ar(four, 256 * K + 4));
        assertEquals(AllReduce.PUSH, ar(four, 64 * M - 4));
        assertEquals(AllReduce.RING, ar(four, 64 * M), "the ring from 64 MB on 3+ GPUs");
        assertEquals(AllReduce.RING, ar(tuner(3), 64 * M));
        GpuTuner two = tuner(2);
        assertEquals(AllReduce.PUSH, ar(two, 64 * M));
        assertEquals(AllReduce.PUSH, ar(two, 512 * M - 4));
        assertEquals(AllReduce.RING, ar(two, 512 * M), "the ring from 512 MB on 2 GPUs");
        assertEquals(AllReduce.ONESHOT, four.allReduce(0, 0), "no elements: the one-shot (it exchanges nothing)");
        GpuTuner one = tuner(1);
        for (long b : new long[] {0, 4, 256 * K, 64 * M, 1 * G}) {
            assertEquals(AllReduce.TWOSHOT, ar(one, b), "alone, " + b + " bytes");
        }
    }

    @Test
    void theOneShotLimitIsRoundedToWholeSlotsAndCapped() {
        GpuTuner t = tuner(4, "JCCL_CUDA_ONESHOT_MAX", "64K");
        assertEquals(AllReduce.ONESHOT, ar(t, 64 * K));
        assertEquals(AllReduce.PUSH, ar(t, 64 * K + 4));
        GpuTuner odd = tuner(4, "JCCL_CUDA_ONESHOT_MAX", "1000");
        assertEquals(1024, odd.settings().oneshotMax(), "rounded up to 256 bytes");
        assertEquals(AllReduce.ONESHOT, ar(odd, 1024));
        assertEquals(AllReduce.PUSH, ar(odd, 1028));
        assertEquals(8 * M, tuner(4, "JCCL_CUDA_ONESHOT_MAX", "64M").settings().oneshotMax(), "at most 8 MiB: the inbox holds 16 slots");
        assertEquals(AllReduce.PUSH, ar(tuner(4, "JCCL_CUDA_ONESHOT_MAX", "0"), 4), "0: no one-shot");
    }

    @Test
    void everyForcedAllReduceRunsWhereItCanAndTwoShotElsewhere() {
        assertEquals(AllReduce.ONESHOT, ar(tuner(4, "JCCL_CUDA_ALLREDUCE", "oneshot"), 256 * K));
        assertEquals(AllReduce.TWOSHOT, ar(tuner(4, "JCCL_CUDA_ALLREDUCE", "oneshot"), 256 * K + 4), "oneshot beyond its inbox");
        for (long b : new long[] {4, 1 * M, 1 * G}) {
            assertEquals(AllReduce.TWOSHOT, ar(tuner(4, "JCCL_CUDA_ALLREDUCE", "twoshot"), b));
            assertEquals(AllReduce.PUSH, ar(tuner(4, "JCCL_CUDA_ALLREDUCE", "push"), b));
            assertEquals(AllReduce.PUSH_SERIAL, ar(tuner(4, "JCCL_CUDA_ALLREDUCE", "push-serial"), b));
            assertEquals(AllReduce.CE, ar(tuner(4, "JCCL_CUDA_ALLREDUCE", "ce"), b));
            assertEquals(AllReduce.RING, ar(tuner(2, "JCCL_CUDA_ALLREDUCE", "ring"), b));
        }
        for (String v : new String[] {"push", "push-serial", "ce", "ring", "twoshot"}) {
            assertEquals(AllReduce.TWOSHOT, ar(tuner(1, "JCCL_CUDA_ALLREDUCE", v), 1 * M), v + " alone");
            assertEquals(AllReduce.TWOSHOT, tuner(4, "JCCL_CUDA_ALLREDUCE", v).allReduce(0, 0), v + " without elements");
        }
        assertEquals(AllReduce.PUSH_SERIAL, ar(tuner(4, "JCCL_CUDA_ALLREDUCE", " Push-Serial "), 4), "trimmed, any case");
        assertEquals(AllReduce.ONESHOT, ar(tuner(4, "JCCL_CUDA_ALLREDUCE", "AUTO"), 4));
    }

    @Test
    void autoBroadcastFollowsTheSizeTable() {
        GpuTuner t = tuner(4);
        assertEquals(Broadcast.SPREAD, t.broadcast(1));
        assertEquals(Broadcast.SPREAD, t.broadcast(512 * K));
        assertEquals(Broadcast.PULL, t.broadcast(512 * K + 1));
        assertEquals(Broadcast.PULL, t.broadcast(8 * M));
        assertEquals(Broadcast.CHAIN, t.broadcast(8 * M + 1));
        assertEquals(Broadcast.CHAIN, t.broadcast(32 * M));
        assertEquals(Broadcast.WARP_CHAIN, t.broadcast(32 * M + 1));
        assertEquals(Broadcast.WARP_CHAIN, t.broadcast(64 * M - 1));
        assertEquals(Broadcast.CHAIN_ASYNC, t.broadcast(64 * M));
        assertEquals(Broadcast.CHAIN_ASYNC, t.broadcast(512 * M));
        assertEquals(Broadcast.CHAIN, t.broadcast(512 * M + 1));
        assertEquals(Broadcast.CHAIN, t.broadcast(8 * G));
        assertEquals(Broadcast.SPREAD, tuner(2).broadcast(0));
    }

    @Test
    void everyForcedBroadcastRunsAtEverySizeButAloneIsSpread() {
        for (Broadcast v : Broadcast.values()) {
            GpuTuner t = tuner(4, "JCCL_CUDA_BROADCAST", v.settingName());
            for (long b : new long[] {0, 16, 1 * M, 100 * M, 4 * G}) {
                assertEquals(v, t.broadcast(b), v.settingName() + " at " + b);
            }
            assertEquals(Broadcast.SPREAD, tuner(1, "JCCL_CUDA_BROADCAST", v.settingName()).broadcast(1 * M), v + " alone");
        }
    }

    @Test
    void reduceScatterAndAllToAllVariants() {
        assertEquals(ReduceScatter.LOAD, tuner(4).reduceScatter(1000));
        assertEquals(ReduceScatter.LOAD, tuner(4, "JCCL_CUDA_REDUCE_SCATTER", "load").reduceScatter(1000));
        assertEquals(ReduceScatter.CE, tuner(4, "JCCL_CUDA_REDUCE_SCATTER", "ce").reduceScatter(1000));
        assertEquals(ReduceScatter.LOAD, tuner(4, "JCCL_CUDA_REDUCE_SCATTER", "ce").reduceScatter(0), "ce without elements");
        assertEquals(ReduceScatter.LOAD, tuner(1, "JCCL_CUDA_REDUCE_SCATTER", "ce").reduceScatter(1000), "ce alone");
        assertEquals(AllToAll.SPLIT, tuner(4).allToAll());
        assertEquals(AllToAll.SPLIT, tuner(4, "JCCL_CUDA_ALLTOALL", "split").allToAll());
        assertEquals(AllToAll.SERIAL, tuner(4, "JCCL_CUDA_ALLTOALL", "serial").allToAll());
    }

    @Test
    void badVariantNamesFailNamingTheSettingAndItsValues() {
        assertEquals("JCCL_CUDA_ALLREDUCE=fast is not one of auto, oneshot, twoshot, push, push-serial, ce, ring",
                assertThrows(ConfigException.class, () -> tuner(4, "JCCL_CUDA_ALLREDUCE", "fast")).getMessage());
        assertEquals("JCCL_CUDA_BROADCAST=tree is not one of auto, chain, warp-chain, chain-async, pipe, pull, spread, ce",
                assertThrows(ConfigException.class, () -> tuner(4, "JCCL_CUDA_BROADCAST", " Tree")).getMessage());
        assertEquals("JCCL_CUDA_REDUCE_SCATTER=ring is not one of auto, load, ce",
                assertThrows(ConfigException.class, () -> tuner(4, "JCCL_CUDA_REDUCE_SCATTER", "ring")).getMessage());
        assertEquals("JCCL_CUDA_ALLTOALL=pairwise is not one of auto, split, serial",
                assertThrows(ConfigException.class, () -> tuner(4, "JCCL_CUDA_ALLTOALL", "pairwise")).getMessage());
        assertTrue(assertThrows(ConfigException.class, () -> tuner(4, "JCCL_CUDA_BROADCAST", "x", "JCCL_CUDA_ALLREDUCE", "y"))
                .getMessage().startsWith("JCCL_CUDA_ALLREDUCE=y "), "with two bad values, the all-reduce's is named first, as before");
    }

    @Test
    void autoLeavesNoVariantForcedAndTheSettingsAreRounded() {
        GpuSettings s = GpuSettings.from(Config.defaults().with("JCCL_CUDA_PUSH_SLOT", "1048600")
                .with("JCCL_CUDA_RING_SLICE", "1000").with("JCCL_CUDA_CE_CHUNK", "100000").with("JCCL_CUDA_BCAST_PART", "100"));
        assertNull(s.allReduce());
        assertNull(s.broadcast());
        assertNull(s.reduceScatter());
        assertNull(s.allToAll());
        assertEquals(1048576, s.pushSlot(), "rounded down to 256 bytes");
        assertEquals(768, s.ringSlice());
        assertEquals(99840, s.ceChunk());
        assertEquals(112, s.bcastPart(), "rounded up to 16 bytes");
        assertEquals(300_000_000_000L, s.timeoutNs());
        assertTrue(s.guardOn());
        assertEquals(2, s.ceLanes());
    }

    @Test
    void blocksGrowWithTheBytesUpToTheSmallestSmCount() {
        GpuTuner t = tuner(4);
        assertEquals(1, t.blocksFor(0));
        assertEquals(1, t.blocksFor(16 * K), "512 threads x two 16-byte vectors per block");
        assertEquals(2, t.blocksFor(16 * K + 1));
        assertEquals(SMS, t.blocksFor(1 * G));
        assertEquals(7, tuner(4, "JCCL_CUDA_NBLOCKS", "7").blocksFor(1 * G));
        assertEquals(KernelArgs.MAX_BLOCKS, tuner(4, "JCCL_CUDA_NBLOCKS", "1000").blocksFor(1), "JCCL_CUDA_NBLOCKS capped at the kernels' most");
    }

    @Test
    void broadcastGridsFollowTheirMeasuredBlockCounts() {
        GpuTuner t = tuner(4);
        assertEquals(new Grid(32, 64 * K), t.broadcastGrid(Broadcast.CHAIN, 64 * M));
        assertEquals(32, t.broadcastGrid(Broadcast.CHAIN, 128 * M).blocks());
        assertEquals(64, t.broadcastGrid(Broadcast.CHAIN, 128 * M + 16).blocks());
        assertEquals(64, t.broadcastGrid(Broadcast.CHAIN, 2 * G).blocks());
        assertEquals(SMS, t.broadcastGrid(Broadcast.CHAIN, 2 * G + 16).blocks());
        assertEquals(new Grid(1, 4096), t.broadcastGrid(Broadcast.CHAIN, 10000), "small: parts of at least 4 KiB");
        assertEquals(new Grid(32, 3072), t.broadcastGrid(Broadcast.WARP_CHAIN, 48 * M), "about 32 rounds per warp");
        assertEquals(new Grid(1, 512), t.broadcastGrid(Broadcast.WARP_CHAIN, 4096), "warp parts of at least 512 B");
        assertEquals(GpuTuner.WARP_CHAIN_MAX_BLOCKS, tuner(4, "JCCL_CUDA_NBLOCKS", "200").broadcastGrid(Broadcast.WARP_CHAIN, 48 * M)
                .blocks(), "one pipe flag per warp");
        assertEquals(112, GpuTuner.WARP_CHAIN_MAX_BLOCKS);
        assertTrue(GpuTuner.WARP_CHAIN_MAX_BLOCKS * (Kernels.THREADS / 32) <= SignalArea.PIPE_FLAGS);
        assertEquals(new Grid(64, 64 * K), t.broadcastGrid(Broadcast.CHAIN_ASYNC, 128 * M));
        assertEquals(new Grid(64, 16), tuner(4, "JCCL_CUDA_BCAST_PART", "16").broadcastGrid(Broadcast.CHAIN_ASYNC, 128 * M));
        assertEquals(new Grid(96, 64 * K), tuner(4, "JCCL_CUDA_NBLOCKS", "96").broadcastGrid(Broadcast.CHAIN_ASYNC, 128 * M));
        assertEquals(new Grid(64, 16 * K), t.broadcastGrid(Broadcast.PIPE, 3 * M), "3 slices of 1 MiB, 64 blocks");
        assertThrows(IllegalArgumentException.class, () -> t.broadcastGrid(Broadcast.SPREAD, 1));
    }

    @Test
    void theSplitAllToAllSharesTheBlocksAmongThePeers() {
        GpuTuner t = tuner(4);
        assertEquals(SMS / 4, t.allToAllBlocksPerPeer(1 * M));
        assertEquals(1, t.allToAllBlocksPerPeer(16));
        assertEquals(2, tuner(4, "JCCL_CUDA_NBLOCKS", "8").allToAllBlocksPerPeer(1 * M));
        assertEquals(1, tuner(4, "JCCL_CUDA_NBLOCKS", "3").allToAllBlocksPerPeer(1 * M));
    }
}
