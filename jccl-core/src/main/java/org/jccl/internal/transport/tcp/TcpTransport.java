package org.jccl.internal.transport.tcp;

import java.io.IOException;
import org.jccl.Config;
import org.jccl.spi.Endpoint;
import org.jccl.spi.LinkCosts;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.jccl.spi.TransportContext;

/**
 * The TCP transport: works between any two ranks that can reach each other over IP, and is the
 * fallback when no faster transport accepts a pair (priority {@value #PRIORITY}, the lowest
 * preference).
 *
 * <p>Each endpoint listens on the address {@code JCCL_SOCKET_IFNAME} / {@code JCCL_SOCKET_FAMILY}
 * select. A connection to a peer is made on first use: the lower rank opens {@code
 * JCCL_SOCKET_NTHREADS x JCCL_NSOCKS_PERTHREAD} sockets (at most 64), each authenticated with the
 * communicator's secret; large messages are striped over all of them. One thread (the
 * communicator's operation thread) drives all sockets without blocking, so "threads" here only
 * scales the socket count; the NCCL name is kept so existing settings carry over. See {@link
 * TcpWire} for the wire format.
 */
public final class TcpTransport implements Transport {

    /** The transport's name, also the key of its address in {@link PeerInfo#addresses()}. */
    public static final String NAME = "TCP";

    /** The socket address a peer's published TCP endpoint address names (Communicator.shrink bootstraps there). */
    public static java.net.InetSocketAddress socketAddress(byte[] published) {
        return TcpWire.decodeAddress(published);
    }
    /** Lowest preference among the built-in transports. */
    public static final int PRIORITY = 100;

    /** Creates the transport; it holds no state, every endpoint is independent. */
    public TcpTransport() {
    }

    @Override
    public String name() {
        return NAME;
    }

    /*
     * Measured on this project's 2-core development machine (Linux x86_64, Temurin 25) on
     * 2026-11-21 ~08:25 UTC with TunerCalibration (jccl-core test scope; how to run it is in its
     * javadoc), over loopback: two ranks ping-pong inside one operation, alpha = half the 8-byte
     * round trip, beta = the slope of half the round trip between 1 MiB and 16 MiB, each the least
     * of three medians (load ~11; a second run agreed within ~20%): 6.4 us, 1.7 GB/s. A real network
     * has more latency and, between hosts, often more bandwidth than this loopback; the runtime also
     * prices transports that declare no costs with these numbers.
     */
    /** What a message costs over TCP (loopback). */
    public static final LinkCosts COSTS = new LinkCosts(6.43e-6, 5.79e-10, "loopback ping-pong, TunerCalibration, 2026-11-21");

    @Override
    public LinkCosts costs() {
        return COSTS;
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    /** Always true: TCP is the transport of last resort and has no switch to turn it off. */
    @Override
    public boolean isEnabled(Config config) {
        return true;
    }

    @Override
    public Endpoint open(TransportContext context) throws IOException {
        return TcpEndpoint.open(context);
    }

    /** True when both ranks published a TCP address (their endpoints opened). */
    @Override
    public boolean canConnect(PeerInfo self, PeerInfo peer) {
        return self.addresses().containsKey(NAME) && peer.addresses().containsKey(NAME);
    }
}
