package org.jccl.conformance;

import org.jccl.Config;

/** The conformance suite over TCP on loopback (in-JVM and shared-memory transports off), with two sockets per peer so that striping is exercised. */
class TcpConformanceTest extends CollectiveConformance {
    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_NSOCKS_PERTHREAD", "2");
    }

    @Override
    protected String transport() {
        return "TCP";
    }
}
