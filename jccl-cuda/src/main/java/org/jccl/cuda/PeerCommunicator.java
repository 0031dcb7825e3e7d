package org.jccl.cuda;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.AllReducePlans;
import org.jccl.cuda.internal.Align;
import org.jccl.cuda.internal.BroadcastPlans;
import org.jccl.cuda.internal.CopyEngine;
import org.jccl.cuda.internal.CopyPlans;
import org.jccl.cuda.internal.CudaDriver;
import org.jccl.cuda.internal.Exchange;
import org.jccl.cuda.internal.GpuSettings;
import org.jccl.cuda.internal.GpuTuner;
import org.jccl.cuda.internal.InProcessExchange;
import org.jccl.cuda.internal.KernelArgs;
import org.jccl.cuda.internal.KernelLauncher;
import org.jccl.cuda.internal.KernelStatus;
import org.jccl.cuda.internal.Kernels;
import org.jccl.cuda.internal.Plan;
import org.jccl.cuda.internal.ReducePlans;
import org.jccl.internal.guard.OpGuard;
import org.jccl.internal.log.Log;

/**
 * The GPU communicator over peer-mapped memory: each call is checked, planned ({@link GpuTuner}
 * picks the variant, the plans of org.jccl.cuda.internal build its launch), published and resolved
 * through the {@link Exchange} (the peers' buffers, as mapped here, and the mismatch guard), and
 * launched on the caller's stream; sends and receives of a group run as one jccl_p2p kernel. It owns
 * the communicator's failure: a kernel's (in the host-mapped status words), a mismatch found on the
 * host, abort and close.
 */
final class PeerCommunicator extends CudaCommunicator {
    private static final int MAX_RANKS = KernelArgs.MAX_RANKS;

    private final Exchange exchange;
    /** This rank's signal area; freed here where it was allocated here (createAll). */
    private final long signal;
    private final MemorySegment hostWords;
    private final GpuSettings settings;
    private final GpuTuner tuner;
    final KernelLauncher launcher;
    private final CopyEngine copyEngine;
    private final AllReducePlans allReducePlans;
    private final BroadcastPlans broadcastPlans;
    private final ReducePlans reducePlans;
    private final CopyPlans copyPlans;

    /** The dup of the host communicator this rank owns (create()), closed with it; null for createAll. */
    Communicator ownedHost;

    private long epoch;
    private final long[] sendSeq;
    private final long[] recvSeq;
    private long p2pBlocks;
    private volatile boolean aborted;
    private volatile boolean closed;
    /** The first failure (null: none yet); set once, by {@link #recordFailure}. */
    private volatile JcclException failure;
    /** Whether a call has thrown {@link #failure} itself (later ones throw an exception naming it). */
    private boolean failureThrown;

    /**
     * @param signal this rank's area, {@code peerSignal[q]}: rank q's as mapped here
     * @param hostWords the host-mapped abort and status words ({@link KernelStatus})
     * @param maxBlocks the smallest SM count among the ranks' GPUs
     */
    PeerCommunicator(int rank, int size, CudaDevice device, Exchange exchange, long signal, long[] peerSignal, MemorySegment hostWords,
                     int maxBlocks, GpuSettings settings, String name) {
        super(rank, size, device, name);
        Kernels kernels = Kernels.on(device.gpu());
        this.exchange = exchange;
        this.signal = signal;
        this.hostWords = hostWords;
        this.settings = settings;
        this.sendSeq = new long[size];
        this.recvSeq = new long[size];
        this.tuner = new GpuTuner(settings, size, maxBlocks);
        this.launcher = new KernelLauncher(rank, size, name, kernels, tuner, signal, peerSignal,
                CudaDriver.memHostGetDevicePointer(hostWords));
        this.copyEngine = new CopyEngine(launcher);
        this.allReducePlans = new AllReducePlans(launcher, copyEngine);
        this.broadcastPlans = new BroadcastPlans(launcher, copyEngine);
        this.reducePlans = new ReducePlans(launcher, copyEngine);
        this.copyPlans = new CopyPlans(launcher);
        // A wait on the host for a peer's record ends when this rank's kernels have failed (the one-shot's guard found
        // a mismatch): the peer failed at that operation too and publishes nothing more.
        exchange.watch(rank, () -> {
            JcclException f = failureNow();
            return f == null ? null : reportFailure("GPU collective", f);
        });
    }

    @Override
    public String stagedBecause() {
        return null;
    }

    // ================================================================== collectives

    /** The call's device addresses as the plans take them. */
    private static Plan.Call call(long send, long recv, DeviceBuffer recvBuf, long count, DataType t, ReduceOp op, int root,
                                  CudaStream stream) {
        return new Plan.Call(send, recv, recvBuf == null ? 0 : recvBuf.byteSize(), count, t, op, root, stream.handle());
    }

    @Override
    public void allReduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        checkUsable("allReduce");
        long count = DeviceArgs.checkAllReduce(this, send, recv, op, stream);
        DataType t = send.type();
        long g = guard("allReduce", count, t, op, -1);
        Plan.Call c = call(send.address(), recv.address(), recv, count, t, op, -1, stream);
        submit("allReduce", g, stream, allReducePlans.plan(tuner.allReduce(count, t.bytes(count)), c, g));
    }

    @Override
    public void reduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream stream) {
        checkUsable("reduce");
        long count = DeviceArgs.checkReduce(this, send, recv, op, root, stream);
        DataType t = send.type();
        Plan.Call c = call(send.address(), rank == root ? recv.address() : 0, rank == root ? recv : null, count, t, op, root, stream);
        submit("reduce", guard("reduce", count, t, op, root), stream, reducePlans.reduce(c));
    }

    @Override
    public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        checkUsable("reduceScatter");
        long n = DeviceArgs.checkReduceScatter(this, send, recv, op, stream);
        DataType t = send.type();
        Plan.Call c = call(send.address(), recv.address(), recv, n, t, op, -1, stream);
        submit("reduceScatter", guard("reduceScatter", n * size, t, op, -1), stream, reducePlans.reduceScatter(tuner.reduceScatter(n), c));
    }

    @Override
    public void allGather(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        checkUsable("allGather");
        long n = DeviceArgs.checkAllGather(this, send, recv, stream);
        Plan.Call c = call(send.address(), recv.address(), recv, n, send.type(), null, -1, stream);
        submit("allGather", guard("allGather", n * size, send.type(), null, -1), stream, copyPlans.allGather(c));
    }

    @Override
    public void broadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream) {
        checkUsable("broadcast");
        DeviceArgs.checkBroadcast(this, send, recv, root, stream);
        Plan.Call c = call(rank == root ? send.address() : 0, recv.address(), recv, recv.count(), recv.type(), null, root, stream);
        submit("broadcast", guard("broadcast", recv.count(), recv.type(), null, root), stream,
                broadcastPlans.plan(tuner.broadcast(recv.byteSize()), c));
    }

    @Override
    public void allToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        checkUsable("allToAll");
        DeviceArgs.checkAllToAll(this, send, recv, stream);
        Plan.Call c = call(send.address(), recv.address(), recv, send.count(), send.type(), null, -1, stream);
        submit("allToAll", guard("allToAll", send.count(), send.type(), null, -1), stream, copyPlans.allToAll(tuner.allToAll(), c));
    }

    /** The mismatch guard's word of a call (org.jccl.internal.guard.OpGuard), 0 with JCCL_CHECK=none. */
    private long guard(String name, long count, DataType t, ReduceOp op, int root) {
        return settings.guardOn() ? OpGuard.collective(name, count, t, op, root) : 0;
    }

    /**
     * Queues (in a group) or runs {@code plan}, a collective that uses {@code plan.epochs()} consecutive
     * epochs (one per kernel). {@code guard}: the mismatch guard's word of the call ({@link #guard}), published with
     * the buffers and compared by every rank before it launches. The one-shot all-reduce (in = out = 0)
     * exchanges nothing: its kernels compare the words, and the exchange gets a note of the call, which
     * a peer whose call exchanges records finds while it waits for this rank's (see docs/CONTRACTS.md
     * "The mismatch guard"). A mismatch found on the host fails the communicator and releases the
     * peers' one-shot kernels that may wait for this rank at that operation ({@link #releaseOneShots}).
     */
    private void submit(String what, long guard, CudaStream stream, Plan plan) {
        long e;
        synchronized (this) {
            e = epoch + 1;
            epoch += plan.epochs();
        }
        long in = plan.in();
        long out = plan.out();
        // Operations that read and write only this rank's buffers (one-shot all-reduce) exchange nothing.
        boolean exchanged = in != 0 || out != 0;
        Runnable publish = () -> {
            if (exchanged) {
                exchange.publishCollective(rank, e, in, out, guard);
            } else if (guard != 0) {
                exchange.noteOneShot(rank, e, guard);
            }
        };
        Runnable launch = () -> {
            long[] peers = null;
            if (exchanged) {
                try {
                    peers = exchange.resolveCollective(rank, e);
                } catch (JcclException x) {
                    if (x.code() == ErrorCode.MISMATCH && failure == null) {
                        mismatchOnHost(x, e, guard, stream);
                    }
                    throw x;
                }
            }
            synchronized (this) {
                checkUsable(what);
                device.makeCurrent();
                plan.launch().launch(peers, e);
            }
        };
        if (!DeviceGroup.enqueue(publish, launch)) {
            publish.run();
            exchange.flush(rank);
            launch.run();
        }
    }

    // ================================================================== send / recv

    @Override
    long[] publishRecvs(List<DeviceGroup.P2p> ops) {
        long[] s = new long[ops.size()];
        int k = 0;
        for (DeviceGroup.P2p o : ops) {
            if (!o.send()) {
                long seq = ++recvSeq[o.peer()];
                s[k++] = seq;
                exchange.publishRecv(rank, o.peer(), seq, o.buf().address(), o.buf().byteSize());
            }
        }
        return s;
    }

    @Override
    void flushExchange() {
        exchange.flush(rank);
    }

    /** Runs a group's sends and receives of this communicator as one kernel. Called in the launch phase. */
    @Override
    synchronized void runP2p(List<DeviceGroup.P2p> ops, long[] recvSeqs) {
        checkUsable("send/recv");
        CudaStream stream = ops.get(0).stream();
        for (DeviceGroup.P2p o : ops) {
            if (o.stream().handle().address() != stream.handle().address()) {
                throw new IllegalArgumentException("the sends and receives of one group on a communicator must use one stream");
            }
        }
        device.makeCurrent();
        KernelArgs p2pArgs = launcher.p2pArgs();
        p2pArgs.clear0p2p();
        int nsend = 0;
        int nrecv = 0;
        int ri = 0;
        for (DeviceGroup.P2p o : ops) {
            if (!o.send()) {
                if (nrecv == MAX_RANKS) {
                    throw new IllegalArgumentException("at most " + MAX_RANKS + " receives per communicator in one group");
                }
                p2pArgs.recv(nrecv++, o.peer(), recvSeqs[ri++]);
            }
        }
        boolean vec = true;
        long maxBytes = 0;
        long scratchNeed = 0;
        for (DeviceGroup.P2p o : ops) {
            if (o.send() && sendOverlapsRecv(o, ops)) {
                scratchNeed += Align.roundUp(o.buf().byteSize(), 256);
            }
        }
        long scratchAt = scratchNeed > 0 ? launcher.scratch(scratchNeed) : 0;
        int sends = 0;
        for (DeviceGroup.P2p o : ops) {
            sends += o.send() ? 1 : 0;
        }
        if (sends > MAX_RANKS) {
            throw new IllegalArgumentException("at most " + MAX_RANKS + " sends per communicator in one group");
        }
        int[] sendPeers = new int[sends];
        long[] sendSeqs = new long[sends];
        int k = 0;
        for (DeviceGroup.P2p o : ops) {
            if (o.send()) {
                sendPeers[k] = o.peer();
                sendSeqs[k++] = ++sendSeq[o.peer()];
            }
        }
        exchange.prepareSends(rank, sendPeers, sendSeqs);
        for (DeviceGroup.P2p o : ops) {
            if (!o.send()) {
                continue;
            }
            long seq = sendSeqs[nsend];
            long[] dst = exchange.resolveSend(rank, o.peer(), seq);
            long bytes = o.buf().byteSize();
            if (dst[1] != bytes) {
                fail(ErrorCode.MISMATCH, "send #" + seq + " to rank " + o.peer() + ": this rank sends " + bytes + " bytes but rank "
                        + o.peer() + " posted a recv of " + dst[1] + " bytes; sizes and types of matching send/recv must agree");
            }
            long src = o.buf().address();
            if (sendOverlapsRecv(o, ops)) {
                CudaDriver.memcpyDtoDAsync(scratchAt, src, bytes, stream.handle());
                src = scratchAt;
                scratchAt += Align.roundUp(bytes, 256);
            }
            vec &= (src | dst[0] | bytes) % 16 == 0;
            maxBytes = Math.max(maxBytes, bytes);
            p2pArgs.send(nsend++, o.peer(), src, dst[0], bytes, seq);
        }
        int grid = nsend == 0 ? 1 : launcher.blocksFor(maxBytes);
        p2pArgs.p2pOp(nsend, nrecv, vec, p2pBlocks);
        if (nsend > 0) {
            p2pBlocks += grid;
        }
        CudaDriver.launchKernel(launcher.kernels().p2p, grid, Kernels.THREADS, 0, stream.handle(), p2pArgs.params(), "jccl_p2p");
    }

    private static boolean sendOverlapsRecv(DeviceGroup.P2p send, List<DeviceGroup.P2p> ops) {
        for (DeviceGroup.P2p r : ops) {
            if (!r.send() && Align.overlaps(send.buf().address(), send.buf().byteSize(), r.buf().address(), r.buf().byteSize())) {
                return true;
            }
        }
        return false;
    }

    // ================================================================== failures

    /**
     * Throws when the communicator cannot take {@code what}: closed, aborted, or failed. A failure (a
     * kernel's, recorded in the status words, or a mismatch found on the host) is thrown as it is by
     * the first call that meets it; later calls throw an exception of the same kind naming it.
     */
    @Override
    void checkUsable(String what) {
        if (closed) {
            throw new InvalidUsageException(what + ": the GPU communicator is closed");
        }
        JcclException f = failureNow();
        if (f != null) {
            throw reportFailure(what, f);
        }
        if (aborted) {
            throw new JcclException(ErrorCode.ABORTED, what + ": the GPU communicator was aborted");
        }
    }

    /**
     * The communicator's failure: the one recorded first, else one a kernel has recorded in the status
     * words by now (recorded here), else null. After abort() by the user, kernels that gave up are no
     * failure.
     */
    private JcclException failureNow() {
        JcclException f = failure;
        if (f != null || aborted) {
            return f;
        }
        if (KernelStatus.code(hostWords) == 0) {
            return null;
        }
        return recordFailure(KernelStatus.decode(hostWords, rank, device.toString(), settings.timeoutNs()));
    }

    /** Makes {@code f} the communicator's failure unless one is recorded already; returns the one recorded. */
    private synchronized JcclException recordFailure(JcclException f) {
        if (failure == null) {
            failure = f;
            aborted = true;
            if (f.code() != ErrorCode.MISMATCH) {
                // waits on the host for peers that may never come end now (a mismatch: every rank finds it itself)
                exchange.abort();
            }
        }
        return failure;
    }

    /** The exception a call meeting failure {@code f} throws: {@code f} itself the first time, then one naming it. */
    private synchronized JcclException reportFailure(String what, JcclException f) {
        if (!failureThrown) {
            failureThrown = true;
            return f;
        }
        String m = what + ": the GPU communicator of rank " + rank + " failed earlier and is unusable (create a new one): "
                + f.getMessage();
        if (f instanceof CudaException) {
            return new CudaException(m);
        }
        if (f instanceof InvalidUsageException) {
            return new InvalidUsageException(f.code(), m);
        }
        return new JcclException(f.code(), m);
    }

    /**
     * The host found a mismatch at operation {@code e} (this rank's guard word {@code guard}): fails the
     * communicator and, when a peer ran that operation as a one-shot all-reduce ({@link
     * Exchange.OneShotPeer}: its kernel waits for this rank), releases the peers' one-shot kernels.
     */
    private void mismatchOnHost(JcclException x, long e, long guard, CudaStream stream) {
        synchronized (this) {
            recordFailure(x);
            failureThrown = true;
        }
        if (x instanceof Exchange.OneShotPeer) {
            releaseOneShots(e, guard, stream);
        }
    }

    /**
     * Queues jccl_oneshot_release on {@code stream} (after this rank's earlier kernels): every peer's
     * one-shot kernel of operation {@code e}, which waits for a flag this rank will never store, finds
     * this rank's word with {@link KernelStatus#RELEASED} instead, writes nothing and records the
     * mismatch. Every rank whose call of that operation exchanges records waits for the one-shot
     * peer's record, finds its note and fails there, so no other kernel of {@code e} runs anywhere and
     * the flags stored for {@code e} meet only one-shot kernels. Nothing with JCCL_CHECK=none (guard 0)
     * or alone.
     */
    private synchronized void releaseOneShots(long e, long guard, CudaStream stream) {
        if (guard == 0 || size < 2 || closed) {
            return;
        }
        try {
            device.makeCurrent();
            launcher.releaseOneShots(e, guard, stream.handle());
        } catch (CudaException c) {
            Log.warn(Log.Subsys.COLL, rank, "releasing the peers' one-shot kernels of GPU operation #" + e + " failed: " + c.getMessage()
                    + "; they end at JCCL_CUDA_WAIT_TIMEOUT");
        }
    }

    private void fail(ErrorCode code, String message) {
        hostWords.set(ValueLayout.JAVA_LONG, 0, 1);
        JcclException x = new JcclException(code, "rank " + rank + ": " + message);
        synchronized (this) {
            recordFailure(x);
            failureThrown = true;
        }
        exchange.abort();
        throw x;
    }

    // ================================================================== lifecycle

    @Override
    public JcclException asyncError() {
        return failureNow();
    }

    @Override
    public void abort() {
        if (!aborted) {
            aborted = true;
            hostWords.set(ValueLayout.JAVA_LONG, 0, 1); // kernels waiting on peers see it and return
            exchange.abort();
            if (ownedHost != null) {
                ownedHost.abort();
            }
        }
    }

    /**
     * Releases the communicator once the device is idle. A failure that its kernels recorded and that
     * no call has reported yet (e.g. a mismatched one-shot all-reduce as the last call) is thrown here,
     * after everything is released, so that it is never silent.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        JcclException unreported = null;
        try {
            device.makeCurrent();
            // Kernels that wait on peers return once they see the abort word, a failure in the status words or the deadline.
            CudaDriver.ctxSynchronize();
            JcclException f = failureNow();
            unreported = f != null && !failureThrown ? f : null;
            launcher.freeScratch();
            copyEngine.close();
            exchange.close();
            if (exchange instanceof InProcessExchange && signal != 0) {
                CudaDriver.memFree(signal);
            }
            CudaDriver.memFreeHost(hostWords);
            if (ownedHost != null) {
                if (aborted) {
                    ownedHost.abort();
                }
                ownedHost.close();
            }
        } finally {
            launcher.closeArgs();
        }
        if (unreported != null) {
            failureThrown = true;
            throw unreported;
        }
    }
}
