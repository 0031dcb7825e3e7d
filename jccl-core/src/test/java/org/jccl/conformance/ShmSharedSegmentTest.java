package org.jccl.conformance;

import org.jccl.Config;

/**
 * {@link AlgorithmConformance} with the all-reduce forced through the shared collective segment
 * ({@code JCCL_ALGO=allreduce:shared}) and a small segment (16 KiB per rank: 8 KiB rounds), so that
 * the larger counts take many two-step rounds with uneven slices, on 2..8 ranks (the barrier
 * between the suite's steps goes through the segment too).
 */
class ShmSharedSegmentTest extends AlgorithmConformance {
    @Override
    protected String algo() {
        return "allreduce:shared";
    }

    @Override
    protected Config transportConfig() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_CHUNK", "64K").with("JCCL_SHM_SLOTS", "4")
                .with("JCCL_SHM_COLL_BUFFER", "16K");
    }

    @Override
    protected String transport() {
        return "SHM";
    }
}
