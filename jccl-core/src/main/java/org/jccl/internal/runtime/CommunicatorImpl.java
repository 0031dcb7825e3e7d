package org.jccl.internal.runtime;

import java.lang.foreign.MemorySegment;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.Group;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.PeerFailedException;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.internal.algo.Collectives;
import org.jccl.internal.config.Settings;
import org.jccl.internal.control.CollectiveEvent;
import org.jccl.internal.control.ControlPlane;
import org.jccl.internal.control.Counters;
import org.jccl.internal.control.FlightRecorder;
import org.jccl.internal.log.Log;
import org.jccl.internal.transport.shm.ShmCollArea;
import org.jccl.internal.transport.shm.ShmTransport;
import org.jccl.internal.tune.AlgoSelector;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.internal.tune.Tuner;
import org.jccl.internal.util.ResourceLimits;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;

/**
 * The communicator: validates calls on the caller's thread, stages heap memory, and queues
 * operations for its single operation thread, which runs them one after another (so operations
 * complete in issue order) and is also the progress engine of every connection.
 *
 * <p>Threading: public methods may be called from any thread; they are serialised by the queue
 * in the order they reach it. Operations run one at a time under {@code execLock}: normally on the
 * operation thread, but a <em>blocking</em> call made while nothing is pending runs on the caller's
 * own thread (no hand-off to another thread and back, which costs more than a small collective).
 * Everything reached from {@link OpContext} runs under that lock.
 */
public final class CommunicatorImpl implements Communicator {

    private final int rank;
    private final int size;
    private final byte[] commId;
    private final byte[] secret;
    private final Config config;
    private final PeerInfo[] peers;
    private final List<Transport> transports;
    private final Map<Transport, Endpoint> endpoints;
    private final Transport[] transportOf;
    private final TransportContextImpl transportContext;
    private final long chunkBytes;
    private final long rdThreshold;
    private final AlgoSelector algorithms;
    private final Tuner tuner;
    /** The ranks by host when they span several hosts and some host has more than one (hierarchical collectives), else null. */
    private final Hierarchy hierarchy;
    /** The shared collective segment when every pair of ranks uses SHM (and rank 0 asked for one), else null. */
    private final ShmCollArea sharedArea;
    /** JCCL_CHECK=1: exchange a signature of every collective (OpSignature) and report mismatches. */
    private final boolean checkSignatures;
    /** JCCL_CHECK is not "none": calls carry the mismatch guard's words (OpGuard). */
    private final boolean guardOn;

    private final Staging.Pool stagingPool = new Staging.Pool();
    /** Runs the operations in issue order: on the caller's thread where it can, else on the operation thread. */
    private final Executor executor;
    private final Object submitLock;
    private final OpContext ctx;
    private final ThreadLocal<GroupImpl> openGroup = new ThreadLocal<>();
    private final AtomicInteger splitCount = new AtomicInteger();

    /** Hang attribution and failure detection (org.jccl.internal.control). */
    private final FlightRecorder recorder;
    private final Counters counters;
    /** What collectives travel on ("TCP", "SHM+TCP"), and each peer's transport: for the recorder and JFR. */
    private final String collTransport;
    private volatile ControlPlane control;

    private volatile JcclException abortCause;
    /** Some operation of this rank failed (or was refused) after abortCause was set: the user has been told. */
    private volatile boolean abortDelivered;
    /** The user called abort(): close() then reports nothing. */
    private volatile boolean userAborted;
    /** The failure a ring confirmation found after its call had returned (idle check or close), or null. */
    private volatile JcclException confirmationFailure;
    private volatile boolean closing;
    private volatile boolean resourcesReleased;

    static {
        ResourceLimits.preload();
    }

    /**
     * Operations up to this size that run inline are not stamped with the clock unless they wait
     * (FlightRecorder's class comment): for them two clock reads are a measurable part of the call.
     */
    private static final long UNTIMED_INLINE_BYTES = 64 << 10;

    CommunicatorImpl(int rank, int size, byte[] commId, byte[] secret, Config config, PeerInfo[] peers,
                     List<Transport> transports, Map<Transport, Endpoint> endpoints, TransportContextImpl transportContext) {
        this.rank = rank;
        this.size = size;
        this.commId = commId.clone();
        this.secret = secret.clone();
        this.config = config;
        this.peers = peers.clone();
        this.transports = transports;
        this.endpoints = endpoints;
        this.transportContext = transportContext;
        this.chunkBytes = Settings.CHUNK_SIZE.getLong(config);
        this.rdThreshold = Settings.SMALL_MSG_BYTES.raw(config) == null ? -1 : Settings.SMALL_MSG_BYTES.getLong(config);
        this.algorithms = AlgoSelector.parse(Settings.ALGO.getString(config));
        int check = Settings.checkLevel(config);
        this.checkSignatures = check == Settings.CHECK_FULL;
        this.guardOn = check != Settings.CHECK_NONE;
        this.transportOf = new Transport[size];
        for (int p = 0; p < size; p++) {
            if (p == rank) {
                continue;
            }
            for (Transport t : transports) {
                if (endpoints.containsKey(t) && t.canConnect(peers[rank], peers[p])) {
                    transportOf[p] = t;
                    break;
                }
            }
            if (transportOf[p] == null) {
                throw new JcclException(ErrorCode.CONFIG, "rank " + rank + ": no transport can reach " + peers[p].describe()
                        + " (enabled here: " + endpoints.keySet().stream().map(Transport::name).toList() + ", the peer offers "
                        + peers[p].addresses().keySet() + ")");
            }
            if (Log.enabled(Log.Level.INFO, Log.Subsys.INIT)) {
                Log.info(Log.Subsys.INIT, rank, "comm " + idShort() + " rank " + rank + " -> rank " + p + " via " + transportOf[p].name());
            }
        }
        String[] peerTransport = new String[size];
        for (int p = 0; p < size; p++) {
            peerTransport[p] = transportOf[p] == null ? null : transportOf[p].name();
        }
        this.counters = new Counters(peerTransport);
        this.collTransport = String.join("+", new java.util.TreeSet<>(java.util.Arrays.stream(peerTransport)
                .filter(Objects::nonNull).toList()));
        this.recorder = new FlightRecorder(Settings.FLIGHT_RECORDER_SIZE.getInt(config));
        java.util.Set<String> pairTransports = pairTransports(transports, peers);
        prepareEndpoints();
        this.sharedArea = openSharedArea(pairTransports);
        this.tuner = new Tuner(algorithms, size, chunkBytes, Tuner.slowest(pairTransports), rank,
                sharedArea == null ? 0 : sharedArea.nearSlotBytes());
        this.hierarchy = Hierarchy.of(rank, peers, transports, algorithms, chunkBytes);
        tuner.hierarchy(hierarchy);
        if (rank == 0 && Log.enabled(Log.Level.INFO, Log.Subsys.TUNING)) {
            Log.info(Log.Subsys.TUNING, rank, "comm " + idShort() + " " + size + " ranks: cost model of " + tuner.model()
                    + (sharedArea != null ? "; shared collective segment: " + Tuner.SHARED : "")
                    + (hierarchy != null ? "; hierarchical collectives over " + hierarchy : ""));
        }
        this.ctx = new OpContext(this);
        transportContext.setWaker(ctx::wake);
        transportContext.setStillWaiting(ctx::stillWaiting);
        this.executor = new Executor(new ExecutorHost(), "jccl-op-" + idShort() + "-r" + rank, Settings.MAX_INFLIGHT.getInt(config),
                Settings.OP_THREAD_DELAY_US.getLong(config) * 1000, IDLE_CONFIRM_MILLIS * 1_000_000L);
        this.submitLock = executor.submitLock();
        executor.start();
        Log.info(Log.Subsys.INIT, rank, "comm " + idShort() + " rank " + rank + " of " + size + " ready on " + peers[rank].host()
                + " pid " + peers[rank].pid());
    }

    /** Lets every endpoint reserve what its peers need, now rather than at first use (Endpoint#prepare). */
    private void prepareEndpoints() {
        for (Map.Entry<Transport, Endpoint> e : endpoints.entrySet()) {
            Transport t = e.getKey();
            int[] routed = java.util.stream.IntStream.range(0, size).filter(p -> transportOf[p] == t).toArray();
            try {
                e.getValue().prepare(routed);
            } catch (IOException ex) {
                throw new org.jccl.ResourceException("rank " + rank + ": cannot set up the " + t.name() + " transport for ranks "
                        + java.util.Arrays.toString(routed) + " of communicator " + idShort() + ": " + ex.getMessage(), ex);
            }
        }
    }

    /**
     * The shared collective segment, when every pair of ranks uses SHM: each rank derives that from
     * the same peer table, so either every rank maps it or none does (their algorithm choices, and
     * hence their message sequences, depend on it).
     */
    private ShmCollArea openSharedArea(java.util.Set<String> pairTransports) {
        if (size < 2 || !pairTransports.equals(java.util.Set.of(ShmTransport.NAME))) {
            return null;
        }
        for (Map.Entry<Transport, Endpoint> e : endpoints.entrySet()) {
            if (e.getKey().name().equals(ShmTransport.NAME)) {
                try {
                    return ShmTransport.openCollArea(e.getValue());
                } catch (IOException ex) {
                    throw new org.jccl.ResourceException("rank " + rank + ": cannot set up the shared collective segment of communicator "
                            + idShort() + ": " + ex.getMessage(), ex);
                }
            }
        }
        return null;
    }

    /**
     * Connects this communicator's control channel (heartbeats, failure notices, stall reports;
     * org.jccl.internal.control). Rank 0 passes the listener whose address it published.
     */
    void startControl(java.nio.channels.ServerSocketChannel listener) {
        control = ControlPlane.start(new ControlPlane.Params(commId, idShort(), rank, size, secret, config, peers, recorder, counters,
                new ControlPlane.Host() {
                    @Override
                    public void fail(JcclException cause) {
                        abort(cause);
                    }

                    @Override
                    public long guardAt(long index) {
                        return ctx.guardAt(index);
                    }

                    @Override
                    public JcclException atExit() {
                        return confirmAtExit();
                    }

                    @Override
                    public long callsStarted() {
                        return ctx.callsStarted();
                    }

                    @Override
                    public void doomedAt(long index, String report) {
                        ctx.doomedAt(index, report);
                    }

                    @Override
                    public long mismatchAt() {
                        return ctx.mismatchAt();
                    }
                }), listener);
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

    /** Operations issued and not finished now (at most JCCL_MAX_INFLIGHT, but for blocking calls and groups). */
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

    /** The shared collective segment, or null (see {@link #openSharedArea}). */
    ShmCollArea sharedArea() {
        return sharedArea;
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
        return transportOf[peer] == null ? null : transportOf[peer].name();
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

    /**
     * The names of the transports any pair of ranks uses, derived from the peer table alone (what
     * every address offers and every transport's canConnect), so that every rank computes the same
     * set and hence makes the same tuning choices.
     */
    static java.util.Set<String> pairTransports(List<Transport> transports, PeerInfo[] peers) {
        java.util.Set<String> names = new java.util.TreeSet<>();
        for (int i = 0; i < peers.length; i++) {
            for (int j = i + 1; j < peers.length; j++) {
                for (Transport t : transports) {
                    String name = t.name();
                    if (peers[i].addresses().containsKey(name) && peers[j].addresses().containsKey(name)
                            && t.canConnect(peers[i], peers[j])) {
                        names.add(name);
                        break;
                    }
                }
            }
        }
        return names;
    }

    Config config() {
        return config;
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
        return allReduce0(send, recv, op, false);
    }

    private Work allReduce0(Buffer send, Buffer recv, ReduceOp op, boolean blocking) {
        final String c = "allReduce";
        nonNull(c, send, recv, op);
        sameType(c, send, recv);
        long count = send.count();
        DataType t = send.type();
        long bytes = t.bytes(count);
        atLeast(c, "recv", recv, count);
        Staging st = staging();
        boolean inPlace = Staging.inPlace(c, send, recv, bytes, 0);
        MemorySegment r = st.output(c, "recv", recv, bytes, inPlace);
        MemorySegment s = inPlace ? r : st.input(c, "send", send, bytes);
        return submit(new LambdaOp(c, bytes, t, op, -1, x -> Collectives.allReduce(x, s, r, count, t, op)), st, blocking);
    }

    @Override
    public Work broadcastAsync(Buffer send, Buffer recv, int root) {
        return broadcast0(send, recv, root, false);
    }

    private Work broadcast0(Buffer send, Buffer recv, int root, boolean blocking) {
        final String c = "broadcast";
        Objects.requireNonNull(recv, "recv");
        checkRoot(c, root);
        long count = recv.count();
        DataType t = recv.type();
        long bytes = t.bytes(count);
        Staging st = staging();
        MemorySegment s = null;
        boolean inPlace = false;
        if (rank == root) {
            Objects.requireNonNull(send, "send (required on the root)");
            sameType(c, send, recv);
            atLeast(c, "send", send, count);
            inPlace = Staging.inPlace(c, send, recv, bytes, 0);
        }
        MemorySegment r = st.output(c, "recv", recv, bytes, inPlace);
        if (rank == root) {
            s = inPlace ? r : st.input(c, "send", send, bytes);
        }
        MemorySegment ss = s;
        return submit(new LambdaOp(c, bytes, t, null, root, x -> Collectives.broadcast(x, ss, r, bytes, root)), st, blocking);
    }

    @Override
    public Work reduceAsync(Buffer send, Buffer recv, ReduceOp op, int root) {
        return reduce0(send, recv, op, root, false);
    }

    private Work reduce0(Buffer send, Buffer recv, ReduceOp op, int root, boolean blocking) {
        final String c = "reduce";
        Objects.requireNonNull(send, "send");
        Objects.requireNonNull(op, "op");
        checkRoot(c, root);
        long count = send.count();
        DataType t = send.type();
        long bytes = t.bytes(count);
        Staging st = staging();
        MemorySegment r = null;
        boolean inPlace = false;
        if (rank == root) {
            Objects.requireNonNull(recv, "recv (required on the root)");
            sameType(c, send, recv);
            atLeast(c, "recv", recv, count);
            inPlace = Staging.inPlace(c, send, recv, bytes, 0);
            r = st.output(c, "recv", recv, bytes, inPlace);
        }
        MemorySegment s = inPlace ? r : st.input(c, "send", send, bytes);
        MemorySegment rr = r;
        return submit(new LambdaOp(c, bytes, t, op, root, x -> Collectives.reduce(x, s, rr, count, t, op, root)), st, blocking);
    }

    @Override
    public Work allGatherAsync(Buffer send, Buffer recv) {
        return allGather0(send, recv, false);
    }

    private Work allGather0(Buffer send, Buffer recv, boolean blocking) {
        final String c = "allGather";
        nonNull(c, send, recv, ReduceOp.SUM);
        sameType(c, send, recv);
        long count = send.count();
        DataType t = send.type();
        long bytes = t.bytes(count);
        atLeast(c, "recv", recv, Math.multiplyExact(count, (long) size));
        Staging st = staging();
        boolean inPlace = Staging.inPlace(c, send, recv, bytes, bytes * rank);
        MemorySegment r = st.output(c, "recv", recv, bytes * size, inPlace);
        MemorySegment s = inPlace ? r.asSlice(bytes * rank, bytes) : st.input(c, "send", send, bytes);
        return submit(new LambdaOp(c, bytes * size, t, null, -1, x -> Collectives.allGather(x, s, r, bytes)), st, blocking);
    }

    @Override
    public Work reduceScatterAsync(Buffer send, Buffer recv, ReduceOp op) {
        return reduceScatter0(send, recv, op, false);
    }

    private Work reduceScatter0(Buffer send, Buffer recv, ReduceOp op, boolean blocking) {
        final String c = "reduceScatter";
        nonNull(c, send, recv, op);
        sameType(c, send, recv);
        long count = recv.count();
        DataType t = recv.type();
        long bytes = t.bytes(count);
        atLeast(c, "send", send, Math.multiplyExact(count, (long) size));
        Staging st = staging();
        // In place: recv is this rank's slot of send (NCCL: recvbuff == sendbuff + rank * recvcount).
        boolean inPlace = Staging.inPlace(c, recv, send, bytes, bytes * rank);
        MemorySegment s;
        MemorySegment r;
        if (inPlace) {
            s = st.output(c, "send", send, bytes * size, true);
            r = s.asSlice(bytes * rank, bytes);
        } else {
            s = st.input(c, "send", send, bytes * size);
            r = st.output(c, "recv", recv, bytes, false);
        }
        return submit(new LambdaOp(c, bytes * size, t, op, -1, x -> Collectives.reduceScatter(x, s, r, count, t, op)), st, blocking);
    }

    @Override
    public Work allToAllAsync(Buffer send, Buffer recv) {
        return allToAll0(send, recv, false);
    }

    private Work allToAll0(Buffer send, Buffer recv, boolean blocking) {
        final String c = "allToAll";
        nonNull(c, send, recv, ReduceOp.SUM);
        sameType(c, send, recv);
        if (send.count() % size != 0) {
            throw new IllegalArgumentException(c + ": send holds " + send.count() + " elements, not a multiple of the " + size
                    + " ranks (each rank gets send.count()/size elements)");
        }
        long total = send.count();
        DataType t = send.type();
        long block = t.bytes(total / size);
        atLeast(c, "recv", recv, total);
        Staging st = staging();
        boolean inPlace = Staging.inPlace(c, send, recv, block * size, 0);
        MemorySegment r = st.output(c, "recv", recv, block * size, inPlace);
        MemorySegment s = inPlace ? r : st.input(c, "send", send, block * size);
        return submit(new LambdaOp(c, block * size, t, null, -1, x -> Collectives.allToAll(x, s, r, block)), st, blocking);
    }

    @Override
    public Work allToAllvAsync(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls) {
        return allToAllv0(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, false);
    }

    private Work allToAllv0(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls, boolean blocking) {
        final String c = "allToAllv";
        nonNull(c, send, recv, ReduceOp.SUM);
        sameType(c, send, recv);
        checkVector(c, "send", send, sendCounts, sendDispls);
        checkVector(c, "recv", recv, recvCounts, recvDispls);
        if (recvCounts[rank] != sendCounts[rank]) {
            throw new IllegalArgumentException(c + ": this rank sends itself " + sendCounts[rank] + " elements but receives "
                    + recvCounts[rank] + " from itself");
        }
        DataType t = send.type();
        long sendExtent = extent(sendCounts, sendDispls);
        long recvExtent = extent(recvCounts, recvDispls);
        if (send.segment().asOverlappingSlice(recv.segment()).isPresent() && sendExtent > 0 && recvExtent > 0) {
            throw new IllegalArgumentException(c + ": send and recv overlap; allToAllv is not in place, use separate buffers");
        }
        Staging st = staging();
        MemorySegment s = st.input(c, "send", send, t.bytes(sendExtent));
        // Copied in too: the gaps between blocks are copied back and must keep the caller's values.
        MemorySegment r = st.output(c, "recv", recv, t.bytes(recvExtent), true);
        long[] sc = sendCounts.clone();
        long[] sd = sendDispls.clone();
        long[] rc = recvCounts.clone();
        long[] rd = recvDispls.clone();
        long total = 0;
        for (long x : sc) {
            total += x;
        }
        return submit(new LambdaOp(c, t.bytes(total), t, null, -1,
                x -> Collectives.allToAllv(x, s, sc, sd, r, rc, rd, t.size())), st, blocking);
    }

    @Override
    public Work gatherAsync(Buffer send, Buffer recv, int root) {
        return gather0(send, recv, root, false);
    }

    private Work gather0(Buffer send, Buffer recv, int root, boolean blocking) {
        final String c = "gather";
        Objects.requireNonNull(send, "send");
        checkRoot(c, root);
        long count = send.count();
        DataType t = send.type();
        long bytes = t.bytes(count);
        Staging st = staging();
        MemorySegment r = null;
        MemorySegment s;
        if (rank == root) {
            Objects.requireNonNull(recv, "recv (required on the root)");
            sameType(c, send, recv);
            atLeast(c, "recv", recv, Math.multiplyExact(count, (long) size));
            boolean inPlace = Staging.inPlace(c, send, recv, bytes, bytes * rank);
            r = st.output(c, "recv", recv, bytes * size, inPlace);
            s = inPlace ? r.asSlice(bytes * rank, bytes) : st.input(c, "send", send, bytes);
        } else {
            s = st.input(c, "send", send, bytes);
        }
        MemorySegment rr = r;
        return submit(new LambdaOp(c, bytes * size, t, null, root, x -> Collectives.gather(x, s, rr, bytes, root)), st, blocking);
    }

    @Override
    public Work scatterAsync(Buffer send, Buffer recv, int root) {
        return scatter0(send, recv, root, false);
    }

    private Work scatter0(Buffer send, Buffer recv, int root, boolean blocking) {
        final String c = "scatter";
        Objects.requireNonNull(recv, "recv");
        checkRoot(c, root);
        long count = recv.count();
        DataType t = recv.type();
        long bytes = t.bytes(count);
        Staging st = staging();
        MemorySegment s = null;
        MemorySegment r;
        if (rank == root) {
            Objects.requireNonNull(send, "send (required on the root)");
            sameType(c, send, recv);
            atLeast(c, "send", send, Math.multiplyExact(count, (long) size));
            boolean inPlace = Staging.inPlace(c, recv, send, bytes, bytes * rank);
            if (inPlace) {
                s = st.output(c, "send", send, bytes * size, true);
                r = s.asSlice(bytes * rank, bytes);
            } else {
                s = st.input(c, "send", send, bytes * size);
                r = st.output(c, "recv", recv, bytes, false);
            }
        } else {
            r = st.output(c, "recv", recv, bytes, false);
        }
        MemorySegment ss = s;
        return submit(new LambdaOp(c, bytes * size, t, null, root, x -> Collectives.scatter(x, ss, r, bytes, root)), st, blocking);
    }

    @Override
    public Work barrierAsync() {
        return barrier0(false);
    }

    private Work barrier0(boolean blocking) {
        return submit(new LambdaOp("barrier", 0, null, null, -1, Collectives::barrier), null, blocking);
    }

    @Override
    public Work sendAsync(Buffer buf, int peer) {
        return p2p(true, buf, peer, false);
    }

    @Override
    public Work recvAsync(Buffer buf, int peer) {
        return p2p(false, buf, peer, false);
    }

    private Work p2p(boolean isSend, Buffer buf, int peer, boolean blocking) {
        String c = isSend ? "send" : "recv";
        Objects.requireNonNull(buf, "buf");
        if (peer < 0 || peer >= size) {
            throw new IllegalArgumentException(c + ": peer " + peer + " is outside [0, " + size + ")");
        }
        if (peer == rank && openGroup.get() == null) {
            throw new IllegalArgumentException(c + ": peer is this rank (" + rank + "); a " + c
                    + " to itself needs its matching " + (isSend ? "recv" : "send") + " in the same group (comm.group())");
        }
        long bytes = buf.byteSize();
        Staging st = staging();
        MemorySegment seg = isSend ? st.input(c, "buf", buf, bytes) : st.output(c, "buf", buf, bytes, false);
        return submit(new P2pOp(isSend, peer, seg, buf.type()), st, blocking);
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
        releaseEndpoints();
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
        releaseEndpoints();
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

    private void releaseEndpoints() {
        synchronized (this) {
            if (resourcesReleased) {
                return;
            }
            resourcesReleased = true;
        }
        for (Endpoint e : endpoints.values()) {
            try {
                e.close();
            } catch (RuntimeException ex) {
                Log.warn(Log.Subsys.NET, rank, "closing an endpoint failed: " + ex);
            }
        }
    }

    private JcclException aborted(Op op) {
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

    /** Why this communicator was aborted, or null while it was not. */
    JcclException abortCause() {
        return abortCause;
    }

    /** A failure reached the user (a failed or refused operation): after an abort, close() need not report it again. */
    private void delivered() {
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

    /**
     * How often the idle operation thread looks at outstanding ring confirmations (OpContext#confirmIdle): a
     * mismatch one shows is found within about two of these even when the program makes no more calls.
     */
    private static final long IDLE_CONFIRM_MILLIS = 50;
    /** OpContext#callsEnded at the operation thread's last idle look (its own field). */
    private long idleSeenEnded = -1;

    /** The executor's view of this communicator. */
    private final class ExecutorHost implements Executor.Host {
        @Override
        public void ensureUsable() {
            CommunicatorImpl.this.ensureUsable();
        }

        @Override
        public void issued(Op op, boolean inline) {
            recorder.issued(op.seq, op.name, op.bytes, op.type == null ? null : op.type.ncclName(),
                    op.reduceOp == null ? null : op.reduceOp.ncclName(), op.rootOrPeer, transportOfOp(op),
                    !inline || op.bytes > UNTIMED_INLINE_BYTES, inline);
        }

        @Override
        public void execute(Op op) {
            CommunicatorImpl.this.execute(op);
        }

        @Override
        public void discard(Op op) {
            op.work.fail(CommunicatorImpl.this.aborted(op));
            delivered();
        }

        @Override
        public boolean aborted() {
            return abortCause != null;
        }

        @Override
        public boolean idleTick() {
            return confirmWhileIdle();
        }

        @Override
        public void drainAtClose() {
            CommunicatorImpl.this.drainAtClose();
        }

        @Override
        public void released() {
            ctx.closeAll();
        }
    }

    /**
     * The operation thread found nothing queued for a while: when ring confirmations are outstanding and no
     * call ended since its last look (a running program's next call progresses them anyway), it drives them
     * itself, so that a mismatch is found, and every rank told, although this rank makes no more calls.
     * Returns true when that aborted the communicator.
     */
    private boolean confirmWhileIdle() {
        if (abortCause != null || !ctx.confirmationsOutstanding()) {
            idleSeenEnded = -1;
            return false;
        }
        long ended = ctx.callsEnded();
        if (ended != idleSeenEnded) {
            idleSeenEnded = ended;
            return false;
        }
        try {
            if (abortCause == null) {
                ctx.confirmIdle();
            }
        } catch (RuntimeException e) {
            confirmationFailed(e);
            return true;
        }
        return false;
    }

    /** How long a JVM that exits without close() waits for the held ring confirmations. */
    private static final long EXIT_CONFIRM_NANOS = 300_000_000L;

    /**
     * The JVM exits and this communicator was not closed (ControlPlane's shutdown hook): hands the held ring
     * confirmations on and waits up to {@link #EXIT_CONFIRM_NANOS} for them, so that a mismatch in calls that
     * returned still shows (the hook then exits with status 1) and the peers get what they wait for. Returns
     * the MISMATCH found, else null (another failure is logged).
     */
    private JcclException confirmAtExit() {
        if (abortCause != null || closing || !ctx.confirmationsOutstanding()) {
            return null;
        }
        try {
            if (!executor.tryLock(100)) {
                return null; // a call is running (another thread): it settles them or fails
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
        try {
            Backoff idle = Backoff.parkingEvery(50_000L);
            long now = System.nanoTime();
            idle.reset(now);
            while (abortCause == null && ctx.confirmationsOutstanding() && idle.waited(now) < EXIT_CONFIRM_NANOS) {
                ctx.confirmIdle();
                idle.idle(now);
                now = System.nanoTime();
            }
        } catch (RuntimeException e) {
            confirmationFailed(e);
        } finally {
            executor.unlock();
        }
        JcclException cause = abortCause;
        return cause != null && cause.code() == ErrorCode.MISMATCH && !abortDelivered && !userAborted ? cause : null;
    }

    /** At close(), on the operation thread: waits for the outstanding ring confirmations (OpContext#drainConfirmations). */
    private void drainAtClose() {
        try {
            if (abortCause == null) {
                ctx.drainConfirmations();
            }
        } catch (RuntimeException e) {
            if (abortCause == null || !userAborted) {
                confirmationFailed(e);
            }
        }
    }

    /** A ring confirmation failed after its call had returned: abort with it (the control plane tells every rank); close() reports it. */
    private void confirmationFailed(RuntimeException e) {
        JcclException cause = abortCause;
        if (cause != null) {
            return; // already aborted (a peer's report, abort()): that cause stands
        }
        JcclException je = e instanceof JcclException j ? j : new JcclException(ErrorCode.INTERNAL, "rank " + rank
                + ": the ring confirmation of communicator " + idShort() + " failed unexpectedly: " + e, e);
        ControlPlane cp = control;
        if (cp != null && je.code() != ErrorCode.MISMATCH) {
            je = cp.explain(je);
        }
        confirmationFailure = je;
        Log.warn(Log.Subsys.COLL, rank, je.getMessage());
        abort(je);
        if (abortCause != je) {
            confirmationFailure = null;
        }
    }

    /** Runs {@code op} (or fails it when aborted); the caller holds the execution lock. */
    private void execute(Op op) {
        if (abortCause != null) {
            op.work.fail(aborted(op));
            delivered();
        } else {
            runOne(op);
        }
    }

    private void runOne(Op op) {
        ctx.begin(op);
        if (!op.startedAtIssue) {
            recorder.started(op.seq);
        }
        CollectiveEvent ev = new CollectiveEvent();
        ev.begin();
        Throwable failure = null;
        try {
            boolean signed = checkSignatures && OpSignature.checked(op);
            boolean call = !(op instanceof FusedOp); // a group starts a call per member (FusedOp)
            if (call) {
                ctx.beginCall(op, signed);
            }
            if (signed) {
                ctx.beginCheck(op);
            }
            op.run(ctx);
            if (signed) {
                ctx.endCheck();
            }
            if (call) {
                ctx.endCall();
            }
            if (op.finisher != null) {
                op.finisher.run();
            }
        } catch (Throwable t) {
            failure = t;
        }
        try {
            recordFinished(op, ev, failure == null);
            if (failure == null) {
                completeAll(op);
                if (op.releaser != null) {
                    op.releaser.run(); // staging buffers back to the pool only after a success
                }
                return;
            }
            Throwable t = failure;
            JcclException e = asJccl(op, t);
            ControlPlane cp = control;
            if (cp != null && abortCause == null) {
                e = cp.explain(e); // a consequence of another rank's failure names that rank
                if (e instanceof org.jccl.PeerFailedException pf && cp.closedNormally(pf.peerRank()) && abortCause == null) {
                    // A peer closed its communicator normally while this collective call needed it: it never made this
                    // call, or made another that returned without this rank (a rooted one): the hub's comparison of
                    // every rank's word of the call says which, rather than blaming the peer for closing.
                    JcclException exact = ctx.verdictOfFailedCall();
                    if (exact != null) {
                        e = exact;
                    }
                }
            }
            JcclException meanwhile = abortCause;
            if (meanwhile != null && meanwhile.code() == ErrorCode.MISMATCH && e.code() != ErrorCode.MISMATCH) {
                // The control plane aborted this communicator with another rank's report of mismatched calls while this
                // operation was failing (its link to that rank broke): the report is the cause, not the broken link.
                e = asJccl(op, t);
            }
            failAll(op, e);
            if (!(t instanceof InvalidUsageException) || e.code() == ErrorCode.MISMATCH || abortCause != null) {
                // A failure inside a collective leaves peers in an unknown state: abort so nothing waits forever.
                Log.warn(Log.Subsys.COLL, rank, e.getMessage());
                abort(e);
            }
            delivered();
        } finally {
            ctx.begin(null);
            Thread.interrupted();
        }
    }

    /** Flight recorder and JFR entry of a finished operation (the algorithm is the tuner's last choice). */
    private void recordFinished(Op op, CollectiveEvent ev, boolean ok) {
        String algo = tuner.takeChoice();
        recorder.finished(op.seq, ok, algo);
        if (op instanceof FusedOp f) {
            List<Op> members = f.ops();
            for (int i = 0; i < members.size(); i++) {
                Op o = members.get(i);
                counters.finished(o.name, o.bytes, ok);
            }
        } else {
            counters.finished(op.name, op.bytes, ok);
        }
        if (ev.shouldCommit()) {
            ev.comm = idShort();
            ev.rank = rank;
            ev.ranks = size;
            ev.seq = op.seq;
            ev.op = op.name;
            ev.bytes = op.bytes;
            ev.dtype = op.type == null ? null : op.type.ncclName();
            ev.algorithm = algo;
            ev.transport = transportOfOp(op);
            ev.ok = ok;
            ev.commit();
        }
    }

    private String transportOfOp(Op op) {
        if (op instanceof P2pOp && op.rootOrPeer >= 0 && op.rootOrPeer != rank) {
            return transportOf[op.rootOrPeer].name();
        }
        return collTransport;
    }

    private static void completeAll(Op op) {
        if (op instanceof FusedOp f) {
            for (Op o : f.ops()) {
                o.work.complete();
            }
        }
        op.work.complete();
    }

    private static void failAll(Op op, JcclException e) {
        if (op instanceof FusedOp f) {
            for (Op o : f.ops()) {
                o.work.fail(e);
            }
        }
        op.work.fail(e);
    }

    private JcclException asJccl(Op op, Throwable t) {
        JcclException cause = abortCause;
        if (cause != null && cause.code() != ErrorCode.ABORTED && !(t instanceof JcclException je0 && je0.getCause() == cause)) {
            // Aborted from outside while this operation ran (a peer's failure reported on the control channel):
            // its connections broke because of that, so report the cause rather than the broken link.
            return aborted(op);
        }
        boolean abortedByUser = cause != null && cause.code() == ErrorCode.ABORTED;
        if (t instanceof JcclException je) {
            // Connections or segments closed under us by abort() surface as I/O or state failures: report the abort instead.
            return abortedByUser && je != cause && je.getCause() != cause ? aborted(op) : je;
        }
        if (abortedByUser) {
            return aborted(op);
        }
        return new JcclException(ErrorCode.INTERNAL, "rank " + rank + ": " + op.describe() + " on communicator " + idShort()
                + " failed unexpectedly: " + t, t);
    }

    // ------------------------------------------------------------------------------------------ submission

    /**
     * Runs {@code body} as an operation of its own, in issue order with the collectives; for
     * measurements from inside an operation (TunerCalibration), where point-to-point costs are what
     * algorithms see, without the per-operation submission.
     */
    Work submitRaw(String name, LambdaOp.Body body) {
        return submit(new LambdaOp(name, 0, null, null, -1, body), null, false);
    }

    private Staging staging() {
        ensureUsable();
        return new Staging(executor.opThread(), stagingPool);
    }

    private Work submit(Op op, Staging st, boolean blocking) {
        if (st != null) {
            op.finisher = st.finisher();
            op.releaser = st.releaser();
        }
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
        await(allReduce0(send, recv, op, true));
    }

    @Override
    public void allReduce(Buffer inOut, ReduceOp op) {
        await(allReduce0(inOut, inOut, op, true));
    }

    @Override
    public void allReduce(MemorySegment send, MemorySegment recv, long count, DataType type, ReduceOp op) {
        await(allReduce0(Buffer.of(send, count, type), Buffer.of(recv, count, type), op, true));
    }

    @Override
    public void broadcast(Buffer send, Buffer recv, int root) {
        await(broadcast0(send, recv, root, true));
    }

    @Override
    public void broadcast(Buffer inOut, int root) {
        await(broadcast0(inOut, inOut, root, true));
    }

    @Override
    public void reduce(Buffer send, Buffer recv, ReduceOp op, int root) {
        await(reduce0(send, recv, op, root, true));
    }

    @Override
    public void allGather(Buffer send, Buffer recv) {
        await(allGather0(send, recv, true));
    }

    @Override
    public void reduceScatter(Buffer send, Buffer recv, ReduceOp op) {
        await(reduceScatter0(send, recv, op, true));
    }

    @Override
    public void allToAll(Buffer send, Buffer recv) {
        await(allToAll0(send, recv, true));
    }

    @Override
    public void allToAllv(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls) {
        await(allToAllv0(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, true));
    }

    @Override
    public void gather(Buffer send, Buffer recv, int root) {
        await(gather0(send, recv, root, true));
    }

    @Override
    public void scatter(Buffer send, Buffer recv, int root) {
        await(scatter0(send, recv, root, true));
    }

    @Override
    public void barrier() {
        await(barrier0(true));
    }

    @Override
    public void send(Buffer buf, int peer) {
        await(p2p(true, buf, peer, true));
    }

    @Override
    public void recv(Buffer buf, int peer) {
        await(p2p(false, buf, peer, true));
    }

    private void ensureUsable() {
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

    /** Opens the connection to {@code peer} (operation thread, first use). */
    Connection connect(int peer, Op op) {
        Transport t = transportOf[peer];
        if (t == null) {
            throw new IllegalStateException("no transport for peer " + peer);
        }
        try {
            Connection c = endpoints.get(t).connect(peer);
            Log.trace(Log.Subsys.NET, rank, "comm " + idShort() + " connected to rank " + peer + ": " + c.describe());
            return c;
        } catch (IOException e) {
            checkNotAborted(op);
            String what = "rank " + rank + ": " + (op != null ? op.describe() : "connect") + " on communicator " + idShort()
                    + " could not connect to " + peers[peer].describe() + " via " + t.name() + ": " + e.getMessage();
            if (ResourceLimits.outOfFileDescriptors(e)) {
                throw new org.jccl.ResourceException(what + "; " + ResourceLimits.openFilesAdvice(), e);
            }
            if (e instanceof java.net.SocketTimeoutException) {
                throw new JcclTimeoutException(what, e);
            }
            throw new PeerFailedException(peer, what, e);
        } catch (JcclException e) {
            checkNotAborted(op);
            throw e;
        }
    }

    // ------------------------------------------------------------------------------------------ validation

    private static void nonNull(String coll, Buffer send, Buffer recv, ReduceOp op) {
        Objects.requireNonNull(send, coll + ": send");
        Objects.requireNonNull(recv, coll + ": recv");
        Objects.requireNonNull(op, coll + ": op");
    }

    private static void sameType(String coll, Buffer a, Buffer b) {
        if (a.type() != b.type()) {
            throw new IllegalArgumentException(coll + ": send holds " + a.type() + " but recv holds " + b.type()
                    + "; both buffers must have the same data type");
        }
    }

    private static void atLeast(String coll, String name, Buffer b, long needed) {
        if (b.count() < needed) {
            throw new IllegalArgumentException(coll + ": " + name + " holds " + b.count() + " elements but " + needed
                    + " are needed");
        }
    }

    private void checkRoot(String coll, int root) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException(coll + ": root " + root + " is outside [0, " + size + ")");
        }
    }

    private void checkVector(String coll, String name, Buffer b, long[] counts, long[] displs) {
        Objects.requireNonNull(counts, coll + ": " + name + "Counts");
        Objects.requireNonNull(displs, coll + ": " + name + "Displs");
        if (counts.length != size || displs.length != size) {
            throw new IllegalArgumentException(coll + ": " + name + "Counts and " + name + "Displs must have " + size
                    + " entries (one per rank), got " + counts.length + " and " + displs.length);
        }
        for (int i = 0; i < size; i++) {
            if (counts[i] < 0 || displs[i] < 0) {
                throw new IllegalArgumentException(coll + ": " + name + "Counts[" + i + "]=" + counts[i] + " and " + name + "Displs["
                        + i + "]=" + displs[i] + " must be >= 0");
            }
            if (counts[i] > b.count() - displs[i]) { // written so that huge values cannot overflow
                throw new IllegalArgumentException(coll + ": " + name + " block " + i + " [" + displs[i] + ", " + (displs[i] + counts[i])
                        + ") is outside " + name + " (" + b.count() + " elements)");
            }
        }
    }

    private static long extent(long[] counts, long[] displs) {
        long e = 0;
        for (int i = 0; i < counts.length; i++) {
            if (counts[i] > 0) {
                e = Math.max(e, displs[i] + counts[i]);
            }
        }
        return e;
    }

}
