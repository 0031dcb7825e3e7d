package org.jccl.conformance;

import org.jccl.Config;

/**
 * {@link MismatchGuardConformance} over TCP with stream threads ({@code JCCL_SOCKET_OFFLOAD=1}, 2 threads x 2 sockets):
 * a mismatch found on a stream thread must reach the caller as the same named error.
 */
class TcpOffloadGuardTest extends MismatchGuardConformance {
    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_OFFLOAD", "1")
                .with("JCCL_SOCKET_NTHREADS", "2").with("JCCL_NSOCKS_PERTHREAD", "2");
    }
}
