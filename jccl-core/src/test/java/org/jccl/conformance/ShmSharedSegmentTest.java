package org.jccl.conformance;

import org.jccl.Config;

/**
 * The whole conformance suite with every collective that has a shared-segment form forced through
 * the shared collective segment ({@code JCCL_ALGO}: all-reduce, all-gather and reduce-scatter
 * {@code shared}; the barrier takes it by default) and a small segment (16 KiB per
 * rank: 8 KiB rounds), so that the larger counts take many rounds with uneven slices, on 1..5, 7
 * and 8 ranks. (ShmConformanceTest runs the default choice, with the default 4 MiB segment.)
 */
class ShmSharedSegmentTest extends CollectiveConformance {
    private static final int[] RANKS = {1, 2, 3, 4, 5, 7, 8};
    private static final long[] COUNTS = {0, 1, 7, 1000, 100_003};

    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_CHUNK", "64K").with("JCCL_SHM_SLOTS", "4")
                .with("JCCL_SHM_COLL_BUFFER", "16K")
                .with("JCCL_ALGO", "allreduce:shared;allgather:shared;reducescatter:shared");
    }

    @Override
    protected int[] ranks() {
        return RANKS;
    }

    @Override
    protected long[] counts() {
        return COUNTS;
    }

    @Override
    protected String transport() {
        return "SHM";
    }
}
