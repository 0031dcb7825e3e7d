package org.jccl.cuda.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One GPU communicator's launch state, below its plans: its kernels, its argument blocks (filled once
 * with what never changes: every rank's signal area as mapped here, the abort and status words, the
 * deadline, rank and size), its {@link SignalArea} layout, its {@link GpuTuner} and its device
 * scratch. Works with raw device pointers and stream handles only. Used under the communicator's
 * lock (the argument blocks are reused for every launch); not thread safe.
 */
public final class KernelLauncher {
    private final int rank;
    private final int size;
    private final String name;
    private final Kernels kernels;
    private final GpuTuner tuner;
    private final SignalArea area;
    private final long signal;
    private final long[] peerSignal;
    private final Arena arena = Arena.ofShared();
    final KernelArgs args;
    final KernelArgs p2pArgs;
    final KernelArgs oneShotArgs;
    final KernelArgs pushArgs;
    final KernelArgs flags;
    private long scratch;
    private long scratchBytes;

    /**
     * @param name the communicator's name, for log lines
     * @param signal this rank's area ({@link SignalArea}), {@code peerSignal[q]}: rank q's, as mapped here
     * @param abortDev device address of the host-mapped abort word; the status words follow it
     */
    public KernelLauncher(int rank, int size, String name, Kernels kernels, GpuTuner tuner, long signal, long[] peerSignal,
                          long abortDev) {
        this.rank = rank;
        this.size = size;
        this.name = name;
        this.kernels = kernels;
        this.tuner = tuner;
        this.area = tuner.settings().area(size);
        this.signal = signal;
        this.peerSignal = peerSignal;
        long statusDev = abortDev + 8;
        long timeoutNs = tuner.settings().timeoutNs();
        this.args = KernelArgs.collective(arena);
        this.p2pArgs = KernelArgs.p2p(arena);
        this.pushArgs = KernelArgs.push(arena);
        this.flags = KernelArgs.flags(arena);
        flags.clear();
        flags.flagCommon(abortDev, statusDev, timeoutNs);
        pushArgs.clear();
        pushArgs.pushCommon(abortDev, statusDev, timeoutNs, rank, size);
        this.oneShotArgs = KernelArgs.oneShot(arena);
        oneShotArgs.clear();
        oneShotArgs.oneShotCommon(abortDev, statusDev, timeoutNs, rank, size);
        args.clear();
        p2pArgs.clear();
        for (int q = 0; q < size; q++) {
            args.signal(q, peerSignal[q]);
            p2pArgs.p2pSignal(q, peerSignal[q]);
            oneShotArgs.oneShotSignal(q, peerSignal[q]);
            pushArgs.pushSignal(q, peerSignal[q]);
        }
        args.common(abortDev, statusDev, timeoutNs, rank, size);
        p2pArgs.p2pCommon(abortDev, statusDev, timeoutNs, rank);
    }

    public int rank() {
        return rank;
    }

    public int size() {
        return size;
    }

    public String name() {
        return name;
    }

    public Kernels kernels() {
        return kernels;
    }

    public GpuTuner tuner() {
        return tuner;
    }

    public SignalArea area() {
        return area;
    }

    /** This rank's area. */
    public long signal() {
        return signal;
    }

    /** Rank {@code q}'s area, as mapped here. */
    public long signal(int q) {
        return peerSignal[q];
    }

    /** The argument block of jccl_p2p (struct P2pArgs). */
    public KernelArgs p2pArgs() {
        return p2pArgs;
    }

    public int blocksFor(long bytes) {
        return tuner.blocksFor(bytes);
    }

    /** Launches {@code fn}, a jccl_reduce kernel, with the struct Args built so far plus these fields. */
    void launchReduce(MemorySegment fn, long count, long epoch, int nsrc, int ndst, int mode, long gridBytes, MemorySegment stream,
                      String what) {
        args.op(count, epoch, nsrc, ndst, mode, size);
        CudaDriver.launchKernel(fn, blocksFor(gridBytes), Kernels.THREADS, 0, stream, args.params(), what);
    }

    /** Launches jccl_copy with the struct Args built so far plus these fields. */
    void launchCopy(long bytes, long epoch, int ntask, int ndst, int mode, long gridBytes, MemorySegment stream, String what) {
        args.op(bytes, epoch, ntask, ndst, mode, size);
        CudaDriver.launchKernel(kernels.copy, blocksFor(gridBytes), Kernels.THREADS, 0, stream, args.params(), what);
    }

    /** Launches jccl_flags (one block) with the struct FlagArgs built since its flagReset. */
    void launchFlags(MemorySegment stream, String what) {
        CudaDriver.launchKernel(kernels.flags, 1, 32, 0, stream, flags.params(), what);
    }

    /** One block of jccl_copy: {@code bytes} from {@code src} to {@code dst} (the creation self-test; no barrier). */
    public void copy(long src, long dst, long bytes, MemorySegment stream, String what) {
        args.src(0, src);
        args.dst(0, dst);
        args.op(bytes, 0, 1, 1, 0, 1);
        CudaDriver.launchKernel(kernels.copy, 1, Kernels.THREADS, 0, stream, args.params(), what);
    }

    /**
     * Queues jccl_oneshot_release on {@code stream}: every peer's one-shot kernel of operation {@code epoch}, which waits
     * for a flag this rank will never store, finds this rank's word {@code guard} with {@link KernelStatus#RELEASED} instead.
     */
    public void releaseOneShots(long epoch, long guard, MemorySegment stream) {
        args.op(guard | KernelStatus.RELEASED, epoch, 0, 0, 0, size);
        CudaDriver.launchKernel(kernels.oneShotRelease, 1, KernelArgs.MAX_BLOCKS, 0, stream, args.params(), "jccl_oneshot_release");
    }

    /** A device scratch area of at least {@code bytes}, grown on demand (growing waits for the device). */
    public long scratch(long bytes) {
        if (bytes > scratchBytes) {
            if (scratch != 0) {
                CudaDriver.ctxSynchronize();
                CudaDriver.memFree(scratch);
                scratch = 0;
            }
            long n = Long.highestOneBit(Math.max(bytes, 1 << 20) - 1) << 1;
            scratch = CudaDriver.memAlloc(n);
            scratchBytes = n;
        }
        return scratch;
    }

    /** Frees the scratch (the device must be idle). */
    public void freeScratch() {
        if (scratch != 0) {
            CudaDriver.memFree(scratch);
        }
    }

    /** Frees the argument blocks; last. */
    public void closeArgs() {
        arena.close();
    }
}
