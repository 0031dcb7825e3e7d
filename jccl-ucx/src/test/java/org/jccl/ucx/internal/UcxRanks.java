package org.jccl.ucx.internal;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.Map;
import org.jccl.Config;
import org.jccl.spi.Connection;
import org.jccl.spi.PeerInfo;
import org.jccl.testing.TestTransportContext;

/**
 * Test helper: {@code n} ranks of this JVM, each with its own UCX endpoint (its own worker), every pair connected
 * through the SPI as bootstrap and the runtime would connect them, over UCX's tcp. {@code c[r][p]} is rank r's
 * connection to rank p.
 */
final class UcxRanks implements AutoCloseable {
    final UcxEndpoint[] eps;
    final Connection[][] c;

    private UcxRanks(UcxEndpoint[] eps, Connection[][] c) {
        this.eps = eps;
        this.c = c;
    }

    static UcxRanks open(int n) throws IOException {
        Config cfg = Config.defaults().with("JCCL_NET", "UCX").with("JCCL_UCX_TLS", "tcp");
        UcxTransport t = new UcxTransport();
        assertTrue(t.isEnabled(cfg));
        byte[] comm = new byte[16];
        byte[] secret = new byte[16];
        TestTransportContext[] ctx = new TestTransportContext[n];
        UcxEndpoint[] eps = new UcxEndpoint[n];
        UcxRanks ranks = new UcxRanks(eps, new Connection[n][n]);
        try {
            for (int r = 0; r < n; r++) {
                ctx[r] = new TestTransportContext(comm, r, n, secret, cfg);
                eps[r] = (UcxEndpoint) t.open(ctx[r]);
            }
            for (int r = 0; r < n; r++) {
                PeerInfo info = new PeerInfo(r, "testhost", ProcessHandle.current().pid(), "host-" + r, "jvm", Map.of("UCX", eps[r].address()));
                for (TestTransportContext x : ctx) {
                    x.setPeer(r, info);
                }
            }
            for (int r = 0; r < n; r++) {
                for (int p = 0; p < n; p++) {
                    if (p != r) {
                        ranks.c[r][p] = eps[r].connect(p);
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            ranks.close();
            throw e;
        }
        return ranks;
    }

    @Override
    public void close() {
        for (UcxEndpoint e : eps) {
            if (e != null) {
                e.close();
            }
        }
    }
}
