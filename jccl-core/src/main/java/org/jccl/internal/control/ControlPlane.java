package org.jccl.internal.control;

import java.io.IOException;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.PeerFailedException;
import org.jccl.internal.control.ControlChannel.Conn;
import org.jccl.internal.log.Log;
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
 *
 * <p><b>Parts.</b> This class is the facade the communicator uses; the work is done by
 * {@link ControlStar} (connecting the star), {@link ControlChannel} (the thread's I/O agent),
 * {@link FailureDetector} (heartbeat, timeout, grace and linger rules as pure logic),
 * {@link Supervisor} (verdicts, relays, frames), {@link StallCollector}, {@link FlightDumps},
 * {@link StatusEndpoint}, {@link GuardBackstop} and {@link ExitHook}.
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
    public record Params(byte[] commId, String idShort, int rank, int size, byte[] secret, ControlSettings settings, PeerInfo[] peers,
                         FlightRecorder recorder, Counters counters, Host host) {
    }

    static {
        ExitHook.install();
    }

    /**
     * Loaded with this class, not when the first connection is set up: a class file cannot be opened
     * once the process is out of file descriptors, and the error that says so must still be built.
     */
    private static final Object[] PRELOADED = {FailureDetector.Link.OPEN, FailureDetector.Cause.SILENT,
        FailureDetector.LingerEnd.GO_ON, FailureDetector.Suspect.class, ControlChannel.class, ControlChannel.Conn.class,
        ControlStar.class, StatusEndpoint.class, FlightDumps.class, StallCollector.class, GuardBackstop.class, Peers.class,
        Supervisor.class, Supervisor.Verdict.class, Supervisor.Events.class, ControlChannel.KeyHandler.class, ExitHook.class,
        WireChannel.Plain.class, Tls.class, org.jccl.internal.net.TlsChannel.class};

    private final Params p;
    private final int rank;
    private final int size;
    private final Peers peers;
    /** JCCL_CONTROL_LINGER: how long the hub supervises after its own close() while others still have the communicator open. */
    private final long lingerNs;
    private final FailureDetector detector;
    private final ControlChannel channel;
    private final Supervisor supervisor;

    // ------------------------------------------------------------------------------------------ setup

    /** The hub's listening socket, bound where the data transports bind ({@code JCCL_SOCKET_IFNAME}); rank 0 only. */
    public static ServerSocketChannel listen(Config config) throws IOException {
        return ControlStar.listen(config);
    }

    /** The address published for a hub listener: ip bytes then a 16-bit port. */
    public static byte[] address(ServerSocketChannel s) throws IOException {
        return ControlStar.address(s);
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
        long createdAt = System.nanoTime();
        this.p = p;
        this.rank = p.rank();
        this.size = p.size();
        this.peers = new Peers(p.peers(), rank);
        ControlSettings settings = p.settings();
        long timeoutNs = settings.peerTimeoutNanos();
        long stallWarnNs = settings.stallWarnNanos();
        long collectNs = settings.collectNanos();
        this.lingerNs = settings.lingerNanos();
        this.detector = new FailureDetector(rank, size, timeoutNs, createdAt);
        FlightDumps dumps = new FlightDumps(p, peers, stallWarnNs, timeoutNs);
        Duration connectTimeout = settings.connectTimeout();
        Conn[] conns = new Conn[rank == 0 ? size : 1];
        Tls tls = settings.tls();
        this.channel = new ControlChannel(p.idShort(), rank, detector.tickMs(), conns);
        ControlStar star = new ControlStar(p, peers, tls, conns);
        Supervisor sup = null;
        try {
            star.connect(listener, connectTimeout);
            channel.attach();
            sup = new Supervisor(p, peers, conns, detector, channel, dumps, stallWarnNs, collectNs, lingerNs);
        } finally {
            if (sup == null) {
                for (Conn c : conns) {
                    if (c != null) {
                        ControlChannel.closeQuietly(c.ch);
                    }
                }
                channel.closeSelector();
            }
        }
        this.supervisor = sup;
        for (Conn c : conns) {
            if (c != null) {
                detector.connected(c.peer, c.connectedAt);
            }
        }
        ExitHook.add(supervisor);
        channel.start(supervisor.events(), tls != null);
        Log.trace(Log.Subsys.INIT, rank, "comm " + p.idShort() + " control channel up (" + (rank == 0 ? size - 1 + " ranks connected"
                : "connected to rank 0") + star.security() + "), peer timeout " + Duration.ofNanos(timeoutNs).toMillis()
                + " ms, stall warning after " + Duration.ofNanos(stallWarnNs).toMillis() + " ms, status file " + supervisor.statusFile());
    }

    // ------------------------------------------------------------------------------------------ API for the communicator

    /** The flight recorder dump and status files go here. */
    public static java.nio.file.Path dumpDir(Config config) {
        return ControlSettings.dumpDir(config);
    }

    /** The last stall line this rank logged, or null; for tests and status. */
    public String lastStallLine() {
        return supervisor.lastStallLine();
    }

    /**
     * Called when the communicator aborts (any thread, before it closes its data connections): tells
     * the hub which peer broke ({@link PeerFailedException} naming a peer), or that this rank leaves.
     * Waits up to 200 ms for the notice to be on the wire.
     */
    public void leaving(JcclException cause) {
        Supervisor.Verdict v = supervisor.verdict();
        if (channel.stopped() || (v != null && v.exception() == cause)) {
            return;
        }
        // The collective call the mismatch was found in: the last one this rank started (read here, on the failing thread).
        long started = p.host().callsStarted();
        long at = p.host().mismatchAt();
        long foundIn = at >= 0 ? at : started > 0 ? started - 1 : -1;
        channel.runAndWait(() -> supervisor.leaving(cause, foundIn));
    }

    /**
     * The mismatch guard's backstop (operation thread, while its call {@code index} has found nothing
     * to do for a second; again every second it goes on waiting): asks the hub to compare every
     * rank's guard word of collective call {@code index}. Calls that differ but deadlock without a
     * message between two ranks whose calls differ (different algorithms for different counts, a rank
     * with 0 elements, a rank that returned from a rooted call) are found this way: the hub asks every
     * rank for its word of that call (each remembers its last 64 or more, OpContext#historySize), and two words that differ
     * abort every rank with a MISMATCH naming who called what ({@link GuardBackstop}). Costs nothing until a wait lasts that long.
     */
    public void probeGuard(long index, long guard) {
        if (channel.stopped() || supervisor.verdict() != null || supervisor.hubGone()) {
            return;
        }
        channel.execute(() -> supervisor.probeGuard(index, guard));
    }

    /**
     * Normal close: says goodbye (the hub and ranks then stop supervising this rank) and stops. The
     * hub, while other ranks still have the communicator open, goes on supervising them (heartbeats,
     * failure notices, stall reports and status) until every one has closed or {@code
     * JCCL_CONTROL_LINGER} has passed, then says goodbye; this call does not wait for that.
     */
    public void close() {
        if (channel.stopped()) {
            return;
        }
        if (rank == 0 && size > 1 && lingerNs > 0) {
            channel.runAndWait(supervisor::closeAndLinger);
            return;
        }
        channel.runAndWait(supervisor::closeNow);
        channel.stop();
        channel.wakeup();
    }

    /** Whether rank {@code r} closed its communicator normally (its close(), not an abort or a crash), as far as this rank knows. */
    public boolean closedNormally(int r) {
        return r >= 0 && r < size && supervisor.closedNormally(r);
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
     * fires (at most T), so every survivor of a stopped hub names the hub, whichever timed out first
     * ({@link FailureDetector#silentHubVerdictDue}).
     */
    public JcclException explain(JcclException e) {
        if (!(e instanceof PeerFailedException pf) || pf.peerRank() < 0 || pf.peerRank() >= size
                || channel.stopped() && supervisor.verdict() == null) {
            return e;
        }
        int seen = pf.peerRank();
        long start = System.nanoTime();
        long deadline = start + Math.min(TimeUnit.SECONDS.toNanos(2), detector.timeoutNs() / 2);
        while (supervisor.verdict() == null && supervisor.mismatch() == null && !channel.stopped() && !supervisor.hubGone()) {
            long now = System.nanoTime();
            long hubDue = detector.silentHubVerdictDue(start, now);
            boolean hubSilent = hubDue != Long.MIN_VALUE && now - hubDue < 0;
            // A neighbour that left or exited explains the break, unless the hub went silent first: it
            // may have left because of the hub (a program that exits on the error, too).
            if (!hubSilent && (now - deadline >= 0 || supervisor.hasLeft(seen) || peers.knownDead(seen))) {
                break;
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        Supervisor.Verdict v = supervisor.verdict();
        if (v != null && (v.kind() == ControlWire.KIND_MISMATCH || v.culprit() != seen)) {
            String msg = e.getMessage() + "; the cause: " + v.message();
            return switch (v.kind()) {
                case ControlWire.KIND_TIMEOUT -> new JcclTimeoutException(msg, e);
                case ControlWire.KIND_MISMATCH -> new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, msg, e);
                default -> new PeerFailedException(v.culprit(), msg, e);
            };
        }
        String m = supervisor.mismatch();
        if (m != null) {
            return new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, e.getMessage() + "; the cause: " + m, e);
        }
        String why = supervisor.leftReason(seen);
        if (v == null && why != null) {
            return new PeerFailedException(seen, e.getMessage() + "; " + peers.describe(seen) + " " + why, e);
        }
        return e;
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
}
