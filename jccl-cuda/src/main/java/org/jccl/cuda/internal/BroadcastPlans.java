package org.jccl.cuda.internal;

import static org.jccl.cuda.internal.Align.ceilDiv;
import static org.jccl.cuda.internal.Align.roundUp;
import static org.jccl.cuda.internal.Plan.in;
import static org.jccl.cuda.internal.Plan.out;

/**
 * The broadcast variants on the kernels (jccl_kernels.cu, jccl_copy and jccl_bcast): spread, pull,
 * pipe and the chains (block, warp, async); the copy-engine chain is {@link CopyEngine#broadcast}.
 * Which one runs, and on how many blocks, is {@link GpuTuner}'s choice. A new variant is a constant
 * of {@link GpuTuner.Broadcast}, its row in the tuner and one case and method here (the switch is
 * exhaustive: the compiler names a variant without one).
 */
public final class BroadcastPlans {
    private final KernelLauncher k;
    private final CopyEngine ce;

    public BroadcastPlans(KernelLauncher launcher, CopyEngine ce) {
        this.k = launcher;
        this.ce = ce;
    }

    /** The plan of broadcast call {@code c} ({@code c.send()} 0 off the root) by variant {@code v}. */
    public Plan plan(GpuTuner.Broadcast v, Plan.Call c) {
        int se = KernelArgs.MODE_START | KernelArgs.MODE_END;
        int chain = KernelArgs.MODE_CHAIN;
        return switch (v) {
            case SPREAD -> kernel(c, (peers, e, total, vec) -> spread(c, peers, e, total, vec));
            case PULL -> kernel(c, (peers, e, total, vec) -> pull(c, peers, e, total, vec));
            case PIPE -> kernel(c, (peers, e, total, vec) -> pipelined(c, peers, e, total, se | vec, v, "broadcast pipe"));
            case CHAIN -> kernel(c, (peers, e, total, vec) -> pipelined(c, peers, e, total, se | vec | chain, v, "broadcast chain"));
            // The chain with one pipeline per warp (own part, own flag).
            case WARP_CHAIN -> kernel(c, (peers, e, total, vec) -> pipelined(c, peers, e, total,
                    se | vec | chain | KernelArgs.MODE_WARPS, v, "broadcast warp chain"));
            // The block chain with roles per block (copying warps, a poller, two signallers): the per-round release store no
            // longer stalls the copies. Pairwise start (the successor says its kernel runs), no end barrier.
            case CHAIN_ASYNC -> kernel(c, (peers, e, total, vec) -> pipelined(c, peers, e, total,
                    vec | chain | KernelArgs.MODE_ROLES, v, "broadcast chain-async"));
            case CE -> ce.broadcast(c);
        };
    }

    /** The launch of a broadcast variant on the kernels, given the peers' buffers and MODE_VEC where every pointer is aligned. */
    @FunctionalInterface
    private interface Body {
        void launch(long[] peers, long epoch, long total, int vec);
    }

    /**
     * One kernel, after the preparation every kernel variant shares: the call's bytes, the argument block's pointers
     * cleared, the alignment of every pointer.
     */
    private Plan kernel(Plan.Call c, Body body) {
        long total = c.type().bytes(c.count());
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            k.args.clear0();
            boolean aligned = in(peers, c.root()) % 16 == 0;
            for (int q = 0; q < k.size(); q++) {
                aligned &= out(peers, q) % 16 == 0;
            }
            body.launch(peers, e, total, aligned ? KernelArgs.MODE_VEC : 0);
        });
    }

    /** Rank r loads slice r of the root's buffer and stores it into every rank's output. */
    private void spread(Plan.Call c, long[] peers, long e, long total, int vec) {
        KernelArgs a = k.args;
        int size = k.size();
        long slice = roundUp(ceilDiv(total, size), 16);
        long lo = Math.min(k.rank() * slice, total);
        long hi = Math.min(lo + slice, total);
        a.src(0, in(peers, c.root()) + lo);
        for (int q = 0; q < size; q++) {
            a.dst(q, out(peers, q) + lo);
        }
        k.launchCopy(hi - lo, e, 1, size, KernelArgs.MODE_START | KernelArgs.MODE_END | KernelArgs.MODE_MULTI_DST | vec, slice,
                c.stream(), "broadcast spread");
    }

    /**
     * n-1 slices, one per non-root rank j, which loads it from the root and stores it to every non-root: the root's links
     * carry each byte once.
     */
    private void pull(Plan.Call c, long[] peers, long e, long total, int vec) {
        KernelArgs a = k.args;
        int size = k.size();
        int rank = k.rank();
        int root = c.root();
        int se = KernelArgs.MODE_START | KernelArgs.MODE_END;
        long slice = roundUp(ceilDiv(total, size - 1), 16);
        if (rank == root) {
            a.src(0, in(peers, root));
            a.dst(0, out(peers, root));
            k.launchCopy(total, e, 1, 1, se | KernelArgs.MODE_MULTI_DST | vec, slice, c.stream(), "broadcast pull");
            return;
        }
        int j = rank < root ? rank : rank - 1;
        long lo = Math.min(j * slice, total);
        long hi = Math.min(lo + slice, total);
        a.src(0, in(peers, root) + lo);
        int nd = 0;
        for (int q = 0; q < size; q++) {
            if (q != root) {
                a.dst(nd++, out(peers, q) + lo);
            }
        }
        k.launchCopy(hi - lo, e, 1, nd, se | KernelArgs.MODE_MULTI_DST | vec, slice, c.stream(), "broadcast pull");
    }

    /**
     * jccl_bcast with the grid {@link GpuTuner#broadcastGrid} gives variant {@code v}: the pipe (the root stores slice j
     * into rank j, which forwards it; {@code mode} without MODE_CHAIN) or a chain root -> root+1 -> ... in which every GPU
     * stores to its successor only, per block, per warp (MODE_WARPS) or with roles (MODE_ROLES).
     */
    private void pipelined(Plan.Call c, long[] peers, long e, long total, int mode, GpuTuner.Broadcast v, String what) {
        KernelArgs a = k.args;
        GpuTuner.Grid g = k.tuner().broadcastGrid(v, total);
        a.src(0, in(peers, c.root()));
        for (int q = 0; q < k.size(); q++) {
            a.dst(q, out(peers, q));
        }
        a.op(total, e, c.root(), k.size(), mode, (int) g.part());
        CudaDriver.launchKernel(k.kernels().bcast, g.blocks(), Kernels.THREADS, 0, c.stream(), a.params(), what);
    }
}
