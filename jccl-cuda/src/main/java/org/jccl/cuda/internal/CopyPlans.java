package org.jccl.cuda.internal;

import static org.jccl.cuda.internal.Plan.out;

/**
 * All-gather and all-to-all on jccl_copy, bracketed by a start and an end barrier: pushes, every
 * rank storing its blocks into the peers' outputs.
 */
public final class CopyPlans {
    private final KernelLauncher k;

    public CopyPlans(KernelLauncher launcher) {
        this.k = launcher;
    }

    /** All-gather call {@code c} ({@code c.count()} elements per rank): this rank's block into slot rank of every output. */
    public Plan allGather(Plan.Call c) {
        long bytes = c.type().bytes(c.count());
        int size = k.size();
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            KernelArgs a = k.args;
            a.clear0();
            a.src(0, c.send());
            boolean aligned = c.send() % 16 == 0;
            for (int q = 0; q < size; q++) {
                long d = out(peers, q) + k.rank() * bytes;
                a.dst(q, d);
                aligned &= d % 16 == 0;
            }
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | KernelArgs.MODE_MULTI_DST | (aligned ? KernelArgs.MODE_VEC : 0);
            k.launchCopy(bytes, e, 1, size, mode, bytes, c.stream(), "allGather");
        });
    }

    /**
     * All-to-all call {@code c} ({@code c.count()}: the send buffer's elements) by variant {@code v}: split (the grid is a
     * multiple of size() and each group of blocks copies one block of the buffer, so every rank writes to all its peers at
     * once) or serial (one peer after another). In place: the send buffer is copied to the scratch first, since peers write
     * into it while it is read.
     */
    public Plan allToAll(GpuTuner.AllToAll v, Plan.Call c) {
        int size = k.size();
        long sendBytes = c.type().bytes(c.count());
        long blk = c.type().bytes(c.count() / size);
        boolean inPlace = Align.overlaps(c.send(), sendBytes, c.recv(), c.recvBytes());
        String what = "allToAll " + v.settingName();
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            long src = c.send();
            if (inPlace) {
                src = k.scratch(sendBytes);
                CudaDriver.memcpyDtoDAsync(src, c.send(), sendBytes, c.stream());
            }
            KernelArgs a = k.args;
            a.clear0();
            boolean aligned = src % 16 == 0 && blk % 16 == 0;
            for (int q = 0; q < size; q++) {
                a.src(q, src + q * blk);
                long d = out(peers, q) + k.rank() * blk;
                a.dst(q, d);
                aligned &= d % 16 == 0;
            }
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | (aligned ? KernelArgs.MODE_VEC : 0);
            // serial: the whole grid copies one peer's block after another (rotated by rank); split: a group of blocks per
            // peer, all at once
            int grid = switch (v) {
                case SERIAL -> k.blocksFor(blk * size);
                case SPLIT -> k.tuner().allToAllBlocksPerPeer(blk) * size;
            };
            a.op(blk, e, size, 0, mode | (v == GpuTuner.AllToAll.SPLIT ? KernelArgs.MODE_SPLIT : 0), size);
            CudaDriver.launchKernel(k.kernels().copy, grid, Kernels.THREADS, 0, c.stream(), a.params(), what);
        });
    }
}
