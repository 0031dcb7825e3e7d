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
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.spi.CollectiveCall;
import org.jccl.spi.CollectiveProvider;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;

/**
 * What algorithms see while an operation runs: point-to-point posts to any peer, waiting with
 * progress, the collective provider's calls ({@link ProviderCall}), and scratch memory. Used only by the thread that holds the
 * executor's execution lock (the caller running its own operations, or the operation thread): it is
 * the progress engine, there is no other thread moving bytes, so nothing here is synchronised.
 * Every message it posts carries the running call's guard word ({@link MismatchGuard}), after the
 * call's held ring confirmations ({@link RingConfirmations}) and, with {@code JCCL_CHECK=1}, its
 * signature ({@link SignatureCheck}).
 *
 * <p>Waiting follows one {@link Backoff}: spin briefly, then yield, then block in the selector of
 * the connections ({@link Links}; sockets wake it when bytes arrive, the in-JVM transport and
 * abort() through {@link #wake()}) or, in a collective provider, park: a rank whose peer is a few
 * microseconds behind reacts at once, while one waiting for a straggler uses no CPU.
 *
 * <p><b>One class.</b> It is the one progress engine of a communicator: the
 * posts, the waits on connections, the stage groups and the scratch all
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
    /** The runtime's side of calls through the collective provider, with the idle strategy of their waits. */
    private final ProviderCall providerCall;
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
        this.counters = comm.counters();
        this.providerCall = new ProviderCall(comm, this, guard, conf, sig, counters,
                new Backoff(spin, yield, spinYield, ProviderCall.HOT_SPIN_NANOS, oversubscribed, 2_000L, 1_000_000L, Backoff.PARK));
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


    /** The communicator's collective provider, or null (always inside a stage of a hierarchical collective); the same on every rank. */
    @Override
    public CollectiveProvider provider() {
        return group == null ? comm.provider() : null;
    }

    @Override
    public CollectiveCall providerCall(DataType type, ReduceOp op) {
        if (!conf.empty()) {
            // A collective through the provider meets no message that comes after the earlier calls' ring
            // confirmations: it waits for them before its first step, so that a mismatch they show fails it (with
            // the calls named) rather than a step of it. Every rank of the communicator is in this call, and each
            // hands its confirmations here (or while it waits).
            conf.awaitEarlier(guard.callIndex);
        }
        return providerCall.of(type, op);
    }

    /** The running operation, null between operations. */
    Op current() {
        return current;
    }

    /** The current operation's first clock read while waiting: its times in the flight recorder (FlightRecorder's class comment). */
    void stamp(long now) {
        if (!stamped && current != null) {
            stamped = true;
            comm.flightRecorder().stamp(current.seq, now);
        }
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
