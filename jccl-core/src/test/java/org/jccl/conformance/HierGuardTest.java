package org.jccl.conformance;

import org.jccl.Config;

/**
 * {@link MismatchGuardConformance} on 4 ranks that stand for two hosts ({@code JCCL_HOSTID=a,a,b,b}:
 * SHM within a host, TCP between them) with every hierarchical collective forced, so that the
 * guard is checked in the stages' messages over both transports, and on 5 ranks of 2+3 (the leader form).
 */
class HierGuardTest extends MismatchGuardConformance {
    @Override
    protected int[] ranks() {
        return new int[] {4, 5};
    }

    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_CHUNK", "64K").with("JCCL_SHM_SLOTS", "4")
                .with("JCCL_CHUNK_SIZE", "64K").with("JCCL_ALGO", HierConformance.HIER);
    }

    @Override
    protected Config config(int n) {
        return config().with("JCCL_HOSTID", n == 4 ? "a,a,b,b" : "a,a,b,b,b");
    }
}
