package org.jccl.internal.transport.tcp;

import static org.jccl.internal.transport.tcp.TcpSockets.closeQuietly;
import static org.jccl.internal.transport.tcp.TcpSockets.remoteOf;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.HandshakeServer;
import org.jccl.internal.net.Tls;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.TransportContext;

/**
 * The higher rank's side of every pair: the acceptor of one {@link TcpEndpoint}'s listening socket.
 *
 * <p>The acceptor ({@code jccl-tcp-accept-r<rank>}, a daemon platform thread) runs one selector over
 * the listening socket and every accepted socket still in its handshake, each driven by a
 * non-blocking {@link HandshakeServer}: no thread and no buffer beyond the handshake's fixed-size
 * state exists for a connection until it has proven the secret. At most {@value
 * #MAX_PENDING_HANDSHAKES} handshakes run at once; while that many are in progress the acceptor
 * stops accepting and further connections wait in the kernel's backlog. A handshake not finished
 * within {@link #ACCEPT_HANDSHAKE_TIMEOUT} is dropped, so a silent or slow client delays nobody
 * else. Only after the handshake proves the secret does the socket get a slot ({@link TcpPeerSlot}); connections with a wrong secret, a foreign communicator id, an impossible
 * rank, or a duplicate socket index are dropped with one warning and do not affect the job.
 *
 * <p><b>Threading:</b> everything but {@link #start} and {@link #stop} runs on the acceptor thread;
 * {@link #stop} may be called from any thread. The listening socket is the acceptor's once it is made.
 */
final class TcpAcceptor {

    /** The acceptor gives a connecting socket this long to finish the handshake. */
    static final Duration ACCEPT_HANDSHAKE_TIMEOUT = Duration.ofSeconds(10);
    /** Handshakes in progress at once; beyond that, connections wait in the listen backlog. */
    static final int MAX_PENDING_HANDSHAKES = 64;
    /** Longest select: how late a handshake deadline or close() may be noticed. */
    private static final long SELECT_MS = 100;
    /** Pause after a failed accept, so an out-of-descriptors listener does not spin. */
    private static final long ACCEPT_PAUSE_NANOS = 100_000_000L;

    private final TransportContext ctx;
    private final int rank;
    /** TLS on every data socket (JCCL_TLS), or null. */
    private final Tls tls;
    private final int socketBuffer;
    private final ServerSocketChannel server;
    /** The listening address, as the warnings name it. */
    private final InetSocketAddress local;
    private final Thread thread;
    /** The acceptor's selector: the listening socket and every handshake in progress. */
    private final Selector selector;
    private final SelectionKey acceptKey;
    /** Handshakes registered with the selector; acceptor thread only. */
    private int pendingHandshakes;
    /** After a failed accept (out of descriptors), accepting resumes at this nanoTime; acceptor thread only. */
    private long acceptPausedUntil = System.nanoTime();
    /** Sockets from lower ranks, by peer rank, until {@link TcpEndpoint#connect} claims them; shared with the endpoint. */
    private final ConcurrentHashMap<Integer, TcpPeerSlot> slots;
    private volatile boolean closed;

    /**
     * Registers the (bound) listening socket with a new selector; {@link #start} starts the thread.
     *
     * @throws IOException when the selector cannot be opened (out of file descriptors)
     */
    TcpAcceptor(TransportContext ctx, ServerSocketChannel server, TcpSettings settings, ConcurrentHashMap<Integer, TcpPeerSlot> slots)
            throws IOException {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.tls = settings.tls();
        this.socketBuffer = settings.socketBuffer();
        this.server = server;
        this.local = (InetSocketAddress) server.getLocalAddress();
        this.slots = slots;
        server.configureBlocking(false);
        this.selector = Selector.open();
        try {
            this.acceptKey = server.register(selector, SelectionKey.OP_ACCEPT);
        } catch (IOException e) {
            selector.close();
            throw e;
        }
        this.thread = Thread.ofPlatform().name("jccl-tcp-accept-r" + rank).daemon(true).unstarted(this::acceptLoop);
    }

    void start() {
        thread.start();
    }

    /**
     * Closes the listening socket and wakes the thread, which closes the sockets still in their
     * handshake as it exits. Sockets already handed to a slot are the endpoint's to close.
     */
    void stop() {
        closed = true;
        try {
            server.close();
        } catch (IOException ignored) {
            // The listener is gone either way.
        }
        // The acceptor notices at once, and closes the sockets still in their handshake as it exits.
        selector.wakeup();
    }

    /** Waits up to {@code millis} for the thread to end. */
    void join(long millis) throws InterruptedException {
        thread.join(millis);
    }

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
        } else if ((hello.flags() & TcpWire.FLAG_SPLIT) != 0 && hello.nsocks() % 2 != 0) {
            reason = "it announces sockets of their own per direction but an odd socket count (" + hello.nsocks() + ")";
        } else {
            try {
                TcpSockets.configure(ch.socket(), socketBuffer);
                ch.socket().configureBlocking(false);
            } catch (IOException e) {
                closeQuietly(ch);
                if (!closed) {
                    Log.warn(Log.Subsys.NET, rank, "TCP endpoint " + TcpWire.format(local) + ": connection from rank " + hello.rank()
                            + " at " + from + " failed while being set up: " + e.getMessage() + "; dropped");
                }
                return;
            }
            TcpPeerSlot slot = slots.computeIfAbsent(hello.rank(), TcpPeerSlot::new);
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
}
