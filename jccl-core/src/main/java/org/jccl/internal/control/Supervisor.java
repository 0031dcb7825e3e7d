package org.jccl.internal.control;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.PeerFailedException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.control.ControlChannel.Conn;
import org.jccl.internal.log.Log;

/**
 * The control thread's policy: it turns what the {@link FailureDetector} suspects and what the peers
 * say (BYE, GONE, FAULT, LEFT) into this rank's verdict and knowledge of who left and why, relays
 * them (the hub to every rank, a rank to the hub), aborts the communicator through its
 * {@link ControlPlane.Host}, ends the hub's linger, and hands the stall, status and guard frames to
 * their parts ({@link StallCollector}, {@link StatusEndpoint}, {@link GuardBackstop}). The frames
 * come from the {@link ControlChannel} agent, which this class answers through {@link #events()}.
 *
 * <p>Threading: the control thread, except the getters of what this rank knows ({@link #verdict()},
 * {@link #mismatch()}, {@link #hubGone()}, {@link #hasLeft}, {@link #leftReason}, {@link #closedNormally}),
 * which any thread may call; {@link ControlPlane} hands its requests over with the channel's tasks.
 */
final class Supervisor {

    /** A fault every rank learns: who, and the exception its communicator was aborted with. */
    record Verdict(int culprit, int kind, String message, JcclException exception) {
    }

    private final ControlPlane.Params p;
    private final int rank;
    private final int size;
    private final Peers peers;
    /** Index = peer rank at the hub; index 0 elsewhere (the hub). */
    private final Conn[] conns;
    private final FailureDetector detector;
    private final ControlChannel channel;
    /** JCCL_CONTROL_LINGER: how long the hub supervises after its own close() while others still have the communicator open. */
    private final long lingerNs;
    private final Events events = new Events();
    private final StatusEndpoint status;
    private final StallCollector collector;
    private final GuardBackstop backstop;

    private volatile Verdict verdict;
    /** The first report of mismatched collective calls this rank heard of (its own or a peer's), or null. */
    private volatile String mismatch;
    /** The collective call that report names (the finder's index of it), -1 when unknown. */
    private volatile long mismatchIndex = -1;
    /** Set when the hub has left (closed or aborted): no more supervision, reports or faults. */
    private volatile boolean hubGone;
    /** Ranks known to have closed or aborted their communicator (1), as far as this rank hears. */
    private final AtomicIntegerArray left;
    /** Why each rank in {@link #left} left ("closed its communicator", "aborted its communicator: ..."), as far as this rank hears. */
    private final AtomicReferenceArray<String> leftReason;
    /** Ranks that closed their communicator normally (LEFT with HOW_CLOSED), not aborted it. */
    private final AtomicIntegerArray leftClosed;

    /** Opens the status endpoint (its file in {@code dumps}' directory) on {@code channel}'s selector. */
    Supervisor(ControlPlane.Params p, Peers peers, Conn[] conns, FailureDetector detector, ControlChannel channel, FlightDumps dumps,
               long stallWarnNs, long collectNs, long lingerNs) throws IOException {
        this.p = p;
        this.rank = p.rank();
        this.size = p.size();
        this.peers = peers;
        this.conns = conns;
        this.detector = detector;
        this.channel = channel;
        this.lingerNs = lingerNs;
        this.left = new AtomicIntegerArray(size);
        this.leftReason = new AtomicReferenceArray<>(size);
        this.leftClosed = new AtomicIntegerArray(size);
        // The local status endpoint (jccl status): loopback, authenticated by a token in a file only this user can read.
        this.status = new StatusEndpoint(p, peers, channel, dumps, collectNs, stallWarnNs, events);
        this.collector = new StallCollector(p, peers, dumps, stallWarnNs, collectNs, events);
        this.backstop = new GuardBackstop(size, peers, events);
    }

    /** What the channel agent reports to. */
    ControlChannel.Handler events() {
        return events;
    }

    java.nio.file.Path statusFile() {
        return status.file();
    }

    // ------------------------------------------------------------------------------------------ what this rank knows (any thread)

    Verdict verdict() {
        return verdict;
    }

    String mismatch() {
        return mismatch;
    }

    boolean hubGone() {
        return hubGone;
    }

    boolean hasLeft(int r) {
        return left.get(r) != 0;
    }

    String leftReason(int r) {
        return leftReason.get(r);
    }

    boolean closedNormally(int r) {
        return leftClosed.get(r) != 0;
    }

    String lastStallLine() {
        return collector.lastStallLine();
    }

    // ------------------------------------------------------------------------------------------ requests (control thread)

    /** {@link ControlPlane#leaving}: {@code foundIn}, the collective call a mismatch was found in (read on the failing thread). */
    void leaving(JcclException cause, long foundIn) {
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
            broadcast(ControlWire.fault(rank, ControlWire.KIND_MISMATCH_FOUND, report, foundIn), null);
        } else if (cause.code() == ErrorCode.MISMATCH) {
            // An operation failed because of the reported mismatch: every rank aborts, with the report (or, one that
            // has not reached the mismatched call yet, fails that call when it starts).
            fault(rank, ControlWire.KIND_MISMATCH, describe(rank) + " reported: " + cause.getMessage(), null, false,
                    mismatchIndex >= 0 ? mismatchIndex : foundIn);
        } else {
            broadcast(ControlWire.gone(cause.getMessage()), null);
        }
        shutdown();
    }

    /** {@link ControlPlane#probeGuard}: the hub compares at once, a rank asks the hub. */
    void probeGuard(long index, long guard) {
        if (channel.stopped() || verdict != null || hubGone) {
            return;
        }
        if (rank == 0) {
            backstop.onGuard(0, index, guard, true);
        } else if (detector.open(0)) {
            send(conns[0], GuardBackstop.askFrame(index, guard));
        }
    }

    /** The hub's {@link ControlPlane#close} while other ranks may still have the communicator open: supervises until they close or the linger ends. */
    void closeAndLinger() {
        if (!channel.stopped() && !detector.lingering()) {
            detector.startLinger(System.nanoTime(), lingerNs);
            endLinger(System.nanoTime());
        }
    }

    /** {@link ControlPlane#close} otherwise: goodbye, and stop. */
    void closeNow() {
        broadcast(ControlWire.bye(p.recorder().lastFinished()), null);
        shutdown();
    }

    /** The JVM exits without close() ({@link ExitHook}), first step: settles what this rank owes its peers; a MISMATCH that shows, or null. */
    JcclException settleAtExit() {
        return channel.stopped() ? null : p.host().atExit();
    }

    /** The JVM exits without close(), second step: a rank inside an operation is failing (FAULT naming itself), an idle one says goodbye. */
    void leaveAtExit() {
        FlightRecorder.Entry cur = p.recorder().current();
        channel.runAndWait(() -> {
            if (channel.stopped()) {
                return;
            }
            if (cur != null) {
                fault(rank, ControlWire.KIND_FAILED, describe(rank) + " exited during " + ControlWire.collName(cur.name())
                        + " #" + cur.seq(), null, false);
            } else {
                broadcast(ControlWire.bye(p.recorder().lastFinished()), null);
                shutdown();
            }
        });
    }

    // ------------------------------------------------------------------------------------------ the tick

    /** The hub's linger, the failure detector (heartbeats, verdicts), the stall watchdog, status deadlines. */
    private void tick(long now) {
        if (detector.lingering()) {
            endLinger(now);
            if (channel.stopped()) {
                return;
            }
        }
        FailureDetector.Suspect s = detector.tick(now, r -> send(conn(r), ControlWire.seal(ControlWire.frame(ControlWire.HEARTBEAT, 0))));
        if (s != null) {
            if (s.cause() == FailureDetector.Cause.CLOSED_WITHOUT_GOODBYE) {
                fault(s.peer(), ControlWire.KIND_FAILED, describe(s.peer()) + " exited or crashed: its control connection closed without a"
                        + " goodbye" + peers.pidNote(s.peer()), null, true);
            } else {
                fault(s.peer(), ControlWire.KIND_TIMEOUT, describe(s.peer()) + " sent nothing on the control channel for "
                        + String.format(java.util.Locale.ROOT, "%.1f", s.silentNs() / 1e9) + " s (" + Settings.PEER_TIMEOUT.name() + " "
                        + Duration.ofNanos(detector.timeoutNs()).toMillis() / 1000.0 + " s): it is stopped (SIGSTOP, a debugger), hung"
                        + " outside the JVM, or cut off by the network", null, true);
            }
            return;
        }
        collector.watch(now);
        status.expire(now);
    }

    /** Hub after its close(): stops once no rank has the communicator open any more, or when the linger ends. */
    private void endLinger(long now) {
        if (!detector.lingering() || channel.stopped()) {
            return;
        }
        FailureDetector.LingerEnd end = detector.lingerCheck(now);
        if (end == FailureDetector.LingerEnd.ALL_CLOSED) {
            Log.trace(Log.Subsys.NET, rank, "comm " + p.idShort() + ": every rank closed; the control hub stops");
            shutdown();
        } else if (end == FailureDetector.LingerEnd.EXPIRED) {
            Log.info(Log.Subsys.NET, rank, "comm " + p.idShort() + ": rank 0 closed its communicator "
                    + TimeUnit.NANOSECONDS.toSeconds(lingerNs) + " s ago (" + Settings.CONTROL_LINGER.name() + "); ranks "
                    + detector.openPeers() + " still have it open and are no longer supervised");
            broadcast(ControlWire.bye(p.recorder().lastFinished()), null);
            shutdown();
        }
    }

    private String describe(int r) {
        return peers.describe(r);
    }

    /** The connection to {@code peer}: at the hub, index = rank; elsewhere the one to the hub. */
    private Conn conn(int peer) {
        return conns[rank == 0 ? peer : 0];
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
     * still complete, do: that call fails when it starts ({@link ControlPlane.Host#doomedAt}).
     */
    private void fault(int culprit, int kind, String message, Conn from, boolean tellOthers, long index) {
        if (verdict != null) {
            return;
        }
        JcclException ex = switch (kind) {
            case ControlWire.KIND_TIMEOUT -> new JcclTimeoutException(message);
            // Another rank's report of mismatched calls: that rank is the peer of the failure here (its report, in
            // the message, names the calls that differ); the operation and its number are set where it fails.
            case ControlWire.KIND_MISMATCH -> culprit != rank
                    ? new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, message).at(-1, culprit, null, -1)
                    : new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, message);
            default -> new PeerFailedException(culprit, message, null);
        };
        verdict = new Verdict(culprit, kind, message, ex);
        broadcast(ControlWire.fault(culprit, kind, message, index), from);
        Log.warn(Log.Subsys.NET, rank, "comm " + p.idShort() + ": " + message);
        boolean lingering = detector.lingering();
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
            failAsync(ex);
        }
        shutdown();
    }

    /** Aborts the communicator with {@code ex} on a thread of its own. */
    private void failAsync(JcclException ex) {
        Thread t = new Thread(() -> p.host().fail(ex), "jccl-ctl-fail-" + p.idShort() + "-r" + rank);
        t.setDaemon(true);
        t.start();
    }

    /**
     * A rank found mismatched calls at collective call {@code index}: this rank, if it has started that
     * call (it waits in it, or is past it, its communicator doomed either way), aborts now with the
     * report, which fails its call with a MISMATCH instead of leaving it to wait for ranks that left
     * (e.g. for a connection a peer on another path will never open); otherwise its own call
     * {@code index} fails when it starts ({@link ControlPlane.Host#doomedAt}). Calls before it run on:
     * they can still complete.
     */
    private void mismatchFoundAt(long index, String report) {
        if (index < 0 || verdict != null || detector.lingering()) {
            return;
        }
        long started = p.host().callsStarted();
        if (started < 0) {
            return;
        }
        if (started > index) {
            failAsync(new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, report));
        } else {
            p.host().doomedAt(index, report);
        }
    }

    /**
     * Rank {@code r} closed or aborted its communicator: remember why; the hub tells every other rank
     * (so that a rank whose link to it closes can say so, see {@link ControlPlane#explain}).
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
            broadcast(ControlWire.left(r, how, why), conns[r]);
            if (detector.lingering()) {
                endLinger(System.nanoTime()); // the last rank closing ends the hub's supervision at once
            }
        }
    }

    /** Sends {@code frame} on {@code c} if its link is open (the next heartbeat to it is then due T/4 later). */
    private void send(Conn c, ByteBuffer frame) {
        if (!detector.open(c.peer) || !c.ch.isOpen()) {
            return;
        }
        detector.sent(c.peer, System.nanoTime());
        channel.send(c, frame);
    }

    /** Sends a copy of {@code frame} on every open connection except {@code except}. */
    private void broadcast(ByteBuffer frame, Conn except) {
        for (Conn c : conns) {
            if (c != null && c != except && detector.open(c.peer)) {
                send(c, frame.duplicate());
            }
        }
    }

    /** Stops: writes what is queued (best effort, bounded), closes every channel, removes the status file. */
    private void shutdown() {
        if (channel.stopped() && !ExitHook.contains(this)) {
            return;
        }
        channel.stop();
        ExitHook.remove(this);
        channel.closeConnections();
        status.close();
        channel.closeSelector();
    }

    // ------------------------------------------------------------------------------------------ frames

    private void handle(Conn c, int type, ByteBuffer b) {
        switch (type) {
            case ControlWire.HEARTBEAT -> { }
            case ControlWire.BYE -> {
                detector.saidGoodbye(c.peer);
                channel.close(c);
                left(c.peer, ControlWire.HOW_CLOSED, "closed its communicator");
            }
            case ControlWire.GONE -> {
                String why = ControlWire.getString(b);
                detector.aborted(c.peer);
                channel.close(c);
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
            case ControlWire.FAULT -> onFault(c, b);
            case ControlWire.GUARD_ASK -> {
                long index = b.getLong();
                long guard = b.getLong();
                if (rank == 0 && index >= 0) {
                    backstop.onGuard(c.peer, index, guard, true);
                }
            }
            case ControlWire.GUARD_QUERY -> {
                long index = b.getLong();
                send(c, GuardBackstop.answerFrame(index, index < 0 ? ControlPlane.GUARD_UNKNOWN : p.host().guardAt(index)));
            }
            case ControlWire.GUARD_ANSWER -> {
                long index = b.getLong();
                long answer = b.getLong();
                if (rank == 0) {
                    backstop.onGuard(c.peer, index, answer, false);
                }
            }
            case ControlWire.REQUEST, ControlWire.COLLECT, ControlWire.STATE, ControlWire.REPORT -> collector.onFrame(c.peer, type, b);
            default -> throw new JcclException(ErrorCode.PROTOCOL, "unexpected control frame type " + type);
        }
    }

    private void onFault(Conn c, ByteBuffer b) {
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
                detector.aborted(c.peer);
                channel.close(c);
            }
            Log.info(Log.Subsys.NET, rank, "comm " + p.idShort() + ": " + msg);
            if (rank == 0) {
                broadcast(ControlWire.fault(culprit, kind, msg, index), c); // before LEFT: the report is there when the leave is
            }
            left(culprit, ControlWire.HOW_ABORTED, "found mismatched collective calls and aborted its communicator");
            mismatchFoundAt(index, msg);
            return;
        }
        if (c.peer != 0 || rank == 0) {
            detector.aborted(c.peer); // the sender stops after a fault
        }
        fault(culprit, kind, msg, c, true, index);
    }

    /**
     * The supervisor's side of its parts' callbacks: the channel agent's events, the links the stall
     * collector uses, what the status endpoint and the guard backstop ask. All on the control thread.
     * Not private only so that {@link ControlPlane} can load it early.
     */
    final class Events implements ControlChannel.Handler, StallCollector.Links, StatusEndpoint.Source, GuardBackstop.Hub {
        @Override
        public boolean onFrame(Conn c, int type, ByteBuffer body, long at) {
            detector.heard(c.peer, at);
            handle(c, type, body);
            return !channel.stopped() && detector.open(c.peer);
        }

        @Override
        public void onLost(Conn c, long at) {
            detector.lost(c.peer, at);
            if (c.peer == 0 && rank != 0 && detector.link(0) != FailureDetector.Link.DEAD) {
                hubGone = true;
            }
        }

        @Override
        public void onBacklog(Conn c, long at) {
            // The peer reads nothing: treat it as silent rather than queue without bound.
            detector.backlogged(c.peer, at);
        }

        @Override
        public void onMalformed(Conn c, RuntimeException e) {
            // An authenticated peer sent a frame that breaks the format: a fault of that peer.
            fault(c.peer, ControlWire.KIND_FAILED, describe(c.peer) + " sent a malformed control frame (" + e.getMessage()
                    + "); connection dropped", null, true);
        }

        @Override
        public void onTick(long now) {
            tick(now);
        }

        @Override
        public void onClose() {
            shutdown();
        }

        @Override
        public FailureDetector.Link link(int peer) {
            return detector.link(peer);
        }

        @Override
        public void send(int peer, ByteBuffer frame) {
            Supervisor.this.send(conn(peer), frame);
        }

        @Override
        public void broadcast(ByteBuffer frame) {
            Supervisor.this.broadcast(frame, null);
        }

        @Override
        public boolean lingering() {
            return detector.lingering();
        }

        @Override
        public boolean hubGone() {
            return hubGone;
        }

        @Override
        public boolean failed() {
            return verdict != null;
        }

        @Override
        public void reportArrived(RankState[] states, int[] how) {
            status.answerWaiting(states, how);
        }

        @Override
        public boolean answerAlone() {
            return hubGone || verdict != null || (rank != 0 && !detector.open(0));
        }

        @Override
        public void requestReport() {
            collector.request(ControlWire.PURPOSE_STATUS);
        }

        @Override
        public String failure() {
            Verdict v = verdict;
            return v == null ? null : v.message();
        }

        @Override
        public String lastStallLine() {
            return collector.lastStallLine();
        }

        @Override
        public boolean decided() {
            return verdict != null;
        }

        @Override
        public long ownGuard(long index) {
            return p.host().guardAt(index);
        }

        @Override
        public boolean ask(int r, ByteBuffer query) {
            Conn c = conns[r];
            if (c == null || !detector.open(r)) {
                return false;
            }
            Supervisor.this.send(c, query);
            return true;
        }

        @Override
        public void mismatch(int culprit, String report, long index) {
            fault(culprit, ControlWire.KIND_MISMATCH, report, null, true, index);
        }
    }
}
