package org.jccl.ucx.conformance;

import org.jccl.Config;
import org.jccl.conformance.MismatchGuardConformance;
import org.jccl.ucx.UcxTests;
import org.junit.jupiter.api.BeforeAll;

/**
 * {@link MismatchGuardConformance} over UCX's tcp: the guard word travels as the first entry of a two-entry IOV
 * with each message and is compared when the receive completes, so every mismatched call fails with MISMATCH
 * naming both calls, none hangs.
 */
class UcxGuardTest extends MismatchGuardConformance {
    @BeforeAll
    static void needUcx() {
        UcxTests.assumeUcx();
    }

    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_NET", "UCX")
                .with("JCCL_UCX_SAME_HOST", "1").with("JCCL_UCX_TLS", "tcp");
    }
}
