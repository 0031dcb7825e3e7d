package org.jccl.conformance;

import org.jccl.Config;

/**
 * {@link MismatchGuardConformance} with every collective that has a shared-segment form forced
 * through the shared collective segment (the guard word in each rank's arrive line), with a small
 * segment (16 KiB per rank) so that the larger counts take many rounds; the rooted collectives and
 * all-to-all run on the SHM rings beside it.
 */
class ShmSharedGuardTest extends MismatchGuardConformance {
    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_COLL_BUFFER", "16K")
                .with("JCCL_ALGO", "allreduce:shared;allgather:shared;reducescatter:shared");
    }
}
