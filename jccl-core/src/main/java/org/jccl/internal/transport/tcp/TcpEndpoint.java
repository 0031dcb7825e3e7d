package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
import java.util.concurrent.ConcurrentHashMap;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.TransportContext;

/**
 * One rank's TCP endpoint for one communicator: a listening socket, its acceptor, and the
 * connections made so far.
 *
 * <h2>Who connects</h2>
 * Of each pair, the lower rank opens the sockets ({@link TcpDialer}); the higher rank only accepts.
 * The higher rank's {@link #connect} therefore just waits until its acceptor has received all of
 * the peer's sockets, and the lower rank's {@link #connect} never depends on the peer's operation
 * thread, so two ranks connecting to each other in any order cannot deadlock.
 *
 * <h2>Accepting</h2>
 * {@link TcpAcceptor} runs the acceptor thread: it authenticates each incoming socket and parks it
 * in its peer's {@link TcpPeerSlot}, where {@link #connect} claims it.
 *
 * <p><b>Threading:</b> {@link #connect} is called by the communicator's operation thread;
 * {@link #close} may be called from any thread.
 */
final class TcpEndpoint implements Endpoint {

    private static final int BACKLOG = 1024;
    /** How often a waiting connect looks at {@link TransportContext#isStopping()}. */
    private static final long STOP_POLL_MS = 50;

    private final TransportContext ctx;
    private final TcpSettings settings;
    private final int rank;
    /** This rank's JCCL_CHECKSUM: what it announces when it connects (the lower rank of a pair decides). */
    private final boolean checksum;
    private final Duration connectTimeout;
    private final InetSocketAddress local;
    private final byte[] address;
    private final TcpDialer dialer;
    private final TcpAcceptor acceptor;
    /** Sockets from lower ranks, by peer rank, until {@link #connect} claims them. */
    private final ConcurrentHashMap<Integer, TcpPeerSlot> slots = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, TcpConnection> connections = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private TcpEndpoint(TransportContext ctx, ServerSocketChannel server, TcpSettings settings) throws IOException {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.checksum = settings.checksum();
        this.connectTimeout = settings.connectTimeout();
        this.settings = settings;
        this.local = (InetSocketAddress) server.getLocalAddress();
        this.address = TcpWire.encodeAddress(local);
        this.dialer = new TcpDialer(this, ctx, settings);
        this.acceptor = new TcpAcceptor(ctx, server, settings, slots);
    }

    /**
     * Binds a listening socket on the address {@code JCCL_SOCKET_IFNAME}/{@code JCCL_SOCKET_FAMILY}
     * select, on an ephemeral port, and starts the acceptor.
     *
     * @throws IOException when the socket cannot be bound; the message names the address and the fix
     */
    static TcpEndpoint open(TransportContext ctx) throws IOException {
        TcpSettings settings = TcpSettings.conclude(ctx.config()); // a bad value fails before a port is held
        int nsocks = settings.sockets();
        int socketBuffer = settings.socketBuffer();
        InetAddress bindAddress = settings.bindAddress();
        ServerSocketChannel server = ServerSocketChannel.open();
        try {
            if (socketBuffer > 0) {
                // Accepted sockets inherit this, and the window scale is fixed at the SYN: it must be set before listen.
                server.setOption(StandardSocketOptions.SO_RCVBUF, socketBuffer);
            }
            server.bind(new InetSocketAddress(bindAddress, 0), BACKLOG);
        } catch (IOException e) {
            server.close();
            throw new IOException("rank " + ctx.rank() + " cannot listen for TCP connections on " + bindAddress.getHostAddress()
                    + ": " + e.getMessage() + ". The address comes from " + Settings.SOCKET_IFNAME.name() + "/"
                    + Settings.SOCKET_FAMILY.name() + "; check that it belongs to this host and that the process may open"
                    + " sockets (ulimit -n)", e);
        }
        TcpEndpoint ep;
        try {
            ep = new TcpEndpoint(ctx, server, settings);
        } catch (IOException e) {
            server.close();
            throw new IOException("rank " + ctx.rank() + " cannot serve its TCP listening socket: " + e.getMessage()
                    + " (out of file descriptors? raise ulimit -n)", e);
        }
        ep.acceptor.start();
        Log.trace(Log.Subsys.NET, ctx.rank(), "TCP endpoint listening on " + TcpWire.format(ep.local) + " (" + nsocks
                + (nsocks == 1 ? " socket" : " sockets") + " per peer)");
        return ep;
    }

    @Override
    public byte[] address() {
        return address.clone();
    }

    /**
     * "TCP". Registration and one-sided puts are not offered (the SPI's defaults say so and refuse them
     * with this name): a put over a byte stream is a message, which send/recv already are.
     */
    @Override
    public String transportName() {
        return TcpTransport.NAME;
    }

    /** The address this endpoint listens on. */
    InetSocketAddress localAddress() {
        return local;
    }

    /**
     * Returns the connection to {@code peerRank}, making it on first use: a lower rank opens the
     * sockets (retrying refused connects until {@code JCCL_CONNECT_TIMEOUT}); a higher rank waits, as
     * long, for the peer's sockets to arrive.
     *
     * @throws IOException when the peer cannot be reached or this endpoint is closing
     * @throws JcclTimeoutException when the connection is not complete within {@code JCCL_CONNECT_TIMEOUT}
     * @throws JcclException with {@link ErrorCode#AUTHENTICATION} or {@link ErrorCode#PROTOCOL} when the
     *         handshake with the peer fails
     */
    @Override
    public Connection connect(int peerRank) throws IOException {
        if (peerRank < 0 || peerRank >= ctx.size() || peerRank == rank) {
            throw new IllegalArgumentException("rank " + rank + " cannot make a TCP connection to rank " + peerRank
                    + ": peers are 0.." + (ctx.size() - 1) + " except this rank");
        }
        if (closed) {
            throw new IOException("rank " + rank + " cannot connect to rank " + peerRank + " over TCP: its endpoint is closed"
                    + " (the communicator was closed or aborted)");
        }
        TcpConnection existing = connections.get(peerRank);
        if (existing != null) {
            return existing;
        }
        PeerInfo peer = ctx.peer(peerRank);
        InetSocketAddress remote = peerAddress(peer);
        boolean crc;
        boolean split;
        WireChannel[] sockets;
        if (rank < peerRank) {
            sockets = dialer.initiate(peer, remote);
            crc = checksum;
            split = settings.split();
        } else {
            TcpPeerSlot slot = await(peer, remote);
            sockets = slot.taken;
            crc = (slot.flags & TcpWire.FLAG_CHECKSUM) != 0;
            split = (slot.flags & TcpWire.FLAG_SPLIT) != 0;
            if (crc != checksum) {
                Log.warn(Log.Subsys.NET, rank, "rank " + rank + " has " + Settings.CHECKSUM.name() + "=" + (checksum ? 1 : 0) + " but "
                        + peer.describe() + ", the lower rank of the pair, connected with " + (crc ? 1 : 0) + ": the pair runs "
                        + (crc ? "with" : "without") + " CRC32C checks. Set " + Settings.CHECKSUM.name() + " alike on every rank");
            }
        }
        // Decided per connection: the number of ranks on this host is known by now (JCCL_SOCKET_OFFLOAD).
        int streamThreads = settings.streamThreads(ctx.localSize(), Runtime.getRuntime().availableProcessors());
        TcpConnection c = new TcpConnection(rank, peer, TcpWire.format(remote), sockets, crc, streamThreads, ctx::wakeup, split);
        connections.put(peerRank, c);
        if (closed) {
            // close() ran while we connected and may have missed this connection.
            c.close();
            throw new IOException("rank " + rank + " stopped connecting to " + peer.describe() + ": the communicator is closing");
        }
        Log.info(Log.Subsys.NET, rank, "rank " + rank + " -> rank " + peerRank + " via " + c.describe());
        return c;
    }

    private InetSocketAddress peerAddress(PeerInfo peer) throws IOException {
        byte[] a = peer.addresses().get(TcpTransport.NAME);
        if (a == null) {
            throw new IOException(peer.describe() + " published no TCP address: its TCP transport is disabled or failed to"
                    + " open (see its log), so rank " + rank + " cannot reach it over TCP");
        }
        try {
            return TcpWire.decodeAddress(a);
        } catch (IllegalArgumentException e) {
            throw new IOException(peer.describe() + " published a TCP address rank " + rank + " cannot read (" + e.getMessage()
                    + "): mixed jccl versions in one job?", e);
        }
    }

    /** Throws when this endpoint is closed or the communicator is stopping: a connect in progress gives up. */
    void checkStopping(PeerInfo peer) throws IOException {
        if (closed || ctx.isStopping()) {
            throw new IOException("rank " + rank + " stopped connecting to " + peer.describe()
                    + " over TCP: the communicator is closing or was aborted");
        }
    }

    static long remainingMillis(long deadlineNanos) {
        return Math.max(0, (deadlineNanos - System.nanoTime()) / 1_000_000);
    }

    // ------------------------------------------------------------------ higher rank: wait for the sockets

    /** Waits until all of the lower rank's sockets are in; returns its slot ({@code taken}: the sockets, {@code flags}: its hello's). */
    private TcpPeerSlot await(PeerInfo peer, InetSocketAddress remote) throws IOException {
        TcpPeerSlot slot = slots.computeIfAbsent(peer.rank(), TcpPeerSlot::new);
        long deadline = System.nanoTime() + connectTimeout.toNanos();
        synchronized (slot) {
            while (slot.expected < 0 || slot.arrived < slot.expected) {
                checkStopping(peer);
                ctx.stillWaiting();
                long left = remainingMillis(deadline);
                if (left <= 0) {
                    throw new JcclTimeoutException("rank " + rank + " waited " + connectTimeout.toSeconds() + " s ("
                            + Settings.CONNECT_TIMEOUT.name() + ") for " + peer.describe() + " to open its TCP connection to "
                            + TcpWire.format(local) + "; " + slot.arrived + " of " + (slot.expected < 0 ? "its" : slot.expected)
                            + " sockets arrived. The lower rank of a pair connects and the higher one (this rank) waits:"
                            + " rank " + peer.rank() + " has not reached an operation with rank " + rank + " (it is slower or"
                            + " stuck: see its log), cannot reach this address (firewall, or " + Settings.SOCKET_IFNAME.name()
                            + " chose an interface it cannot route to), or failed authentication (see this rank's warnings)."
                            + " Raise " + Settings.CONNECT_TIMEOUT.name() + " if ranks reach their collectives far apart");
                }
                try {
                    slot.wait(Math.min(left, STOP_POLL_MS));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new InterruptedIOException("rank " + rank + " was interrupted while waiting for " + peer.describe()
                            + " to connect over TCP");
                }
            }
            slot.claimed = true;
            slot.taken = slot.sockets;
            slot.sockets = null;
            return slot;
        }
    }

    /**
     * Stops the acceptor (which closes the sockets still in their handshake), closes the listening
     * socket, every socket waiting to be claimed and every connection.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        acceptor.stop();
        for (TcpPeerSlot slot : slots.values()) {
            slot.close();
        }
        for (TcpConnection c : connections.values()) {
            c.close();
        }
        try {
            acceptor.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return "TCP endpoint of rank " + rank + " at " + TcpWire.format(local);
    }
}
