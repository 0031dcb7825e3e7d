package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.ConnectException;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.HandshakeServer;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.net.Tls;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.TransportContext;

/**
 * One rank's TCP endpoint for one communicator: a listening socket, its acceptor thread, and the
 * connections made so far.
 *
 * <h2>Who connects</h2>
 * Of each pair, the lower rank opens the sockets; the higher rank only accepts. The higher rank's
 * {@link #connect} therefore just waits until its acceptor has received all of the peer's
 * sockets, and the lower rank's {@link #connect} never depends on the peer's operation thread, so
 * two ranks connecting to each other in any order cannot deadlock.
 *
 * <h2>Accepting</h2>
 * The acceptor ({@code jccl-tcp-accept-r<rank>}, a daemon platform thread) runs one selector over
 * the listening socket and every accepted socket still in its handshake, each driven by a
 * non-blocking {@link HandshakeServer}: no thread and no buffer beyond the handshake's fixed-size
 * state exists for a connection until it has proven the secret. At most {@value
 * #MAX_PENDING_HANDSHAKES} handshakes run at once; while that many are in progress the acceptor
 * stops accepting and further connections wait in the kernel's backlog. A handshake not finished
 * within {@link #ACCEPT_HANDSHAKE_TIMEOUT} is dropped, so a silent or slow client delays nobody
 * else. Only after the handshake proves the secret does the socket get a slot; connections with a wrong secret, a foreign communicator id, an impossible
 * rank, or a duplicate socket index are dropped with one warning and do not affect the job.
 *
 * <p><b>Threading:</b> {@link #connect} is called by the communicator's operation thread;
 * {@link #close} may be called from any thread.
 */
final class TcpEndpoint implements Endpoint {

    /** The acceptor gives a connecting socket this long to finish the handshake. */
    static final Duration ACCEPT_HANDSHAKE_TIMEOUT = Duration.ofSeconds(10);
    /** Handshakes in progress at once; beyond that, connections wait in the listen backlog. */
    static final int MAX_PENDING_HANDSHAKES = 64;
    private static final int BACKLOG = 1024;
    /** Longest select: how late a handshake deadline or close() may be noticed. */
    private static final long SELECT_MS = 100;
    /** Pause after a failed accept, so an out-of-descriptors listener does not spin. */
    private static final long ACCEPT_PAUSE_NANOS = 100_000_000L;
    /** First and largest pause between refused connection attempts. */
    private static final long BACKOFF_START_MS = 10;
    private static final long BACKOFF_MAX_MS = 1000;
    /** How often a waiting connect looks at {@link TransportContext#isStopping()}. */
    private static final long STOP_POLL_MS = 50;

    private final TransportContext ctx;
    private final int rank;
    private final int nsocks;
    /** This rank's JCCL_CHECKSUM: what it announces when it connects (the lower rank of a pair decides). */
    private final boolean checksum;
    /** TLS on every data socket (JCCL_TLS), or null. */
    private final Tls tls;
    private final int socketBuffer;
    private final Duration connectTimeout;
    private final ServerSocketChannel server;
    private final InetSocketAddress local;
    private final byte[] address;
    private final Thread acceptor;
    /** The acceptor's selector: the listening socket and every handshake in progress. */
    private final Selector selector;
    private final SelectionKey acceptKey;
    /** Handshakes registered with the selector; acceptor thread only. */
    private int pendingHandshakes;
    /** After a failed accept (out of descriptors), accepting resumes at this nanoTime; acceptor thread only. */
    private long acceptPausedUntil = System.nanoTime();
    /** Sockets from lower ranks, by peer rank, until {@link #connect} claims them. */
    private final ConcurrentHashMap<Integer, PeerSlot> slots = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, TcpConnection> connections = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private TcpEndpoint(TransportContext ctx, ServerSocketChannel server, TcpSettings settings) throws IOException {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.nsocks = settings.sockets();
        this.checksum = settings.checksum();
        this.tls = settings.tls();
        this.socketBuffer = settings.socketBuffer();
        this.connectTimeout = settings.connectTimeout();
        this.server = server;
        this.local = (InetSocketAddress) server.getLocalAddress();
        this.address = TcpWire.encodeAddress(local);
        server.configureBlocking(false);
        this.selector = Selector.open();
        try {
            this.acceptKey = server.register(selector, SelectionKey.OP_ACCEPT);
        } catch (IOException e) {
            selector.close();
            throw e;
        }
        this.acceptor = Thread.ofPlatform().name("jccl-tcp-accept-r" + rank).daemon(true).unstarted(this::acceptLoop);
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
        WireChannel[] sockets;
        if (rank < peerRank) {
            sockets = initiate(peer, remote);
            crc = checksum;
        } else {
            PeerSlot slot = await(peer, remote);
            sockets = slot.taken;
            crc = (slot.flags & TcpWire.FLAG_CHECKSUM) != 0;
            if (crc != checksum) {
                Log.warn(Log.Subsys.NET, rank, "rank " + rank + " has " + Settings.CHECKSUM.name() + "=" + (checksum ? 1 : 0) + " but "
                        + peer.describe() + ", the lower rank of the pair, connected with " + (crc ? 1 : 0) + ": the pair runs "
                        + (crc ? "with" : "without") + " CRC32C checks. Set " + Settings.CHECKSUM.name() + " alike on every rank");
            }
        }
        TcpConnection c = new TcpConnection(rank, peer, TcpWire.format(remote), sockets, crc);
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

    // ------------------------------------------------------------------ lower rank: open the sockets

    private WireChannel[] initiate(PeerInfo peer, InetSocketAddress remote) throws IOException {
        long deadline = System.nanoTime() + connectTimeout.toNanos();
        WireChannel[] sockets = new WireChannel[nsocks];
        boolean ok = false;
        try {
            for (int i = 0; i < nsocks; i++) {
                sockets[i] = openSocket(peer, remote, i, deadline);
            }
            ok = true;
            return sockets;
        } finally {
            if (!ok) {
                for (WireChannel ch : sockets) {
                    closeQuietly(ch);
                }
            }
        }
    }

    private WireChannel openSocket(PeerInfo peer, InetSocketAddress remote, int index, long deadline) throws IOException {
        String target = peer.describe() + " at " + TcpWire.format(remote);
        long backoff = BACKOFF_START_MS;
        int attempts = 0;
        SocketChannel ch;
        while (true) {
            checkStopping(peer);
            attempts++;
            ch = SocketChannel.open(remote.getAddress() instanceof Inet6Address ? StandardProtocolFamily.INET6 : StandardProtocolFamily.INET);
            try {
                configure(ch);
                long left = remainingMillis(deadline);
                ch.socket().connect(remote, (int) Math.max(1, Math.min(Integer.MAX_VALUE, left)));
                break;
            } catch (ConnectException | NoRouteToHostException | SocketTimeoutException e) {
                // Refused or unanswered: the peer may be restarting its listener, or its SYN queue overflowed. Retry.
                closeQuietly(ch);
                long left = remainingMillis(deadline);
                if (left <= backoff) {
                    throw new JcclTimeoutException("rank " + rank + " could not connect to " + target + " over TCP within "
                            + connectTimeout.toSeconds() + " s (" + Settings.CONNECT_TIMEOUT.name() + "; " + attempts
                            + " attempts, last: " + e.getMessage() + "). The peer exited, or its address is not reachable from"
                            + " this host (firewall, or " + Settings.SOCKET_IFNAME.name() + " chose an interface other hosts"
                            + " cannot route to)", e);
                }
                Log.trace(Log.Subsys.NET, rank, "connect to " + target + " (socket " + index + "): " + e.getMessage()
                        + "; attempt " + attempts + ", retrying in " + backoff + " ms, " + left + " ms left");
                sleep(backoff, peer);
                backoff = Math.min(BACKOFF_MAX_MS, backoff * 2);
            } catch (IOException e) {
                closeQuietly(ch);
                throw new IOException("rank " + rank + " could not connect to " + target + " over TCP: " + e.getMessage(), e);
            }
        }
        try {
            long left = Math.max(1000, remainingMillis(deadline));
            WireChannel w = Tls.wrap(tls, ch, true, target);
            Handshake.connect(w, ctx.secret(), Handshake.Kind.DATA,
                    TcpWire.hello(ctx.commId(), rank, index, nsocks, checksum ? TcpWire.FLAG_CHECKSUM : 0),
                    Duration.ofMillis(left));
            ch.configureBlocking(false);
            return w;
        } catch (JcclException e) {
            closeQuietly(ch);
            String msg = "TCP connection from rank " + rank + " to " + peer.describe() + ": " + e.getMessage();
            throw e.code() == ErrorCode.TIMEOUT ? new JcclTimeoutException(msg, e) : new JcclException(e.code(), msg, e);
        } catch (IOException e) {
            closeQuietly(ch);
            throw new IOException("TCP handshake from rank " + rank + " with " + target + " failed: " + e.getMessage()
                    + " (the peer exited or dropped the connection; its log says why)", e);
        }
    }

    private void configure(SocketChannel ch) throws IOException {
        ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
        if (socketBuffer > 0) {
            ch.setOption(StandardSocketOptions.SO_SNDBUF, socketBuffer);
            ch.setOption(StandardSocketOptions.SO_RCVBUF, socketBuffer);
        }
    }

    private void checkStopping(PeerInfo peer) throws IOException {
        if (closed || ctx.isStopping()) {
            throw new IOException("rank " + rank + " stopped connecting to " + peer.describe()
                    + " over TCP: the communicator is closing or was aborted");
        }
    }

    private void sleep(long millis, PeerInfo peer) throws IOException {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("rank " + rank + " was interrupted while connecting to " + peer.describe() + " over TCP");
        }
    }

    private static long remainingMillis(long deadlineNanos) {
        return Math.max(0, (deadlineNanos - System.nanoTime()) / 1_000_000);
    }

    // ------------------------------------------------------------------ higher rank: wait for the sockets

    /** Waits until all of the lower rank's sockets are in; returns its slot ({@code taken}: the sockets, {@code flags}: its hello's). */
    private PeerSlot await(PeerInfo peer, InetSocketAddress remote) throws IOException {
        PeerSlot slot = slots.computeIfAbsent(peer.rank(), PeerSlot::new);
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

    /** The sockets one lower rank has delivered so far. Guarded by its own monitor. */
    private static final class PeerSlot {
        final int peer;
        WireChannel[] sockets;
        /** The sockets handed to {@link #connect}, once claimed. */
        WireChannel[] taken;
        /** The hello flags of the first socket; every socket of the peer must announce the same. */
        int flags;
        int expected = -1;
        int arrived;
        boolean claimed;
        boolean closed;

        PeerSlot(int peer) {
            this.peer = peer;
        }

        /** Adds an authenticated socket; returns null, or why it must be dropped. */
        synchronized String offer(int index, int n, int helloFlags, WireChannel ch) {
            if (closed) {
                return "the endpoint is closing";
            }
            if (claimed) {
                return "rank " + peer + " already has its connection: this is an extra socket (index " + index + ")";
            }
            if (expected < 0) {
                expected = n;
                flags = helloFlags;
                sockets = new WireChannel[n];
            } else if (n != expected) {
                return "it announces " + n + " sockets where its earlier sockets announced " + expected;
            } else if (helloFlags != flags) {
                return "it announces flags " + helloFlags + " where its earlier sockets announced " + flags;
            }
            if (sockets[index] != null) {
                return "socket index " + index + " of rank " + peer + " arrived twice";
            }
            sockets[index] = ch;
            arrived++;
            if (arrived == expected) {
                notifyAll();
            }
            return null;
        }

        synchronized void close() {
            closed = true;
            if (sockets != null) {
                for (WireChannel ch : sockets) {
                    closeQuietly(ch);
                }
                sockets = null;
            }
            notifyAll();
        }
    }

    // ------------------------------------------------------------------ acceptor

    /**
     * The acceptor thread: one selector serves the listening socket and every handshake in progress.
     * No thread and no peer-sized buffer exists for a connection before it has proven the secret.
     */
    private void acceptLoop() {
        try {
            while (!closed) {
                long now = System.nanoTime();
                // At the cap, stop accepting: further connections wait in the kernel's backlog until a slot frees up.
                boolean accepting = pendingHandshakes < MAX_PENDING_HANDSHAKES && now - acceptPausedUntil >= 0;
                if (acceptKey.isValid()) {
                    acceptKey.interestOps(accepting ? SelectionKey.OP_ACCEPT : 0);
                }
                selector.select(SELECT_MS);
                if (closed) {
                    return;
                }
                for (Iterator<SelectionKey> it = selector.selectedKeys().iterator(); it.hasNext(); ) {
                    SelectionKey key = it.next();
                    it.remove();
                    if (!key.isValid()) {
                        continue;
                    }
                    if (key == acceptKey) {
                        acceptSome();
                    } else {
                        HandshakeServer hs = (HandshakeServer) key.attachment();
                        try {
                            onStep(key, hs, hs.step());
                        } catch (IOException | RuntimeException e) {
                            // Whatever goes wrong with one connection costs that connection only, not the acceptor.
                            drop(key, hs, e);
                        }
                    }
                }
                // Deadlines: a silent client is dropped after ACCEPT_HANDSHAKE_TIMEOUT, checked at least every SELECT_MS.
                now = System.nanoTime();
                for (SelectionKey key : selector.keys()) {
                    if (key != acceptKey && key.isValid() && key.attachment() instanceof HandshakeServer hs) {
                        HandshakeServer.Result r = hs.expired(now);
                        if (r != null) {
                            onStep(key, hs, r);
                        }
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            if (!closed) {
                Log.warn(Log.Subsys.NET, rank, "TCP endpoint " + TcpWire.format(local) + ": its acceptor failed (" + e
                        + "); no further connections are accepted. This is a jccl bug, please report it with this log");
            }
        } finally {
            // Unauthenticated connections die with the acceptor; authenticated ones already left the selector.
            for (SelectionKey key : selector.keys()) {
                if (key != acceptKey) {
                    closeQuietly((SocketChannel) key.channel());
                }
            }
            try {
                selector.close();
            } catch (IOException ignored) {
                // The descriptors are released either way.
            }
        }
    }

    /** Accepts what the backlog holds, up to the handshake cap, and starts each one's handshake. */
    private void acceptSome() {
        while (pendingHandshakes < MAX_PENDING_HANDSHAKES) {
            SocketChannel ch;
            try {
                ch = server.accept();
            } catch (ClosedChannelException e) {
                return;
            } catch (IOException e) {
                if (!closed) {
                    // Typically EMFILE (out of file descriptors): warn, pause accepting so the loop does not spin, keep serving.
                    Log.warn(Log.Subsys.NET, rank, "TCP endpoint " + TcpWire.format(local) + " failed to accept a connection: "
                            + e.getMessage() + " (out of file descriptors? raise ulimit -n)");
                    acceptPausedUntil = System.nanoTime() + ACCEPT_PAUSE_NANOS;
                }
                return;
            }
            if (ch == null) {
                return;
            }
            HandshakeServer hs;
            SelectionKey key;
            try {
                ch.configureBlocking(false);
                hs = HandshakeServer.start(Tls.wrap(tls, ch, false, remoteOf(ch)), ctx.secret(), Handshake.Kind.DATA,
                        ACCEPT_HANDSHAKE_TIMEOUT);
                key = ch.register(selector, 0, hs);
            } catch (IOException e) {
                closeQuietly(ch);
                if (!closed) {
                    Log.warn(Log.Subsys.NET, rank, "TCP endpoint " + TcpWire.format(local) + ": " + describeDrop(e, remoteOf(ch)));
                }
                continue;
            }
            pendingHandshakes++;
            try {
                // Send the challenge at once; the socket's send buffer normally takes all 23 bytes.
                onStep(key, hs, hs.step());
            } catch (IOException | RuntimeException e) {
                drop(key, hs, e);
            }
        }
    }

    /** Acts on one handshake result: wait for more, hand an authenticated socket on, or drop it. */
    private void onStep(SelectionKey key, HandshakeServer hs, HandshakeServer.Result r) {
        switch (r.status()) {
            case IN_PROGRESS -> key.interestOps(r.interestOps());
            case DONE -> {
                // Leave the acceptor's selector; the channel stays non-blocking, as TcpConnection expects.
                key.cancel();
                pendingHandshakes--;
                admit(hs.channel(), hs.hello(), hs.remote());
            }
            case FAILED -> drop(key, hs, r.error());
        }
    }

    /** Closes a connection whose handshake failed, with one warning; the job is not affected. */
    private void drop(SelectionKey key, HandshakeServer hs, Exception e) {
        if (key.isValid()) {
            // Still counted as a handshake (a failure after DONE already left the count when the key was cancelled).
            key.cancel();
            pendingHandshakes--;
        }
        closeQuietly(hs.channel());
        if (!closed) {
            Log.warn(Log.Subsys.NET, rank, "TCP endpoint " + TcpWire.format(local) + ": " + describeDrop(e, hs.remote()));
        }
    }

    /** Hands an authenticated socket to its peer's slot, or drops it with one warning. */
    private void admit(WireChannel ch, byte[] raw, String from) {
        TcpWire.Hello hello = TcpWire.Hello.parse(raw);
        String reason;
        if (hello == null) {
            reason = "its hello has " + raw.length + " bytes, expected " + TcpWire.HELLO_BYTES + " (mixed jccl versions?)";
        } else if (!MessageDigest.isEqual(hello.commId(), ctx.commId())) {
            reason = "it belongs to another communicator of this job (a different communicator id): addresses mixed up between"
                    + " communicators";
        } else if (hello.rank() < 0 || hello.rank() >= rank) {
            reason = "it claims rank " + hello.rank() + ", but only lower ranks (0.." + (rank - 1) + ") connect to rank " + rank;
        } else if (hello.nsocks() < 1 || hello.nsocks() > TcpWire.MAX_SOCKETS || hello.socketIndex() < 0
                || hello.socketIndex() >= hello.nsocks()) {
            reason = "it announces socket " + hello.socketIndex() + " of " + hello.nsocks() + " (at most " + TcpWire.MAX_SOCKETS + ")";
        } else if ((hello.flags() & ~TcpWire.KNOWN_FLAGS) != 0) {
            reason = "it announces unknown flags 0x" + Integer.toHexString(hello.flags()) + " (mixed jccl versions?)";
        } else {
            try {
                configure(ch.socket());
                ch.socket().configureBlocking(false);
            } catch (IOException e) {
                closeQuietly(ch);
                if (!closed) {
                    Log.warn(Log.Subsys.NET, rank, "TCP endpoint " + TcpWire.format(local) + ": connection from rank " + hello.rank()
                            + " at " + from + " failed while being set up: " + e.getMessage() + "; dropped");
                }
                return;
            }
            PeerSlot slot = slots.computeIfAbsent(hello.rank(), PeerSlot::new);
            reason = slot.offer(hello.socketIndex(), hello.nsocks(), hello.flags(), ch);
            if (reason == null) {
                if (closed) {
                    // close() may have swept the slots before this one was made: do not leave the socket parked.
                    slot.close();
                }
                return;
            }
        }
        closeQuietly(ch);
        if (!closed) {
            Log.warn(Log.Subsys.NET, rank, "TCP endpoint " + TcpWire.format(local) + ": authenticated connection from " + from
                    + " dropped: " + reason);
        }
    }

    private static String describeDrop(Exception e, String from) {
        String m = e.getMessage();
        // Handshake's own messages already name the remote address; socket errors do not.
        return m != null && m.contains(from) ? m : "connection from " + from + " dropped during the jccl handshake: " + m;
    }

    private static String remoteOf(SocketChannel ch) {
        try {
            return String.valueOf(ch.getRemoteAddress());
        } catch (IOException e) {
            return "?";
        }
    }

    private static void closeQuietly(java.nio.channels.Channel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // Already broken: nothing more to release.
            }
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
        try {
            server.close();
        } catch (IOException ignored) {
            // The listener is gone either way.
        }
        // The acceptor notices at once, and closes the sockets still in their handshake as it exits.
        selector.wakeup();
        for (PeerSlot slot : slots.values()) {
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
