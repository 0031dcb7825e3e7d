package org.jccl.internal.runtime;

import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.internal.guard.OpGuard;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;

/**
 * The always-on mismatch guard ({@code JCCL_CHECK} 0 and 1) of one communicator: the guard word of
 * the running call that every message carries, the collective index and the history of words the
 * control plane compares, the backstop probe of a long wait, another rank's verdict that dooms later
 * calls, and the reports of a mismatch (naming both calls, and where this rank's calls may have parted
 * from its peer's). Its ring confirmations are {@link RingConfirmations}. Used by the thread running
 * operations, except the methods that say "any thread".
 */
final class MismatchGuard {
    private final CommunicatorImpl comm;
    private final OpContext ctx;
    /** The ring confirmations of this guard (set once, right after both are made). */
    private RingConfirmations conf;
    /** The idle strategy of the wait for the hub's verdict: parks of 200 us. */
    private final Backoff verdictBackoff = Backoff.parkingEvery(200_000L);

    MismatchGuard(CommunicatorImpl comm, OpContext ctx) {
        this.comm = comm;
        this.ctx = ctx;
        this.guardOn = comm.guardOn();
        this.historySize = historySize(comm.size());
        this.guardHistory = new java.util.concurrent.atomic.AtomicLongArray(historySize);
        this.guardHistoryIndex = new java.util.concurrent.atomic.AtomicLongArray(historySize);
        for (int i = 0; i < historySize; i++) {
            guardHistoryIndex.set(i, -1);
        }
    }

    void confirmations(RingConfirmations c) {
        this.conf = c;
    }

    /** The power of two of guard words remembered on {@code n} ranks: {@link RingConfirmations#MAX_CONFIRMATIONS} per rank and 64 more, within [64, 8192]. */
    static int historySize(int n) {
        long want = Math.min(GUARD_HISTORY_MAX, Math.max(GUARD_HISTORY, (long) RingConfirmations.MAX_CONFIRMATIONS * n + GUARD_HISTORY));
        return Integer.highestOneBit((int) want - 1) << 1;
    }

    /** JCCL_CHECK is not "none": every message, arrive and GPU record carries the running call's guard word. */
    private final boolean guardOn;
    /** The guard word ({@link OpGuard}) of the running call, carried by every message this rank posts; 0 when none. */
    long guard;
    /** Collective calls started so far on this communicator (each member of a group counts): the same sequence on every rank. */
    private long collIndex;
    /** Index of the running collective call, -1 when none runs. */
    long callIndex = -1;
    /**
     * How long a wait may find nothing to do before this rank asks the control plane to compare every
     * rank's guard of the running call (the backstop for mismatched calls that deadlock without any
     * message between two ranks whose calls differ: different algorithms chosen for different counts,
     * a rank with 0 elements, the shared segment on one rank and the rings on another); then again
     * every as long while the wait lasts. A wait that long is rare in a healthy job, and the comparison
     * costs a few control frames.
     */
    static final long GUARD_PROBE_NANOS = 1_000_000_000L;
    /**
     * The fewest collective calls whose guard words a rank remembers for the control plane. More on larger
     * communicators ({@link #historySize}): each rank may run {@link RingConfirmations#MAX_CONFIRMATIONS} calls ahead of its ring
     * predecessor, so along the ring a rank may be up to that many calls per rank ahead of another, and the
     * backstop must still find the word of the call the slowest rank waits in.
     */
    static final int GUARD_HISTORY = 64;
    /** Most words remembered (64 KiB per communicator): beyond 256 ranks, ranks far apart on the ring may not be compared. */
    static final int GUARD_HISTORY_MAX = 8192;
    /** The guard words of the last {@link #historySize} collective calls, for the control plane (any thread). */
    private final int historySize;
    private final java.util.concurrent.atomic.AtomicLongArray guardHistory;
    private final java.util.concurrent.atomic.AtomicLongArray guardHistoryIndex;


    /**
     * Starts call {@code op} (an operation, or a collective member of a group): its messages carry
     * {@code op}'s guard word from here on; a collective gets the next collective index (remembered
     * with its guard for the control plane; a collective provider's steps carry it too, see ProviderCall#guard), and
     * the calls of {@link OpGuard#needsConfirmation} get their ring confirmation ({@link RingConfirmations#confirm}).
     * {@code signed}: JCCL_CHECK=1 exchanges the call's full signature ({@link SignatureCheck#begin}), whose
     * ring replaces the confirmation.
     */
    void beginCall(Op op, boolean signed) {
        if (!guardOn) {
            return;
        }
        long g = op.guardWord(); // here, not when the operation is made: nothing on the call path with JCCL_CHECK=none
        guard = g;
        if (!OpGuard.isCollective(g)) {
            callIndex = -1;
            return;
        }
        long k = collIndex++;
        callIndex = k;
        if (k >= doomedFrom) {
            String why = doomReport;
            throw new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, "rank " + comm.rank() + ": " + ctx.describeOp()
                    + " failed: another rank found mismatched collective calls at collective call #" + doomedFrom + " (this one is #" + k
                    + "): " + why);
        }
        int slot = (int) (k & (historySize - 1));
        guardHistoryIndex.setRelease(slot, -1);
        guardHistory.setRelease(slot, g);
        guardHistoryIndex.setRelease(slot, k);
        // With JCCL_CHECK=1 the signature ring does this (and its signatures, first on those connections, say more).
        if (comm.size() > 1 && !signed && OpGuard.needsConfirmation(g)) {
            conf.confirm(g, k, op.seq);
        }
    }

    /** Ends the call {@link #beginCall} started (its ring confirmation, if any, is not waited for: see {@link RingConfirmations}). */
    void endCall() {
        conf.endCall();
        callIndex = -1;
    }

    /** Sets the guard word of what this rank posts next without starting a call (a group's sends and receives). */
    void guardP2p() {
        if (guardOn) {
            guard = OpGuard.p2p();
            callIndex = -1;
        }
    }

    /** No call runs any more (the operation ended). */
    void endCallState() {
        outsideSince = 0;
        conf.progressed = false;
        callIndex = -1;
        guard = 0;
    }

    /**
     * The guard word of this rank's collective call number {@code k}, for the control plane's
     * comparison (any thread): {@code ControlPlane.GUARD_NOT_YET} when it has not started it, {@code
     * GUARD_UNKNOWN} when it no longer remembers it (more than {@link #historySize} calls ago) or
     * runs without the guard.
     */
    long guardAt(long k) {
        if (!guardOn) {
            return org.jccl.internal.control.ControlPlane.GUARD_UNKNOWN;
        }
        int slot = (int) (k & (historySize - 1));
        while (true) {
            long i = guardHistoryIndex.getAcquire(slot);
            long g = guardHistory.getAcquire(slot);
            if (guardHistoryIndex.getAcquire(slot) != i) {
                continue; // rewritten meanwhile (beginCall writes the index, then the word, then the index)
            }
            if (i == k) {
                return g;
            }
            // A slot only ever holds later calls: an older one (or none) means call k has not started here.
            return i < k ? org.jccl.internal.control.ControlPlane.GUARD_NOT_YET : org.jccl.internal.control.ControlPlane.GUARD_UNKNOWN;
        }
    }

    /** How many collective calls this rank has started (any thread; from the history, so nothing is published per call). */
    long callsStarted() {
        if (!guardOn) {
            return -1;
        }
        long max = -1;
        for (int i = 0; i < historySize; i++) {
            max = Math.max(max, guardHistoryIndex.getAcquire(i));
        }
        return max + 1;
    }

    /** First collective call that must fail at once, with {@link #doomReport} (see ControlPlane.Host#doomedAt); MAX_VALUE: none. */
    private volatile long doomedFrom = Long.MAX_VALUE;
    private volatile String doomReport;

    /** Another rank found mismatched calls at collective call {@code index}: that call and later ones fail when they start (any thread). */
    void doomedAt(long index, String report) {
        doomReport = report;
        doomedFrom = index;
    }

    /** Start of the current wait outside the progress engine ({@link #stillWaiting}), 0: none. */
    long outsideSince;
    private long outsideProbeAfter;

    /** A transport blocks this thread waiting for a peer (TransportContext#stillWaiting): probes as a long wait does. */
    void stillWaiting() {
        long now = System.nanoTime();
        if (outsideSince == 0) {
            outsideSince = now;
            outsideProbeAfter = GUARD_PROBE_NANOS;
            return;
        }
        if (now - outsideSince >= outsideProbeAfter) {
            outsideProbeAfter += GUARD_PROBE_NANOS;
            probeGuard();
        }
    }

    /** The waiting call has found nothing to do for a while: asks the control plane to compare every rank's guard of it. */
    void probeGuard() {
        boolean confirming = conf.waitIndex >= 0;
        long k = confirming ? conf.waitIndex : callIndex;
        if (k >= 0) {
            org.jccl.internal.control.ControlPlane cp = comm.control();
            if (cp != null) {
                cp.probeGuard(k, confirming ? conf.waitGuard : guard);
            }
        }
    }

    /** The error for a message or an arrive of {@code peer}'s call {@code theirs} met by this rank's call {@code mine}. */
    org.jccl.InvalidUsageException guardMismatch(int peer, long theirs, long mine) {
        return guardMismatch(peer, theirs, mine, -1);
    }

    /** The error of a transport's guard mismatch: of an outstanding confirmation's receive if it failed so, else of the running call. */
    org.jccl.InvalidUsageException guardMismatch(org.jccl.spi.GuardMismatchException e) {
        for (long j = conf.head(); j < conf.recvHanded(); j++) {
            int i = RingConfirmations.slot(j);
            P2pRequest r = conf.recvAt(i);
            if (r != null && r.error() == e && conf.guardAt(i) == e.expected() && (!ctx.running() || guard != e.expected() || callIndex < 0)) {
                return guardMismatch(e.peer(), e.received(), e.expected(), i);
            }
        }
        return guardMismatch(e.peer(), e.received(), e.expected(), -1);
    }

    /**
     * The error for {@code peer}'s call {@code theirs} met by this rank's call {@code mine}; {@code slot} >= 0: found
     * by the confirmation in that slot, of a call that returned earlier on this rank.
     */
    org.jccl.InvalidUsageException guardMismatch(int peer, long theirs, long mine, int slot) {
        PeerInfo from = comm.peerInfo(peer);
        String where = ctx.running() ? ctx.describeOp() + " failed: " : "communicator " + comm.idShort() + ": ";
        mismatchAt = -1;
        if (slot >= 0) {
            where += "the ring confirmation of collective call #" + conf.indexAt(slot) + " (operation #" + conf.seqAt(slot) + ", "
                    + OpGuard.describe(conf.guardAt(slot)) + "), which had already returned on this rank with a result that used no"
                    + " other rank's data unchecked, found ";
            mismatchAt = conf.indexAt(slot);
        }
        String context = earlier(slot, theirs, mine);
        if (slot < 0 && context.isEmpty() && OpGuard.kind(theirs) != OpGuard.kind(mine)) {
            org.jccl.InvalidUsageException exact = exactVerdict();
            if (exact != null) {
                return exact;
            }
        }
        org.jccl.InvalidUsageException e = new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, "rank " + comm.rank() + ": " + where
                + "mismatched collective calls: rank " + peer + " (" + from.host() + " pid " + from.pid() + ") called "
                + OpGuard.describe(theirs) + " but rank " + comm.rank() + " called " + OpGuard.describe(mine) + context
                + "; they differ in "
                + String.join(", ", OpGuard.differences(theirs, mine)) + " (found by the mismatch guard)"
                + ". Every rank must call the same collectives in the same order, with the same count, data type, op and root");
        e.at(comm.rank(), peer, null, -1);
        return e;
    }

    /** How long a mismatch whose calls this rank cannot place waits for the hub's comparison of every rank's word. */
    private static final long VERDICT_WAIT_NANOS = 500_000_000L;

    /**
     * A peer's message is of another collective than this rank's running call, and not of this rank's previous
     * one: the peer may be a call ahead (it returned from this call without waiting, a rooted call's leaf or
     * root, and its next call's message arrived), so this rank cannot say what the peer called here. The
     * hub can: asks it to compare every rank's word of the running call and waits up to {@link
     * #VERDICT_WAIT_NANOS} for its verdict, which aborts every rank naming the exact calls. Returns that
     * verdict as this call's error, or null when none came (the caller then reports what it saw).
     */
    private org.jccl.InvalidUsageException exactVerdict() {
        org.jccl.internal.control.ControlPlane cp = comm.control();
        if (cp == null || callIndex < 0 || !ctx.running()) {
            return null;
        }
        cp.probeGuard(callIndex, guard);
        long start = System.nanoTime();
        verdictBackoff.reset(start);
        for (long now = start; verdictBackoff.waited(now) < VERDICT_WAIT_NANOS; now = System.nanoTime()) {
            JcclException cause = comm.abortCause();
            if (cause != null) {
                if (cause.code() != ErrorCode.MISMATCH) {
                    return null;
                }
                return new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, "rank " + comm.rank() + ": " + ctx.describeOp() + " failed: "
                        + cause.getMessage(), cause);
            }
            verdictBackoff.idle(now);
        }
        return null;
    }

    /**
     * The running collective call failed because a peer closed its communicator normally: the hub's comparison of
     * every rank's word of the call ({@link #exactVerdict}), or null (not a collective call, or no verdict came).
     */
    JcclException verdictOfFailedCall() {
        return guardOn && callIndex >= 0 ? exactVerdict() : null;
    }

    /** The collective call the last mismatch error of this rank is about when not its running one (ControlPlane.Host#mismatchAt), else -1. */
    private volatile long mismatchAt = -1;

    long mismatchAt() {
        return mismatchAt;
    }

    /**
     * Where the calls may have parted before the one that found the mismatch, for the report (and the call
     * index it gives the control plane, {@link #mismatchAt}): the oldest call of this rank that returned
     * without its ring confirmation yet (besides {@code slot}; the peer's message met a later call before that
     * confirmation arrived, on another socket for instance), else, when the peer's message is of this rank's
     * previous collective call, that call (the peer is a call behind).
     */
    private String earlier(int slot, long theirs, long mine) {
        for (long j = conf.head(); j < conf.tail(); j++) {
            int i = RingConfirmations.slot(j);
            P2pRequest r = conf.recvAt(i);
            if (i != slot && conf.indexAt(i) != callIndex && r != null && r.isDone() && r.error() != null) {
                mismatchAt = conf.indexAt(i);
                return ", after collective call #" + conf.indexAt(i) + ", " + OpGuard.describe(conf.guardAt(i)) + " (operation #"
                        + conf.seqAt(i) + "), which returned on this rank before the ring confirmation of rank " + conf.pred()
                        + " for it arrived";
            }
        }
        long prev = (callIndex >= 0 ? callIndex : collIndex) - 1;
        if (slot < 0 && prev >= 0 && OpGuard.kind(theirs) != OpGuard.kind(mine)) {
            long g = guardAt(prev);
            // Only when the peer's message is of this rank's previous call: else the peer may as well be a call ahead.
            if (g == theirs) {
                mismatchAt = prev;
                return " after collective call #" + prev + ", " + OpGuard.describe(g);
            }
        }
        return "";
    }
}
