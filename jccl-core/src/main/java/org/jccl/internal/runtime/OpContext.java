package org.jccl.internal.runtime;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.PeerFailedException;
import org.jccl.internal.algo.CollectiveContext;
import org.jccl.internal.tune.AlgoSelector;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.internal.tune.Tuner;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.internal.transport.shm.ShmCollArea;

/**
 * What algorithms see while an operation runs: point-to-point posts to any peer, waiting with
 * progress, the shared segment's waits, and scratch memory. Used only by the thread that holds the
 * executor's execution lock (the caller running its own operations, or the operation thread): it is
 * the progress engine, there is no other thread moving bytes, so nothing here is synchronised.
 * Every message it posts carries the running call's guard word ({@link MismatchGuard}), after the
 * call's held ring confirmations ({@link RingConfirmations}) and, with {@code JCCL_CHECK=1}, its
 * signature ({@link SignatureCheck}).
 *
 * <p>Waiting follows one {@link Backoff}: spin briefly, then yield, then block in the selector of
 * the connections ({@link Links}; sockets wake it when bytes arrive, the in-JVM transport and
 * abort() through {@link #wake()}) or, in the shared segment, park: a rank whose peer is a few
 * microseconds behind reacts at once, while one waiting for a straggler uses no CPU.
 *
 * <p><b>Why about 610 lines in one class.</b> It is the one progress engine of a communicator: the
 * posts, the waits on connections and in the shared segment, the stage groups and the scratch all
 * read and write the same per-operation state (the running {@link Op}, the group narrowing, the two
 * {@link Backoff}s, whether the clock was read) on the hot path, without locks, because one thread
 * at a time runs here. Split, the parts would share that state through a state object or
 * package-private fields, which is what this class is. The parts that are not per-operation state already
 * live apart ({@link Links}, {@link MismatchGuard}, {@link RingConfirmations}, {@link SignatureCheck},
 * {@link Backoff}).
 */
public final class OpContext implements CollectiveContext {
    /** Longest blind block; a safety net only, since sockets and wake() end the block early. */
    private static final long MAX_BLOCK_MILLIS = 50;

    private final CommunicatorImpl comm;
    /** Bytes per peer (jccl status); written here only, on the thread running the operation. */
    private final org.jccl.internal.control.Counters counters;
    /** The open connections and the selector of the park phase. */
    private final Links links;
    private Op current;
    /** Whether the current operation's waits have read the clock (and so stamped it in the flight recorder). */
    private boolean stamped;
    private Arena scratchArena;
    private final MemorySegment[] scratch = new MemorySegment[SCRATCH_SLOTS];
    /** Scratch slots: 0..3 for the algorithms of Collectives, 4..5 for the hierarchical ones around them. */
    public static final int SCRATCH_SLOTS = 6;

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
    /** The mismatch guard, its ring confirmations, and the JCCL_CHECK=1 signatures of the running call. */
    private final MismatchGuard guard;
    private final RingConfirmations conf;
    private final SignatureCheck sig;
    /** When the current wait on connections asks the control plane next (relative to its start; MismatchGuard#probeGuard). */
    private long probeAfter = MismatchGuard.GUARD_PROBE_NANOS;
    /**
     * A wait that has found nothing to do this long looks for operations of other communicators of this JVM that
     * nobody runs (Executor#nudgeLate): one thread may drive several (jccl-cuda's staged group).
     */
    static final long NUDGE_AFTER_NANOS = 50_000;

    OpContext(CommunicatorImpl comm) {
        this.comm = comm;
        this.links = new Links(comm.rank(), comm.size());
        this.guard = new MismatchGuard(comm, this);
        this.conf = new RingConfirmations(this, guard, comm.rank(), comm.size());
        guard.confirmations(conf);
        this.sig = new SignatureCheck(comm, this, conf);
        long spin = comm.settings().idleSpinNanos();
        long yield = comm.settings().idleYieldNanos();
        long spinYield = comm.settings().idleSpinYieldNanos();
        boolean oversubscribed = comm.localRanks() > HOST_CPUS;
        this.linkBackoff = new Backoff(spin, yield, spinYield, 0, oversubscribed, 1_000_000L, MAX_BLOCK_MILLIS * 1_000_000L,
                nanos -> links.block(nanos, this::progress, comm.routing()::armWakeFds));
        // Every rank of a shared segment is on this host: more of them than CPUs means the rank we wait for may be
        // waiting for our core.
        this.sharedBackoff = new Backoff(spin, yield, spinYield, HOT_SPIN_NANOS, oversubscribed, 2_000L, 1_000_000L, Backoff.PARK);
        this.counters = comm.counters();
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
            guard.endCallState();
            sig.reset();
        }
    }

    /** Whether an operation is running. */
    boolean running() {
        return current != null;
    }

    MismatchGuard guard() {
        return guard;
    }

    RingConfirmations confirmations() {
        return conf;
    }

    SignatureCheck signatures() {
        return sig;
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
        if (!conf.empty()) {
            // A collective through the shared segment meets no message that comes after the earlier calls' ring
            // confirmations: it waits for them before its first arrive, so that a mismatch they show fails it (with
            // the calls named) rather than a round of it. Every rank of the segment is in this call, and each hands
            // its confirmations here (or while it waits).
            conf.awaitEarlier(guard.callIndex);
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
            if (!reducedWord && q != me && sig.sharedFrom(round)) {
                sig.verifyShared(a, q, round);
            }
            if (!reducedWord && q != me && guard.sharedFrom(round)) {
                guard.checkSharedGuard(a, q, round);
            }
        }
    }

    /** {@link #awaitShared} for one peer {@code q}. */
    @Override
    public void awaitSharedOne(ShmCollArea a, int q, boolean reducedWord, long round) {
        if (word(a, q, reducedWord) < round) {
            awaitSharedPeer(a, q, reducedWord, round);
        }
        if (!reducedWord && sig.sharedFrom(round)) {
            sig.verifyShared(a, q, round);
        }
        if (!reducedWord && guard.sharedFrom(round)) {
            guard.checkSharedGuard(a, q, round);
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
        long probeAt = MismatchGuard.GUARD_PROBE_NANOS;
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
            if (sig.awaiting()) {
                progress();
                sig.poll();
            } else if (!conf.empty()) {
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
            if (waited >= RingConfirmations.HAND_AFTER_NANOS && conf.anyHeld()) {
                conf.handAll();
            }
            if (waited >= probeAt) {
                probeAt += MismatchGuard.GUARD_PROBE_NANOS;
                guard.probeGuard();
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
        if (sig.unsignedTo(peer)) {
            sig.signTo(peer);
        }
        counters.sent(peer, src.byteSize());
        if (conf.sendsHeldFor(peer)) {
            conf.handSends(); // the confirmation first: the order both ends agree on (and on TCP one write for both)
        }
        return connection(peer).send(src, guard.guard);
    }

    /** Posts a receive of exactly {@code dst.byteSize()} bytes from {@code peer}. */
    @Override
    public P2pRequest recv(int groupPeer, MemorySegment dst) {
        int peer = global(groupPeer);
        if (sig.unsignedFrom(peer)) {
            sig.signFrom(peer);
        }
        counters.received(peer, dst.byteSize());
        if (conf.recvsHeldFor(peer)) {
            conf.handRecvs();
        }
        return connection(peer).recv(dst, guard.guard);
    }

    /** Waits for one request, driving progress on every connection. */
    @Override
    public void await(P2pRequest r) {
        int idle = 0;
        while (!r.isDone()) {
            idle = progressOrIdle(idle);
            if (sig.awaiting()) {
                sig.poll();
            }
        }
        if (sig.awaiting()) {
            // The peer's signature preceded this message on its connection: compare it before the data is used.
            sig.poll();
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

    int progressOrIdle(int idle) {
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
            probeAfter = MismatchGuard.GUARD_PROBE_NANOS;
        }
        long waited = b.waited(now);
        if (waited >= RingConfirmations.HAND_AFTER_NANOS && conf.anyHeld()) {
            conf.handAll(); // this rank waits anyway: its held confirmations go now (a peer may wait for them)
        }
        if (waited >= probeAfter) {
            probeAfter += MismatchGuard.GUARD_PROBE_NANOS;
            guard.probeGuard();
        }
        if (!linkNudged && waited >= NUDGE_AFTER_NANOS) {
            linkNudged = true;
            Executor.nudgeLate(NUDGE_AFTER_NANOS);
        }
        b.idle(now);
        return idle;
    }

    /** Wakes the thread running an operation if it is blocked in the selector; any thread. Cheap when it is not. */
    void wake() {
        links.wake();
    }

    /** One round of progress over every open connection; returns the work done. */
    public int progress() {
        conf.progressed = true;
        int work = 0;
        List<Connection> open = links.open;
        for (int i = 0, n = open.size(); i < n; i++) {
            Connection c = open.get(i);
            try {
                work += c.progress();
            } catch (org.jccl.spi.GuardMismatchException e) {
                sig.poll();
                throw guard.guardMismatch(e);
            } catch (IOException e) {
                sig.poll();
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
        List<Connection> open = links.open;
        for (int i = 0, n = open.size(); i < n; i++) {
            Connection c = open.get(i);
            if (c != broken) {
                try {
                    c.progress();
                } catch (org.jccl.spi.GuardMismatchException e) {
                    throw guard.guardMismatch(e);
                } catch (IOException | RuntimeException ignored) {
                    // that link failed too: the first failure is reported
                }
            }
        }
    }

    void check(P2pRequest r) {
        Throwable t = r.error();
        if (t != null) {
            sig.poll(); // a mismatch explains a wrong-sized message better than its size does
            if (t instanceof org.jccl.spi.GuardMismatchException g) {
                throw guard.guardMismatch(g);
            }
            if (t instanceof JcclException je) {
                throw je;
            }
            throw new JcclException(ErrorCode.INTERNAL, "rank " + comm.rank() + ": " + describeOp() + " failed: " + t, t);
        }
    }

    Connection connection(int peer) {
        Connection c = links.get(peer);
        if (c == null) {
            guard.outsideSince = 0;
            c = comm.connect(peer, current);
            guard.outsideSince = 0;
            links.add(peer, c);
        }
        return c;
    }

    PeerFailedException peerFailed(int peer, IOException e) {
        PeerInfo p = comm.peerInfo(peer);
        String msg = "rank " + comm.rank() + ": " + describeOp() + " failed: link to " + p.describe() + " broke: " + e.getMessage();
        return new PeerFailedException(peer, msg, e);
    }

    String describeOp() {
        return current == null ? "(no operation)" : current.describe() + " on communicator " + comm.idShort();
    }

    /** Closes every connection and frees scratch memory; operation thread only. */
    void closeAll() {
        conf.clear();
        links.close();
        sig.clear();
        if (scratchArena != null) {
            scratchArena.close();
            scratchArena = null;
            java.util.Arrays.fill(scratch, null);
        }
    }
}
