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

    @Override
    protected String transport() {
        return "UCX tcp";
    }
}
