package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.internal.transport.shm.ShmTransport;
import org.jccl.internal.transport.tcp.TcpTransport;
import org.jccl.internal.tune.AlgoSelector;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.internal.tune.Tuner;
import org.jccl.spi.Endpoint;
import org.jccl.spi.LinkCosts;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.jccl.spi.TransportContext;
import org.junit.jupiter.api.Test;

/**
 * The tuner and the hierarchy price each transport by what it declares (Transport#costs), never by
 * its name: a plugin transport (UCX next) gets its own costs, and one that declares none is priced
 * as loopback TCP.
 */
class TransportCostsTest {

    /** A transport as a plugin would be: found by name in the peers' addresses, linking ranks on different hosts. */
    private record Plugin(String name, LinkCosts costs) implements Transport {
        @Override
        public int priority() {
            return 30;
        }

        @Override
        public boolean isEnabled(Config config) {
            return true;
        }

        @Override
        public Endpoint open(TransportContext context) {
            throw new UnsupportedOperationException("not opened in this test");
        }

        @Override
        public boolean canConnect(PeerInfo self, PeerInfo peer) {
            return !self.hostHash().equals(peer.hostHash());
        }
    }

    /** Ranks 0, 1 on host a and 2, 3 on host b; every rank offers SHM and the plugin's address. */
    private static PeerInfo[] twoHosts(String plugin) {
        PeerInfo[] p = new PeerInfo[4];
        for (int r = 0; r < 4; r++) {
            String host = r < 2 ? "a" : "b";
            p[r] = new PeerInfo(r, host, 100 + r, "hash-" + host, "jvm-" + r, Map.of("SHM", new byte[] {1}, plugin, new byte[] {2}));
        }
        return p;
    }

    @Test
    void aPluginIsPricedByTheCostsItDeclares() {
        LinkCosts rdma = new LinkCosts(2e-6, 1.0 / 25e9, "declared by the test");
        Transport ucx = new Plugin("UCX", rdma);
        PeerInfo[] peers = twoHosts("UCX");
        List<Transport> transports = List.of(new ShmTransport(), ucx);

        Map<String, LinkCosts> pairs = Routing.pairTransports(transports, peers, 0);
        assertEquals(Map.of("SHM", ShmTransport.COSTS, "UCX", rdma), pairs);

        Hierarchy h = Hierarchy.of(0, peers, transports, Routing.UNDECLARED_COSTS, AlgoSelector.parse(null), 1 << 20);
        assertNotNull(h);
        assertEquals(rdma.latencySeconds(), h.crossHostModel().alpha());
        assertEquals(rdma.secondsPerByte(), h.crossHostModel().beta());
        // the same-host stage is SHM's, as SHM declares it for that role
        assertEquals(ShmTransport.HOST_STAGE_COSTS.secondsPerByte(), h.hostStageModel().beta());
        assertEquals(Tuner.GAMMA, h.crossHostModel().gamma());
    }

    @Test
    void aPluginThatDeclaresNoCostsIsPricedAsLoopbackTcp() {
        Transport quiet = new Plugin("QUIET", null);
        PeerInfo[] peers = twoHosts("QUIET");
        List<Transport> transports = List.of(new ShmTransport(), quiet);

        assertEquals(TcpTransport.COSTS, Routing.pairTransports(transports, peers, 0).get("QUIET"));
        Hierarchy h = Hierarchy.of(0, peers, transports, Routing.UNDECLARED_COSTS, AlgoSelector.parse(null), 1 << 20);
        assertEquals(TcpTransport.COSTS.latencySeconds(), h.crossHostModel().alpha());
        assertEquals(TcpTransport.COSTS.secondsPerByte(), h.crossHostModel().beta());
    }
}
