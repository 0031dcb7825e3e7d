package org.jccl.ucx.conformance;

import java.nio.file.Path;
import java.util.Map;
import org.jccl.conformance.OneSidedConformance;
import org.jccl.spi.Transport;
import org.jccl.ucx.UcxTests;
import org.jccl.ucx.internal.UcxTransport;
import org.junit.jupiter.api.BeforeAll;

/**
 * The one-sided suite over UCX's tcp (registration through the endpoint's RegistrationCache over ucp_mem_map, keys
 * from ucp_rkey_pack, puts with ucp_put_nbx, flush with ucp_ep_flush_nbx), ranks as threads of this JVM. UCX cannot tell
 * a peer's deregistration, so the deregistration scenario is the variant that stops short of putting into it.
 */
class UcxOneSidedTest extends OneSidedConformance {
    @BeforeAll
    static void needUcx() {
        UcxTests.assumeUcx();
    }

    @Override
    protected Transport transport() {
        UcxTransport t = new UcxTransport();
        org.jccl.Config c = org.jccl.Config.defaults();
        for (Map.Entry<String, String> e : settings(dir).entrySet()) {
            c = c.with(e.getKey(), e.getValue());
        }
        t.isEnabled(c); // reads JCCL_UCX_SAME_HOST: these ranks share one host identity
        return t;
    }

    @Override
    protected Map<String, String> settings(Path dir) {
        return Map.of("JCCL_NET", "UCX", "JCCL_UCX_SAME_HOST", "1", "JCCL_UCX_TLS", "tcp");
    }

    @Override
    protected boolean oneSided() {
        return true;
    }

    @Override
    protected boolean registersProcessMemory() {
        return true;
    }

    /** UCX cannot see a peer's deregistration (the SPI allows it); a put there would land in freed memory. */
    @Override
    protected boolean seesRemoteDeregistration() {
        return false;
    }
}
