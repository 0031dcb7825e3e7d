package org.jccl.cuda;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;
import org.jccl.DataType;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.CudaDriver;
import org.jccl.cuda.internal.HierDevice;

/**
 * The {@link HierDevice} of one GPU: the local group's collectives through its {@link
 * CudaCommunicator} (jccl's kernels over CUDA IPC) on the caller's stream, copies out on a stream of
 * their own and copies in on another (both directions of PCIe busy at once), ordered by events:
 * per slot, {@code out} (the caller's stream reached the step's copies out), {@code d2h} (they are
 * done), {@code h2d} (the copies in are done; the caller's stream waits for it) and {@code post} (the
 * caller's stream has passed the step's last use of the slot). Pinned slots are cuMemHostAlloc'd and
 * kept; device scratch grows and is kept. Waiting for a slot polls its event and, between polls, the
 * communicator's failure check, so a peer that died ends the wait instead of a kernel's deadline.
 */
final class GpuHierDevice implements HierDevice {
    private static final int EVENT_DISABLE_TIMING = 0x2;

    private final CudaDevice device;
    private final CudaCommunicator local;
    /** World rank of each rank of the local group. */
    private final int[] localRanks;
    private final Supplier<JcclException> failure;
    private final MemorySegment d2h;
    private final MemorySegment h2d;
    private CudaStream stream;

    private long shared;
    private long sharedBytes;
    private long[] perSlot = new long[0];
    private long perSlotBytes;
    private MemorySegment[][] host = new MemorySegment[0][];
    private long hostBytes;
    private MemorySegment[][] events = new MemorySegment[0][]; // per slot: out, d2h, h2d, post
    private boolean[] outOpen = new boolean[0];
    private boolean[] h2dUsed = new boolean[0];
    private boolean[] postUsed = new boolean[0];
    private int slots;

    /** {@code local}: the host's GPU communicator, null when this rank is alone on its host; {@code localRanks}: its ranks' world ranks. */
    GpuHierDevice(CudaDevice device, CudaCommunicator local, int[] localRanks, Supplier<JcclException> failure) {
        this.device = device;
        this.localRanks = localRanks;
        this.local = local;
        this.failure = failure;
        device.makeCurrent();
        this.d2h = CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
        this.h2d = CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
    }

    /** The caller's stream of the collective about to run. */
    void begin(CudaStream s) {
        this.stream = s;
        device.makeCurrent();
    }

    /** A local collective; its failure names ranks in the whole communicator's numbering. */
    private void onLocal(Runnable r) {
        try {
            r.run();
        } catch (JcclException x) {
            throw org.jccl.cuda.internal.HostSplit.inWorldRanks(x, localRanks);
        }
    }

    private DeviceBuffer buf(long address, long count, DataType t) {
        return address == 0 ? null : DeviceBuffer.wrap(device, address, count, t);
    }

    @Override
    public int localRank() {
        return local == null ? 0 : local.rank();
    }

    @Override
    public int localSize() {
        return local == null ? 1 : local.size();
    }

    @Override
    public void localAllReduce(long send, long recv, long count, DataType t, ReduceOp op) {
        onLocal(() -> local.allReduce(buf(send, count, t), buf(recv, count, t), op, stream));
    }

    @Override
    public void localReduceScatter(long send, long recv, long recvCount, DataType t, ReduceOp op) {
        onLocal(() -> local.reduceScatter(buf(send, recvCount * local.size(), t), buf(recv, recvCount, t), op, stream));
    }

    @Override
    public void localAllGather(long send, long recv, long sendCount, DataType t) {
        onLocal(() -> local.allGather(buf(send, sendCount, t), buf(recv, sendCount * local.size(), t), stream));
    }

    @Override
    public void localReduce(long send, long recv, long count, DataType t, ReduceOp op, int localRoot) {
        onLocal(() -> local.reduce(buf(send, count, t), buf(recv, count, t), op, localRoot, stream));
    }

    @Override
    public void localBroadcast(long send, long recv, long count, DataType t, int localRoot) {
        onLocal(() -> local.broadcast(buf(send, count, t), buf(recv, count, t), localRoot, stream));
    }

    @Override
    public void copy(long dst, long src, long bytes) {
        if (bytes > 0) {
            CudaDriver.memcpyDtoDAsync(dst, src, bytes, stream.handle());
        }
    }

    @Override
    public void prepare(long sharedNeed, long perSlotNeed, long hostNeed, int n) {
        boolean grow = sharedNeed > sharedBytes || (perSlotNeed > perSlotBytes && n > 0) || hostNeed > hostBytes || n > slots;
        if (!grow) {
            return;
        }
        // Earlier collectives may still use the memory: wait for them before anything is freed.
        CudaDriver.streamSynchronize(stream.handle());
        CudaDriver.streamSynchronize(d2h);
        CudaDriver.streamSynchronize(h2d);
        if (sharedNeed > sharedBytes) {
            if (shared != 0) {
                CudaDriver.memFree(shared);
            }
            sharedBytes = round(Math.max(sharedNeed, 2 * sharedBytes));
            shared = CudaDriver.memAlloc(sharedBytes);
        }
        int newSlots = Math.max(n, slots);
        // Growth at least doubles: fewer frees (each leaves the peers a stale IPC mapping to close) and reallocations.
        long newPer = perSlotNeed > perSlotBytes ? Math.max(perSlotNeed, 2 * perSlotBytes) : perSlotBytes;
        long newHost = hostNeed > hostBytes ? Math.max(hostNeed, 2 * hostBytes) : hostBytes;
        if (newSlots > slots || newPer > perSlotBytes) {
            for (long p : perSlot) {
                if (p != 0) {
                    CudaDriver.memFree(p);
                }
            }
            perSlotBytes = newPer == 0 ? 0 : round(newPer);
            perSlot = new long[newSlots];
            for (int s = 0; s < newSlots && perSlotBytes > 0; s++) {
                perSlot[s] = CudaDriver.memAlloc(perSlotBytes);
            }
        }
        if (newSlots > slots || newHost > hostBytes) {
            for (MemorySegment[] h : host) {
                CudaDriver.memFreeHost(h[0]);
                CudaDriver.memFreeHost(h[1]);
            }
            hostBytes = round(newHost);
            host = new MemorySegment[newSlots][];
            for (int s = 0; s < newSlots; s++) {
                host[s] = new MemorySegment[] {CudaDriver.memHostAlloc(hostBytes, CudaDriver.MEMHOSTALLOC_PORTABLE),
                        CudaDriver.memHostAlloc(hostBytes, CudaDriver.MEMHOSTALLOC_PORTABLE)};
            }
        }
        if (newSlots > slots) {
            MemorySegment[][] e = new MemorySegment[newSlots][];
            for (int s = 0; s < newSlots; s++) {
                e[s] = s < slots ? events[s] : new MemorySegment[] {CudaDriver.eventCreate(EVENT_DISABLE_TIMING),
                        CudaDriver.eventCreate(EVENT_DISABLE_TIMING), CudaDriver.eventCreate(EVENT_DISABLE_TIMING),
                        CudaDriver.eventCreate(EVENT_DISABLE_TIMING)};
            }
            events = e;
            outOpen = new boolean[newSlots];
            h2dUsed = new boolean[newSlots];
            postUsed = new boolean[newSlots];
            slots = newSlots;
        }
    }

    private static long round(long b) {
        return Math.max(4096, (b + 4095) / 4096 * 4096);
    }

    @Override
    public long scratch(int which) {
        return which < 0 ? shared : perSlot[which];
    }

    @Override
    public MemorySegment slot(int slot, int half) {
        return host[slot][half];
    }

    @Override
    public void toHost(int slot, MemorySegment dst, long src, long bytes) {
        if (!outOpen[slot]) {
            outOpen[slot] = true;
            CudaDriver.eventRecord(events[slot][0], stream.handle());
            CudaDriver.streamWaitEvent(d2h, events[slot][0]);
            if (h2dUsed[slot]) {
                CudaDriver.streamWaitEvent(d2h, events[slot][2]); // the slot's previous copies in have read it
            }
        }
        CudaDriver.memcpyDtoHAsync(dst, src, bytes, d2h);
    }

    @Override
    public void awaitHost(int slot) {
        if (!outOpen[slot] && h2dUsed[slot]) {
            CudaDriver.streamWaitEvent(d2h, events[slot][2]);
        }
        outOpen[slot] = false;
        MemorySegment done = events[slot][1];
        CudaDriver.eventRecord(done, d2h);
        long spins = 0;
        while (!CudaDriver.eventQuery(done)) {
            if ((++spins & 63) == 0) {
                JcclException f = failure.get();
                if (f != null) {
                    throw f;
                }
            }
            if (spins < 2000) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(20_000);
            }
        }
    }

    @Override
    public void toDevice(int slot, long dst, MemorySegment src, long bytes) {
        if (postUsed[slot]) {
            CudaDriver.streamWaitEvent(h2d, events[slot][3]); // the slot's device scratch is free
        }
        CudaDriver.memcpyHtoDAsync(dst, src, bytes, h2d);
        CudaDriver.eventRecord(events[slot][2], h2d);
        h2dUsed[slot] = true;
        CudaDriver.streamWaitEvent(stream.handle(), events[slot][2]);
    }

    @Override
    public void released(int slot) {
        CudaDriver.eventRecord(events[slot][3], stream.handle());
        postUsed[slot] = true;
    }

    /** Frees everything once the streams are idle. */
    void close() {
        device.makeCurrent();
        CudaDriver.streamSynchronize(d2h);
        CudaDriver.streamSynchronize(h2d);
        CudaDriver.ctxSynchronize();
        if (shared != 0) {
            CudaDriver.memFree(shared);
        }
        for (long p : perSlot) {
            if (p != 0) {
                CudaDriver.memFree(p);
            }
        }
        for (MemorySegment[] h : host) {
            CudaDriver.memFreeHost(h[0]);
            CudaDriver.memFreeHost(h[1]);
        }
        for (MemorySegment[] e : events) {
            for (MemorySegment x : e) {
                CudaDriver.eventDestroy(x);
            }
        }
        CudaDriver.streamDestroy(d2h);
        CudaDriver.streamDestroy(h2d);
    }
}
