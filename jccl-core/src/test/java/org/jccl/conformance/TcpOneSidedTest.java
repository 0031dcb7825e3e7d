package org.jccl.conformance;

import java.nio.file.Path;
import java.util.Map;
import org.jccl.internal.transport.tcp.TcpTransport;
import org.jccl.spi.Transport;

/**
 * The one-sided suite over TCP, which offers neither registration nor puts: every scenario passes
 * only by each call being refused with {@code OneSidedUnsupportedException} naming TCP, while the same
 * connections go on carrying messages.
 */
class TcpOneSidedTest extends OneSidedConformance {
    @Override
    protected Transport transport() {
        return new TcpTransport();
    }

    @Override
    protected Map<String, String> settings(Path dir) {
        return Map.of("JCCL_SOCKET_IFNAME", "lo", "JCCL_CONNECT_TIMEOUT", "20");
    }

    @Override
    protected boolean oneSided() {
        return false;
    }

    @Override
    protected boolean registersProcessMemory() {
        return false;
    }
}
