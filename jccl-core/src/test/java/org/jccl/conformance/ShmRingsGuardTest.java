package org.jccl.conformance;

import org.jccl.Config;

/**
 * {@link MismatchGuardConformance} over the SHM rings only (no shared collective segment): the guard
 * in every slot's meta, with small slots so that messages take many chunks.
 */
class ShmRingsGuardTest extends MismatchGuardConformance {
    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_COLL_BUFFER", "0").with("JCCL_SHM_CHUNK", "64K")
                .with("JCCL_SHM_SLOTS", "4");
    }
}
