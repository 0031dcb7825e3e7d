package org.jccl.internal.runtime;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;

/**
 * The mismatch guard's deferred ring confirmations: the empty messages, carrying a call's guard
 * word, that each rank sends to the next rank of the ring and receives from the previous one for
 * the calls where it could otherwise return without comparing its call with anyone's. Held here,
 * handed to their connections at the moments below, reaped as they complete; a failed one throws
 * the mismatch (or broken link) it found. Used by the thread running operations (the execution
 * lock), except {@link #outstanding} and {@link #callsEnded}, which any thread may read.
 */
final class RingConfirmations {
    /** An empty native segment: the payload of a ring confirmation (the message is its guard word). */
    private static final MemorySegment EMPTY = Arena.global().allocate(8).asSlice(0, 0);

    private final OpContext ctx;
    private final MismatchGuard guard;
    private final int rank;
    private final int size;

    RingConfirmations(OpContext ctx, MismatchGuard guard, int rank, int size) {
        this.ctx = ctx;
        this.guard = guard;
        this.rank = rank;
        this.size = size;
    }

    /*
     * Where a rank could return without having compared its call with anyone's (the rooted collectives,
     * where roots or leaves only send, and calls of 0 elements), every rank sends an empty message carrying
     * its guard word to the next rank of the ring and receives the previous rank's. Its place in each
     * direction's message order is fixed: the first message of its call on that connection, after every
     * message of earlier calls and before every later one, on both ends. Nothing waits for it: a call
     * returns without it (a rank whose own result does not depend on it, since every message of another
     * rank that a result uses is compared when it arrives), and it completes later, while this rank waits
     * for anything else, in a later call, on the operation thread when the communicator is idle, or at
     * close(). A mismatch it shows then fails the call that finds it and aborts the communicator, whose
     * control plane fails every rank; close() reports it when no call did.
     *
     * To keep it off the latency path, its two messages are held here and handed to their connections only
     * (a) just before the next message this rank posts on that connection (so the order above holds, and on
     * TCP the confirmation leaves in the same write as that message, see TcpConnection), (b) when this rank
     * has waited HAND_AFTER_NANOS for anything (so two ranks that wait for each other in mismatched calls
     * meet their confirmations at once, as the old awaited confirmation did), (c) when MAX_CONFIRMATIONS
     * calls are unconfirmed, (d) on the idle operation thread, (e) at close().
     */

    /** Most calls whose confirmation may be outstanding; the next one waits for the oldest (historySize keeps that many per rank for the backstop). */
    static final int MAX_CONFIRMATIONS = 32;
    /** A wait that has found nothing to do this long hands the held confirmations to their connections. */
    static final long HAND_AFTER_NANOS = 20_000;
    /** Ring of outstanding confirmations, indexed by counter % MAX_CONFIRMATIONS: [confHead, confTail). */
    private final P2pRequest[] confRecv = new P2pRequest[MAX_CONFIRMATIONS];
    private final P2pRequest[] confSend = new P2pRequest[MAX_CONFIRMATIONS];
    private final long[] confGuard = new long[MAX_CONFIRMATIONS];
    private final long[] confIndex = new long[MAX_CONFIRMATIONS];
    private final long[] confSeq = new long[MAX_CONFIRMATIONS];
    private long confHead;
    private long confTail;
    /** Entries below these have their receive / send handed to the connection; the rest are held. */
    private long confRecvHanded;
    private long confSendHanded;
    /** Opaque copy of confTail - confHead for the operation thread's idle check (any thread). */
    private int confOutstanding;
    /** Calls ended so far (written by the running thread, read opaque by the idle operation thread). */
    private long callsEnded;
    /** Whether the running call has driven the connections' progress (set by OpContext#progress). */
    boolean progressed;
    /** Collective index and guard the backstop asks about while this rank waits for a confirmation, not in a call (-1: none). */
    long waitIndex = -1;
    long waitGuard;
    private static final java.lang.invoke.VarHandle OUTSTANDING;
    private static final java.lang.invoke.VarHandle ENDED;

    static {
        try {
            java.lang.invoke.MethodHandles.Lookup l = java.lang.invoke.MethodHandles.lookup();
            OUTSTANDING = l.findVarHandle(RingConfirmations.class, "confOutstanding", int.class);
            ENDED = l.findVarHandle(RingConfirmations.class, "callsEnded", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Whether both ring neighbours' connections are in memory (Connection#inMemory); 0 unknown, 1 yes, 2 no. */
    private int ringInMemory;

    private boolean ringInMemory() {
        if (ringInMemory == 0) {
            ringInMemory = ctx.connection(pred()).inMemory() && ctx.connection(succ()).inMemory() ? 1 : 2;
        }
        return ringInMemory == 1;
    }

    /** Records call {@code k}'s ring confirmation (guard {@code g}, operation {@code seq}), held until one of (a)-(e) above. */
    void confirm(long g, long k, long seq) {
        if (confTail - confHead == MAX_CONFIRMATIONS) {
            awaitOldest();
        }
        int i = (int) (confTail % MAX_CONFIRMATIONS);
        confRecv[i] = null;
        confSend[i] = null;
        confGuard[i] = g;
        confIndex[i] = k;
        confSeq[i] = seq;
        confTail++;
        OUTSTANDING.setOpaque(this, (int) (confTail - confHead));
        if (ringInMemory()) {
            handAll(); // in memory it is awaited at the end of the call (endCall): on its way before the algorithm's first message
        }
    }

    /** Whether confirmations are outstanding (any thread; may lag a little). */
    boolean outstanding() {
        return (int) OUTSTANDING.getOpaque(this) != 0;
    }

    /** Calls ended so far (any thread; may lag a little): the idle operation thread checks only when none ended for a while. */
    long callsEnded() {
        return (long) ENDED.getOpaque(this);
    }

    int pred() {
        return (rank + size - 1) % size;
    }

    int succ() {
        return (rank + 1) % size;
    }

    /** Hands the held confirmation receives to the predecessor's connection, in order. */
    void handRecvs() {
        if (confRecvHanded < confTail) {
            Connection c = ctx.connection(pred());
            for (long j = Math.max(confRecvHanded, confHead); j < confTail; j++) {
                int i = (int) (j % MAX_CONFIRMATIONS);
                confRecv[i] = c.recv(EMPTY, confGuard[i]);
            }
            confRecvHanded = confTail;
        }
    }

    /** Hands the held confirmation sends to the successor's connection, in order. */
    void handSends() {
        if (confSendHanded < confTail) {
            Connection c = ctx.connection(succ());
            for (long j = Math.max(confSendHanded, confHead); j < confTail; j++) {
                int i = (int) (j % MAX_CONFIRMATIONS);
                confSend[i] = c.send(EMPTY, confGuard[i]);
            }
            confSendHanded = confTail;
        }
    }

    void handAll() {
        handRecvs();
        handSends();
    }

    /** Drops the confirmations that completed, oldest first; one that failed throws (a mismatch names the call it confirmed). */
    void reap() {
        while (confHead < confRecvHanded && confHead < confSendHanded) {
            int i = (int) (confHead % MAX_CONFIRMATIONS);
            P2pRequest r = confRecv[i];
            P2pRequest s = confSend[i];
            if (!r.isDone() || !s.isDone()) {
                break;
            }
            failedConfirmation(i, r);
            failedConfirmation(i, s);
            confRecv[i] = null;
            confSend[i] = null;
            confHead++;
        }
        OUTSTANDING.setOpaque(this, (int) (confTail - confHead));
    }

    private void failedConfirmation(int i, P2pRequest r) {
        Throwable t = r.error();
        if (t == null) {
            return;
        }
        if (t instanceof org.jccl.spi.GuardMismatchException g) {
            throw guard.guardMismatch(g.peer(), g.received(), g.expected(), i);
        }
        int peer = r.isSend() ? succ() : pred();
        throw ctx.peerFailed(peer, t instanceof IOException io ? io : new IOException(t.toString(), t));
    }

    /** Waits, driving progress, until the oldest outstanding confirmation completed (the bound on outstanding ones). */
    void awaitOldest() {
        int i = (int) (confHead % MAX_CONFIRMATIONS);
        long savedIndex = waitIndex;
        long savedGuard = waitGuard;
        // Before handing them on: that may open a connection and wait in its setup, which asks the backstop about this call.
        waitIndex = confIndex[i];
        waitGuard = confGuard[i];
        try {
            handAll();
            int idle = 0;
            while (!(confRecv[i].isDone() && confSend[i].isDone())) {
                idle = ctx.progressOrIdle(idle);
            }
        } finally {
            waitIndex = savedIndex;
            waitGuard = savedGuard;
            guard.outsideSince = 0;
        }
        reap();
    }

    /** Waits, driving progress, until the confirmations of calls before call {@code callIndex} (the running one) completed. */
    void awaitEarlier(long callIndex) {
        handAll();
        while (confHead < confTail && confIndex[(int) (confHead % MAX_CONFIRMATIONS)] != callIndex) {
            awaitOldest();
        }
        if (confHead < confTail) {
            ctx.progress();
        }
    }

    /**
     * The operation thread while no operation runs (the execution lock held): hands the held
     * confirmations to their connections, drives one round of progress and drops the completed ones;
     * a mismatch (or a broken link) throws.
     */
    void idle() {
        if (confTail == confHead) {
            return;
        }
        int i = (int) (confHead % MAX_CONFIRMATIONS);
        long savedIndex = waitIndex;
        long savedGuard = waitGuard;
        waitIndex = confIndex[i]; // a connection set up here asks the backstop about the oldest unconfirmed call
        waitGuard = confGuard[i];
        try {
            handAll();
            ctx.progress();
        } finally {
            waitIndex = savedIndex;
            waitGuard = savedGuard;
            guard.outsideSince = 0;
        }
        progressed = false;
        reap();
    }

    /**
     * At close(): waits, driving progress, until every outstanding confirmation completed (as long as
     * the calls themselves would have waited: until the peers' confirmations arrive, the communicator is
     * aborted by a peer's failure or timeout, or the backstop finds a mismatch); a mismatch throws.
     */
    void drain() {
        while (confTail != confHead) {
            awaitOldest();
        }
    }

    /** Whether confirmation sends are held that must leave before the next message to {@code peer}. */
    boolean sendsHeldFor(int peer) {
        return confSendHanded != confTail && peer == succ();
    }

    /** Whether confirmation receives are held that must be posted before the next receive from {@code peer}. */
    boolean recvsHeldFor(int peer) {
        return confRecvHanded != confTail && peer == pred();
    }

    /** Whether any confirmation is held back from its connections. */
    boolean anyHeld() {
        return confRecvHanded != confTail || confSendHanded != confTail;
    }

    /** Whether no confirmation is outstanding (the running thread's own view). */
    boolean empty() {
        return confTail == confHead;
    }

    /** Ends a call: looks at what arrived, hands the held ones on at half the bound, and in memory waits for them. */
    void endCall() {
        if (!progressed && confRecvHanded > confHead) {
            ctx.progress(); // a call that moved nothing through the connections still looks at the confirmations that arrived
        }
        progressed = false;
        reap();
        if (confTail - Math.min(confSendHanded, confRecvHanded) >= MAX_CONFIRMATIONS / 2) {
            // A rank that never posts a message to its ring neighbour (a broadcast's leaf) hands them on at half the
            // bound, so a root running ahead rarely meets the bound (which would drain the pipeline of a loop of calls).
            handAll();
        }
        if (confTail != confHead && ringInMemory()) {
            // Shared memory and one JVM: waiting here costs less than holding it (the ranks stay in step; a held one
            // takes a slot of the next call's traffic): 0.55 against 2.1 us for an 8-byte SHM broadcast. Handed
            // on when the call began (confirm), as the algorithm's first message.
            while (confTail != confHead) {
                awaitOldest();
            }
        }
        ENDED.setOpaque(this, callsEnded + 1);
    }

    // ---------------------------------------------------------------------- for the guard's reports

    long head() {
        return confHead;
    }

    long tail() {
        return confTail;
    }

    long recvHanded() {
        return confRecvHanded;
    }

    /** The slot of the {@code j}-th confirmation (a counter between head and tail). */
    static int slot(long j) {
        return (int) (j % MAX_CONFIRMATIONS);
    }

    P2pRequest recvAt(int slot) {
        return confRecv[slot];
    }

    long guardAt(int slot) {
        return confGuard[slot];
    }

    long indexAt(int slot) {
        return confIndex[slot];
    }

    long seqAt(int slot) {
        return confSeq[slot];
    }

    /** Forgets everything (the connections are closing). */
    void clear() {
        java.util.Arrays.fill(confRecv, null);
        java.util.Arrays.fill(confSend, null);
        confHead = confTail = confRecvHanded = confSendHanded = 0;
        OUTSTANDING.setOpaque(this, 0);
    }
}
