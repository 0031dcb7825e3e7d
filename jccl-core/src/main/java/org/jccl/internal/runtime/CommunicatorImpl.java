package org.jccl.internal.runtime;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.Group;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.internal.control.ControlPlane;
import org.jccl.internal.control.Counters;
import org.jccl.internal.control.FlightRecorder;
import org.jccl.internal.log.Log;
import org.jccl.internal.tune.AlgoSelector;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.internal.tune.Tuner;
import org.jccl.internal.util.ResourceLimits;
import org.jccl.spi.CollectiveProvider;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;

/**
 * The communicator: the public API over the parts that do the work, and its lifecycle (groups,
 * split, abort, close). A call is checked and its memory staged on the caller's thread ({@link
 * CallValidator}), then issued to the {@link Executor}, which runs operations one at a time in
 * issue order, on the caller's thread where it can (a blocking call with nothing pending, a thread
 * that joins a {@code Work}, a caller at the in-flight bound) and else on the communicator's
 * operation thread; {@link OpRunner} runs each one on the {@link OpContext} that algorithms see.
 * Each peer's transport and the collective provider are decided at creation ({@link Routing}).
 *
 * <p>Threading: public methods may be called from any thread; calls are serialised in the order
 * they reach the executor. Everything reached from {@link OpContext} runs under the executor's
 * execution lock.
 *
 * <p><b>Why about 670 lines in one class.</b> Most of it is the public {@link Communicator}
 * interface: some forty collective and point-to-point methods (asynchronous, blocking, in-place and
 * {@code MemorySegment} forms), each one to three lines that hand the call to {@link CallValidator}
 * and the {@link Executor}. The rest is the lifecycle (abort, close, split, shrink), which must see
 * the same fields as the calls. Validation, execution, routing, the operation context and the
 * settings ({@link RuntimeSettings}) are already classes of their own; splitting the API surface
 * further would only add a forwarding layer between the interface and those classes. The abort
 * state (its cause, whether the user was told, whether the user aborted, closing) stays here too:
 * the cause is set under the executor's submit lock and the abort then tears down the control plane,
 * transports and executor (fields of this class), and {@link OpRunner} (for the {@link Executor} too), {@link OpContext},
 * {@code ProviderCall} and {@code MismatchGuard} read it through this class around every operation
 * (28 call sites); a class of its own would need those same references, or forwarding methods here.
 */
public final class CommunicatorImpl implements Communicator {

    private final int rank;
    private final int size;
    private final byte[] commId;
    private final byte[] secret;
    private final Config config;
    /** The runtime's settings, concluded once from {@link #config} when the communicator was created. */
    private final RuntimeSettings settings;
    private final PeerInfo[] peers;
    private final List<Transport> transports;
    /** Each peer's transport, decided here at creation; the collective provider. */
    private final Routing routing;
    private final TransportContextImpl transportContext;
    private final long chunkBytes;
    private final long rdThreshold;
    private final AlgoSelector algorithms;
    private final Tuner tuner;
    /** The ranks by host when they span several hosts and some host has more than one (hierarchical collectives), else null. */
    private final Hierarchy hierarchy;
    /** JCCL_CHECK is not "none": calls carry the mismatch guard's words (OpGuard). */
    private final boolean guardOn;

    private final Staging.Pool stagingPool = new Staging.Pool();
    /** Checks and stages every collective call, making its operation. */
    private final CallValidator calls;
    /** Runs the operations in issue order: on the caller's thread where it can, else on the operation thread. */
    private final Executor executor;
    private final Object submitLock;
    private final OpContext ctx;
    /** Runs each operation and the idle work between them, for the executor. */
    private final OpRunner runner;
    private final ThreadLocal<GroupImpl> openGroup = new ThreadLocal<>();
    private final AtomicInteger splitCount = new AtomicInteger();

    /** Hang attribution and failure detection (org.jccl.internal.control). */
    private final FlightRecorder recorder;
    private final Counters counters;
    private volatile ControlPlane control;

    private volatile JcclException abortCause;
    /** Some operation of this rank failed (or was refused) after abortCause was set: the user has been told. */
    private volatile boolean abortDelivered;
    /** The user called abort(): close() then reports nothing. */
    private volatile boolean userAborted;
    private volatile boolean closing;

    static {
        ResourceLimits.preload();
    }

    CommunicatorImpl(int rank, int size, byte[] commId, byte[] secret, Config config, RuntimeSettings settings, PeerInfo[] peers,
                     List<Transport> transports, Map<Transport, Endpoint> endpoints, TransportContextImpl transportContext) {
        this.rank = rank;
        this.size = size;
        this.commId = commId.clone();
        this.secret = secret.clone();
        this.config = config;
        this.settings = settings;
        this.peers = peers.clone();
        this.transports = transports;
        this.transportContext = transportContext;
        this.chunkBytes = settings.chunkBytes();
        this.rdThreshold = settings.rdThreshold();
        this.algorithms = settings.algorithms();
        this.guardOn = settings.guardOn();
        this.routing = new Routing(rank, this.peers, transports, endpoints, idShort());
        this.counters = new Counters(routing.peerTransports());
        this.recorder = new FlightRecorder(settings.flightRecorderSize());
        CollectiveProvider provider = routing.provider();
        this.tuner = new Tuner(algorithms, size, chunkBytes, Tuner.slowest(routing.pairTransports(), Tuner.model("none", Routing.UNDECLARED_COSTS)), rank,
                provider);
        this.hierarchy = Hierarchy.of(rank, peers, transports, Routing.UNDECLARED_COSTS, algorithms, chunkBytes);
        tuner.hierarchy(hierarchy);
        if (rank == 0 && Log.enabled(Log.Level.INFO, Log.Subsys.TUNING)) {
            Log.info(Log.Subsys.TUNING, rank, "comm " + idShort() + " " + size + " ranks: cost model of " + tuner.model()
                    + (provider != null ? "; collective provider: " + provider : "")
                    + (hierarchy != null ? "; hierarchical collectives over " + hierarchy : ""));
        }
        this.ctx = new OpContext(this);
        transportContext.setWaker(ctx::wake);
        routing.watchWakeFds(ctx::wake);
        transportContext.setStillWaiting(ctx.guard()::stillWaiting);
        this.runner = new OpRunner(this, ctx, routing, recorder, counters, tuner, settings.fullCheck());
        this.executor = new Executor(runner, "jccl-op-" + idShort() + "-r" + rank, settings.maxInFlight(), settings.opThreadDelayNanos(),
                OpRunner.IDLE_CONFIRM_MILLIS * 1_000_000L);
        runner.executor(executor);
        this.submitLock = executor.submitLock();
        this.calls = new CallValidator(rank, size, this::staging);
        executor.start();
        Log.info(Log.Subsys.INIT, rank, "comm " + idShort() + " rank " + rank + " of " + size + " ready on " + peers[rank].host()
                + " pid " + peers[rank].pid());
    }

    /**
     * Connects this communicator's control channel (heartbeats, failure notices, stall reports;
     * org.jccl.internal.control). Rank 0 passes the listener whose address it published.
     */
    void startControl(java.nio.channels.ServerSocketChannel listener) {
        control = ControlPlane.start(new ControlPlane.Params(commId, idShort(), rank, size, secret, settings.control(), peers, recorder, counters,
                runner.controlHost()), listener);
    }

    /** The flight recorder of this communicator. */
    public FlightRecorder flightRecorder() {
        return recorder;
    }

    /** Bytes per peer and transport, operations per collective. */
    public Counters counters() {
        return counters;
    }

    @Override
    public org.jccl.CommStats stats() {
        return counters.snapshot(rank);
    }

    /** Operations issued and not finished now (at most JCCL_MAX_INFLIGHT; a group counts as one). */
    public int inFlight() {
        return executor.pending();
    }

    /** The most operations that were ever issued and not finished at once on this communicator. */
    public int inFlightHighWater() {
        return executor.highWater();
    }

    /** The control channel, or null before it is connected. */
    public ControlPlane control() {
        return control;
    }

    /** Whether calls carry the mismatch guard's words ({@code JCCL_CHECK} is not {@code none}). */
    boolean guardOn() {
        return guardOn;
    }

    /** The collective provider, or null (see {@link Routing#provider}). */
    public org.jccl.spi.CollectiveProvider provider() {
        return routing.provider();
    }

    // ------------------------------------------------------------------------------------------ identity

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    String idShort() {
        return HexFormat.of().formatHex(commId, 0, 4);
    }

    PeerInfo peerInfo(int r) {
        return peers[r];
    }

    /** How many ranks of this communicator share this rank's host (its host identity). */
    int localRanks() {
        int n = 0;
        for (PeerInfo p : peers) {
            if (p.hostHash().equals(peers[rank].hostHash())) {
                n++;
            }
        }
        return n;
    }

    /** The name of the transport chosen for {@code peer} ("SHM", "TCP", ...), null for this rank itself; for tests. */
    String transportName(int peer) {
        return routing.transportName(peer);
    }

    long chunkBytes() {
        return chunkBytes;
    }

    long rdThreshold() {
        return rdThreshold;
    }

    AlgoSelector algorithms() {
        return algorithms;
    }

    Tuner tuner() {
        return tuner;
    }

    /** The host layout for hierarchical collectives, or null (see {@link Hierarchy#of}). */
    Hierarchy hierarchy() {
        return hierarchy;
    }

    Config config() {
        return config;
    }

    /** The runtime's settings, concluded from {@link #config()} at creation. */
    RuntimeSettings settings() {
        return settings;
    }

    byte[] commId() {
        return commId.clone();
    }

    byte[] secret() {
        return secret.clone();
    }

    List<Transport> transports() {
        return transports;
    }

    @Override
    public String toString() {
        return "Communicator[" + idShort() + " rank " + rank + "/" + size + "]";
    }

    // ------------------------------------------------------------------------------------------ collectives

    @Override
    public Work allReduceAsync(Buffer send, Buffer recv, ReduceOp op) {
        return submit(calls.allReduce(send, recv, op), false);
    }

    @Override
    public Work broadcastAsync(Buffer send, Buffer recv, int root) {
        return submit(calls.broadcast(send, recv, root), false);
    }

    @Override
    public Work reduceAsync(Buffer send, Buffer recv, ReduceOp op, int root) {
        return submit(calls.reduce(send, recv, op, root), false);
    }

    @Override
    public Work allGatherAsync(Buffer send, Buffer recv) {
        return submit(calls.allGather(send, recv), false);
    }

    @Override
    public Work reduceScatterAsync(Buffer send, Buffer recv, ReduceOp op) {
        return submit(calls.reduceScatter(send, recv, op), false);
    }

    @Override
    public Work allToAllAsync(Buffer send, Buffer recv) {
        return submit(calls.allToAll(send, recv), false);
    }

    @Override
    public Work allToAllvAsync(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls) {
        return submit(calls.allToAllv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls), false);
    }

    @Override
    public Work gatherAsync(Buffer send, Buffer recv, int root) {
        return submit(calls.gather(send, recv, root), false);
    }

    @Override
    public Work scatterAsync(Buffer send, Buffer recv, int root) {
        return submit(calls.scatter(send, recv, root), false);
    }

    @Override
    public Work barrierAsync() {
        return submit(calls.barrier(), false);
    }

    @Override
    public Work sendAsync(Buffer buf, int peer) {
        return submit(calls.p2p(true, buf, peer, openGroup.get() != null), false);
    }

    @Override
    public Work recvAsync(Buffer buf, int peer) {
        return submit(calls.p2p(false, buf, peer, openGroup.get() != null), false);
    }

    // ------------------------------------------------------------------------------------------ groups

    @Override
    public Group group() {
        ensureUsable();
        GroupImpl g = openGroup.get();
        if (g != null) {
            g.depth++;
            return g;
        }
        g = new GroupImpl(this);
        openGroup.set(g);
        return g;
    }

    void endGroup(GroupImpl g) {
        openGroup.remove();
        if (g.ops.isEmpty()) {
            return;
        }
        FusedOp fused = new FusedOp(List.copyOf(g.ops));
        List<Runnable> finishers = new ArrayList<>();
        for (Op o : g.ops) {
            if (o.finisher != null) {
                finishers.add(o.finisher);
            }
        }
        if (!finishers.isEmpty()) {
            fused.finisher = () -> finishers.forEach(Runnable::run);
        }
        executor.issue(fused, true);
        fused.work.join();
    }

    // ------------------------------------------------------------------------------------------ split / dup

    @Override
    public Communicator split(int color, int key) {
        if (color < 0 && color != SPLIT_NOCOLOR) {
            throw new IllegalArgumentException("split: color must be >= 0 or SPLIT_NOCOLOR (-1), got " + color);
        }
        if (openGroup.get() != null) {
            throw new InvalidUsageException("split cannot be called inside a group");
        }
        ensureUsable();
        return CommunicatorFactory.split(this, splitCount.getAndIncrement(), color, key);
    }

    @Override
    public Communicator dup() {
        return split(0, rank);
    }

    @Override
    public Communicator shrink(int... excludedRanks) {
        Objects.requireNonNull(excludedRanks, "excludedRanks");
        if (openGroup.get() != null) {
            throw new InvalidUsageException("shrink cannot be called inside a group");
        }
        return CommunicatorFactory.shrink(this, excludedRanks);
    }

    // ------------------------------------------------------------------------------------------ lifecycle

    @Override
    public void abort() {
        userAborted = true;
        abort(new JcclException(ErrorCode.ABORTED, "rank " + rank + ": communicator " + idShort() + " was aborted by abort()"));
    }

    /** Aborts with {@code cause}: fails pending and later operations and releases resources. Any thread. */
    void abort(JcclException cause) {
        boolean first = false;
        synchronized (submitLock) {
            if (abortCause == null) {
                abortCause = cause;
                first = true;
            }
        }
        ControlPlane cp = control;
        if (first && cp != null) {
            cp.leaving(cause); // before the data connections close: peers learn the cause, not only its consequence
        }
        transportContext.stop();
        ctx.wake();
        routing.releaseEndpoints();
        executor.failQueued();
        if (Thread.currentThread() != executor.opThread()) {
            executor.interrupt();
            // Not from a thread running an operation: the operation thread needs the execution lock to
            // finish, so waiting for it there would stall (it exits once the lock is released).
            if (!executor.runningHere()) {
                executor.awaitStopped(TimeUnit.SECONDS.toMillis(1));
                executor.failQueued();
            }
        }
    }

    @Override
    public void close() {
        synchronized (submitLock) {
            if (closing) {
                return;
            }
            closing = true;
        }
        if (Thread.currentThread() == executor.opThread()) {
            throw new InvalidUsageException("close() called from jccl's own operation thread");
        }
        executor.requestStop();
        boolean interrupted = false;
        while (!executor.stopped()) {
            if (!executor.awaitStopped()) {
                interrupted = true;
                abort();
            }
        }
        ControlPlane cp = control;
        if (cp != null) {
            cp.close();
        }
        transportContext.stop();
        routing.releaseEndpoints();
        executor.failQueued();
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        Log.info(Log.Subsys.INIT, rank, "comm " + idShort() + " rank " + rank + " closed");
        JcclException cause = abortCause;
        if (cause != null && !abortDelivered && !userAborted && cause.code() == ErrorCode.MISMATCH) {
            // No call of this rank failed with it: its calls returned (their own results right) before the ring
            // confirmation, or another rank's report, showed the mismatch. close() is the last place to say so.
            // (A confirmation that failed otherwise, a peer that exited after a call whose result it had, was
            // logged: every result of this rank stands, and main's close() did not throw there either.)
            abortDelivered = true;
            String msg = "rank " + rank + ": close() of communicator " + idShort() + ": calls of this rank returned, but the communicator"
                    + " was aborted afterwards: " + cause.getMessage();
            JcclException typed = ControlPlane.sameKind(cause, msg);
            throw typed != null ? typed : new JcclException(cause.code(), msg, cause);
        }
    }

    JcclException aborted(Op op) {
        JcclException cause = abortCause;
        if (cause != null && cause.code() != ErrorCode.ABORTED) {
            // A peer failed or timed out: every pending operation fails the same way, naming itself and the peer.
            JcclException typed = ControlPlane.sameKind(cause, "rank " + rank + ": " + (op != null ? op.describe() : "operation")
                    + " on communicator " + idShort() + " failed: " + cause.getMessage());
            if (typed != null) {
                return typed;
            }
        }
        String why = cause != null ? cause.getMessage() : "the communicator was closed";
        return new JcclException(ErrorCode.ABORTED, "rank " + rank + ": " + (op != null ? op.describe() : "operation")
                + " on communicator " + idShort() + " did not run: " + why, cause);
    }

    /** Whether close() was called. */
    boolean closing() {
        return closing;
    }

    /** Whether a failure after the abort reached the user already. */
    boolean abortDelivered() {
        return abortDelivered;
    }

    /** Whether the user called abort(). */
    boolean userAborted() {
        return userAborted;
    }

    /** Why this communicator was aborted, or null while it was not. */
    JcclException abortCause() {
        return abortCause;
    }

    /** A failure reached the user (a failed or refused operation): after an abort, close() need not report it again. */
    void delivered() {
        if (abortCause != null) {
            abortDelivered = true;
        }
    }

    /** Called while waiting: throws when the communicator was aborted from another thread. */
    void checkNotAborted(Op op) {
        if (abortCause != null) {
            throw aborted(op);
        }
    }

    // ------------------------------------------------------------------------------------------ submission

    /**
     * Runs {@code body} as an operation of its own, in issue order with the collectives; for
     * measurements from inside an operation (TunerCalibration), where point-to-point costs are what
     * algorithms see, without the per-operation submission.
     */
    Work submitRaw(String name, LambdaOp.Body body) {
        return submit(new LambdaOp(name, 0, null, null, -1, body), false);
    }

    private Staging staging() {
        ensureUsable();
        return new Staging(executor.opThread(), stagingPool);
    }

    private Work submit(Op op, boolean blocking) {
        GroupImpl g = openGroup.get();
        if (g != null) {
            g.ops.add(op);
            return op.work;
        }
        return executor.issue(op, blocking);
    }

    /**
     * Waits for the work of a blocking public method (submitted with {@code blocking}: it may have run
     * inline). Inside a group the call is only recorded and returns at once (as in NCCL): the
     * group's close() waits.
     */
    private void await(Work w) {
        if (openGroup.get() == null) {
            w.join();
        }
    }

    // ------------------------------------------------------------------------------------------ blocking forms

    @Override
    public void allReduce(Buffer send, Buffer recv, ReduceOp op) {
        await(submit(calls.allReduce(send, recv, op), true));
    }

    @Override
    public void allReduce(Buffer inOut, ReduceOp op) {
        await(submit(calls.allReduce(inOut, inOut, op), true));
    }

    @Override
    public void allReduce(MemorySegment send, MemorySegment recv, long count, DataType type, ReduceOp op) {
        await(submit(calls.allReduce(Buffer.of(send, count, type), Buffer.of(recv, count, type), op), true));
    }

    @Override
    public void broadcast(Buffer send, Buffer recv, int root) {
        await(submit(calls.broadcast(send, recv, root), true));
    }

    @Override
    public void broadcast(Buffer inOut, int root) {
        await(submit(calls.broadcast(inOut, inOut, root), true));
    }

    @Override
    public void reduce(Buffer send, Buffer recv, ReduceOp op, int root) {
        await(submit(calls.reduce(send, recv, op, root), true));
    }

    @Override
    public void allGather(Buffer send, Buffer recv) {
        await(submit(calls.allGather(send, recv), true));
    }

    @Override
    public void reduceScatter(Buffer send, Buffer recv, ReduceOp op) {
        await(submit(calls.reduceScatter(send, recv, op), true));
    }

    @Override
    public void allToAll(Buffer send, Buffer recv) {
        await(submit(calls.allToAll(send, recv), true));
    }

    @Override
    public void allToAllv(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls) {
        await(submit(calls.allToAllv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls), true));
    }

    @Override
    public void gather(Buffer send, Buffer recv, int root) {
        await(submit(calls.gather(send, recv, root), true));
    }

    @Override
    public void scatter(Buffer send, Buffer recv, int root) {
        await(submit(calls.scatter(send, recv, root), true));
    }

    @Override
    public void barrier() {
        await(submit(calls.barrier(), true));
    }

    @Override
    public void send(Buffer buf, int peer) {
        await(submit(calls.p2p(true, buf, peer, openGroup.get() != null), true));
    }

    @Override
    public void recv(Buffer buf, int peer) {
        await(submit(calls.p2p(false, buf, peer, openGroup.get() != null), true));
    }

    void ensureUsable() {
        JcclException cause = abortCause;
        if (cause != null) {
            abortDelivered = true;
            String msg = "rank " + rank + ": communicator " + idShort() + " cannot be used: it was aborted: " + cause.getMessage();
            JcclException typed = cause.code() == ErrorCode.ABORTED ? null : ControlPlane.sameKind(cause, msg);
            if (typed != null) {
                throw typed;
            }
            throw new JcclException(ErrorCode.ABORTED, msg, cause);
        }
        if (closing) {
            throw new InvalidUsageException("rank " + rank + ": communicator " + idShort() + " is closed");
        }
    }

    /** Opens the connection to {@code peer} (first use, by the thread running {@code op}). */
    Connection connect(int peer, Op op) {
        return routing.connect(peer, op, this::checkNotAborted);
    }

    /** Each peer's transport, the endpoints and their wake descriptors. */
    Routing routing() {
        return routing;
    }
}
