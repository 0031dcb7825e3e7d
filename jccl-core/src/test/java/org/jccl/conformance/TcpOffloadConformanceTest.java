package org.jccl.conformance;

import org.jccl.Config;

/**
 * The conformance suite over TCP with the sockets driven by stream threads ({@code JCCL_SOCKET_OFFLOAD=1}):
 * two threads of two sockets each per peer, so that split messages complete across threads and
 * whole ones alternate between them. Rank counts 2-4 only (the plain TCP suite covers 1, 7 and 8): every rank of
 * the JVM runs two stream threads per peer, and CI has 2 CPUs.
 */
class TcpOffloadConformanceTest extends CollectiveConformance {
    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_OFFLOAD", "1")
                .with("JCCL_SOCKET_NTHREADS", "2").with("JCCL_NSOCKS_PERTHREAD", "2");
    }

    @Override
    protected int[] ranks() {
        return new int[] {2, 3, 4};
    }

    @Override
    protected String transport() {
        return "TCP";
    }
}
