package org.jccl.cuda.internal;

import static org.jccl.cuda.internal.Align.ceilDiv;
import static org.jccl.cuda.internal.Align.roundUp;
import static org.jccl.cuda.internal.Plan.in;
import static org.jccl.cuda.internal.Plan.out;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;

/**
 * Reduce and reduce-scatter on jccl_reduce, bracketed by a start and an end barrier: GPU r loads
 * its slice (reduce) or its block (reduce-scatter) from every peer, in rank order, and stores the
 * result (reduce: into the root's output). The copy-engine reduce-scatter is {@link CopyEngine#reduce}.
 */
public final class ReducePlans {
    private final KernelLauncher k;
    private final CopyEngine ce;

    public ReducePlans(KernelLauncher launcher, CopyEngine ce) {
        this.k = launcher;
        this.ce = ce;
    }

    /** Reduce call {@code c} ({@code c.recv()} 0 off the root). */
    public Plan reduce(Plan.Call c) {
        DataType t = c.type();
        int es = t.size();
        int size = k.size();
        int root = c.root();
        long count = c.count();
        MemorySegment fn = k.kernels().reduce(t, c.op());
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            KernelArgs a = k.args;
            a.clear0();
            long slice = roundUp(ceilDiv(count, size), 16 / es);
            long lo = Math.min(k.rank() * slice, count);
            long hi = Math.min(lo + slice, count);
            boolean aligned = out(peers, root) % 16 == 0;
            for (int q = 0; q < size; q++) {
                a.src(q, in(peers, q) + lo * es);
                aligned &= in(peers, q) % 16 == 0;
            }
            a.dst(0, out(peers, root) + lo * es);
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | (aligned ? KernelArgs.MODE_VEC : 0);
            k.launchReduce(fn, hi - lo, e, size, 1, mode, t.bytes(slice), c.stream(), "reduce");
        });
    }

    /** Reduce-scatter call {@code c} ({@code c.count()} elements per rank) by variant {@code v}. */
    public Plan reduceScatter(GpuTuner.ReduceScatter v, Plan.Call c) {
        return switch (v) {
            case LOAD -> reduceScatterLoad(c);
            case CE -> ce.reduce("reduceScatter", c, false);
        };
    }

    /** Reduce-scatter by loads: GPU r loads block r of every peer's input and reduces it into its output. */
    private Plan reduceScatterLoad(Plan.Call c) {
        DataType t = c.type();
        int es = t.size();
        int size = k.size();
        long count = c.count();
        MemorySegment fn = k.kernels().reduce(t, c.op());
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            KernelArgs a = k.args;
            a.clear0();
            boolean aligned = c.recv() % 16 == 0;
            for (int q = 0; q < size; q++) {
                long s = in(peers, q) + (long) k.rank() * count * es;
                a.src(q, s);
                aligned &= s % 16 == 0;
            }
            a.dst(0, c.recv());
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | (aligned ? KernelArgs.MODE_VEC : 0);
            k.launchReduce(fn, count, e, size, 1, mode, t.bytes(count), c.stream(), "reduceScatter");
        });
    }
}
