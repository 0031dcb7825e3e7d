package org.jccl.ucx.conformance;

import org.jccl.conformance.CollectiveConformance;

import org.jccl.Config;
import org.jccl.ucx.UcxTests;
import org.junit.jupiter.api.BeforeAll;

/**
 * The conformance suite over UCX's tcp transport ({@code JCCL_UCX_TLS=tcp}): ranks of this JVM with the
 * in-JVM and shared-memory transports off and {@code JCCL_UCX_SAME_HOST=1}, so that every pair goes through a
 * UCX endpoint (peer-failure mode) over loopback TCP. Skips, naming what is missing, without UCX.
 */
class UcxTcpConformanceTest extends CollectiveConformance {
    @BeforeAll
    static void needUcx() {
        UcxTests.assumeUcx();
    }

    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_NET", "UCX")
                .with("JCCL_UCX_SAME_HOST", "1").with("JCCL_UCX_TLS", "tcp");
    }

    /**
     * 2, 3, 4 and 7 ranks (the suite's sweep without 1, which moves no message, and 8, whose power-of-two algorithms
     * 4 ranks already take): the whole sweep took 200-280 s on the 2-core VM, too much of CI's budget.
     */
    @Override
    protected int[] ranks() {
        return new int[] {2, 3, 4, 7};
    }

    @Override
    protected String transport() {
        return "UCX tcp";
    }
}
