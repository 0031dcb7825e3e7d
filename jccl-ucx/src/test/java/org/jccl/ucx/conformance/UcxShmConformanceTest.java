package org.jccl.ucx.conformance;

import org.jccl.conformance.CollectiveConformance;

import org.jccl.Config;
import org.jccl.ucx.UcxTests;
import org.junit.jupiter.api.BeforeAll;

/**
 * The conformance suite over UCX's shared-memory transports ({@code JCCL_UCX_TLS=posix,cma,self}), every pair
 * through a UCX endpoint in the peer-failure error mode: this needs the transport's
 * {@code UCX_POSIX_ERROR_HANDLING=y} (without it UCX 1.13 has no path for such an endpoint and ucp_ep_create fails
 * with UCS_ERR_UNREACHABLE, which {@code UcxHazardsTest} shows). Skips, naming what is missing, without UCX.
 */
class UcxShmConformanceTest extends CollectiveConformance {
    @BeforeAll
    static void needUcx() {
        UcxTests.assumeUcx();
    }

    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_NET", "UCX")
                .with("JCCL_UCX_SAME_HOST", "1").with("JCCL_UCX_TLS", "posix,cma,self");
    }

    /** 2-4 ranks (the tcp variant runs the whole sweep): enough for every algorithm, and it keeps CI short. */
    @Override
    protected int[] ranks() {
        return new int[] {2, 3, 4};
    }

    @Override
    protected String transport() {
        return "UCX posix,cma,self";
    }
}
