package org.jccl.cuda;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.cuda.internal.CudaDriver;
import org.jccl.cuda.internal.HierPrograms;
import org.jccl.cuda.internal.HostSplit;
import org.jccl.internal.runtime.HostPeers;

/**
 * The GPU communicator of ranks on several hosts (host identity as the host communicator sees it, so
 * JCCL_HOSTID splits one machine): inside each host a {@link CudaCommunicator} of its GPUs (jccl's
 * kernels over CUDA IPC), between hosts host communicators over jccl's transports on pinned host
 * memory, every collective cut into pipelined steps ({@link HierPrograms}). A call enqueues its GPU
 * work on the caller's stream and returns once its cross-host legs are done; work the caller issues
 * on that stream afterwards sees the result (as with NCCL). The calling thread drives the network legs.
 *
 * <p>Failures: while it waits for the GPU, every collective polls the whole host communicator's
 * failure (its control plane fails it when any rank dies, naming it, within JCCL_PEER_TIMEOUT, even
 * while no operation runs on it) and the local kernels' status; the cross-host legs fail themselves when a peer of theirs dies; either way the
 * communicator aborts every part (kernels waiting on peers return at the abort word, peers of the
 * host communicators learn the cause) and the call throws, naming the cause.
 */
final class HierCommunicator extends CudaCommunicator {
    private final HostSplit split;
    private final CudaCommunicator local;
    private final Communicator cross;
    private final Communicator all;
    private final GpuHierDevice dev;
    private final HierPrograms programs;
    private final String description;
    private volatile boolean aborted;
    private volatile boolean closed;
    private volatile JcclException failure;

    HierCommunicator(HostSplit split, CudaDevice device, CudaCommunicator local, Communicator cross, Communicator all, long chunk, int slots, long wholeMax, String description) {
        super(split.rank(), split.size(), device, "gpucomm-hier");
        this.split = split;
        this.local = local;
        this.cross = cross;
        this.all = all;
        this.description = description;
        this.dev = new GpuHierDevice(device, local, split.localGroup(), this::watchFailure);
        this.programs = new HierPrograms(dev, split, cross, split.myLocal() == 0 ? cross : null, all, chunk, slots, wholeMax);
    }

    /** How the communicator is laid out (its INFO line's body). */
    String description() {
        return description;
    }

    @Override
    public String stagedBecause() {
        return null;
    }

    @Override
    public JcclException asyncError() {
        JcclException f = failure;
        if (f != null) {
            return f;
        }
        return local != null ? local.asyncError() : null;
    }

    /**
     * Why the communicator cannot go on, or null: the whole host communicator's failure (its control
     * plane fails it when any rank dies or aborts, naming it, within JCCL_PEER_TIMEOUT, even while no
     * operation runs on it), the cross-host group's, or a kernel's of the local group.
     */
    private JcclException watchFailure() {
        JcclException f = HostPeers.failure(all);
        if (f != null) {
            return f;
        }
        // The parts number their ranks their own way: name them in this communicator's numbering.
        f = HostPeers.failure(cross);
        if (f != null) {
            return HostSplit.inWorldRanks(f, split.crossGroup());
        }
        f = local != null ? local.asyncError() : null;
        return f != null ? HostSplit.inWorldRanks(f, split.localGroup()) : null;
    }

    // ================================================================== collectives

    private interface Body {
        void run();
    }

    private void run(String what, CudaStream stream, Body body) {
        Runnable launch = () -> {
            synchronized (this) {
                checkUsable(what);
                dev.begin(stream);
                try {
                    body.run();
                } catch (RuntimeException e) {
                    throw fail(what, e);
                }
            }
        };
        if (!DeviceGroup.enqueue(() -> { }, launch)) {
            launch.run();
        }
    }

    /** Records the first failure, aborts every part, returns the exception the call throws. */
    private JcclException fail(String what, RuntimeException e) {
        JcclException w = watchFailure();
        // A cross-host group names its peers by host index: give the whole group's control plane (which names the rank
        // in GPU rank order, detecting by the same heartbeats) a moment to reach its own verdict.
        for (int k = 0; k < 100 && w == null && e instanceof org.jccl.PeerFailedException; k++) {
            java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L);
            w = HostPeers.failure(all);
        }
        JcclException cause = w != null ? w : e instanceof JcclException j ? j : new JcclException(ErrorCode.INTERNAL, e.toString());
        JcclException x = new JcclException(cause.code() == null ? ErrorCode.INTERNAL : cause.code(), "rank " + rank + ": GPU " + what
                + " across hosts failed: " + cause.getMessage() + " (" + split.describe() + "; this rank's cross-host group, ranked by host: "
                + java.util.Arrays.toString(split.crossGroup()) + ")");
        x.at(rank, cause.peer(), what, -1);
        x.addSuppressed(e);
        if (failure == null) {
            failure = x;
        }
        abortParts();
        return x;
    }

    @Override
    public void allReduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        checkUsable("allReduce");
        long count = DeviceArgs.checkAllReduce(this, send, recv, op, stream);
        run("allReduce", stream, () -> programs.allReduce(send.address(), recv.address(), count, send.type(), op));
    }

    @Override
    public void reduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream stream) {
        checkUsable("reduce");
        long count = DeviceArgs.checkReduce(this, send, recv, op, root, stream);
        long r = rank == root ? recv.address() : 0;
        run("reduce", stream, () -> programs.reduce(send.address(), r, count, send.type(), op, root));
    }

    @Override
    public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        checkUsable("reduceScatter");
        long n = DeviceArgs.checkReduceScatter(this, send, recv, op, stream);
        run("reduceScatter", stream, () -> programs.reduceScatter(send.address(), recv.address(), n, send.type(), op));
    }

    @Override
    public void allGather(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        checkUsable("allGather");
        long n = DeviceArgs.checkAllGather(this, send, recv, stream);
        run("allGather", stream, () -> programs.allGather(send.address(), recv.address(), n, send.type()));
    }

    @Override
    public void broadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream) {
        checkUsable("broadcast");
        long count = DeviceArgs.checkBroadcast(this, send, recv, root, stream);
        long s = rank == root ? send.address() : 0;
        run("broadcast", stream, () -> programs.broadcast(s, recv.address(), count, recv.type(), root));
    }

    @Override
    public void allToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        checkUsable("allToAll");
        long block = DeviceArgs.checkAllToAll(this, send, recv, stream);
        run("allToAll", stream, () -> programs.allToAll(send.address(), recv.address(), block, send.type()));
    }

    // ================================================================== send / recv

    private boolean sameHost(int peer) {
        return split.hostOf(peer) == split.myHost();
    }

    /** The group's sends and receives to ranks of this host, with peers as local ranks. */
    private List<DeviceGroup.P2p> localOps(List<DeviceGroup.P2p> ops) {
        List<DeviceGroup.P2p> l = new ArrayList<>();
        for (DeviceGroup.P2p o : ops) {
            if (sameHost(o.peer())) {
                l.add(new DeviceGroup.P2p(o.send(), o.buf(), split.localOf(o.peer()), o.stream()));
            }
        }
        return l;
    }

    @Override
    long[] publishRecvs(List<DeviceGroup.P2p> ops) {
        List<DeviceGroup.P2p> l = localOps(ops);
        return local != null && !l.isEmpty() ? local.publishRecvs(l) : null;
    }

    @Override
    void flushExchange() {
        if (local != null) {
            local.flushExchange();
        }
    }

    /**
     * Same-host sends and receives run as the local communicator's kernel; those to other hosts go
     * through pinned memory and the whole host communicator (the call returns once they are done).
     */
    @Override
    void runP2p(List<DeviceGroup.P2p> ops, long[] recvSeqs) {
        checkUsable("send/recv");
        List<DeviceGroup.P2p> l = localOps(ops);
        if (!l.isEmpty()) {
            local.runP2p(l, recvSeqs);
        }
        List<DeviceGroup.P2p> remote = new ArrayList<>();
        for (DeviceGroup.P2p o : ops) {
            if (!sameHost(o.peer())) {
                remote.add(o);
            }
        }
        if (remote.isEmpty()) {
            return;
        }
        synchronized (this) {
            device.makeCurrent();
            List<MemorySegment> bufs = new ArrayList<>();
            try {
                for (DeviceGroup.P2p o : remote) {
                    o.stream().synchronize();
                }
                List<Work> works = new ArrayList<>();
                for (DeviceGroup.P2p o : remote) {
                    MemorySegment m = CudaDriver.memHostAlloc(Math.max(16, o.buf().byteSize()), CudaDriver.MEMHOSTALLOC_PORTABLE);
                    bufs.add(m);
                    if (o.send()) {
                        CudaDriver.memcpyDtoH(m, o.buf().address(), o.buf().byteSize());
                    }
                }
                try (org.jccl.Group g = all.group()) {
                    for (int k = 0; k < remote.size(); k++) {
                        DeviceGroup.P2p o = remote.get(k);
                        Buffer b = Buffer.of(bufs.get(k).asSlice(0, o.buf().byteSize()), o.buf().count(), o.buf().type());
                        works.add(o.send() ? all.sendAsync(b, o.peer()) : all.recvAsync(b, o.peer()));
                    }
                }
                for (Work w : works) {
                    w.join();
                }
                for (int k = 0; k < remote.size(); k++) {
                    DeviceGroup.P2p o = remote.get(k);
                    if (!o.send()) {
                        CudaDriver.memcpyHtoD(o.buf().address(), bufs.get(k), o.buf().byteSize());
                    }
                }
            } catch (RuntimeException e) {
                throw fail("send/recv", e);
            } finally {
                for (MemorySegment m : bufs) {
                    CudaDriver.memFreeHost(m);
                }
            }
        }
    }

    // ================================================================== lifecycle

    @Override
    void checkUsable(String what) {
        if (closed) {
            throw new InvalidUsageException(what + ": the GPU communicator is closed");
        }
        JcclException f = failure;
        if (f != null) {
            throw new JcclException(f.code(), what + ": the GPU communicator of rank " + rank + " failed earlier and is unusable (create a"
                    + " new one): " + f.getMessage());
        }
        if (aborted) {
            throw new JcclException(ErrorCode.ABORTED, what + ": the GPU communicator was aborted");
        }
    }

    private void abortParts() {
        aborted = true;
        if (local != null) {
            local.abort();
        }
        cross.abort();
        all.abort();
    }

    @Override
    public void abort() {
        if (!aborted) {
            abortParts();
        }
    }

    /** Releases everything once the device is idle (the parts' own close then says goodbye to their peers). */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            dev.close();
        } finally {
            if (local != null) {
                local.close();
            }
            for (Communicator c : new Communicator[] {cross, all}) {
                if (aborted) {
                    c.abort();
                }
                c.close();
            }
        }
    }
}
