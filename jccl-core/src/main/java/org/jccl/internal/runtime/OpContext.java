package org.jccl.internal.runtime;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.PeerFailedException;
import org.jccl.internal.algo.CollectiveContext;
import org.jccl.internal.config.Settings;
import org.jccl.internal.guard.OpGuard;
import org.jccl.internal.log.Log;
import org.jccl.internal.tune.AlgoSelector;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.internal.tune.Tuner;
import org.jccl.internal.util.ResourceLimits;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.internal.transport.shm.ShmCollArea;

/**
 * What algorithms see while an operation runs: point-to-point posts to any peer, waiting with
 * progress, and scratch memory. Confined to the communicator's operation thread (it is the
 * progress engine: there is no other thread moving bytes), so nothing here is synchronised.
 *
 * <p>Waiting spins briefly, then yields, then blocks in a {@link Selector} over the connections'
 * channels (sockets wake it when bytes arrive; the in-JVM transport and abort() wake it through
 * {@link #wake()}): a rank whose peer is a few microseconds behind reacts at once, while one waiting
 * for a straggler uses no CPU.
 */
public final class OpContext implements CollectiveContext {
    /** Longest blind block; a safety net only, since sockets and wake() end the block early. */
    private static final long MAX_BLOCK_MILLIS = 50;

    private final CommunicatorImpl comm;
    /** Bytes per peer (jccl status); written here only, on the thread running the operation. */
    private final org.jccl.internal.control.Counters counters;
    private final Connection[] connections;
    private final List<Connection> open = new ArrayList<>();
    private Op current;
    /** Whether the current operation's waits have read the clock (and so stamped it in the flight recorder). */
    private boolean stamped;
    private Arena scratchArena;
    private final MemorySegment[] scratch = new MemorySegment[SCRATCH_SLOTS];
    /** Scratch slots: 0..3 for the algorithms of Collectives, 4..5 for the hierarchical ones around them. */
    public static final int SCRATCH_SLOTS = 6;
    private Selector selector;
    /** Set while the operation thread is (about to be) blocked in the selector; see {@link #wake()}. */
    private volatile boolean sleeping;

    /**
     * CPUs of this host (not of this process's affinity mask: jccl run binds each rank to one CPU),
     * from /sys/devices/system/cpu/online, else what the JVM sees.
     */
    static final int HOST_CPUS = hostCpus();

    private static int hostCpus() {
        try {
            String s = java.nio.file.Files.readString(java.nio.file.Path.of("/sys/devices/system/cpu/online")).trim();
            int n = 0;
            for (String part : s.split(",")) {
                int dash = part.indexOf('-');
                n += dash < 0 ? 1 : Integer.parseInt(part.substring(dash + 1)) - Integer.parseInt(part.substring(0, dash)) + 1;
            }
            return Math.max(1, n);
        } catch (IOException | RuntimeException e) {
            return Runtime.getRuntime().availableProcessors();
        }
    }

    /** The idle strategy of waits on connections: spin, yield, then block in the selector (1 ms doubling to 50 ms). */
    private final Backoff linkBackoff;
    /** The idle strategy of waits in the shared segment: spin (pure for HOT_SPIN_NANOS), yield, then park 2 us doubling to 1 ms. */
    private final Backoff sharedBackoff;
    /** Whether the current wait on connections has looked for other communicators' late operations. */
    private boolean linkNudged;
    /** The idle strategy of the wait for the hub's verdict: parks of 200 us. */
    private final Backoff verdictBackoff = Backoff.parkingEvery(200_000L);
    /**
     * A wait that has found nothing to do this long looks for operations of other communicators of this JVM that
     * nobody runs (Executor#nudgeLate): one thread may drive several (jccl-cuda's staged group).
     */
    static final long NUDGE_AFTER_NANOS = 50_000;

    OpContext(CommunicatorImpl comm) {
        this.comm = comm;
        this.guardOn = comm.guardOn();
        this.historySize = historySize(comm.size());
        this.guardHistory = new java.util.concurrent.atomic.AtomicLongArray(historySize);
        this.guardHistoryIndex = new java.util.concurrent.atomic.AtomicLongArray(historySize);
        for (int i = 0; i < historySize; i++) {
            guardHistoryIndex.set(i, -1);
        }
        long spin = Settings.IDLE_SPIN_US.getLong(comm.config()) * 1000;
        long yield = Settings.IDLE_YIELD_US.getLong(comm.config()) * 1000;
        long spinYield = Settings.IDLE_SPIN_YIELD_US.getLong(comm.config()) * 1000;
        boolean oversubscribed = comm.localRanks() > HOST_CPUS;
        this.linkBackoff = new Backoff(spin, yield, spinYield, 0, oversubscribed, 1_000_000L, MAX_BLOCK_MILLIS * 1_000_000L,
                this::block);
        // Every rank of a shared segment is on this host: more of them than CPUs means the rank we wait for may be
        // waiting for our core.
        this.sharedBackoff = new Backoff(spin, yield, spinYield, HOT_SPIN_NANOS, oversubscribed, 2_000L, 1_000_000L, Backoff.PARK);
        this.connections = new Connection[comm.size()];
        this.counters = comm.counters();
    }

    /** The power of two of guard words remembered on {@code n} ranks: {@link #MAX_CONFIRMATIONS} per rank and 64 more, within [64, 8192]. */
    static int historySize(int n) {
        long want = Math.min(GUARD_HISTORY_MAX, Math.max(GUARD_HISTORY, (long) MAX_CONFIRMATIONS * n + GUARD_HISTORY));
        return Integer.highestOneBit((int) want - 1) << 1;
    }

    /**
     * This rank as the running collective sees it: its rank in the communicator, or its index in the
     * group of a stage of a hierarchical collective ({@link #inGroup}).
     */
    @Override
    public int rank() {
        return group == null ? comm.rank() : groupRank;
    }

    /** Ranks of the running collective: the communicator's, or the group's of a hierarchical stage. */
    @Override
    public int size() {
        return group == null ? comm.size() : group.length;
    }

    // ---------------------------------------------------------------------- stages of hierarchical collectives

    /** Communicator ranks of the running stage's group, indexed by group rank; null outside a stage. */
    private int[] group;
    private int groupRank;
    private Tuner groupTuner;

    /**
     * Runs {@code body} with this context narrowed to a group of the communicator's ranks: inside,
     * {@link #rank()} and {@link #size()} are the group's, peers of {@link #send}/{@link #recv} are
     * group ranks, {@link #tuner()} is {@code tuner} (the stage's cost model) and there is neither a
     * shared collective segment nor a hierarchy, so every algorithm of {@code Collectives} runs on
     * the group unchanged. Every member calls it with the same {@code members}, in the same order
     * relative to its other operations with those peers (connections match messages in FIFO order).
     *
     * @param members communicator ranks of the group, this rank among them
     */
    @Override
    public void inGroup(int[] members, Tuner tuner, Runnable body) {
        if (group != null) {
            throw new IllegalStateException("stages of hierarchical collectives do not nest");
        }
        int me = -1;
        for (int i = 0; i < members.length; i++) {
            if (members[i] == comm.rank()) {
                me = i;
            }
        }
        if (me < 0) {
            throw new IllegalStateException("rank " + comm.rank() + " is not in the stage group " + java.util.Arrays.toString(members));
        }
        group = members;
        groupRank = me;
        groupTuner = tuner;
        try {
            body.run();
        } finally {
            group = null;
            groupTuner = null;
        }
    }

    /** Communicator rank of a peer as the running collective names it. */
    private int global(int peer) {
        return group == null ? peer : group[peer];
    }

    /** The communicator's host layout, when its ranks span hosts and a hierarchical collective may run; null in a stage. */
    @Override
    public Hierarchy hierarchy() {
        return group == null ? comm.hierarchy() : null;
    }

    /** Pipelining granularity of ring algorithms, in bytes ({@code JCCL_CHUNK_SIZE}). */
    @Override
    public long chunkBytes() {
        return comm.chunkBytes();
    }

    /** All-reduce messages up to this many bytes use recursive doubling ({@code JCCL_RD_THRESHOLD}); -1 when unset (the tuner decides). */
    @Override
    public long rdThreshold() {
        return comm.rdThreshold();
    }

    /** Which algorithm names are allowed for a collective (from {@code JCCL_ALGO}). */
    public AlgoSelector algorithms() {
        return comm.algorithms();
    }

    /** The cost-model tuner that picks algorithms (honouring {@code JCCL_ALGO}). */
    @Override
    public Tuner tuner() {
        return group == null ? comm.tuner() : groupTuner;
    }

    void begin(Op op) {
        current = op;
        stamped = false;
        if (op == null) {
            endCallState();
        }
        if (op == null && signing != 0) {
            signing = 0;
            stopSharedSigning();
            sigSends.clear();
            sigPeers.clear();
            sigRecvs.clear();
        }
    }


    // ---------------------------------------------------------------------- the mismatch guard (JCCL_CHECK 0 and 1)

    /** JCCL_CHECK is not "none": every message, arrive and GPU record carries the running call's guard word. */
    private final boolean guardOn;
    /** The guard word ({@link OpGuard}) of the running call, carried by every message this rank posts; 0 when none. */
    private long guard;
    /** Collective calls started so far on this communicator (each member of a group counts): the same sequence on every rank. */
    private long collIndex;
    /** Index of the running collective call, -1 when none runs. */
    private long callIndex = -1;
    /** First round of the running collective call in the shared segment (0: none), whose arrive lines carry its guard. */
    private long sharedGuardFrom;
    /**
     * How long a wait may find nothing to do before this rank asks the control plane to compare every
     * rank's guard of the running call (the backstop for mismatched calls that deadlock without any
     * message between two ranks whose calls differ: different algorithms chosen for different counts,
     * a rank with 0 elements, the shared segment on one rank and the rings on another); then again
     * every as long while the wait lasts. A wait that long is rare in a healthy job, and the comparison
     * costs a few control frames.
     */
    static final long GUARD_PROBE_NANOS = 1_000_000_000L;
    /** When the current stretch of waiting asks next (relative to its start). */
    private long probeAfter = GUARD_PROBE_NANOS;
    /**
     * The fewest collective calls whose guard words a rank remembers for the control plane. More on larger
     * communicators ({@link #historySize}): each rank may run {@link #MAX_CONFIRMATIONS} calls ahead of its ring
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
    /** An empty native segment: the payload of a ring confirmation (the message is its guard word). */
    private static final MemorySegment EMPTY = Arena.global().allocate(8).asSlice(0, 0);


    /**
     * Starts call {@code op} (an operation, or a collective member of a group): its messages carry
     * {@code op}'s guard word from here on; a collective gets the next collective index (remembered
     * with its guard for the control plane), its rounds in the shared segment carry the guard, and
     * the calls of {@link OpGuard#needsConfirmation} get their ring confirmation ({@link #confirm}).
     * {@code signed}: JCCL_CHECK=1 exchanges the call's full signature ({@link #beginCheck}), whose
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
            throw new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, "rank " + comm.rank() + ": " + describeOp()
                    + " failed: another rank found mismatched collective calls at collective call #" + doomedFrom + " (this one is #" + k
                    + "): " + why);
        }
        int slot = (int) (k & (historySize - 1));
        guardHistoryIndex.setRelease(slot, -1);
        guardHistory.setRelease(slot, g);
        guardHistoryIndex.setRelease(slot, k);
        ShmCollArea area = comm.sharedArea();
        if (area != null) {
            area.guard(g);
            sharedGuardFrom = area.currentRound() + 1;
        }
        // With JCCL_CHECK=1 the signature ring does this (and its signatures, first on those connections, say more).
        if (comm.size() > 1 && !signed && OpGuard.needsConfirmation(g)) {
            confirm(g, k, op.seq);
        }
    }

    /** Ends the call {@link #beginCall} started (its ring confirmation, if any, is not waited for: see {@link #confirm}). */
    void endCall() {
        if (!progressed && confRecvHanded > confHead) {
            progress(); // a call that moved nothing through the connections still looks at the confirmations that arrived
        }
        progressed = false;
        reapConfirmations();
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
                awaitOldestConfirmation();
            }
        }
        ENDED.setOpaque(this, callsEnded + 1);
        callIndex = -1;
        sharedGuardFrom = 0;
    }

    // ---------------------------------------------------------------------- the ring confirmation, deferred

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
    /** Whether the running call has driven the connections' progress. */
    private boolean progressed;
    /** Collective index and guard the backstop asks about while this rank waits for a confirmation, not in a call (-1: none). */
    private long waitIndex = -1;
    private long waitGuard;
    private static final java.lang.invoke.VarHandle OUTSTANDING;
    private static final java.lang.invoke.VarHandle ENDED;

    static {
        try {
            java.lang.invoke.MethodHandles.Lookup l = java.lang.invoke.MethodHandles.lookup();
            OUTSTANDING = l.findVarHandle(OpContext.class, "confOutstanding", int.class);
            ENDED = l.findVarHandle(OpContext.class, "callsEnded", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Whether both ring neighbours' connections are in memory (Connection#inMemory); 0 unknown, 1 yes, 2 no. */
    private int ringInMemory;

    private boolean ringInMemory() {
        if (ringInMemory == 0) {
            ringInMemory = connection(pred()).inMemory() && connection(succ()).inMemory() ? 1 : 2;
        }
        return ringInMemory == 1;
    }

    /** Records call {@code k}'s ring confirmation (guard {@code g}, operation {@code seq}), held until one of (a)-(e) above. */
    private void confirm(long g, long k, long seq) {
        if (confTail - confHead == MAX_CONFIRMATIONS) {
            awaitOldestConfirmation();
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
    boolean confirmationsOutstanding() {
        return (int) OUTSTANDING.getOpaque(this) != 0;
    }

    /** Calls ended so far (any thread; may lag a little): the idle operation thread checks only when none ended for a while. */
    long callsEnded() {
        return (long) ENDED.getOpaque(this);
    }

    private int pred() {
        int n = comm.size();
        return (comm.rank() + n - 1) % n;
    }

    private int succ() {
        return (comm.rank() + 1) % comm.size();
    }

    /** Hands the held confirmation receives to the predecessor's connection, in order. */
    private void handRecvs() {
        if (confRecvHanded < confTail) {
            Connection c = connection(pred());
            for (long j = Math.max(confRecvHanded, confHead); j < confTail; j++) {
                int i = (int) (j % MAX_CONFIRMATIONS);
                confRecv[i] = c.recv(EMPTY, confGuard[i]);
            }
            confRecvHanded = confTail;
        }
    }

    /** Hands the held confirmation sends to the successor's connection, in order. */
    private void handSends() {
        if (confSendHanded < confTail) {
            Connection c = connection(succ());
            for (long j = Math.max(confSendHanded, confHead); j < confTail; j++) {
                int i = (int) (j % MAX_CONFIRMATIONS);
                confSend[i] = c.send(EMPTY, confGuard[i]);
            }
            confSendHanded = confTail;
        }
    }

    private void handAll() {
        handRecvs();
        handSends();
    }

    /** Drops the confirmations that completed, oldest first; one that failed throws (a mismatch names the call it confirmed). */
    private void reapConfirmations() {
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
            throw guardMismatch(g.peer(), g.received(), g.expected(), i);
        }
        int peer = r.isSend() ? succ() : pred();
        throw peerFailed(peer, t instanceof IOException io ? io : new IOException(t.toString(), t));
    }

    /** Waits, driving progress, until the oldest outstanding confirmation completed (the bound on outstanding ones). */
    private void awaitOldestConfirmation() {
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
                idle = progressOrIdle(idle);
            }
        } finally {
            waitIndex = savedIndex;
            waitGuard = savedGuard;
            outsideSince = 0;
        }
        reapConfirmations();
    }

    /** Waits, driving progress, until the confirmations of calls before the running one completed. */
    private void awaitEarlierConfirmations() {
        handAll();
        while (confHead < confTail && confIndex[(int) (confHead % MAX_CONFIRMATIONS)] != callIndex) {
            awaitOldestConfirmation();
        }
        if (confHead < confTail) {
            progress();
        }
    }

    /**
     * The operation thread while no operation runs (the execution lock held): hands the held
     * confirmations to their connections, drives one round of progress and drops the completed ones;
     * a mismatch (or a broken link) throws.
     */
    void confirmIdle() {
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
            progress();
        } finally {
            waitIndex = savedIndex;
            waitGuard = savedGuard;
            outsideSince = 0;
        }
        progressed = false;
        reapConfirmations();
    }

    /**
     * At close(): waits, driving progress, until every outstanding confirmation completed (as long as
     * the calls themselves would have waited: until the peers' confirmations arrive, the communicator is
     * aborted by a peer's failure or timeout, or the backstop finds a mismatch); a mismatch throws.
     */
    void drainConfirmations() {
        while (confTail != confHead) {
            awaitOldestConfirmation();
        }
    }

    /** Sets the guard word of what this rank posts next without starting a call (a group's sends and receives). */
    void guardP2p() {
        if (guardOn) {
            guard = OpGuard.p2p();
            callIndex = -1;
        }
    }

    private void endCallState() {
        outsideSince = 0;
        progressed = false;
        callIndex = -1;
        sharedGuardFrom = 0;
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
    private long outsideSince;
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
    private void probeGuard() {
        boolean confirming = waitIndex >= 0;
        long k = confirming ? waitIndex : callIndex;
        if (k >= 0) {
            org.jccl.internal.control.ControlPlane cp = comm.control();
            if (cp != null) {
                cp.probeGuard(k, confirming ? waitGuard : guard);
            }
        }
    }

    /** The error for a message or an arrive of {@code peer}'s call {@code theirs} met by this rank's call {@code mine}. */
    private org.jccl.InvalidUsageException guardMismatch(int peer, long theirs, long mine) {
        return guardMismatch(peer, theirs, mine, -1);
    }

    /** The error of a transport's guard mismatch: of an outstanding confirmation's receive if it failed so, else of the running call. */
    private org.jccl.InvalidUsageException guardMismatch(org.jccl.spi.GuardMismatchException e) {
        for (long j = confHead; j < confRecvHanded; j++) {
            int i = (int) (j % MAX_CONFIRMATIONS);
            P2pRequest r = confRecv[i];
            if (r != null && r.error() == e && confGuard[i] == e.expected() && (current == null || guard != e.expected() || callIndex < 0)) {
                return guardMismatch(e.peer(), e.received(), e.expected(), i);
            }
        }
        return guardMismatch(e.peer(), e.received(), e.expected(), -1);
    }

    /**
     * The error for {@code peer}'s call {@code theirs} met by this rank's call {@code mine}; {@code conf} >= 0: found
     * by the confirmation in that slot, of a call that returned earlier on this rank.
     */
    private org.jccl.InvalidUsageException guardMismatch(int peer, long theirs, long mine, int conf) {
        PeerInfo from = comm.peerInfo(peer);
        String where = current != null ? describeOp() + " failed: " : "communicator " + comm.idShort() + ": ";
        mismatchAt = -1;
        if (conf >= 0) {
            where += "the ring confirmation of collective call #" + confIndex[conf] + " (operation #" + confSeq[conf] + ", "
                    + OpGuard.describe(confGuard[conf]) + "), which had already returned on this rank with a result that used no"
                    + " other rank's data unchecked, found ";
            mismatchAt = confIndex[conf];
        }
        String context = earlier(conf, theirs, mine);
        if (conf < 0 && context.isEmpty() && OpGuard.kind(theirs) != OpGuard.kind(mine)) {
            org.jccl.InvalidUsageException exact = exactVerdict();
            if (exact != null) {
                return exact;
            }
        }
        return new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, "rank " + comm.rank() + ": " + where
                + "mismatched collective calls: rank " + peer + " (" + from.host() + " pid " + from.pid() + ") called "
                + OpGuard.describe(theirs) + " but rank " + comm.rank() + " called " + OpGuard.describe(mine) + context
                + "; they differ in "
                + String.join(", ", OpGuard.differences(theirs, mine)) + " (found by the mismatch guard)"
                + ". Every rank must call the same collectives in the same order, with the same count, data type, op and root");
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
        if (cp == null || callIndex < 0 || current == null) {
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
                return new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, "rank " + comm.rank() + ": " + describeOp() + " failed: "
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
     * without its ring confirmation yet (besides {@code conf}; the peer's message met a later call before that
     * confirmation arrived, on another socket for instance), else, when the peer's message is of this rank's
     * previous collective call, that call (the peer is a call behind).
     */
    private String earlier(int conf, long theirs, long mine) {
        for (long j = confHead; j < confTail; j++) {
            int i = (int) (j % MAX_CONFIRMATIONS);
            P2pRequest r = confRecv[i];
            if (i != conf && confIndex[i] != callIndex && r != null && r.isDone() && r.error() != null) {
                mismatchAt = confIndex[i];
                return ", after collective call #" + confIndex[i] + ", " + OpGuard.describe(confGuard[i]) + " (operation #" + confSeq[i]
                        + "), which returned on this rank before the ring confirmation of rank " + pred() + " for it arrived";
            }
        }
        long prev = (callIndex >= 0 ? callIndex : collIndex) - 1;
        if (conf < 0 && prev >= 0 && OpGuard.kind(theirs) != OpGuard.kind(mine)) {
            long g = guardAt(prev);
            // Only when the peer's message is of this rank's previous call: else the peer may as well be a call ahead.
            if (g == theirs) {
                mismatchAt = prev;
                return " after collective call #" + prev + ", " + OpGuard.describe(g);
            }
        }
        return "";
    }

    /** Compares {@code q}'s guard word of {@code round} (read after its arrive) with this rank's call; see {@link ShmCollArea#guardOf}. */
    private void checkSharedGuard(ShmCollArea a, int q, long round) {
        long g = a.guardOf(q);
        if (((g ^ round) & 1) == 0 && OpGuard.mismatch(g & ~1L, guard)) {
            throw guardMismatch(q, g & ~1L, guard);
        }
    }

    // ---------------------------------------------------------------------- JCCL_CHECK signatures

    /** Checked collectives run so far on this communicator (the same count on every rank). */
    private long collSeq;
    /** Number of the running checked collective (0: none runs), compared with the per-peer marks below. */
    private long signing;
    private long[] signedTo;
    private long[] signedFrom;
    private Arena sigArena;  // ofAuto: see beginCheck
    private MemorySegment sigMine;
    /** The signature each peer sent for the running collective, 32 bytes per peer. */
    private MemorySegment sigTheirs;
    private final List<P2pRequest> sigSends = new ArrayList<>();
    /** Peers whose signature was received or is awaited and not compared yet, with their requests. */
    private final List<Integer> sigPeers = new ArrayList<>();
    private final List<P2pRequest> sigRecvs = new ArrayList<>();

    /**
     * Starts the signature check of a collective ({@code JCCL_CHECK=1}). Each connection the
     * operation uses carries this rank's signature as the first message of the operation in each
     * direction (posted just before the operation's first send or receive on it; connections match
     * messages in order), so no data from a peer that called something else is ever taken as this
     * operation's. On top, every rank signs to the next rank of the ring and reads the previous one's,
     * so that a mismatch is found during the operation even where a collective only sends (a
     * broadcast's root). Signatures are compared as soon as they arrive, while the algorithm waits
     * ({@link #await}), and at the latest in {@link #endCheck}: a mismatch is an error naming both
     * ranks and what differs. On two ranks the ring covers both directions: one extra message each way.
     */
    void beginCheck(Op op) {
        long seq = collSeq++;
        int n = comm.size();
        if (n < 2) {
            return;
        }
        if (sigArena == null) {
            // Automatic, not closed with the connections: the in-JVM transport copies from the sender's
            // memory, and a peer may still be copying this rank's signature when this rank aborts.
            sigArena = Arena.ofAuto();
            sigMine = sigArena.allocate(OpSignature.BYTES, 8);
            sigTheirs = sigArena.allocate((long) OpSignature.BYTES * n, 8);
            signedTo = new long[n];
            signedFrom = new long[n];
        }
        OpSignature.encode(op, seq, sigMine);
        signing = seq + 1;
        ShmCollArea area = comm.sharedArea();
        if (area != null) {
            // Collectives through the shared segment send no messages: the signature travels with every arrive.
            area.sign(sigMine);
            sharedSigFrom = area.currentRound() + 1;
        }
        signFrom((comm.rank() + n - 1) % n);
        signTo((comm.rank() + 1) % n);
    }

    private void signTo(int peer) {
        if (confSendHanded != confTail && peer == succ()) {
            handSends();
        }
        signedTo[peer] = signing;
        // No guard word on the signature itself (JCCL_CHECK=1): the signature, which says more, is compared instead.
        sigSends.add(connection(peer).send(sigMine, 0));
    }

    private void signFrom(int peer) {
        if (confRecvHanded != confTail && peer == pred()) {
            handRecvs();
        }
        signedFrom[peer] = signing;
        sigPeers.add(peer);
        sigRecvs.add(connection(peer).recv(theirs(peer), 0));
    }

    private MemorySegment theirs(int peer) {
        return sigTheirs.asSlice((long) peer * OpSignature.BYTES, OpSignature.BYTES);
    }

    /** Waits for every signature message of the running collective and compares (see {@link #beginCheck}). */
    void endCheck() {
        while (!sigRecvs.isEmpty()) {
            P2pRequest r = sigRecvs.getFirst();
            int idle = 0;
            while (!r.isDone()) {
                idle = progressOrIdle(idle);
            }
            if (r.error() != null) {
                check(r);
            }
            pollSignature();
        }
        for (P2pRequest s : sigSends) {
            await(s);
        }
        sigSends.clear();
        signing = 0;
        stopSharedSigning();
    }

    private void stopSharedSigning() {
        if (sharedSigFrom != 0) {
            sharedSigFrom = 0;
            ShmCollArea area = comm.sharedArea();
            if (area != null) {
                area.sign(null);
            }
        }
    }

    /** Compares the signatures that arrived with this rank's; throws the first mismatch. Cheap when none is pending. */
    private void pollSignature() {
        for (int i = 0; i < sigRecvs.size(); i++) {
            P2pRequest r = sigRecvs.get(i);
            if (r.isDone() && r.error() == null) {
                int peer = sigPeers.remove(i);
                sigRecvs.remove(i);
                i--;
                verifySignature(peer);
            }
        }
    }

    private void verifySignature(int peer) {
        MemorySegment theirs = theirs(peer);
        PeerInfo from = comm.peerInfo(peer);
        String where = "rank " + comm.rank() + ": " + describeOp();
        if (!OpSignature.valid(theirs)) {
            throw new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, where + " failed: the first message from " + from.describe()
                    + " was not an operation signature. JCCL_CHECK must have the same value on every rank, and every rank must"
                    + " call the same collectives in the same order");
        }
        List<String> diff = OpSignature.differences(theirs, sigMine);
        if (!diff.isEmpty()) {
            throw new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, where + " failed: mismatched collective calls: rank " + peer
                    + " (" + from.host() + " pid " + from.pid() + ") called " + OpSignature.describe(theirs) + " but rank " + comm.rank()
                    + " called " + OpSignature.describe(sigMine) + "; they differ in " + String.join(", ", diff)
                    + ". Every rank must call the same collectives in the same order, with the same count, data type, op and root");
        }
    }

    /**
     * The communicator's shared collective segment (every rank of the communicator on this host over
     * SHM), or null; the same on every rank.
     */
    @Override
    public ShmCollArea sharedArea() {
        if (group != null) {
            return null;
        }
        if (confTail != confHead) {
            // A collective through the shared segment meets no message that comes after the earlier calls' ring
            // confirmations: it waits for them before its first arrive, so that a mismatch they show fails it (with
            // the calls named) rather than a round of it. Every rank of the segment is in this call, and each hands
            // its confirmations here (or while it waits).
            awaitEarlierConfirmations();
        }
        return comm.sharedArea();
    }

    /**
     * Waits until every peer's {@code arrive} word (or {@code reduced} word) in the shared collective
     * segment has reached {@code round}. The common case, peers already there, is one acquire load
     * per peer. Otherwise the idle strategy of {@link #await}: spin ({@code JCCL_IDLE_SPIN_US}), then
     * yield ({@code JCCL_IDLE_YIELD_US}), then park in growing steps of at most 1 ms (nothing can ring
     * a parked rank awake here, so a straggler is noticed within 1 ms). Throughout it fails, in
     * bounded time, when the communicator is aborted, a peer closed its communicator, or a peer's
     * process is gone (checked every 50 ms).
     */
    @Override
    public void awaitShared(ShmCollArea a, boolean reducedWord, long round) {
        int n = a.ranks();
        int me = a.rank();
        for (int q = 0; q < n; q++) {
            if (q != me && word(a, q, reducedWord) < round) {
                awaitSharedPeer(a, q, reducedWord, round);
            }
            if (sharedSigFrom != 0 && !reducedWord && round >= sharedSigFrom && q != me) {
                verifyShared(a, q, round);
            }
            if (sharedGuardFrom != 0 && !reducedWord && round >= sharedGuardFrom && q != me) {
                checkSharedGuard(a, q, round);
            }
        }
    }

    /** {@link #awaitShared} for one peer {@code q}. */
    @Override
    public void awaitSharedOne(ShmCollArea a, int q, boolean reducedWord, long round) {
        if (word(a, q, reducedWord) < round) {
            awaitSharedPeer(a, q, reducedWord, round);
        }
        if (sharedSigFrom != 0 && !reducedWord && round >= sharedSigFrom) {
            verifyShared(a, q, round);
        }
        if (sharedGuardFrom != 0 && !reducedWord && round >= sharedGuardFrom) {
            checkSharedGuard(a, q, round);
        }
    }

    /** First round of the running checked collective in the shared segment (0: none); see {@link #beginCheck}. */
    private long sharedSigFrom;

    /** Compares the signature {@code q} published with its arrive of {@code round} (a round of the running collective). */
    private void verifyShared(ShmCollArea a, int q, long round) {
        MemorySegment theirs = a.signatureOf(q, round);
        List<String> diff = OpSignature.differences(theirs, sigMine);
        if (!OpSignature.valid(theirs) || !diff.isEmpty()) {
            MemorySegment copy = theirs(q);
            MemorySegment.copy(theirs, 0, copy, 0, OpSignature.BYTES);
            verifySignature(q);
        }
    }

    /**
     * Pure polling (no PAUSE) at the start of a wait in the shared segment; see {@link #awaitSharedPeer}.
     * Short: it covers the sub-microsecond waits of small operations, while a rank that waits for a
     * peer busy copying goes back to PAUSE (should the two vCPUs be SMT siblings on the host, a
     * PAUSE-less spin would slow the peer's copy down).
     */
    private static final long HOT_SPIN_NANOS = 5_000;

    private static long word(ShmCollArea a, int q, boolean reducedWord) {
        return reducedWord ? a.reducedOf(q) : a.arrivedOf(q);
    }

    private void awaitSharedPeer(ShmCollArea a, int q, boolean reducedWord, long round) {
        // The clock (System.nanoTime, ~25 ns here) is first read at the first check, after 31 polls:
        // most waits of small operations end before, and a read at the start would delay noticing
        // the peer's arrive by as much.
        Backoff idle = sharedBackoff;
        long nextLiveness = 0;
        boolean timed = false;
        boolean nudged = false;
        int spins = 0;
        boolean polite = false;
        long probeAt = GUARD_PROBE_NANOS;
        while (word(a, q, reducedWord) < round) {
            comm.checkNotAborted(current);
            if ((++spins & 31) != 0) {
                // No PAUSE (Thread.onSpinWait) for the first HOT_SPIN_NANOS: under KVM a PAUSE loop
                // can make the hypervisor deschedule the vCPU (pause-loop exiting), and measured on
                // the 2-core VM a cache-line round trip between two processes took 0.5-1.4 us with
                // it and 0.16 us without. Past that, peers are late anyway and PAUSE is polite.
                if (polite) {
                    Thread.onSpinWait();
                }
                continue;
            }
            if (!sigRecvs.isEmpty()) {
                progress();
                pollSignature();
            } else if (confTail != confHead) {
                progress(); // confirmations of earlier calls move while this rank waits in the segment
            }
            if (a.closedBy(q)) {
                // The peer stores its words before its closed state: re-read before blaming it.
                if (word(a, q, reducedWord) >= round) {
                    return;
                }
                throw peerFailed(q, new IOException(a.closedMessage(q)));
            }
            long now = System.nanoTime();
            if (!timed) {
                timed = true;
                stamp(now);
                idle.reset(now);
                nextLiveness = now + 50_000_000L;
            }
            if (now - nextLiveness >= 0) {
                nextLiveness = now + 50_000_000L;
                String gone = a.processGone(q);
                if (gone != null && word(a, q, reducedWord) < round) {
                    throw peerFailed(q, new IOException(gone));
                }
            }
            long waited = idle.waited(now);
            if (waited >= HAND_AFTER_NANOS && (confRecvHanded != confTail || confSendHanded != confTail)) {
                handAll();
            }
            if (waited >= probeAt) {
                probeAt += GUARD_PROBE_NANOS;
                probeGuard();
            }
            if (!nudged && waited >= NUDGE_AFTER_NANOS) {
                nudged = true;
                Executor.nudgeLate(NUDGE_AFTER_NANOS);
            }
            polite = waited > HOT_SPIN_NANOS;
            idle.idle(now);
        }
    }

    /** The current operation's first clock read while waiting: its times in the flight recorder (FlightRecorder's class comment). */
    private void stamp(long now) {
        if (!stamped && current != null) {
            stamped = true;
            comm.flightRecorder().stamp(current.seq, now);
        }
    }

    /**
     * Counts an operation through the shared collective segment that moved {@code perPeer} bytes
     * each way between this rank and every peer (a peer reads that much out of this rank's area,
     * this rank as much out of each peer's). Once per operation, never per round.
     */
    @Override
    public void countShared(long perPeer) {
        counters.shared(rank(), perPeer);
    }

    /**
     * Counts a two-step all-reduce of {@code count} elements of {@code elementBytes} through the
     * shared segment, in rounds of {@code perRound} elements cut into one slice per rank: per round a
     * peer reads its slice out of this rank's area and this rank's reduced slice, and this rank reads
     * as much from it, so each pair moves (its slice + this rank's slice) each way.
     */
    @Override
    public void countSharedSlices(long count, long perRound, int elementBytes) {
        int n = size();
        int me = rank();
        long full = count / perRound;
        long last = count % perRound;
        for (int q = 0; q < n; q++) {
            if (q != me) {
                long elems = full * (slice(perRound, n, q) + slice(perRound, n, me)) + (last == 0 ? 0 : slice(last, n, q) + slice(last, n, me));
                counters.sharedWith(q, elems * elementBytes);
            }
        }
    }

    /** Elements of rank q's slice when {@code len} elements are cut into n slices, the first len % n one longer. */
    private static long slice(long len, int n, int q) {
        return len / n + (q < len % n ? 1 : 0);
    }

    /** Posts a send of {@code src} to {@code peer}; src must stay unchanged until the request is done. */
    @Override
    public P2pRequest send(int groupPeer, MemorySegment src) {
        int peer = global(groupPeer);
        if (signing != 0 && signedTo[peer] != signing) {
            signTo(peer);
        }
        counters.sent(peer, src.byteSize());
        if (confSendHanded != confTail && peer == succ()) {
            handSends(); // the confirmation first: the order both ends agree on (and on TCP one write for both)
        }
        return connection(peer).send(src, guard);
    }

    /** Posts a receive of exactly {@code dst.byteSize()} bytes from {@code peer}. */
    @Override
    public P2pRequest recv(int groupPeer, MemorySegment dst) {
        int peer = global(groupPeer);
        if (signing != 0 && signedFrom[peer] != signing) {
            signFrom(peer);
        }
        counters.received(peer, dst.byteSize());
        if (confRecvHanded != confTail && peer == pred()) {
            handRecvs();
        }
        return connection(peer).recv(dst, guard);
    }

    /** Waits for one request, driving progress on every connection. */
    @Override
    public void await(P2pRequest r) {
        int idle = 0;
        while (!r.isDone()) {
            idle = progressOrIdle(idle);
            if (!sigRecvs.isEmpty()) {
                pollSignature();
            }
        }
        if (!sigRecvs.isEmpty()) {
            // The peer's signature preceded this message on its connection: compare it before the data is used.
            pollSignature();
        }
        check(r);
    }

    /** Waits for all requests (nulls are skipped). */
    @Override
    public void awaitAll(P2pRequest... rs) {
        for (P2pRequest r : rs) {
            if (r != null) {
                await(r);
            }
        }
    }

    /** Waits for all requests in the list, then clears it. */
    @Override
    public void awaitAll(List<P2pRequest> rs) {
        for (P2pRequest r : rs) {
            await(r);
        }
        rs.clear();
    }


    /**
     * Scratch memory of at least {@code bytes} for slot {@code slot} (0..5, see {@link #SCRATCH_SLOTS}), reused across operations
     * and grown on demand; contents are undefined. Slots never alias each other.
     */
    @Override
    public MemorySegment scratch(int slot, long bytes) {
        MemorySegment s = scratch[slot];
        if (s == null || s.byteSize() < bytes) {
            if (scratchArena == null) {
                scratchArena = Arena.ofShared();
            }
            long size = Math.max(bytes, s == null ? 4096 : Math.min(s.byteSize() * 2, Math.max(bytes, 1L << 30)));
            // The old slot's memory stays in the arena until close; growth is rare (powers of two).
            scratch[slot] = scratchArena.allocate(size, 64);
        }
        return scratch[slot].asSlice(0, bytes);
    }

    private int progressOrIdle(int idle) {
        int work = progress();
        if (work > 0) {
            return 0;
        }
        comm.checkNotAborted(current);
        long now = System.nanoTime();
        Backoff b = linkBackoff;
        if (idle++ == 0) {
            b.reset(now);
            linkNudged = false;
            stamp(now);
            probeAfter = GUARD_PROBE_NANOS;
        }
        long waited = b.waited(now);
        if (waited >= HAND_AFTER_NANOS && (confRecvHanded != confTail || confSendHanded != confTail)) {
            handAll(); // this rank waits anyway: its held confirmations go now (a peer may wait for them)
        }
        if (waited >= probeAfter) {
            probeAfter += GUARD_PROBE_NANOS;
            probeGuard();
        }
        if (!linkNudged && waited >= NUDGE_AFTER_NANOS) {
            linkNudged = true;
            Executor.nudgeLate(NUDGE_AFTER_NANOS);
        }
        b.idle(now);
        return idle;
    }

    /**
     * Blocks until a watched channel is readable, {@link #wake()} is called, or a short timeout.
     * The flag is raised before a last progress check, so a wake() racing with the decision to
     * block is never lost (a wakeup before select() makes select() return at once).
     */
    private void block(long nanos) {
        sleeping = true;
        try {
            if (progress() > 0) {
                return;
            }
            selector().select(Math.max(1, nanos / 1_000_000));
            selector.selectedKeys().clear();
        } catch (IOException e) {
            throw new JcclException(ErrorCode.RESOURCE, "rank " + comm.rank() + ": waiting for network activity failed: " + e
                    + (ResourceLimits.outOfFileDescriptors(e) ? "; " + ResourceLimits.openFilesAdvice() : ""), e);
        } finally {
            sleeping = false;
        }
    }

    /** Wakes the operation thread if it is blocked; any thread. Cheap (a volatile read) when it is not. */
    void wake() {
        if (sleeping) {
            Selector s = selector;
            if (s != null) {
                s.wakeup();
            }
        }
    }

    private Selector selector() throws IOException {
        if (selector == null) {
            selector = Selector.open();
        }
        return selector;
    }

    private void watch(Connection c) {
        SelectableChannel[] chans = c.channels();
        if (chans.length == 0) {
            return;
        }
        try {
            Selector sel = selector();
            for (SelectableChannel ch : chans) {
                ch.register(sel, SelectionKey.OP_READ);
            }
        } catch (ClosedChannelException e) {
            // The connection already failed; its next progress() reports it.
        } catch (IOException e) {
            throw new JcclException(ErrorCode.RESOURCE, "rank " + comm.rank() + ": cannot watch the connection to rank " + c.peer() + ": " + e
                    + (ResourceLimits.outOfFileDescriptors(e) ? "; " + ResourceLimits.openFilesAdvice() : ""), e);
        }
    }

    /** One round of progress over every open connection; returns the work done. */
    public int progress() {
        progressed = true;
        int work = 0;
        for (int i = 0, n = open.size(); i < n; i++) {
            Connection c = open.get(i);
            try {
                work += c.progress();
            } catch (org.jccl.spi.GuardMismatchException e) {
                pollSignature();
                throw guardMismatch(e);
            } catch (IOException e) {
                pollSignature();
                mismatchElsewhere(c);
                throw peerFailed(c.peer(), e);
            }
        }
        return work;
    }

    /**
     * A link broke: when a message of another call waits on another connection (a peer that left may have
     * left because of it), that mismatch is the better report; one round of progress over the other
     * connections finds it. Only on the failure path.
     */
    private void mismatchElsewhere(Connection broken) {
        for (int i = 0, n = open.size(); i < n; i++) {
            Connection c = open.get(i);
            if (c != broken) {
                try {
                    c.progress();
                } catch (org.jccl.spi.GuardMismatchException e) {
                    throw guardMismatch(e);
                } catch (IOException | RuntimeException ignored) {
                    // that link failed too: the first failure is reported
                }
            }
        }
    }

    private void check(P2pRequest r) {
        Throwable t = r.error();
        if (t != null) {
            pollSignature(); // a mismatch explains a wrong-sized message better than its size does
            if (t instanceof org.jccl.spi.GuardMismatchException g) {
                throw guardMismatch(g);
            }
            if (t instanceof JcclException je) {
                throw je;
            }
            throw new JcclException(ErrorCode.INTERNAL, "rank " + comm.rank() + ": " + describeOp() + " failed: " + t, t);
        }
    }

    private Connection connection(int peer) {
        Connection c = connections[peer];
        if (c == null) {
            outsideSince = 0;
            c = comm.connect(peer, current);
            outsideSince = 0;
            connections[peer] = c;
            open.add(c);
            watch(c);
        }
        return c;
    }

    private PeerFailedException peerFailed(int peer, IOException e) {
        PeerInfo p = comm.peerInfo(peer);
        String msg = "rank " + comm.rank() + ": " + describeOp() + " failed: link to " + p.describe() + " broke: " + e.getMessage();
        return new PeerFailedException(peer, msg, e);
    }

    String describeOp() {
        return current == null ? "(no operation)" : current.describe() + " on communicator " + comm.idShort();
    }

    /** Closes every connection and frees scratch memory; operation thread only. */
    void closeAll() {
        java.util.Arrays.fill(confRecv, null);
        java.util.Arrays.fill(confSend, null);
        confHead = confTail = confRecvHanded = confSendHanded = 0;
        OUTSTANDING.setOpaque(this, 0);
        for (Connection c : open) {
            try {
                c.close();
            } catch (RuntimeException e) {
                Log.trace(Log.Subsys.NET, comm.rank(), "closing connection to rank " + c.peer() + ": " + e);
            }
        }
        open.clear();
        java.util.Arrays.fill(connections, null);
        if (selector != null) {
            try {
                selector.close();
            } catch (IOException e) {
                Log.trace(Log.Subsys.NET, comm.rank(), "closing the selector: " + e);
            }
            selector = null;
        }
        if (sigArena != null) {
            sigArena = null;
            signing = 0;
            sigSends.clear();
            sigPeers.clear();
            sigRecvs.clear();
        }
        if (scratchArena != null) {
            scratchArena.close();
            scratchArena = null;
            java.util.Arrays.fill(scratch, null);
        }
    }
}
