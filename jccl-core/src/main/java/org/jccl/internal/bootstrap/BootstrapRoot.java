package org.jccl.internal.bootstrap;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.ResourceException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.HandshakeServer;
import org.jccl.internal.net.Tls;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.PeerInfo;

/**
 * The bootstrap root: the one listening socket every rank of a job connects to at initialisation
 * (rank 0's process, or whoever called {@code JcclId.create()}, runs it). It collects one
 * registration per rank, checks that the ranks agree on the world size and that no rank number is
 * taken twice, and when all have arrived sends every rank the full peer table and stops. At the
 * init deadline ({@code JCCL_INIT_TIMEOUT}, counted from {@link #start}) it tells every waiting rank
 * which ranks never arrived, and stops.
 *
 * <p>Threads: one daemon platform thread, {@code jccl-bootstrap-root}, owns all job state (the
 * registrations, the world size) and never blocks on a peer: it accepts, validates and writes
 * with a selector. Each accepted connection is authenticated on that same selector by a
 * non-blocking {@link HandshakeServer} (the acceptor side of {@link Handshake}, bounded by a short
 * timeout), and only then, the peer proven, is its registration frame read, also without blocking.
 * No thread exists per connection. At most 64 such connections are served at once; while that many
 * are in progress the root stops accepting and the rest wait in the listen backlog. So a
 * connection that sends nothing holds one of those slots for at most 5 seconds, and costs nothing
 * beyond the handshake's fixed-size state until it has proven the secret. A connection that fails
 * the handshake is logged in one line and dropped; the job goes on. When the root stops, connections
 * still in their handshake are closed; authenticated ones still sending their registration are told
 * why the root stopped.
 *
 * <p>A registered rank whose connection closes before the job is complete (its process died) is
 * removed, so a restarted process can take its rank again.
 *
 * <p>{@link #close()} may be called from any thread, any number of times.
 *
 * <p>Parts: this class is the root's thread and its selector (accept, handshakes, replies);
 * {@link RootBinding} binds the listening sockets and explains a failed bind, {@link RootIncoming}
 * is one connection's handshake and registration frame, and {@link RootTable} the rendezvous
 * itself (who registered, the checks, the table, the words of every stop).
 */
public final class BootstrapRoot implements AutoCloseable {

    /** Time an accepted connection has to prove the secret and send its registration. */
    static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(5);
    /** Unauthenticated connections served at once; further connections wait in the backlog. */
    static final int MAX_CONCURRENT_HANDSHAKES = 64;
    /** Longest select: how late a handshake deadline is noticed. */
    private static final long SELECT_MS = 100;
    /** How long close() waits for the root thread to tell waiting ranks and let go of the port. */
    private static final long CLOSE_WAIT_MS = 2_000;

    /** The listening sockets: the required address first, then extra interfaces. */
    private final List<ServerSocketChannel> servers;
    private final Selector selector;
    private final List<SelectionKey> acceptKeys = new ArrayList<>();
    private final InetSocketAddress address;
    private final List<InetSocketAddress> addresses;
    private final String where;
    private final byte[] secret;
    /** TLS for every accepted connection (JCCL_TLS), or null. */
    private final Tls tls;
    private final Duration initTimeout;
    private final Duration sendTimeout;
    private final long startNanos;
    private final long deadlineNanos;
    private final AtomicInteger dropped = new AtomicInteger();
    private final Thread thread;
    private volatile boolean closeRequested;
    /** Set once the root thread stops serving: what a late arrival is told. Null while running. */
    private volatile byte[] stopFrame;
    /** Number of ranks currently registered, for tests and status. */
    private volatile int arrivedCount;

    // ---- state owned by the root thread only
    /** Who registered, the world size, the refusals: the rendezvous itself. */
    private final RootTable table;
    /** Connections in their handshake or registration (attached {@link RootIncoming}); capped at MAX_CONCURRENT_HANDSHAKES. */
    private int incoming;

    /** An authenticated connection whose registration has been read; its key is reused for the registrant. */
    private record Arrival(WireChannel channel, SelectionKey key, BootstrapWire.Registration registration, String from) {
    }

    private BootstrapRoot(List<ServerSocketChannel> servers, Selector selector, List<InetSocketAddress> addresses, byte[] secret,
            Config config) {
        this.servers = List.copyOf(servers);
        this.selector = selector;
        this.addresses = List.copyOf(addresses);
        this.address = addresses.getFirst();
        this.where = addresses.size() == 1 ? BootstrapWire.hostPort(address)
                : String.join(" and ", addresses.stream().map(BootstrapWire::hostPort).toList());
        this.secret = secret.clone();
        this.table = new RootTable(where);
        this.tls = Tls.fromConfig(config);
        this.initTimeout = Settings.INIT_TIMEOUT.getDuration(config);
        this.sendTimeout = Settings.CONNECT_TIMEOUT.getDuration(config);
        this.startNanos = System.nanoTime();
        this.deadlineNanos = startNanos + initTimeout.toNanos();
        try {
            for (ServerSocketChannel server : servers) {
                acceptKeys.add(server.register(selector, SelectionKey.OP_ACCEPT, server));
            }
        } catch (IOException e) {
            throw new ResourceException("cannot register the bootstrap root's socket " + where + " with a selector: " + e, e);
        }
        this.thread = Thread.ofPlatform().daemon(true).name("jccl-bootstrap-root").unstarted(this::run);
    }

    /**
     * Binds exactly {@code bind} (port 0 picks a free port) and starts serving one rendezvous; returns
     * once the socket listens, so ranks may connect as soon as this returns (and ranks that connected
     * earlier have been retrying).
     *
     * @param bind address and port to listen on; a wildcard address listens on all interfaces and
     *        {@link #address()} then reports the interface {@code JCCL_SOCKET_IFNAME} selects
     * @param secret the job's 16-byte secret, which every rank must prove
     * @param config settings ({@code JCCL_INIT_TIMEOUT}, {@code JCCL_CONNECT_TIMEOUT}, interface selection)
     * @throws ResourceException when the port is in use or sockets are exhausted
     * @throws ConfigException when the address is not one of this host's, or cannot be resolved
     */
    public static BootstrapRoot start(InetSocketAddress bind, byte[] secret, Config config) {
        return start(List.of(bind), secret, config);
    }

    /**
     * Like {@link #start(InetSocketAddress, byte[], Config)}, listening on several addresses with one
     * port: the first must be bound (its failure is the error; port 0 picks a free port, which the
     * others then use too); each further address is bound when it can be and skipped with an INFO
     * line when not (e.g. the port is taken on that interface). Duplicates are bound once; a wildcard
     * address makes the others redundant.
     */
    public static BootstrapRoot start(List<InetSocketAddress> binds, byte[] secret, Config config) {
        Objects.requireNonNull(binds, "binds");
        Objects.requireNonNull(secret, "secret");
        Objects.requireNonNull(config, "config");
        if (binds.isEmpty()) {
            throw new IllegalArgumentException("no address to bind");
        }
        // Read the settings before binding so a bad JCCL_INIT_TIMEOUT fails without holding a port.
        Settings.INIT_TIMEOUT.getDuration(config);
        Settings.CONNECT_TIMEOUT.getDuration(config);
        Tls.fromConfig(config); // and a broken TLS setup
        String asked = RootBinding.asked(binds.getFirst());
        RootBinding.Bound bound = RootBinding.bind(binds, config);
        Selector selector = null;
        try {
            selector = Selector.open();
            BootstrapRoot root = new BootstrapRoot(bound.servers(), selector, bound.reported(), secret, config);
            root.thread.start();
            Log.info(Log.Subsys.BOOTSTRAP, -1, "bootstrap root listening on " + root.where
                    + (bound.local().equals(bound.reported().getFirst()) ? "" : " (bound " + BootstrapWire.hostPort(bound.local()) + ")")
                    + (bound.skipped().isEmpty() ? "" : "; not on " + String.join(", ", bound.skipped()))
                    + ", init deadline " + BootstrapWire.seconds(root.initTimeout) + " (JCCL_INIT_TIMEOUT)");
            return root;
        } catch (IOException e) {
            RootBinding.closeAll(bound.servers(), selector);
            throw RootBinding.failure(asked, e);
        }
    }

    /** Every address the root listens on, the first being {@link #address()}. */
    public List<InetSocketAddress> addresses() {
        return addresses;
    }

    /** The address ranks connect to (a concrete address even when the root listens on a wildcard). */
    public InetSocketAddress address() {
        return address;
    }

    /** Number of ranks registered and waiting right now (0 again once the root has stopped). */
    int arrivedCount() {
        return arrivedCount;
    }

    /** Whether the root thread has finished (job formed, deadline passed, or closed). */
    boolean isStopped() {
        return !thread.isAlive();
    }

    /**
     * Stops the root: ranks still waiting are told that the root was closed, the port is released.
     * Idempotent; waits briefly for the root thread so the port is free when this returns.
     */
    @Override
    public void close() {
        closeRequested = true;
        selector.wakeup();
        if (Thread.currentThread() != thread) {
            try {
                thread.join(CLOSE_WAIT_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    // ------------------------------------------------------------------ root thread

    private void run() {
        byte[] stop = null;
        try {
            stop = serve();
        } catch (Throwable t) {
            String message = "the bootstrap root at " + where + " failed: " + t + "; this is a jccl bug, please report it with this log";
            Log.warn(Log.Subsys.BOOTSTRAP, -1, message);
            stop = BootstrapWire.errorFrame(ErrorCode.INTERNAL, message);
            try {
                sendToAll(stop, Duration.ofSeconds(1));
            } catch (Throwable ignored) {
                // Best effort: the ranks see the connection close and name this root.
            }
        } finally {
            stopFrame = stop != null ? stop : BootstrapWire.errorFrame(ErrorCode.INTERNAL, "the bootstrap root at " + where + " stopped");
            closeServers();
            for (RootTable.Registrant r : table.registrants()) {
                closeQuietly(r.channel(), null);
            }
            table.clear();
            arrivedCount = 0;
            closeIncoming(stopFrame);
            closeQuietly(null, selector);
        }
    }

    /** Serves until the job is formed, the deadline passes or close() is called; returns what late arrivals are told. */
    private byte[] serve() throws IOException {
        while (true) {
            if (closeRequested) {
                return stopClosed();
            }
            if (table.formed()) {
                return complete();
            }
            long remaining = deadlineNanos - System.nanoTime();
            if (remaining <= 0) {
                return stopTimedOut();
            }
            // Stop accepting while every handshake slot is busy; the kernel keeps the rest in the backlog.
            for (SelectionKey k : acceptKeys) {
                if (k.isValid()) {
                    k.interestOps(incoming < MAX_CONCURRENT_HANDSHAKES ? SelectionKey.OP_ACCEPT : 0);
                }
            }
            // Wake at least every SELECT_MS to drop connections past their handshake deadline.
            selector.select(Math.max(1, Math.min(SELECT_MS, TimeUnit.NANOSECONDS.toMillis(remaining) + 1)));
            Iterator<SelectionKey> it = selector.selectedKeys().iterator();
            while (it.hasNext()) {
                SelectionKey key = it.next();
                it.remove();
                if (!key.isValid()) {
                    continue;
                }
                if (key.attachment() instanceof ServerSocketChannel server) {
                    acceptAll(server);
                } else if (key.attachment() instanceof RootIncoming in) {
                    progress(key, in);
                } else if (key.isReadable()) {
                    onRegistrantReadable((RootTable.Registrant) key.attachment());
                }
            }
            long now = System.nanoTime();
            for (SelectionKey key : List.copyOf(selector.keys())) {
                if (key.isValid() && key.attachment() instanceof RootIncoming in) {
                    checkDeadline(key, in, now);
                }
            }
        }
    }

    private void closeServers() {
        for (ServerSocketChannel s : servers) {
            closeQuietly(s, null);
        }
    }

    private void acceptAll(ServerSocketChannel server) throws IOException {
        while (incoming < MAX_CONCURRENT_HANDSHAKES) {
            SocketChannel ch = server.accept();
            if (ch == null) {
                return;
            }
            SelectionKey key;
            RootIncoming in;
            try {
                ch.configureBlocking(false);
                long remainingMs = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
                Duration timeout = Duration.ofMillis(Math.max(1, Math.min(HANDSHAKE_TIMEOUT.toMillis(), remainingMs)));
                in = new RootIncoming(HandshakeServer.start(Tls.wrap(tls, ch, false, remote(ch)), secret, Handshake.Kind.BOOTSTRAP, timeout));
                key = ch.register(selector, 0, in);
            } catch (IOException e) {
                dropped.incrementAndGet();
                closeQuietly(ch, null);
                Log.warn(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + ": connection from " + remote(ch)
                        + " failed during the handshake (" + e + "); dropped");
                continue;
            }
            incoming++;
            // Sends the challenge at once; the socket's send buffer normally takes all 23 bytes.
            progress(key, in);
        }
    }

    /**
     * Moves one unregistered connection on as far as its socket allows without blocking: the
     * handshake, then the registration frame, then {@link #onArrival}. Failures drop it with one line.
     */
    private void progress(SelectionKey key, RootIncoming in) {
        BootstrapWire.Registration reg;
        try {
            if (!in.authenticated) {
                HandshakeServer.Result r = in.handshake.step();
                switch (r.status()) {
                    case IN_PROGRESS -> {
                        key.interestOps(r.interestOps());
                        return;
                    }
                    case FAILED -> throw r.error();
                    case DONE -> {
                        in.authenticated = true;
                        in.idleDeadline = System.nanoTime() + HANDSHAKE_TIMEOUT.toNanos();
                        in.rankSize = BootstrapWire.parseHello(in.handshake.hello(), in.from);
                        key.interestOps(SelectionKey.OP_READ);
                    }
                }
            }
            reg = in.readRegistration();
        } catch (JcclException | IOException e) {
            drop(key, in, e);
            return;
        } catch (RuntimeException e) {
            // A decoder bug on one peer's bytes must cost that connection only, not the whole root.
            drop(key, in, new IOException("unexpected " + e, e));
            return;
        }
        if (reg != null) {
            incoming--;
            onArrival(new Arrival(in.handshake.channel(), key, reg, in.from));
        }
    }

    /** Drops a connection past its handshake deadline, or an authenticated one whose registration stalled. */
    private void checkDeadline(SelectionKey key, RootIncoming in, long now) {
        if (!in.authenticated) {
            HandshakeServer.Result r = in.handshake.expired(now);
            if (r != null) {
                drop(key, in, r.error());
            }
        } else if (now - in.idleDeadline >= 0) {
            drop(key, in, new SocketTimeoutException("no registration bytes within " + HANDSHAKE_TIMEOUT.toMillis() + " ms"));
        }
    }

    /** Drops an unregistered connection with one warning; a peer that proved the secret is told why. */
    private void drop(SelectionKey key, RootIncoming in, Exception e) {
        WireChannel ch = in.handshake.channel();
        incoming--;
        dropped.incrementAndGet();
        if (e instanceof JcclException je) {
            Log.warn(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + ": " + je.getMessage());
            if (in.authenticated) {
                // The peer proved the secret, so it is one of ours with a bug or another version: tell it why.
                writeOnce(ch, BootstrapWire.errorFrame(je.code(), "the bootstrap root at " + where + " refused this rank: " + je.getMessage()));
            }
        } else if (!closeRequested && stopFrame == null) {
            Log.warn(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + ": connection from " + in.from + " failed during "
                    + (in.authenticated ? "registration" : "the handshake") + " (" + e + "); dropped");
        }
        key.cancel();
        closeQuietly(ch, null);
    }

    private void onArrival(Arrival a) {
        BootstrapWire.Registration reg = a.registration();
        PeerInfo info = reg.info();
        RootTable.Refusal refusal = table.refusal(reg, a.from());
        if (refusal != null) {
            reject(a, refusal.code(), refusal.message());
            return;
        }
        WireChannel ch = a.channel();
        // The handshake's key, on this selector already: from now on it watches for the registrant closing.
        SelectionKey key = a.key();
        key.interestOps(SelectionKey.OP_READ);
        RootTable.Registrant r = new RootTable.Registrant(ch, key, info, a.from());
        key.attach(r);
        table.add(r, reg.size());
        arrivedCount = table.arrived();
        Log.trace(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + ": " + info.describe() + " registered from " + a.from()
                + " (" + table.arrived() + " of " + table.size() + ")");
    }

    private void reject(Arrival a, ErrorCode code, String message) {
        Log.warn(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + " rejected a registration from " + a.from() + ": " + message);
        table.rejected(message);
        writeOnce(a.channel(), BootstrapWire.errorFrame(code, message));
        closeQuietly(a.channel(), null);
    }

    /**
     * A registered rank's connection became readable before the table was sent: it closed (its
     * process exited) or sent bytes it must not send. Either way the registration is withdrawn so
     * the rank can register again.
     */
    private void onRegistrantReadable(RootTable.Registrant r) {
        ByteBuffer one = ByteBuffer.allocate(1);
        String why;
        try {
            int n = r.channel().read(one);
            why = n < 0 ? "closed its bootstrap connection" : "sent unexpected bytes while waiting for the peer table";
        } catch (IOException e) {
            why = "lost its bootstrap connection (" + e.getMessage() + ")";
        }
        r.key().cancel();
        closeQuietly(r.channel(), null);
        table.remove(r.info().rank());
        arrivedCount = table.arrived();
        Log.warn(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + ": " + r.info().describe() + " " + why
                + " before all ranks arrived (its process exited or was killed?); its rank is open again");
    }

    private byte[] complete() throws IOException {
        closeServers();
        int size = table.size();
        byte[] encoded;
        try {
            encoded = PeerInfoCodec.encodeAll(table.table());
        } catch (JcclException e) {
            byte[] error = BootstrapWire.errorFrame(ErrorCode.RESOURCE, table.cannotEncode(e));
            sendToAll(error, sendTimeout);
            return error;
        }
        if (encoded.length > BootstrapWire.MAX_REPLY_FRAME - 1) {
            byte[] error = BootstrapWire.errorFrame(ErrorCode.RESOURCE, RootTable.tableTooLarge(size, encoded.length));
            sendToAll(error, sendTimeout);
            return error;
        }
        long formedNanos = System.nanoTime() - startNanos;
        int sent = sendToAll(BootstrapWire.tableFrame(encoded), sendTimeout);
        Log.info(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + ": all " + size + " ranks arrived after "
                + String.format("%.3f s", formedNanos / 1e9) + "; peer table (" + encoded.length + " bytes) sent to " + sent + " of " + size);
        return BootstrapWire.errorFrame(ErrorCode.MISMATCH, table.alreadyFormed());
    }

    private byte[] stopTimedOut() throws IOException {
        closeServers();
        String message = table.timedOut(initTimeout, address, addresses, dropped.get());
        Log.warn(Log.Subsys.BOOTSTRAP, -1, message);
        byte[] frame = BootstrapWire.errorFrame(ErrorCode.TIMEOUT, message);
        sendToAll(frame, sendTimeout);
        return BootstrapWire.errorFrame(ErrorCode.TIMEOUT, "this rank arrived after the bootstrap root at " + where
                + " had given up: " + message);
    }

    private byte[] stopClosed() throws IOException {
        closeServers();
        String message = table.closed();
        byte[] frame = BootstrapWire.errorFrame(ErrorCode.ABORTED, message);
        if (table.arrived() > 0) {
            Log.warn(Log.Subsys.BOOTSTRAP, -1, message);
            sendToAll(frame, Duration.ofSeconds(1));
        }
        return frame;
    }

    /**
     * Writes {@code frame} to every registered rank, all at once through the selector so one slow
     * reader cannot hold up the others, then closes their connections. Returns how many got it whole.
     */
    private int sendToAll(byte[] frame, Duration timeout) throws IOException {
        Map<SelectionKey, ByteBuffer> pending = new HashMap<>();
        for (SelectionKey key : selector.keys()) {
            if (key.isValid() && key.attachment() instanceof RootIncoming) {
                // Not served while the reply goes out (they are closed when the root stops); a ready key left
                // in its interest set would make every select below return at once.
                key.interestOps(0);
            }
        }
        for (RootTable.Registrant r : table.registrants()) {
            if (r.key().isValid()) {
                r.key().interestOps(SelectionKey.OP_WRITE);
                pending.put(r.key(), ByteBuffer.wrap(frame));
            }
        }
        int sent = 0;
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!pending.isEmpty()) {
            long remaining = deadline - System.nanoTime();
            if (remaining <= 0) {
                break;
            }
            selector.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(remaining)));
            Iterator<SelectionKey> it = selector.selectedKeys().iterator();
            while (it.hasNext()) {
                SelectionKey key = it.next();
                it.remove();
                ByteBuffer buf = pending.get(key);
                if (buf == null || !key.isValid() || !key.isWritable()) {
                    continue;
                }
                RootTable.Registrant r = (RootTable.Registrant) key.attachment();
                try {
                    WireChannel w = r.channel();
                    w.write(buf);
                    if (!w.flush()) {
                        continue; // TLS records still queued: wait for OP_WRITE again
                    }
                } catch (IOException e) {
                    Log.warn(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + ": could not send to " + r.info().describe() + ": " + e);
                    pending.remove(key);
                    key.cancel();
                    continue;
                }
                if (!buf.hasRemaining()) {
                    pending.remove(key);
                    key.interestOps(0);
                    sent++;
                }
            }
        }
        for (SelectionKey key : pending.keySet()) {
            Log.warn(Log.Subsys.BOOTSTRAP, -1, "bootstrap root " + where + ": " + ((RootTable.Registrant) key.attachment()).info().describe()
                    + " did not take the root's reply within " + BootstrapWire.seconds(timeout) + " (JCCL_CONNECT_TIMEOUT); closing");
        }
        for (RootTable.Registrant r : table.registrants()) {
            closeQuietly(r.channel(), null);
        }
        table.clear();
        arrivedCount = 0;
        return sent;
    }

    /**
     * Closes the connections still in their handshake or registration when the root stops; those that
     * already proved the secret are told why they cannot join ({@code frame}).
     */
    private void closeIncoming(byte[] frame) {
        if (!selector.isOpen()) {
            return;
        }
        for (SelectionKey key : List.copyOf(selector.keys())) {
            if (key.attachment() instanceof RootIncoming in) {
                WireChannel ch = in.handshake.channel();
                if (in.authenticated) {
                    writeOnce(ch, frame);
                }
                closeQuietly(ch, null);
            }
        }
        incoming = 0;
    }

    /** One non-blocking write of a small frame; a peer that does not take it all is not waited for. */
    private static void writeOnce(WireChannel ch, byte[] frame) {
        try {
            ch.socket().configureBlocking(false);
            ch.write(ByteBuffer.wrap(frame));
            ch.flush();
        } catch (IOException e) {
            // The connection is being dropped anyway; the peer sees it close.
        }
    }

    private static String remote(SocketChannel ch) {
        try {
            return BootstrapWire.hostPort((InetSocketAddress) ch.getRemoteAddress());
        } catch (IOException | RuntimeException e) {
            return "?";
        }
    }

    static void closeQuietly(java.nio.channels.Channel ch, Selector selector) {
        try {
            if (ch != null) {
                ch.close();
            }
        } catch (IOException e) {
            // Closing is best effort; the descriptor is released either way.
        }
        try {
            if (selector != null) {
                selector.close();
            }
        } catch (IOException e) {
            // As above.
        }
    }

    @Override
    public String toString() {
        return "BootstrapRoot[" + where + (thread.isAlive() ? ", serving" : ", stopped") + "]";
    }
}
