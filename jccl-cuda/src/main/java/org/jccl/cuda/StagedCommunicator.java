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

/**
 * The GPU communicator where GPUs cannot map each other's memory (JCCL_CUDA_P2P_DISABLE, no
 * peer-to-peer path, ranks on other hosts, a failed self-test): every collective and every group of
 * sends and receives is staged through pinned host memory and the host communicator (the CPU
 * transports). A call waits for its stream (its earlier work produced the input), copies in, runs
 * the host collective and copies the result back: it returns once the result is on the GPU. No
 * kernel runs, so the only failures are the host communicator's.
 */
final class StagedCommunicator extends CudaCommunicator {
    private final Communicator staging;
    private final String why;
    private final List<MemorySegment> pinned = new ArrayList<>();
    private int pinnedNext;
    private int pinnedInUse;
    private volatile boolean aborted;
    private volatile boolean closed;

    /** {@code host}: the host communicator the collectives go through; this communicator owns and closes it. */
    StagedCommunicator(Communicator host, CudaDevice device, String why) {
        super(host.rank(), host.size(), device, "gpucomm-staged");
        this.staging = host;
        this.why = why;
    }

    @Override
    public String stagedBecause() {
        return why;
    }

    /** Null: no kernel runs, so nothing fails behind the caller's back. */
    @Override
    public JcclException asyncError() {
        return null;
    }

    // ================================================================== collectives

    @Override
    public void allReduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        checkUsable("allReduce");
        long count = DeviceArgs.checkAllReduce(this, send, recv, op, stream);
        DataType t = send.type();
        staged("allReduce", send, t.bytes(count), recv, t.bytes(count), stream,
                (in, out) -> staging.allReduceAsync(Buffer.of(in, count, t), Buffer.of(out, count, t), op));
    }

    @Override
    public void reduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream stream) {
        checkUsable("reduce");
        long count = DeviceArgs.checkReduce(this, send, recv, op, root, stream);
        DataType t = send.type();
        boolean isRoot = rank == root;
        staged("reduce", send, t.bytes(count), isRoot ? recv : null, isRoot ? t.bytes(count) : 0, stream,
                (in, out) -> staging.reduceAsync(Buffer.of(in, count, t), isRoot ? Buffer.of(out, count, t) : null, op, root));
    }

    @Override
    public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        checkUsable("reduceScatter");
        long c = DeviceArgs.checkReduceScatter(this, send, recv, op, stream);
        DataType t = send.type();
        staged("reduceScatter", send, t.bytes(c * size), recv, t.bytes(c), stream,
                (in, out) -> staging.reduceScatterAsync(Buffer.of(in, c * size, t), Buffer.of(out, c, t), op));
    }

    @Override
    public void allGather(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        checkUsable("allGather");
        long c = DeviceArgs.checkAllGather(this, send, recv, stream);
        DataType t = send.type();
        staged("allGather", send, t.bytes(c), recv, t.bytes(c * size), stream,
                (in, out) -> staging.allGatherAsync(Buffer.of(in, c, t), Buffer.of(out, c * size, t)));
    }

    @Override
    public void broadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream) {
        checkUsable("broadcast");
        DeviceArgs.checkBroadcast(this, send, recv, root, stream);
        DataType t = recv.type();
        long c = recv.count();
        boolean isRoot = rank == root;
        staged("broadcast", isRoot ? send : null, isRoot ? t.bytes(c) : 0, recv, t.bytes(c), stream,
                (in, out) -> staging.broadcastAsync(isRoot ? Buffer.of(in, c, t) : null, Buffer.of(out, c, t), root));
    }

    @Override
    public void allToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        checkUsable("allToAll");
        DeviceArgs.checkAllToAll(this, send, recv, stream);
        DataType t = send.type();
        long c = send.count();
        staged("allToAll", send, t.bytes(c), recv, t.bytes(c), stream,
                (in, out) -> staging.allToAllAsync(Buffer.of(in, c, t), Buffer.of(out, c, t)));
    }

    private interface HostOp {
        Work start(MemorySegment in, MemorySegment out);
    }

    /**
     * One collective through pinned host memory: wait for the stream (its earlier work produced the
     * input), copy in, start the host collective (publish phase); join it and copy the result to
     * the GPU (launch phase). The call returns once the result is on the GPU.
     */
    private void staged(String what, DeviceBuffer src, long inBytes, DeviceBuffer dst, long outBytes, CudaStream stream, HostOp op) {
        MemorySegment[] bufs = new MemorySegment[2];
        Work[] work = new Work[1];
        Runnable publish = () -> {
            synchronized (this) {
                checkUsable(what);
                stream.synchronize();
                bufs[0] = pinned(Math.max(inBytes, 16));
                bufs[1] = pinned(Math.max(outBytes, 16));
                if (src != null && inBytes > 0) {
                    device.makeCurrent();
                    CudaDriver.memcpyDtoH(bufs[0], src.address(), inBytes);
                }
            }
            work[0] = op.start(bufs[0], bufs[1]);
        };
        Runnable launch = () -> {
            try {
                work[0].join();
            } catch (JcclException e) {
                abort();
                throw e;
            }
            synchronized (this) {
                if (dst != null && outBytes > 0) {
                    device.makeCurrent();
                    CudaDriver.memcpyHtoD(dst.address(), bufs[1], outBytes);
                }
                pinnedDone();
            }
        };
        if (!DeviceGroup.enqueue(publish, launch)) {
            publish.run();
            launch.run();
        }
    }

    /** The next pinned staging buffer of at least {@code bytes} (page-locked: copies run at full PCIe speed). */
    private MemorySegment pinned(long bytes) {
        pinnedInUse++;
        int i = pinnedNext++;
        if (i < pinned.size() && pinned.get(i).byteSize() >= bytes) {
            return pinned.get(i);
        }
        device.makeCurrent();
        if (i < pinned.size()) {
            CudaDriver.memFreeHost(pinned.get(i));
        }
        long n = Math.max(Long.highestOneBit(bytes - 1) << 1, 4096);
        MemorySegment m = CudaDriver.memHostAlloc(n, CudaDriver.MEMHOSTALLOC_PORTABLE);
        if (i < pinned.size()) {
            pinned.set(i, m);
        } else {
            pinned.add(m);
        }
        return m.asSlice(0, bytes);
    }

    private void pinnedDone() {
        pinnedInUse -= 2;
        if (pinnedInUse <= 0) {
            pinnedInUse = 0;
            pinnedNext = 0;
        }
    }

    // ================================================================== send / recv in a group

    @Override
    long[] publishRecvs(List<DeviceGroup.P2p> ops) {
        return null;
    }

    @Override
    void flushExchange() {
    }

    /** A group's sends and receives through host memory: copy out, host group, copy in. */
    @Override
    void runP2p(List<DeviceGroup.P2p> ops, long[] recvSeqs) {
        synchronized (this) {
            checkUsable("send/recv");
            for (DeviceGroup.P2p o : ops) {
                o.stream().synchronize();
            }
        }
        MemorySegment[] bufs = new MemorySegment[ops.size()];
        List<Work> works = new ArrayList<>();
        synchronized (this) {
            device.makeCurrent();
            for (int i = 0; i < ops.size(); i++) {
                DeviceGroup.P2p o = ops.get(i);
                bufs[i] = pinned(Math.max(o.buf().byteSize(), 16));
                pinnedInUse++; // pinned() counts one per buffer; pinnedDone() releases two
                if (o.send()) {
                    CudaDriver.memcpyDtoH(bufs[i], o.buf().address(), o.buf().byteSize());
                }
            }
        }
        try (org.jccl.Group hg = staging.group()) {
            for (int i = 0; i < ops.size(); i++) {
                DeviceGroup.P2p o = ops.get(i);
                Buffer b = Buffer.of(bufs[i], o.buf().count(), o.buf().type());
                works.add(o.send() ? staging.sendAsync(b, o.peer()) : staging.recvAsync(b, o.peer()));
            }
        }
        for (Work w : works) {
            w.join();
        }
        synchronized (this) {
            device.makeCurrent();
            for (int i = 0; i < ops.size(); i++) {
                DeviceGroup.P2p o = ops.get(i);
                if (!o.send()) {
                    CudaDriver.memcpyHtoD(o.buf().address(), bufs[i], o.buf().byteSize());
                }
                pinnedDone();
            }
        }
    }

    // ================================================================== lifecycle

    @Override
    void checkUsable(String what) {
        if (closed) {
            throw new InvalidUsageException(what + ": the GPU communicator is closed");
        }
        if (aborted) {
            throw new JcclException(ErrorCode.ABORTED, what + ": the GPU communicator was aborted");
        }
    }

    @Override
    public void abort() {
        if (!aborted) {
            aborted = true;
            staging.abort();
        }
    }

    /** Releases the pinned buffers and the host communicator once the device is idle. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.makeCurrent();
        CudaDriver.ctxSynchronize();
        for (MemorySegment m : pinned) {
            CudaDriver.memFreeHost(m);
        }
        pinned.clear();
        if (aborted) {
            staging.abort();
        }
        staging.close();
    }
}
