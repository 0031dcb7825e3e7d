package org.jccl.conformance;

import org.jccl.Config;

/**
 * {@link MismatchGuardConformance} over TCP on loopback with two sockets per peer, so that the larger
 * messages are striped and the guard is checked in every stripe header.
 */
class TcpGuardTest extends MismatchGuardConformance {
    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_NSOCKS_PERTHREAD", "2");
    }
}
