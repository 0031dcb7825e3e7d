package org.jccl.internal.control;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.PeerFailedException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.net.Tls;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.PeerInfo;

/**
 * A communicator's control channel: small authenticated messages beside the data transports, for
 * heartbeats, failure notices, stall reports and {@code jccl status}.
 *
 * <p><b>Topology: a star through rank 0 (the hub).</b> Each other rank keeps one connection to the
 * hub, so a job of n ranks holds n-1 control sockets in all (64 ranks in one JVM: 63 pairs, not
 * 63 x 64). Liveness needs no mesh: the hub hears every rank and every rank hears the hub, so a
 * rank that stops is seen by the hub, which tells the others; when the hub itself stops, every
 * rank sees its heartbeats end and names rank 0 on its own. A rank that is merely held back (it
 * does not call the collective) keeps its control thread running, so the hub, even when it is the
 * held-back one, still answers and collects the stall report.
 *
 * <p><b>Failure detection.</b> Heartbeats every quarter of {@code JCCL_PEER_TIMEOUT} in both
 * directions (any frame counts). Silence for the whole timeout is a timeout of that peer; a
 * connection that closes without a goodbye (BYE, sent by close() and at JVM exit while idle) is a
 * failure of that peer, declared after a short grace so that a data transport that saw the same
 * death reports it first with its own, more specific message. Either way the hub tells every rank
 * (FAULT) and each one aborts its communicator with a {@link PeerFailedException} or a
 * {@link JcclTimeoutException} naming the rank, its host and pid. A rank whose own operation failed
 * because a peer broke tells the hub which peer (so ranks that only see the consequence, a
 * neighbour's closed socket, learn the cause); a rank aborted by its user leaves quietly (GONE).
 * If the control thread itself was not scheduled for half the timeout (a GC pause, an overloaded
 * host) it forgives the silence it could not have heard.
 *
 * <p><b>Stall watchdog.</b> When this rank's oldest unfinished operation has waited
 * {@code JCCL_STALL_WARN}, it asks the hub to collect every rank's {@link RankState}; the hub sends
 * the report to every rank, each dumps its flight recorder to {@code JCCL_DUMP_DIR} and each rank
 * waiting in an operation logs one line ({@link StallReport}).
 *
 * <p><b>Rank 0 closing first.</b> The hub's {@link #close()} returns at once, but its thread goes on
 * supervising the ranks that still have the communicator open until they have all closed or
 * {@code JCCL_CONTROL_LINGER} has passed; a rank still open when the hub leaves logs that
 * supervision is off.
 *
 * <p>Threading: one thread per communicator ({@code jccl-ctl-<comm>-r<rank>}) owns every channel
 * and every field not marked volatile; other threads hand it tasks.
 */
public final class ControlPlane {

    /** Key of the hub's control address in the peer table ({@link PeerInfo#addresses()}). */
    public static final String ADDRESS_KEY = "CTL";

    /** What the control plane asks of its communicator. */
    @FunctionalInterface
    public interface Host {
        /** Aborts the communicator with {@code cause} (any thread; the control thread calls it at most once). */
        void fail(JcclException cause);

        /**
         * This rank's mismatch guard word of its collective call number {@code index} (any thread), or
         * {@link #GUARD_NOT_YET} (not started yet) or {@link #GUARD_UNKNOWN} (forgotten, or no guard).
         */
        default long guardAt(long index) {
            return GUARD_UNKNOWN;
        }

        /** How many collective calls this rank has started (any thread); -1 when unknown. */
        default long callsStarted() {
            return -1;
        }

        /**
         * The collective call this rank's last mismatch report is about, when that is not the last call it
         * started (a ring confirmation of an earlier call that returned, or a peer's message of an earlier
         * call), else -1 (any thread).
         */
        default long mismatchAt() {
            return -1;
        }

        /**
         * Another rank found mismatched calls at collective call {@code index} ({@code report} says
         * which) while this rank has not started that call: the call, when it starts, fails at once
         * with the report (and every later one), so that no rank waits in a call its peers left.
         */
        default void doomedAt(long index, String report) {
        }

        /**
         * The JVM exits without close() (shutdown hook, before this rank says goodbye): settles what this rank
         * still owes its peers (the mismatch guard's held ring confirmations) within a short bound. Returns a
         * MISMATCH that shows, or null.
         */
        default JcclException atExit() {
            return null;
        }
    }

    /** {@link Host#guardAt} of a call the rank has not started. */
    public static final long GUARD_NOT_YET = Long.MIN_VALUE;
    /** {@link Host#guardAt} of a call the rank no longer remembers, or when it runs without the guard. */
    public static final long GUARD_UNKNOWN = Long.MIN_VALUE + 1;

    /** Everything a control plane needs to know about its communicator. */
    public record Params(byte[] commId, String idShort, int rank, int size, byte[] secret, Config config, PeerInfo[] peers,
                         FlightRecorder recorder, Counters counters, Host host) {
    }

    /** A fault every rank learns: who, and the exception its communicator was aborted with. */
    private record Verdict(int culprit, int kind, String message, JcclException exception) {
    }

    private enum ConnState { OPEN, CLOSED, ABORTED, DEAD }

    /** One control connection (to the hub, or at the hub to one rank). */
    private final class Conn {
        final int peer;
        final SocketChannel ch;
        /** What frames are read from and written to: the socket, or TLS over it ({@code JCCL_TLS=1}). */
        final WireChannel w;
        final ByteBuffer header = ByteBuffer.allocate(ControlWire.HEADER);
        ByteBuffer payload;
        final ArrayDeque<ByteBuffer> out = new ArrayDeque<>();
        long outBytes;
        long lastHeard;
        long lastSent;
        long eofAt;
        ConnState state = ConnState.OPEN;
        SelectionKey key;

        Conn(int peer, WireChannel w) {
            this.peer = peer;
            this.ch = w.socket();
            this.w = w;
            long now = System.nanoTime();
            lastHeard = now;
            lastSent = now;
        }
    }

    /** Sets {@code c.lastHeard}, mirrored for the hub's connection (see {@link #hubHeardAt}). */
    private void heard(Conn c, long at) {
        c.lastHeard = at;
        if (c.peer == 0) {
            hubHeardAt = at;
        }
    }

    /** A local {@code jccl status} client waiting for its report. */
    private static final class StatusClient {
        final SocketChannel ch;
        final ByteBuffer in = ByteBuffer.allocate(256);
        /** host:port of the client, for the one line logged when its connection is dropped. */
        final String from;
        long deadline;
        boolean authenticated;

        StatusClient(SocketChannel ch) {
            this.ch = ch;
            String f;
            try {
                java.net.SocketAddress a = ch.getRemoteAddress();
                f = a instanceof java.net.InetSocketAddress ia ? ia.getAddress().getHostAddress() + ":" + ia.getPort() : String.valueOf(a);
            } catch (IOException e) {
                f = "?";
            }
            this.from = f;
        }
    }

    /** Drops an unauthenticated status client with one WARN line naming it and what was wrong. */
    private void dropStatus(StatusClient sc, String why) {
        statusClients.remove(sc);
        closeQuietly(sc.ch);
        Log.warn(Log.Subsys.NET, rank, "comm " + p.idShort() + ": status connection from " + sc.from + " dropped: " + why);
    }

    private static final Set<ControlPlane> LIVE = ConcurrentHashMap.newKeySet();
    private static final long MAX_OUT_BYTES = 4L << 20;

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(ControlPlane::atExit, "jccl-ctl-exit"));
    }

    /**
     * Loaded with this class, not when the first connection is set up: a class file cannot be opened
     * once the process is out of file descriptors, and the error that says so must still be built.
     */
    private static final Object[] PRELOADED = {ConnState.OPEN, Conn.class, WireChannel.Plain.class, Tls.class,
        org.jccl.internal.net.TlsChannel.class};

    private final Params p;
    private final int rank;
    private final int size;
    private final PeerInfo[] peers;
    private final long timeoutNs;
    private final long heartbeatNs;
    private final long stallWarnNs;
    private final long graceNs;
    private final long collectNs;
    private final long tickMs;
    /** JCCL_CONTROL_LINGER: how long the hub supervises after its own close() while others still have the communicator open. */
    private final long lingerNs;
    /** Hub: the communicator was closed here and the control thread goes on supervising until {@link #lingerUntil}. */
    private boolean lingering;
    private long lingerUntil;
    /** TLS for the control connections ({@code JCCL_TLS=1}), or null. */
    private final Tls tls;
    /** Why the hub dropped the last connection it could not admit, for the message when a rank never arrives. */
    private String lastDrop;
    private final Path0 dumpDir;
    private final Selector selector;
    /** Index = peer rank at the hub; index 0 elsewhere (the hub). */
    private final Conn[] conns;
    private final Thread thread;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final ServerSocketChannel statusServer;
    private final String statusToken;
    private final java.nio.file.Path statusFile;
    private final List<StatusClient> statusClients = new ArrayList<>();

    private volatile boolean stopped;
    private volatile Verdict verdict;
    /** The first report of mismatched collective calls this rank heard of (its own or a peer's), or null. */
    private volatile String mismatch;
    /** The collective call that report names (the finder's index of it), -1 when unknown. */
    private volatile long mismatchIndex = -1;
    /** Set when the hub has left (closed or aborted): no more supervision, reports or faults. */
    private volatile boolean hubGone;
    /**
     * When this rank (not the hub) last heard the hub, mirrored from its connection's
     * {@code lastHeard} for {@link #explain}, which runs on an operation thread.
     */
    private volatile long hubHeardAt = System.nanoTime();
    /** Ranks known to have closed or aborted their communicator (1), as far as this rank hears. */
    private final java.util.concurrent.atomic.AtomicIntegerArray left;
    /** Why each rank in {@link #left} left ("closed its communicator", "aborted its communicator: ..."), as far as this rank hears. */
    private final java.util.concurrent.atomic.AtomicReferenceArray<String> leftReason;
    /** Ranks that closed their communicator normally (LEFT with HOW_CLOSED), not aborted it. */
    private final java.util.concurrent.atomic.AtomicIntegerArray leftClosed;
    private long lastLoop = System.nanoTime();
    private long requestedSeq = -1;
    private long reportedSeq = -1;
    private long nextId = 1;
    private long pendingStatusRequest;
    private volatile String lastStallLine;

    // Hub: the collection in progress.
    private long collectId;
    private long collectDeadline;
    private RankState[] collectStates;
    private int[] collectHow;
    private boolean collectForStall;
    private final List<Conn> collectRequesters = new ArrayList<>();
    private boolean collectForSelf;
    private long lastStallReport = System.nanoTime() - TimeUnit.DAYS.toNanos(1);

    /**
     * Hub: what each rank said its guard word of a collective call is ({@link #GUARD_NOT_YET},
     * {@link #GUARD_UNKNOWN}, the word, or {@link #GUARD_ASKED} while a query is out), for the few
     * call indices some rank asked about lately (the mismatch guard's backstop, {@link #probeGuard}).
     */
    private final java.util.TreeMap<Long, long[]> guardAnswers = new java.util.TreeMap<>();
    private static final long GUARD_ASKED = Long.MIN_VALUE + 2;
    /** Hub: the rank that asked first about each index, and how long it had waited (for the report). */
    private final Map<Long, Integer> guardAsker = new java.util.HashMap<>();

    /** Small wrapper so the field above reads as a path without importing two Path types. */
    private record Path0(java.nio.file.Path path) {
    }

    // ------------------------------------------------------------------------------------------ setup

    /** The hub's listening socket, bound where the data transports bind ({@code JCCL_SOCKET_IFNAME}); rank 0 only. */
    public static ServerSocketChannel listen(Config config) throws IOException {
        InetAddress bind = Interfaces.selectAddress(config);
        ServerSocketChannel s = ServerSocketChannel.open();
        try {
            s.bind(new InetSocketAddress(bind, 0), 1024);
            return s;
        } catch (IOException e) {
            s.close();
            throw new IOException("cannot listen for control connections on " + bind.getHostAddress() + ": " + e.getMessage(), e);
        }
    }

    /** The address published for a hub listener: ip bytes then a 16-bit port. */
    public static byte[] address(ServerSocketChannel s) throws IOException {
        InetSocketAddress a = (InetSocketAddress) s.getLocalAddress();
        byte[] ip = a.getAddress().getAddress();
        return ByteBuffer.allocate(ip.length + 2).put(ip).putShort((short) a.getPort()).array();
    }

    static InetSocketAddress decode(byte[] b) throws IOException {
        if (b == null || (b.length != 6 && b.length != 18)) {
            throw new IOException("control address of " + (b == null ? 0 : b.length) + " bytes (expected 6 or 18)");
        }
        byte[] ip = Arrays.copyOf(b, b.length - 2);
        int port = ((b[b.length - 2] & 0xFF) << 8) | (b[b.length - 1] & 0xFF);
        return new InetSocketAddress(InetAddress.getByAddress(ip), port);
    }

    /**
     * Connects the star (rank 0 accepts on {@code listener}, the others connect to the address rank
     * 0 published) and starts the control thread. Blocking, bounded by {@code JCCL_CONNECT_TIMEOUT}.
     *
     * @throws JcclException naming the ranks that did not connect, or why the hub cannot be reached
     */
    public static ControlPlane start(Params p, ServerSocketChannel listener) {
        try {
            return new ControlPlane(p, listener);
        } catch (IOException e) {
            if (org.jccl.internal.util.ResourceLimits.outOfFileDescriptors(e)) {
                throw new org.jccl.ResourceException("rank " + p.rank() + ": control channel of communicator " + p.idShort()
                        + " could not be set up: " + e.getMessage() + "; " + org.jccl.internal.util.ResourceLimits.openFilesAdvice(), e);
            }
            throw new PeerFailedException(p.rank() == 0 ? -1 : 0, "rank " + p.rank() + ": control channel of communicator " + p.idShort()
                    + " could not be set up: " + e.getMessage(), e);
        } finally {
            if (listener != null) {
                try {
                    listener.close();
                } catch (IOException ignored) {
                    // the star is complete or failed either way
                }
            }
        }
    }

    private ControlPlane(Params p, ServerSocketChannel listener) throws IOException {
        this.p = p;
        this.rank = p.rank();
        this.size = p.size();
        this.peers = p.peers().clone();
        Config cfg = p.config();
        this.timeoutNs = Settings.PEER_TIMEOUT.getDuration(cfg).toNanos();
        this.heartbeatNs = timeoutNs / 4;
        this.stallWarnNs = Settings.STALL_WARN.getDuration(cfg).toNanos();
        this.graceNs = Math.min(TimeUnit.SECONDS.toNanos(1), timeoutNs / 4);
        this.collectNs = Math.max(TimeUnit.MILLISECONDS.toNanos(500), Math.min(TimeUnit.SECONDS.toNanos(2), timeoutNs / 2));
        this.tickMs = Math.max(20, Math.min(250, TimeUnit.NANOSECONDS.toMillis(timeoutNs) / 8));
        this.lingerNs = Settings.CONTROL_LINGER.getDuration(cfg).toNanos();
        this.dumpDir = new Path0(dumpDir(cfg));
        Duration connectTimeout = Settings.CONNECT_TIMEOUT.getDuration(cfg);
        this.conns = new Conn[rank == 0 ? size : 1];
        this.left = new java.util.concurrent.atomic.AtomicIntegerArray(size);
        this.leftReason = new java.util.concurrent.atomic.AtomicReferenceArray<>(size);
        this.leftClosed = new java.util.concurrent.atomic.AtomicIntegerArray(size);
        this.tls = Tls.fromConfig(cfg);
        this.selector = Selector.open();
        boolean ok = false;
        ServerSocketChannel ss = null;
        try {
            if (rank == 0) {
                acceptAll(listener, connectTimeout);
            } else {
                connectHub(connectTimeout);
            }
            for (Conn c : conns) {
                if (c != null) {
                    c.ch.configureBlocking(false);
                    c.ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
                    c.key = c.ch.register(selector, SelectionKey.OP_READ, c);
                }
            }
            // The local status endpoint (jccl status): loopback, authenticated by a token in a file only this user can read.
            ss = ServerSocketChannel.open();
            ss.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
            ss.configureBlocking(false);
            ss.register(selector, SelectionKey.OP_ACCEPT, null);
            byte[] tok = new byte[16];
            new java.security.SecureRandom().nextBytes(tok);
            this.statusToken = HexFormat.of().formatHex(tok);
            this.statusServer = ss;
            this.statusFile = writeStatusFile(((InetSocketAddress) ss.getLocalAddress()).getPort());
            this.thread = new Thread(this::loop, "jccl-ctl-" + p.idShort() + "-r" + rank);
            this.thread.setDaemon(true);
            ok = true;
        } finally {
            if (!ok) {
                for (Conn c : conns) {
                    if (c != null) {
                        closeQuietly(c.ch);
                    }
                }
                if (ss != null) {
                    closeQuietly(ss);
                }
                selector.close();
            }
        }
        LIVE.add(this);
        thread.start();
        Log.trace(Log.Subsys.INIT, rank, "comm " + p.idShort() + " control channel up (" + (rank == 0 ? size - 1 + " ranks connected"
                : "connected to rank 0") + security() + "), peer timeout " + Duration.ofNanos(timeoutNs).toMillis()
                + " ms, stall warning after " + Duration.ofNanos(stallWarnNs).toMillis() + " ms, status file " + statusFile);
    }

    /** ", over TLS (TLSv1.3 TLS_AES_...)" once the connections run TLS, else "". */
    private String security() {
        for (Conn c : conns) {
            if (c != null && c.w instanceof org.jccl.internal.net.TlsChannel t) {
                return ", over TLS (" + t.describeSession() + ")";
            }
        }
        return "";
    }

    private byte[] hello(int r) {
        return ByteBuffer.allocate(p.commId().length + 4).put(p.commId()).putInt(r).array();
    }

    private void acceptAll(ServerSocketChannel listener, Duration timeout) throws IOException {
        long deadline = System.nanoTime() + timeout.toNanos();
        listener.configureBlocking(false);
        try (Selector sel = Selector.open()) {
            listener.register(sel, SelectionKey.OP_ACCEPT);
            int missing = size - 1;
            while (missing > 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    List<Integer> absent = new ArrayList<>();
                    for (int r = 1; r < size; r++) {
                        if (conns[r] == null) {
                            absent.add(r);
                        }
                    }
                    throw new JcclTimeoutException("rank 0: ranks " + absent + " did not open their control connection to communicator "
                            + p.idShort() + " within " + timeout.toSeconds() + " s (" + Settings.CONNECT_TIMEOUT.name() + ")"
                            + (lastDrop != null ? "; the last connection dropped: " + lastDrop : ""));
                }
                sel.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                sel.selectedKeys().clear();
                SocketChannel ch;
                while ((ch = listener.accept()) != null) {
                    int r = admit(ch);
                    if (r > 0) {
                        missing--;
                    }
                }
            }
        }
    }

    /** Runs the handshake on an accepted socket; returns the rank it belongs to, or -1 (dropped, logged). */
    private int admit(SocketChannel ch) {
        try {
            WireChannel w = Tls.wrap(tls, ch, false, null);
            byte[] hello = Handshake.accept(w, p.secret(), Handshake.Kind.CONTROL, Duration.ofSeconds(5));
            ByteBuffer h = ByteBuffer.wrap(hello);
            byte[] id = new byte[p.commId().length];
            if (hello.length != id.length + 4) {
                throw new JcclException(ErrorCode.PROTOCOL, "control hello of " + hello.length + " bytes");
            }
            h.get(id);
            int r = h.getInt();
            if (!Arrays.equals(id, p.commId())) {
                throw new JcclException(ErrorCode.PROTOCOL, "control connection for another communicator");
            }
            if (r < 1 || r >= size || conns[r] != null) {
                throw new JcclException(ErrorCode.PROTOCOL, "control connection claims rank " + r + " (taken or outside [1, " + size + "))");
            }
            conns[r] = new Conn(r, w);
            return r;
        } catch (IOException | JcclException e) {
            lastDrop = e.getMessage();
            Log.warn(Log.Subsys.NET, rank, "comm " + p.idShort() + ": control connection dropped: " + e.getMessage());
            closeQuietly(ch);
            return -1;
        }
    }

    private void connectHub(Duration timeout) throws IOException {
        InetSocketAddress hub = decode(peers[0].addresses().get(ADDRESS_KEY));
        long deadline = System.nanoTime() + timeout.toNanos();
        IOException last = null;
        while (System.nanoTime() < deadline) {
            SocketChannel ch = SocketChannel.open();
            try {
                ch.socket().connect(hub, (int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
                // A TLS failure (untrusted certificate, a hub without TLS) is a JcclException naming TLS and the hub: not retried.
                WireChannel w = Tls.wrap(tls, ch, true, "the control channel of " + describe(0) + " at "
                        + hub.getAddress().getHostAddress() + ":" + hub.getPort());
                Handshake.connect(w, p.secret(), Handshake.Kind.CONTROL, hello(rank), Duration.ofSeconds(10));
                conns[0] = new Conn(0, w);
                return;
            } catch (IOException e) {
                closeQuietly(ch);
                last = e;
                try {
                    Thread.sleep(50);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while connecting to rank 0", ie);
                }
            } catch (RuntimeException e) {
                closeQuietly(ch);
                throw e;
            }
        }
        throw new IOException("cannot reach " + describe(0) + " at " + hub + " within " + timeout.toSeconds() + " s ("
                + Settings.CONNECT_TIMEOUT.name() + ")" + (last != null ? ": " + last.getMessage() : ""), last);
    }

    // ------------------------------------------------------------------------------------------ API for the communicator

    /** The flight recorder dump and status files go here. */
    public static java.nio.file.Path dumpDir(Config config) {
        String d = Settings.DUMP_DIR.getString(config);
        if (d != null && !d.isBlank()) {
            return java.nio.file.Path.of(d);
        }
        return java.nio.file.Path.of(System.getProperty("java.io.tmpdir"), "jccl-" + System.getProperty("user.name", "user"));
    }

    /** The last stall line this rank logged, or null; for tests and status. */
    public String lastStallLine() {
        return lastStallLine;
    }

    /**
     * Called when the communicator aborts (any thread, before it closes its data connections): tells
     * the hub which peer broke ({@link PeerFailedException} naming a peer), or that this rank leaves.
     * Waits up to 200 ms for the notice to be on the wire.
     */
    public void leaving(JcclException cause) {
        Verdict v = verdict;
        if (stopped || (v != null && v.exception() == cause)) {
            return;
        }
        // The collective call the mismatch was found in: the last one this rank started (read here, on the failing thread).
        long started = p.host().callsStarted();
        long at = p.host().mismatchAt();
        long foundIn = at >= 0 ? at : started > 0 ? started - 1 : -1;
        runAndWait(() -> {
            if (verdict != null) {
                return;
            }
            if (cause instanceof PeerFailedException pf && pf.peerRank() >= 0 && pf.peerRank() != rank && pf.peerRank() < size) {
                fault(pf.peerRank(), ControlWire.KIND_FAILED, describe(pf.peerRank()) + " failed, as seen by rank " + rank + ": "
                        + cause.getMessage(), null, false);
            } else if (cause.code() == ErrorCode.MISMATCH && mismatch == null) {
                // This rank found the mismatch: it leaves, and every rank learns its report, so that the ranks
                // whose operations fail because it left say why (explain). Nobody is failed by the notice itself:
                // an operation that can still complete (an earlier collective) does.
                String report = describe(rank) + " reported: " + cause.getMessage();
                mismatch = report;
                mismatchIndex = foundIn;
                broadcast(faultFrame(rank, ControlWire.KIND_MISMATCH_FOUND, report, foundIn), null);
            } else if (cause.code() == ErrorCode.MISMATCH) {
                // An operation failed because of the reported mismatch: every rank aborts, with the report (or, one that
                // has not reached the mismatched call yet, fails that call when it starts).
                fault(rank, ControlWire.KIND_MISMATCH, describe(rank) + " reported: " + cause.getMessage(), null, false,
                        mismatchIndex >= 0 ? mismatchIndex : foundIn);
            } else {
                broadcast(gone(cause.getMessage()), null);
            }
            shutdown();
        });
    }

    /**
     * The mismatch guard's backstop (operation thread, while its call {@code index} has found nothing
     * to do for a second; again every second it goes on waiting): asks the hub to compare every
     * rank's guard word of collective call {@code index}. Calls that differ but deadlock without a
     * message between two ranks whose calls differ (different algorithms for different counts, a rank
     * with 0 elements, a rank that returned from a rooted call) are found this way: the hub asks every
     * rank for its word of that call (each remembers its last 64 or more, OpContext#historySize), and two words that differ
     * abort every rank with a MISMATCH naming who called what. Costs nothing until a wait lasts that long.
     */
    public void probeGuard(long index, long guard) {
        if (stopped || verdict != null || hubGone) {
            return;
        }
        tasks.add(() -> {
            if (stopped || verdict != null || hubGone) {
                return;
            }
            if (rank == 0) {
                onGuard(0, index, guard, true);
            } else if (conns[0].state == ConnState.OPEN) {
                send(conns[0], ControlWire.seal(ControlWire.frame(ControlWire.GUARD_ASK, 16).putLong(index).putLong(guard)));
            }
        });
        selector.wakeup();
    }

    /** Hub: rank {@code r} says its word of call {@code index} is {@code answer}; {@code asked}: it waits in it and asks for a comparison. */
    private void onGuard(int r, long index, long answer, boolean asked) {
        long[] a = guardAnswers.get(index);
        if (a == null) {
            if (!asked) {
                return; // an answer about an index dropped meanwhile
            }
            while (guardAnswers.size() >= 8) {
                long oldest = guardAnswers.firstKey();
                guardAnswers.remove(oldest);
                guardAsker.remove(oldest);
            }
            a = new long[size];
            Arrays.fill(a, GUARD_NOT_YET);
            guardAnswers.put(index, a);
            guardAsker.put(index, r);
        }
        a[r] = answer;
        if (checkGuards(index, a)) {
            return;
        }
        if (!asked) {
            return;
        }
        // Ask the ranks that have not told their word yet (not started, or not asked): the hub answers for itself.
        ByteBuffer q = null;
        for (int x = 0; x < size; x++) {
            if (a[x] != GUARD_NOT_YET) {
                continue;
            }
            if (x == 0) {
                a[0] = p.host().guardAt(index);
            } else if (conns[x] != null && conns[x].state == ConnState.OPEN) {
                if (q == null) {
                    q = ControlWire.seal(ControlWire.frame(ControlWire.GUARD_QUERY, 8).putLong(index));
                }
                a[x] = GUARD_ASKED;
                send(conns[x], q.duplicate());
            }
        }
        checkGuards(index, a);
    }

    /**
     * A rank found mismatched calls at collective call {@code index}: this rank, if it has started that
     * call (it waits in it, or is past it, its communicator doomed either way), aborts now with the
     * report, which fails its call with a MISMATCH instead of leaving it to wait for ranks that left
     * (e.g. for a connection a peer on another path will never open); otherwise its own call
     * {@code index} fails when it starts ({@link Host#doomedAt}). Calls before it run on: they can
     * still complete.
     */
    private void mismatchFoundAt(long index, String report) {
        if (index < 0 || verdict != null || lingering) {
            return;
        }
        long started = p.host().callsStarted();
        if (started < 0) {
            return;
        }
        if (started > index) {
            JcclException ex = new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, report);
            Thread t = new Thread(() -> p.host().fail(ex), "jccl-ctl-fail-" + p.idShort() + "-r" + rank);
            t.setDaemon(true);
            t.start();
        } else {
            p.host().doomedAt(index, report);
        }
    }

    /**
     * Hub: when two ranks' words of call {@code index} differ, aborts every rank with a MISMATCH that
     * names the ranks and their calls; returns whether it did.
     */
    private boolean checkGuards(long index, long[] a) {
        if (verdict != null) {
            return true;
        }
        java.util.LinkedHashMap<Long, List<Integer>> calls = new java.util.LinkedHashMap<>();
        for (int r = 0; r < size; r++) {
            long w = a[r];
            if (w != GUARD_NOT_YET && w != GUARD_UNKNOWN && w != GUARD_ASKED && w != 0) {
                calls.computeIfAbsent(w, k -> new ArrayList<>()).add(r);
            }
        }
        if (calls.size() < 2) {
            return false;
        }
        List<Map.Entry<Long, List<Integer>>> groups = new ArrayList<>(calls.entrySet());
        // The largest group first: the others are named as deviating from it.
        groups.sort((x, y) -> y.getValue().size() - x.getValue().size());
        StringBuilder sb = new StringBuilder("mismatched collective calls at collective call #" + index + " (found by the mismatch"
                + " guard when " + describe(guardAsker.getOrDefault(index, 0)) + " had waited in it for a second): ");
        for (int i = 0; i < groups.size(); i++) {
            List<Integer> rs = groups.get(i).getValue();
            sb.append(i == 0 ? "" : i == groups.size() - 1 ? " but " : ", ");
            sb.append(rs.size() == 1 ? describe(rs.get(0)) : "ranks " + StallReport.ranges(rs)).append(" called ")
                    .append(org.jccl.internal.guard.OpGuard.describe(groups.get(i).getKey()));
        }
        long first = groups.get(0).getKey();
        List<String> diffs = new ArrayList<>();
        for (int i = 1; i < groups.size(); i++) {
            diffs.addAll(org.jccl.internal.guard.OpGuard.differences(first, groups.get(i).getKey()));
        }
        sb.append("; they differ in ").append(String.join(", ", new java.util.LinkedHashSet<>(diffs)))
                .append(". Every rank must call the same collectives in the same order, with the same count, data type, op and root");
        int culprit = groups.get(groups.size() - 1).getValue().get(0);
        fault(culprit, ControlWire.KIND_MISMATCH, sb.toString(), null, true, index);
        return true;
    }

    /**
     * Normal close: says goodbye (the hub and ranks then stop supervising this rank) and stops. The
     * hub, while other ranks still have the communicator open, goes on supervising them (heartbeats,
     * failure notices, stall reports and status) until every one has closed or {@code
     * JCCL_CONTROL_LINGER} has passed, then says goodbye; this call does not wait for that.
     */
    public void close() {
        if (stopped) {
            return;
        }
        if (rank == 0 && size > 1 && lingerNs > 0) {
            runAndWait(() -> {
                if (!stopped && !lingering) {
                    lingering = true;
                    lingerUntil = System.nanoTime() + lingerNs;
                    endLinger(System.nanoTime());
                }
            });
            return;
        }
        runAndWait(() -> {
            broadcast(bye(p.recorder().lastFinished()), null);
            shutdown();
        });
        stopped = true;
        selector.wakeup();
    }

    /**
     * A better explanation of a data-path failure, when the control plane knows (or learns within a
     * short wait) the root cause: a rank that only lost its link to a neighbour which aborted because
     * of a third rank's death then names that rank; a neighbour that aborted because it found
     * mismatched collective calls passes on its report (which ranks called what, and how the calls
     * differ), as an {@code InvalidUsageException} with {@code ErrorCode.MISMATCH}; a neighbour that
     * closed or aborted its communicator is named as such. Otherwise {@code e}.
     *
     * <p>Every rank says on the control channel why it leaves (BYE, GONE, FAULT) before its data
     * connections close, and the hub relays that to every rank (LEFT, FAULT) within milliseconds,
     * also between ranks of one JVM; the wait for it is bounded by min(2 s, T/2). A hub that has
     * missed its heartbeats cannot relay: then the wait lasts until this rank's own timer on the hub
     * fires (at most T), so every survivor of a stopped hub names the hub, whichever timed out first.
     */
    /** Whether rank {@code r} closed its communicator normally (its close(), not an abort or a crash), as far as this rank knows. */
    public boolean closedNormally(int r) {
        return r >= 0 && r < size && leftClosed.get(r) != 0;
    }

    public JcclException explain(JcclException e) {
        if (!(e instanceof PeerFailedException pf) || pf.peerRank() < 0 || pf.peerRank() >= size || stopped && verdict == null) {
            return e;
        }
        int seen = pf.peerRank();
        long start = System.nanoTime();
        long deadline = start + Math.min(TimeUnit.SECONDS.toNanos(2), timeoutNs / 2);
        while (verdict == null && mismatch == null && !stopped && !hubGone) {
            long now = System.nanoTime();
            long hubDue = silentHubVerdictDue(start);
            boolean hubSilent = hubDue != Long.MIN_VALUE && now - hubDue < 0;
            // A neighbour that left or exited explains the break, unless the hub went silent first: it
            // may have left because of the hub (a program that exits on the error, too).
            if (!hubSilent && (now - deadline >= 0 || left.get(seen) != 0 || peerKnownDead(seen))) {
                break;
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        Verdict v = verdict;
        if (v != null && (v.kind() == ControlWire.KIND_MISMATCH || v.culprit() != seen)) {
            String msg = e.getMessage() + "; the cause: " + v.message();
            return switch (v.kind()) {
                case ControlWire.KIND_TIMEOUT -> new JcclTimeoutException(msg, e);
                case ControlWire.KIND_MISMATCH -> new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, msg, e);
                default -> new PeerFailedException(v.culprit(), msg, e);
            };
        }
        String m = mismatch;
        if (m != null) {
            return new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, e.getMessage() + "; the cause: " + m, e);
        }
        String why = leftReason.get(seen);
        if (v == null && why != null) {
            return new PeerFailedException(seen, e.getMessage() + "; " + describe(seen) + " " + why, e);
        }
        return e;
    }

    /**
     * When this rank's own timer will name a silent hub, if the hub has missed its heartbeats: a
     * neighbour that closed its link meanwhile most likely timed out on the same hub a little
     * earlier (the hub's last heartbeats to the ranks are up to a quarter of the timeout apart, and
     * timeouts may differ per rank), and a stopped hub cannot relay why it left. Waiting for this
     * rank's own verdict then names the stopped rank rather than the neighbour. At most the timeout
     * from {@code start}; {@code Long.MIN_VALUE} when the hub is heard or this rank is the hub.
     */
    private long silentHubVerdictDue(long start) {
        if (rank == 0) {
            return Long.MIN_VALUE;
        }
        long heardAt = hubHeardAt;
        long now = System.nanoTime();
        if (now - heardAt <= heartbeatNs + graceNs) {
            return Long.MIN_VALUE;
        }
        long due = heardAt + timeoutNs + graceNs + 2 * TimeUnit.MILLISECONDS.toNanos(tickMs);
        return due - (start + timeoutNs) > 0 ? start + timeoutNs : due;
    }

    /** Hub after its close(): stops once no rank has the communicator open any more, or when the linger ends. */
    private void endLinger(long now) {
        if (!lingering || stopped) {
            return;
        }
        List<Integer> open = new ArrayList<>();
        for (int r = 1; r < size; r++) {
            if (conns[r].state == ConnState.OPEN) {
                open.add(r);
            }
        }
        if (open.isEmpty()) {
            Log.trace(Log.Subsys.NET, rank, "comm " + p.idShort() + ": every rank closed; the control hub stops");
            shutdown();
        } else if (now - lingerUntil >= 0) {
            Log.info(Log.Subsys.NET, rank, "comm " + p.idShort() + ": rank 0 closed its communicator "
                    + TimeUnit.NANOSECONDS.toSeconds(lingerNs) + " s ago (" + Settings.CONTROL_LINGER.name() + "); ranks " + open
                    + " still have it open and are no longer supervised");
            broadcast(bye(p.recorder().lastFinished()), null);
            shutdown();
        }
    }

    private boolean peerKnownDead(int r) {
        PeerInfo pi = peers[r];
        return pi.hostHash().equals(peers[rank].hostHash()) && ProcessHandle.of(pi.pid()).map(h -> !h.isAlive()).orElse(true);
    }

    /**
     * An exception of the same kind as {@code cause} (peer failed, timeout) with {@code message}, or
     * null for other kinds: every pending and later operation of a communicator aborted by a peer's
     * failure fails with that peer's exception type, naming itself.
     */
    public static JcclException sameKind(JcclException cause, String message) {
        JcclException e;
        if (cause instanceof PeerFailedException pf) {
            e = new PeerFailedException(pf.peerRank(), message, cause);
        } else if (cause instanceof JcclTimeoutException) {
            e = new JcclTimeoutException(message, cause);
        } else if (cause.code() == ErrorCode.MISMATCH) {
            e = new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, message, cause);
        } else {
            return null;
        }
        return e.at(cause.rank(), cause.peer(), cause.operation(), cause.sequence());
    }

    // ------------------------------------------------------------------------------------------ the loop

    private void runAndWait(Runnable r) {
        if (Thread.currentThread() == thread) {
            r.run();
            return;
        }
        CountDownLatch done = new CountDownLatch(1);
        tasks.add(() -> {
            try {
                r.run();
            } finally {
                done.countDown();
            }
        });
        selector.wakeup();
        try {
            done.await(200, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void loop() {
        try {
            if (tls != null) {
                // Frames that arrived with the handshake's last TLS records are already in the channel: the selector will not
                // report them.
                for (Conn c : conns) {
                    if (c != null && !stopped) {
                        read(c);
                    }
                }
            }
            while (!stopped) {
                Runnable t;
                while ((t = tasks.poll()) != null) {
                    t.run();
                }
                if (stopped) {
                    break;
                }
                tick(System.nanoTime());
                if (stopped) {
                    break;
                }
                selector.select(tickMs);
                Iterator<SelectionKey> it = selector.selectedKeys().iterator();
                while (it.hasNext()) {
                    SelectionKey k = it.next();
                    it.remove();
                    if (!k.isValid()) {
                        continue;
                    }
                    if (k.attachment() instanceof Conn c) {
                        if (k.isReadable()) {
                            read(c);
                        }
                        if (k.isValid() && k.isWritable()) {
                            flush(c);
                        }
                    } else {
                        try {
                            if (k.attachment() instanceof StatusClient sc) {
                                statusRead(sc);
                            } else if (k.isAcceptable()) {
                                statusAccept();
                            }
                        } catch (IOException | RuntimeException e) {
                            // A status client's trouble never stops the control channel.
                            Log.warn(Log.Subsys.NET, rank, "comm " + p.idShort() + ": status request failed: " + e);
                        }
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            if (!stopped) {
                Log.warn(Log.Subsys.NET, rank, "comm " + p.idShort() + ": control thread failed: " + e);
            }
        } finally {
            Runnable t;
            while ((t = tasks.poll()) != null) {
                t.run();
            }
            shutdown();
        }
    }

    private void tick(long now) {
        if (lingering) {
            endLinger(now);
            if (stopped) {
                return;
            }
        }
        if (now - lastLoop > timeoutNs / 2) {
            // This thread was not scheduled for half the timeout (GC pause, overloaded host): whatever
            // silence it measured is its own, not the peers'.
            for (Conn c : conns) {
                if (c != null) {
                    heard(c, now);
                }
            }
        }
        lastLoop = now;
        for (Conn c : conns) {
            if (c == null) {
                continue;
            }
            if (c.state == ConnState.DEAD && c.eofAt != 0 && now - c.eofAt >= graceNs && verdict == null) {
                c.eofAt = 0;
                fault(c.peer, ControlWire.KIND_FAILED, describe(c.peer) + " exited or crashed: its control connection closed without a"
                        + " goodbye" + pidNote(c.peer), null, true);
                return;
            }
            if (c.state != ConnState.OPEN) {
                continue;
            }
            if (now - c.lastHeard > timeoutNs && verdict == null) {
                double s = (now - c.lastHeard) / 1e9;
                fault(c.peer, ControlWire.KIND_TIMEOUT, describe(c.peer) + " sent nothing on the control channel for "
                        + String.format(java.util.Locale.ROOT, "%.1f", s) + " s (" + Settings.PEER_TIMEOUT.name() + " "
                        + Duration.ofNanos(timeoutNs).toMillis() / 1000.0 + " s): it is stopped (SIGSTOP, a debugger), hung outside"
                        + " the JVM, or cut off by the network", null, true);
                return;
            }
            if (now - c.lastSent >= heartbeatNs) {
                send(c, ControlWire.seal(ControlWire.frame(ControlWire.HEARTBEAT, 0)));
            }
        }
        // The stall watchdog.
        FlightRecorder.Entry cur = p.recorder().currentStamped(now);
        if (cur != null && !hubGone && verdict == null && cur.elapsedMs(now) * 1_000_000L >= stallWarnNs
                && cur.seq() != requestedSeq && cur.seq() != reportedSeq) {
            requestedSeq = cur.seq();
            request(ControlWire.PURPOSE_STALL);
        }
        if (rank == 0 && collectStates != null && now - collectDeadline >= 0) {
            finishCollection();
        }
        for (Iterator<StatusClient> it = statusClients.iterator(); it.hasNext(); ) {
            StatusClient sc = it.next();
            if (now - sc.deadline >= 0) {
                it.remove();
                if (sc.authenticated) {
                    answerStatus(sc, null, null);
                } else {
                    closeQuietly(sc.ch);
                    Log.warn(Log.Subsys.NET, rank, "comm " + p.idShort() + ": status connection from " + sc.from
                            + " dropped: no request within 2 s");
                }
            }
        }
    }

    private String pidNote(int r) {
        PeerInfo pi = peers[r];
        if (!pi.hostHash().equals(peers[rank].hostHash())) {
            return "";
        }
        return ProcessHandle.of(pi.pid()).map(h -> h.isAlive() ? " (pid " + pi.pid() + " is still running)" : "")
                .orElse(" (pid " + pi.pid() + " no longer exists)");
    }

    /** "rank 3 (host b, pid 881)". */
    String describe(int r) {
        PeerInfo pi = peers[r];
        return "rank " + r + " (host " + pi.host() + ", pid " + pi.pid() + ")";
    }

    // ------------------------------------------------------------------------------------------ faults

    /**
     * Records the job's fault (first one wins), tells the others (the hub: every rank but
     * {@code from}; a rank: the hub), aborts this communicator and stops.
     */
    private void fault(int culprit, int kind, String message, Conn from, boolean tellOthers) {
        fault(culprit, kind, message, from, tellOthers, -1);
    }

    /**
     * {@link #fault}; {@code index}: for a mismatch, the collective call it is in (-1: unknown). A rank
     * that has not started that call yet is not aborted now, so that the calls before it, which can
     * still complete, do: that call fails when it starts ({@link Host#doomedAt}).
     */
    private void fault(int culprit, int kind, String message, Conn from, boolean tellOthers, long index) {
        if (verdict != null) {
            return;
        }
        JcclException ex = switch (kind) {
            case ControlWire.KIND_TIMEOUT -> new JcclTimeoutException(message);
            case ControlWire.KIND_MISMATCH -> new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, message);
            default -> new PeerFailedException(culprit, message, null);
        };
        verdict = new Verdict(culprit, kind, message, ex);
        broadcast(faultFrame(culprit, kind, message, index), from);
        Log.warn(Log.Subsys.NET, rank, "comm " + p.idShort() + ": " + message);
        if (kind == ControlWire.KIND_MISMATCH && index >= 0 && (tellOthers || from != null) && !lingering) {
            long started = p.host().callsStarted();
            if (started >= 0 && started <= index) {
                p.host().doomedAt(index, message);
                shutdown();
                return;
            }
        }
        if ((tellOthers || from != null) && !lingering) {
            // Abort on another thread: abort() may wait for the operation thread, the notices must not.
            Thread t = new Thread(() -> p.host().fail(ex), "jccl-ctl-fail-" + p.idShort() + "-r" + rank);
            t.setDaemon(true);
            t.start();
        }
        shutdown();
    }

    private static ByteBuffer faultFrame(int culprit, int kind, String message) {
        return faultFrame(culprit, kind, message, -1);
    }

    /** A FAULT; {@code index}: for a mismatch found (kind 4), the collective call it was found in, else -1. */
    private static ByteBuffer faultFrame(int culprit, int kind, String message, long index) {
        ByteBuffer f = ControlWire.frame(ControlWire.FAULT, 4 + 1 + ControlWire.stringBytes(message) + 8);
        f.putInt(culprit).put((byte) kind);
        ControlWire.putString(f, message);
        f.putLong(index);
        return ControlWire.seal(f);
    }

    /**
     * Rank {@code r} closed or aborted its communicator: remember why; the hub tells every other rank
     * (so that a rank whose link to it closes can say so, see {@link #explain}).
     */
    private void left(int r, int how, String why) {
        left.set(r, 1);
        leftReason.set(r, why);
        if (how == ControlWire.HOW_CLOSED) {
            leftClosed.set(r, 1);
        }
        if (r == 0 && rank != 0 && !hubGone) {
            hubGone = true;
            // This rank still has the communicator open (its close() stops this thread first): say what that costs.
            FlightRecorder.Entry cur = p.recorder().current();
            String line = "comm " + p.idShort() + ": " + describe(0) + ", the control hub, " + why + " while this rank still has it open"
                    + (cur != null ? " (it waits in " + ControlWire.collName(cur.name()) + " #" + cur.seq() + ")" : "")
                    + ": heartbeats, failure notices and stall reports of this communicator are off from here; jccl status answers"
                    + " with this rank's own view";
            if (cur != null) {
                Log.warn(Log.Subsys.NET, rank, line);
            } else {
                Log.info(Log.Subsys.NET, rank, line);
            }
        }
        if (rank == 0) {
            ByteBuffer f = ControlWire.frame(ControlWire.LEFT, 4 + 1 + ControlWire.stringBytes(why));
            f.putInt(r).put((byte) how);
            ControlWire.putString(f, why);
            broadcast(ControlWire.seal(f), conns[r]);
            if (lingering) {
                endLinger(System.nanoTime()); // the last rank closing ends the hub's supervision at once
            }
        }
    }

    private ByteBuffer gone(String reason) {
        ByteBuffer f = ControlWire.frame(ControlWire.GONE, ControlWire.stringBytes(reason));
        ControlWire.putString(f, reason);
        return ControlWire.seal(f);
    }

    private ByteBuffer bye(long lastFinished) {
        return ControlWire.seal(ControlWire.frame(ControlWire.BYE, 8).putLong(lastFinished));
    }

    /** Sends a copy of {@code frame} on every open connection except {@code except}. */
    private void broadcast(ByteBuffer frame, Conn except) {
        for (Conn c : conns) {
            if (c != null && c != except && c.state == ConnState.OPEN) {
                send(c, frame.duplicate());
            }
        }
    }

    /** Stops: writes what is queued (best effort, bounded), closes every channel, removes the status file. */
    private void shutdown() {
        if (stopped && !LIVE.contains(this)) {
            return;
        }
        stopped = true;
        LIVE.remove(this);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100);
        for (Conn c : conns) {
            if (c == null) {
                continue;
            }
            while (!c.out.isEmpty() && c.ch.isOpen() && System.nanoTime() < deadline) {
                try {
                    if (c.w.write(c.out.peek()) == 0) {
                        Thread.onSpinWait();
                    }
                    if (!c.out.peek().hasRemaining()) {
                        c.out.poll();
                    }
                } catch (IOException | RuntimeException e) {
                    break;
                }
            }
            try {
                // TLS: the records of the last frames may still wait in the channel.
                while (c.ch.isOpen() && !c.w.flush() && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
            } catch (IOException | RuntimeException e) {
                // closing either way
            }
            closeQuietly(c.ch);
        }
        for (StatusClient sc : statusClients) {
            closeQuietly(sc.ch);
        }
        statusClients.clear();
        if (statusServer != null) {
            closeQuietly(statusServer);
        }
        if (statusFile != null) {
            try {
                java.nio.file.Files.deleteIfExists(statusFile);
            } catch (IOException ignored) {
                // a stale status file names a dead pid; jccl status skips it
            }
        }
        try {
            selector.close();
        } catch (IOException ignored) {
            // closing
        }
    }

    /** At JVM exit: a rank inside an operation is failing (FAULT naming itself), an idle one says goodbye. */
    private static void atExit() {
        // First every communicator settles its ring confirmations (their peers may be exiting too, and need them).
        List<JcclException> mismatches = new ArrayList<>();
        for (ControlPlane cp : LIVE) {
            if (!cp.stopped) {
                JcclException m = cp.p.host().atExit();
                if (m != null) {
                    mismatches.add(m);
                }
            }
        }
        for (ControlPlane cp : LIVE) {
            FlightRecorder.Entry cur = cp.p.recorder().current();
            cp.runAndWait(() -> {
                if (cp.stopped) {
                    return;
                }
                if (cur != null) {
                    cp.fault(cp.rank, ControlWire.KIND_FAILED, cp.describe(cp.rank) + " exited during " + ControlWire.collName(cur.name())
                            + " #" + cur.seq(), null, false);
                } else {
                    cp.broadcast(cp.bye(cp.p.recorder().lastFinished()), null);
                    cp.shutdown();
                }
            });
        }
        if (!mismatches.isEmpty()) {
            // Calls of this rank returned (their own results right) before the mismatch showed, and the program
            // did not close() its communicator: an exit status of 0 would hide it.
            for (JcclException m : mismatches) {
                System.err.println("jccl: exiting with status 1: " + m.getMessage());
            }
            System.err.flush();
            Runtime.getRuntime().halt(1);
        }
    }

    // ------------------------------------------------------------------------------------------ I/O

    private void send(Conn c, ByteBuffer frame) {
        if (c.state != ConnState.OPEN || !c.ch.isOpen()) {
            return;
        }
        c.lastSent = System.nanoTime();
        if (c.out.isEmpty()) {
            try {
                c.w.write(frame);
                // Done when the frame is written and (TLS) no record of it waits in the channel.
                if (!frame.hasRemaining() && c.w.flush()) {
                    return;
                }
            } catch (IOException | JcclException e) {
                lost(c);
                return;
            }
        }
        c.out.add(frame);
        c.outBytes += frame.remaining();
        if (c.outBytes > MAX_OUT_BYTES) {
            // The peer reads nothing: treat it as silent rather than queue without bound.
            heard(c, Math.min(c.lastHeard, System.nanoTime() - timeoutNs - 1));
            return;
        }
        if (c.key != null && c.key.isValid()) {
            c.key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
        }
    }

    private void flush(Conn c) {
        try {
            while (!c.out.isEmpty()) {
                ByteBuffer b = c.out.peek();
                int before = b.remaining();
                c.w.write(b);
                c.outBytes -= before - b.remaining();
                if (b.hasRemaining()) {
                    return;
                }
                c.out.poll();
            }
            if (!c.w.flush()) {
                return; // TLS records still wait for the socket: stay interested in writing
            }
            c.key.interestOps(SelectionKey.OP_READ);
        } catch (IOException | JcclException e) {
            lost(c);
        }
    }

    private void read(Conn c) {
        try {
            while (true) {
                if (c.payload == null) {
                    int n = c.w.read(c.header);
                    if (n < 0) {
                        lost(c);
                        return;
                    }
                    if (c.header.hasRemaining()) {
                        if (n == 0) {
                            return;
                        }
                        continue; // read until nothing comes: TLS may hold more records than the socket reports
                    }
                    int len = ControlWire.payloadLength(c.header, describe(c.peer));
                    c.payload = ByteBuffer.allocate(len);
                }
                if (c.payload.hasRemaining()) {
                    int n = c.w.read(c.payload);
                    if (n < 0) {
                        lost(c);
                        return;
                    }
                    if (c.payload.hasRemaining()) {
                        if (n == 0) {
                            return;
                        }
                        continue;
                    }
                }
                int type = c.header.get(1) & 0xFF;
                ByteBuffer body = c.payload.flip();
                c.header.clear();
                c.payload = null;
                heard(c, System.nanoTime());
                handle(c, type, body);
                if (stopped || c.state != ConnState.OPEN) {
                    return;
                }
            }
        } catch (IOException e) {
            lost(c);
        } catch (JcclException | java.nio.BufferUnderflowException e) {
            // An authenticated peer sent a frame that breaks the format: a fault of that peer.
            fault(c.peer, ControlWire.KIND_FAILED, describe(c.peer) + " sent a malformed control frame (" + e.getMessage()
                    + "); connection dropped", null, true);
        }
    }

    /** The connection closed or broke: a goodbye before it makes it harmless, else a failure after the grace period. */
    private void lost(Conn c) {
        closeQuietly(c.ch);
        if (c.state == ConnState.OPEN) {
            c.state = ConnState.DEAD;
            c.eofAt = System.nanoTime();
        }
        if (c.peer == 0 && rank != 0 && c.state != ConnState.DEAD) {
            hubGone = true;
        }
    }

    private void handle(Conn c, int type, ByteBuffer b) {
        switch (type) {
            case ControlWire.HEARTBEAT -> { }
            case ControlWire.BYE -> {
                c.state = ConnState.CLOSED;
                closeQuietly(c.ch);
                left(c.peer, ControlWire.HOW_CLOSED, "closed its communicator");
            }
            case ControlWire.GONE -> {
                String why = ControlWire.getString(b);
                c.state = ConnState.ABORTED;
                closeQuietly(c.ch);
                Log.info(Log.Subsys.NET, rank, "comm " + p.idShort() + ": " + describe(c.peer) + " aborted its communicator: " + why);
                left(c.peer, ControlWire.HOW_ABORTED, "aborted its communicator: " + why);
            }
            case ControlWire.LEFT -> {
                int r = b.getInt();
                int how = b.get();
                String why = ControlWire.getString(b);
                if (r < 1 || r >= size || r == rank || (how != ControlWire.HOW_CLOSED && how != ControlWire.HOW_ABORTED)) {
                    throw new JcclException(ErrorCode.PROTOCOL, "LEFT names rank " + r + " how " + how);
                }
                left.set(r, 1);
                leftReason.set(r, why);
                if (how == ControlWire.HOW_CLOSED) {
                    leftClosed.set(r, 1);
                }
            }
            case ControlWire.FAULT -> {
                int culprit = b.getInt();
                int kind = b.get();
                String msg = ControlWire.getString(b);
                long index = b.getLong();
                if (culprit < 0 || culprit >= size || kind < ControlWire.KIND_FAILED || kind > ControlWire.KIND_MISMATCH_FOUND) {
                    throw new JcclException(ErrorCode.PROTOCOL, "FAULT names rank " + culprit + " kind " + kind);
                }
                if (kind == ControlWire.KIND_MISMATCH_FOUND) {
                    // A notice, not a verdict: the culprit found mismatched calls and left; its report explains the
                    // failures that follow (explain). The hub relays it; this rank goes on.
                    if (mismatch == null) {
                        mismatch = msg;
                        mismatchIndex = index;
                    }
                    if (c.peer == culprit) {
                        c.state = ConnState.ABORTED;
                        closeQuietly(c.ch);
                    }
                    Log.info(Log.Subsys.NET, rank, "comm " + p.idShort() + ": " + msg);
                    if (rank == 0) {
                        broadcast(faultFrame(culprit, kind, msg, index), c); // before LEFT: the report is there when the leave is
                    }
                    left(culprit, ControlWire.HOW_ABORTED, "found mismatched collective calls and aborted its communicator");
                    mismatchFoundAt(index, msg);
                    break;
                }
                if (c.peer != 0 || rank == 0) {
                    c.state = ConnState.ABORTED; // the sender stops after a fault
                }
                fault(culprit, kind, msg, c, true, index);
            }
            case ControlWire.GUARD_ASK -> {
                long index = b.getLong();
                long guard = b.getLong();
                if (rank == 0 && index >= 0) {
                    onGuard(c.peer, index, guard, true);
                }
            }
            case ControlWire.GUARD_QUERY -> {
                long index = b.getLong();
                ByteBuffer f = ControlWire.frame(ControlWire.GUARD_ANSWER, 16);
                f.putLong(index).putLong(index < 0 ? GUARD_UNKNOWN : p.host().guardAt(index));
                send(c, ControlWire.seal(f));
            }
            case ControlWire.GUARD_ANSWER -> {
                long index = b.getLong();
                long answer = b.getLong();
                if (rank == 0) {
                    onGuard(c.peer, index, answer, false);
                }
            }
            case ControlWire.REQUEST -> {
                b.getLong();
                int purpose = b.get();
                if (rank == 0) {
                    if (purpose == ControlWire.PURPOSE_STALL && System.nanoTime() - lastStallReport < collectNs) {
                        break; // the report that answers it went to every rank a moment ago
                    }
                    startCollection(purpose == ControlWire.PURPOSE_STALL, c, false);
                }
            }
            case ControlWire.COLLECT -> {
                long id = b.getLong();
                RankState s = RankState.of(rank, p.recorder(), p.counters());
                ByteBuffer f = ControlWire.frame(ControlWire.STATE, 8 + ControlWire.stateBytes(s));
                f.putLong(id);
                s.write(f);
                send(c, ControlWire.seal(f));
            }
            case ControlWire.STATE -> {
                long id = b.getLong();
                RankState s = RankState.read(b);
                if (rank == 0 && collectStates != null && id == collectId && s.rank() == c.peer) {
                    collectStates[c.peer] = s;
                    collectHow[c.peer] = ControlWire.HOW_ANSWERED;
                    if (Arrays.stream(collectHow).noneMatch(h -> h == ControlWire.HOW_SILENT)) {
                        finishCollection();
                    }
                }
            }
            case ControlWire.REPORT -> {
                b.getLong();
                int purpose = b.get();
                int n = b.getInt();
                if (n != size) {
                    throw new JcclException(ErrorCode.PROTOCOL, "REPORT of " + n + " ranks, the communicator has " + size);
                }
                RankState[] states = new RankState[n];
                int[] how = new int[n];
                for (int r = 0; r < n; r++) {
                    how[r] = b.get();
                    if (how[r] == ControlWire.HOW_ANSWERED) {
                        states[r] = RankState.read(b);
                    }
                }
                onReport(purpose == ControlWire.PURPOSE_STALL, states, how);
            }
            default -> throw new JcclException(ErrorCode.PROTOCOL, "unexpected control frame type " + type);
        }
    }

    // ------------------------------------------------------------------------------------------ stall reports

    /** Asks for every rank's state: the hub collects itself, a rank asks the hub. */
    private void request(int purpose) {
        if (rank == 0) {
            startCollection(purpose == ControlWire.PURPOSE_STALL, null, true);
        } else if (conns[0].state == ConnState.OPEN) {
            ByteBuffer f = ControlWire.frame(ControlWire.REQUEST, 9);
            f.putLong(nextId++).put((byte) purpose);
            send(conns[0], ControlWire.seal(f));
        }
    }

    private void startCollection(boolean forStall, Conn requester, boolean self) {
        collectForStall |= forStall;
        if (requester != null && !collectRequesters.contains(requester)) {
            collectRequesters.add(requester);
        }
        collectForSelf |= self;
        if (collectStates != null) {
            return; // joins the collection in progress
        }
        collectId = nextId++;
        collectDeadline = System.nanoTime() + collectNs;
        collectStates = new RankState[size];
        collectHow = new int[size];
        Arrays.fill(collectHow, ControlWire.HOW_SILENT);
        collectStates[0] = RankState.of(0, p.recorder(), p.counters());
        collectHow[0] = lingering ? ControlWire.HOW_CLOSED : ControlWire.HOW_ANSWERED;
        ByteBuffer f = ControlWire.seal(ControlWire.frame(ControlWire.COLLECT, 8).putLong(collectId));
        for (int r = 1; r < size; r++) {
            Conn c = conns[r];
            switch (c.state) {
                case OPEN -> send(c, f.duplicate());
                case CLOSED -> collectHow[r] = ControlWire.HOW_CLOSED;
                case ABORTED -> collectHow[r] = ControlWire.HOW_ABORTED;
                case DEAD -> { }
            }
        }
        if (Arrays.stream(collectHow).noneMatch(h -> h == ControlWire.HOW_SILENT)) {
            finishCollection();
        }
    }

    private void finishCollection() {
        RankState[] states = collectStates;
        int[] how = collectHow;
        boolean forStall = collectForStall;
        List<Conn> requesters = new ArrayList<>(collectRequesters);
        boolean self = collectForSelf;
        collectStates = null;
        collectHow = null;
        collectForStall = false;
        collectForSelf = false;
        collectRequesters.clear();
        int bytes = 8 + 1 + 4;
        for (int r = 0; r < size; r++) {
            bytes += 1 + (how[r] == ControlWire.HOW_ANSWERED ? ControlWire.stateBytes(states[r]) : 0);
        }
        ByteBuffer f = ControlWire.frame(ControlWire.REPORT, bytes);
        f.putLong(collectId).put((byte) (forStall ? ControlWire.PURPOSE_STALL : ControlWire.PURPOSE_STATUS)).putInt(size);
        for (int r = 0; r < size; r++) {
            f.put((byte) how[r]);
            if (how[r] == ControlWire.HOW_ANSWERED) {
                states[r].write(f);
            }
        }
        ControlWire.seal(f);
        if (forStall) {
            lastStallReport = System.nanoTime();
            broadcast(f, null);
        } else {
            for (Conn c : requesters) {
                send(c, f.duplicate());
            }
        }
        if (forStall || self) {
            onReport(forStall, states, how);
        }
    }

    private void onReport(boolean forStall, RankState[] states, int[] how) {
        for (StatusClient sc : new ArrayList<>(statusClients)) {
            if (sc.authenticated) {
                statusClients.remove(sc);
                answerStatus(sc, states, how);
            }
        }
        if (!forStall) {
            return;
        }
        long now = System.nanoTime();
        FlightRecorder.Entry cur = p.recorder().current();
        String line = null;
        if (cur != null && cur.seq() != reportedSeq) {
            reportedSeq = cur.seq();
            line = StallReport.line(cur.name(), cur.seq(), cur.elapsedMs(now), states, how, peers);
            lastStallLine = line;
            Log.warn(Log.Subsys.COLL, rank, "comm " + p.idShort() + " " + line);
        }
        if (line == null && cur != null && cur.seq() == reportedSeq) {
            line = lastStallLine;
        }
        dump(line != null ? line : "stall reported by another rank", states, how);
    }

    /** Writes this rank's flight recorder to JCCL_DUMP_DIR (format: docs/ARCHITECTURE.md, "Hang attribution"). */
    private void dump(String why, RankState[] states, int[] how) {
        Map<String, Object> m = report(states, how);
        m.put("reason", why);
        List<Object> ops = new ArrayList<>();
        for (FlightRecorder.Entry e : p.recorder().snapshot()) {
            ops.add(p.recorder().toMap(e));
        }
        m.put("operations", ops);
        java.nio.file.Path dir = dumpDir.path();
        java.nio.file.Path file = dir.resolve("jccl-flight-" + p.idShort() + "-r" + rank + "-" + peers[rank].pid() + ".json");
        try {
            ensureDir(dir);
            java.nio.file.Path tmp = dir.resolve(file.getFileName() + ".tmp");
            java.nio.file.Files.writeString(tmp, org.jccl.internal.util.Json.write(m) + "\n");
            java.nio.file.Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                    java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            Log.warn(Log.Subsys.COLL, rank, "comm " + p.idShort() + " flight recorder dumped to " + file);
        } catch (IOException | RuntimeException e) {
            Log.warn(Log.Subsys.COLL, rank, "comm " + p.idShort() + " cannot dump the flight recorder to " + file + ": " + e
                    + " (set " + Settings.DUMP_DIR.name() + " to a writable directory)");
        }
    }

    /** The report common to dumps and status answers. */
    private Map<String, Object> report(RankState[] states, int[] how) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", "jccl-flight-recorder");
        m.put("version", 1);
        m.put("comm", p.idShort());
        m.put("rank", rank);
        m.put("size", size);
        m.put("host", peers[rank].host());
        m.put("pid", peers[rank].pid());
        m.put("time_ms", System.currentTimeMillis());
        m.put("stall_warn_ms", TimeUnit.NANOSECONDS.toMillis(stallWarnNs));
        m.put("peer_timeout_ms", TimeUnit.NANOSECONDS.toMillis(timeoutNs));
        List<Object> rs = new ArrayList<>();
        for (int r = 0; r < size; r++) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("rank", r);
            e.put("host", peers[r].host());
            e.put("pid", peers[r].pid());
            int h = how == null ? (r == rank ? ControlWire.HOW_ANSWERED : ControlWire.HOW_SILENT) : how[r];
            e.put("answer", switch (h) {
                case ControlWire.HOW_ANSWERED -> "answered";
                case ControlWire.HOW_CLOSED -> "closed";
                case ControlWire.HOW_ABORTED -> "aborted";
                default -> "no answer";
            });
            RankState s = states == null ? (r == rank ? RankState.of(rank, p.recorder(), p.counters()) : null) : states[r];
            if (s != null) {
                e.putAll(s.toMap());
            }
            rs.add(e);
        }
        m.put("ranks", rs);
        m.put("counters", p.counters() == null ? Map.of() : p.counters().toMap());
        return m;
    }

    // ------------------------------------------------------------------------------------------ jccl status

    private java.nio.file.Path writeStatusFile(int port) throws IOException {
        java.nio.file.Path dir = dumpDir.path();
        ensureDir(dir);
        java.nio.file.Path f = dir.resolve("jccl-status-" + p.idShort() + "-r" + rank + "-" + peers[rank].pid());
        String text = "jccl-status 1\nport=" + port + "\ntoken=" + statusToken + "\ncomm=" + p.idShort() + "\nrank=" + rank + "\nsize="
                + size + "\npid=" + peers[rank].pid() + "\nhost=" + peers[rank].host() + "\n";
        java.nio.file.Path tmp = dir.resolve(f.getFileName() + ".tmp");
        java.nio.file.Files.deleteIfExists(tmp);
        try {
            java.nio.file.Files.createFile(tmp, java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                    java.nio.file.attribute.PosixFilePermissions.fromString("rw-------")));
        } catch (UnsupportedOperationException e) {
            java.nio.file.Files.createFile(tmp);
        }
        java.nio.file.Files.writeString(tmp, text);
        java.nio.file.Files.move(tmp, f, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        return f;
    }

    private static void ensureDir(java.nio.file.Path dir) throws IOException {
        if (java.nio.file.Files.isDirectory(dir)) {
            return;
        }
        try {
            java.nio.file.Files.createDirectories(dir, java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                    java.nio.file.attribute.PosixFilePermissions.fromString("rwx------")));
        } catch (UnsupportedOperationException e) {
            java.nio.file.Files.createDirectories(dir);
        }
    }

    private void statusAccept() throws IOException {
        SocketChannel ch;
        while ((ch = statusServer.accept()) != null) {
            if (statusClients.size() >= 16) {
                Log.warn(Log.Subsys.NET, rank, "comm " + p.idShort() + ": status connection from " + ch.socket().getRemoteSocketAddress()
                        + " dropped: 16 status requests are open already");
                closeQuietly(ch);
                continue;
            }
            ch.configureBlocking(false);
            StatusClient sc = new StatusClient(ch);
            sc.deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            statusClients.add(sc);
            ch.register(selector, SelectionKey.OP_READ, sc);
        }
    }

    /** Reads "STATUS &lt;token&gt;\n"; a wrong token or an overlong line closes the connection. */
    private void statusRead(StatusClient sc) {
        try {
            int got = sc.ch.read(sc.in);
            if (got < 0) {
                if (sc.authenticated) {
                    statusClients.remove(sc);
                    closeQuietly(sc.ch);
                } else {
                    dropStatus(sc, "closed before a request (a port scan?)");
                }
                return;
            }
            if (!sc.in.hasRemaining() && indexOfNewline(sc.in) < 0) {
                dropStatus(sc, "no request line in " + sc.in.capacity() + " bytes (not a jccl status client)");
                return;
            }
            int nl = indexOfNewline(sc.in);
            if (nl < 0 || sc.authenticated) {
                return;
            }
            String line = new String(sc.in.array(), 0, nl, java.nio.charset.StandardCharsets.US_ASCII).trim();
            if (!java.security.MessageDigest.isEqual(line.getBytes(java.nio.charset.StandardCharsets.US_ASCII),
                    ("STATUS " + statusToken).getBytes(java.nio.charset.StandardCharsets.US_ASCII))) {
                dropStatus(sc, line.startsWith("STATUS ") ? "wrong token" : "not a status request (not a jccl status client)");
                return;
            }
            sc.authenticated = true;
            sc.deadline = System.nanoTime() + collectNs + TimeUnit.SECONDS.toNanos(1);
            if (hubGone || verdict != null || (rank != 0 && conns[0].state != ConnState.OPEN)) {
                statusClients.remove(sc);
                answerStatus(sc, null, null);
            } else {
                request(ControlWire.PURPOSE_STATUS);
            }
        } catch (IOException e) {
            if (sc.authenticated) {
                statusClients.remove(sc);
                closeQuietly(sc.ch);
            } else {
                dropStatus(sc, e.toString());
            }
        }
    }

    private static int indexOfNewline(ByteBuffer b) {
        for (int i = 0; i < b.position(); i++) {
            if (b.get(i) == '\n') {
                return i;
            }
        }
        return -1;
    }

    /** Answers a status client with the report (or this rank's own view when no report came) and closes it. */
    private void answerStatus(StatusClient sc, RankState[] states, int[] how) {
        Map<String, Object> m = report(states, how);
        m.put("format", "jccl-status");
        long now = System.nanoTime();
        boolean stalled = false;
        RankState worst = null;
        List<?> ranks = (List<?>) m.get("ranks");
        for (int r = 0; r < size; r++) {
            RankState s = states != null ? states[r] : (r == rank ? RankState.of(rank, p.recorder(), p.counters()) : null);
            if (s != null && s.busy() && (worst == null || s.curWaitMs() > worst.curWaitMs())) {
                worst = s;
            }
            Object a = ((Map<?, ?>) ranks.get(r)).get("answer");
            if ("no answer".equals(a) && states != null) {
                stalled = true;
            }
        }
        String line;
        if (verdict != null) {
            stalled = true;
            line = "failed: " + verdict.message();
        } else if (worst != null && worst.curWaitMs() * 1_000_000L >= stallWarnNs) {
            stalled = true;
            line = StallReport.line(worst.curName(), worst.curSeq(), worst.curWaitMs(),
                    states != null ? states : onlySelf(), how != null ? how : selfHow(), peers);
        } else if (states == null) {
            stalled = true;
            line = "no report: rank 0 did not answer (" + (hubGone ? "it left the communicator" : "it may be stopped") + ")";
        } else {
            line = stalled ? "some ranks did not answer" : "no operation has waited " + Settings.STALL_WARN.name() + " ("
                    + TimeUnit.NANOSECONDS.toMillis(stallWarnNs) / 1000.0 + " s)";
        }
        m.put("stalled", stalled);
        m.put("summary", line);
        m.put("last_stall_line", lastStallLine);
        byte[] text = (org.jccl.internal.util.Json.write(m) + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8);
        try {
            // The channel stays registered (non-blocking): a few tries on loopback, bounded, then give up.
            ByteBuffer b = ByteBuffer.wrap(text);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (b.hasRemaining() && System.nanoTime() < deadline) {
                if (sc.ch.write(b) == 0) {
                    Thread.sleep(1);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException | RuntimeException e) {
            Log.trace(Log.Subsys.NET, rank, "status client went away: " + e);
        } finally {
            closeQuietly(sc.ch);
        }
    }

    private RankState[] onlySelf() {
        RankState[] s = new RankState[size];
        s[rank] = RankState.of(rank, p.recorder(), p.counters());
        return s;
    }

    private int[] selfHow() {
        int[] h = new int[size];
        Arrays.fill(h, ControlWire.HOW_SILENT);
        h[rank] = ControlWire.HOW_ANSWERED;
        return h;
    }

    private static void closeQuietly(java.io.Closeable c) {
        try {
            c.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }
}
