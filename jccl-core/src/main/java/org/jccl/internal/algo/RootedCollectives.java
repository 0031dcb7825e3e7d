package org.jccl.internal.algo;

import static org.jccl.internal.algo.Collectives.mod;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.internal.tune.AlgoSelector.Algo;
import org.jccl.internal.tune.AlgoSelector.Coll;
import org.jccl.spi.P2pRequest;

/**
 * The rooted collectives' algorithms: broadcast (binomial tree, or binomial scatter then all-gather),
 * reduce (binomial tree), gather and scatter (direct to and from the root).
 */
final class RootedCollectives {
    private RootedCollectives() {
    }

    /** Binomial tree over ranks renumbered so that the root is 0; returns the parent (or -1) and fills children. */
    private static int tree(int rank, int root, int n, List<Integer> children) {
        int v = mod(rank - root, n);
        int parent = -1;
        int mask = 1;
        while (mask < n) {
            if ((v & mask) != 0) {
                parent = mod(v - mask + root, n);
                break;
            }
            mask <<= 1;
        }
        for (mask >>= 1; mask > 0; mask >>= 1) {
            if (v + mask < n) {
                children.add(mod(v + mask + root, n));
            }
        }
        return parent;
    }

    /**
     * Binomial tree broadcast of {@code r} from {@code root}, pipelined by slices: a rank forwards
     * slice k to its children as soon as it has received it.
     */
    static void treeBroadcast(CollectiveContext ctx, MemorySegment r, long bytes, int root) {
        int n = ctx.size();
        int rank = ctx.rank();
        List<Integer> children = new ArrayList<>();
        int parent = tree(rank, root, n, children);
        Chunks ch = Chunks.equal(bytes, 1, ctx.chunkBytes());
        int ns = ch.slices(0);
        List<P2pRequest> sends = new ArrayList<>();
        if (parent < 0) {
            for (int k = 0; k < ns; k++) {
                for (int child : children) {
                    sends.add(ctx.send(child, ch.slice(r, 0, k, 1)));
                }
            }
        } else {
            P2pRequest[] rq = new P2pRequest[ns];
            for (int k = 0; k < ns; k++) {
                rq[k] = ctx.recv(parent, ch.slice(r, 0, k, 1));
            }
            for (int k = 0; k < ns; k++) {
                ctx.await(rq[k]);
                for (int child : children) {
                    sends.add(ctx.send(child, ch.slice(r, 0, k, 1)));
                }
            }
        }
        ctx.awaitAll(sends);
    }

    /**
     * Broadcast as a binomial scatter of n balanced chunks (chunk c to the rank c + root) followed by
     * an all-gather of those chunks (ring, recursive doubling or Bruck, as the tuner picks for an
     * all-gather of that size): about 2 (n-1)/n of the message per rank instead of the tree's
     * log2 n at the root.
     */
    static void scatterAllGatherBroadcast(CollectiveContext ctx, MemorySegment r, long bytes, int root) {
        int n = ctx.size();
        int v = mod(ctx.rank() - root, n);
        Chunks ch = Chunks.balanced(bytes, n, ctx.chunkBytes());
        // Subtree of v in the binomial tree rooted at 0: [v, v + lowbit(v)); its chunks arrive from v - lowbit(v).
        int top;
        if (v == 0) {
            top = Integer.highestOneBit(n - 1) << 1;
        } else {
            top = Integer.lowestOneBit(v);
            MemorySegment mine = ch.range(r, v, Math.min(v + top, n));
            if (mine.byteSize() > 0) {
                ctx.await(ctx.recv(mod(v - top + root, n), mine));
            }
        }
        List<P2pRequest> sends = new ArrayList<>();
        for (int mask = top >> 1; mask > 0; mask >>= 1) {
            int c = v + mask;
            if (c < n) {
                MemorySegment sub = ch.range(r, c, Math.min(c + mask, n));
                if (sub.byteSize() > 0) {
                    sends.add(ctx.send(mod(c + root, n), sub));
                }
            }
        }
        ctx.awaitAll(sends);
        Collectives.allGatherChunks(ctx, r, ch, root, ctx.tuner().choose(Coll.ALLGATHER, bytes, Algo.RING, Algo.RD, Algo.BRUCK));
    }

    /**
     * Binomial tree reduce to {@code root}, pipelined by slices: a rank reduces its children's
     * slice k into its own and sends it on to its parent.
     */
    static void treeReduce(CollectiveContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op, int root) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = t.bytes(count);
        List<Integer> children = new ArrayList<>();
        int parent = tree(rank, root, n, children);
        MemorySegment acc;
        if (rank == root) {
            acc = r;
            if (s.address() != r.address() || s.isNative() != r.isNative()) {
                MemorySegment.copy(s, 0, r, 0, bytes);
            }
        } else if (children.isEmpty()) {
            acc = s;
        } else {
            acc = ctx.scratch(1, bytes);
            MemorySegment.copy(s, 0, acc, 0, bytes);
        }
        int esz = t.size();
        Chunks ch = Chunks.equal(count, 1, ctx.chunkBytes() / esz);
        int ns = ch.slices(0);
        long sliceBytes = ch.sliceElems() * esz;
        int nc = children.size();
        // Two sets of receive slots per child: slice k+1 arrives while slice k is reduced.
        MemorySegment tmp = nc == 0 ? null : ctx.scratch(0, 2L * nc * Math.min(sliceBytes, bytes));
        long slot = Math.min(sliceBytes, bytes);
        List<P2pRequest> sends = new ArrayList<>();
        P2pRequest[][] rq = new P2pRequest[2][nc];
        for (int k = 0; k < ns; k++) {
            if (k == 0) {
                postChildren(ctx, children, tmp, rq[0], 0, slot, ch.sliceLength(0, 0) * esz);
            }
            if (k + 1 < ns) {
                postChildren(ctx, children, tmp, rq[(k + 1) & 1], (k + 1) & 1, slot, ch.sliceLength(0, k + 1) * esz);
            }
            long len = ch.sliceLength(0, k);
            MemorySegment dst = ch.slice(acc, 0, k, esz);
            for (int j = 0; j < nc; j++) {
                ctx.await(rq[k & 1][j]);
                Reductions.reduce(dst, tmp.asSlice(((long) (k & 1) * nc + j) * slot, len * esz), len, t, op);
            }
            if (parent >= 0) {
                sends.add(ctx.send(parent, dst));
            } else {
                Reductions.finishAvg(dst, len, t, op, n);
            }
        }
        ctx.awaitAll(sends);
    }

    private static void postChildren(CollectiveContext ctx, List<Integer> children, MemorySegment tmp, P2pRequest[] rq, int set,
                                     long slot, long len) {
        int nc = children.size();
        for (int j = 0; j < nc; j++) {
            rq[j] = ctx.recv(children.get(j), tmp.asSlice(((long) set * nc + j) * slot, len));
        }
    }

    /** Direct to the root: every rank sends its block, the root receives them all at once. */
    static void gather(CollectiveContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
        int n = ctx.size();
        int rank = ctx.rank();
        if (rank != root) {
            ctx.await(ctx.send(root, s));
            return;
        }
        MemorySegment own = r.asSlice(bytes * rank, bytes);
        if (s.address() != own.address() || s.isNative() != own.isNative()) {
            MemorySegment.copy(s, 0, own, 0, bytes);
        }
        List<P2pRequest> rq = new ArrayList<>();
        for (int i = 1; i < n; i++) {
            int from = mod(root + i, n);
            rq.add(ctx.recv(from, r.asSlice(bytes * from, bytes)));
        }
        ctx.awaitAll(rq);
    }

    /** Direct from the root: the root sends every rank its block at once. */
    static void scatter(CollectiveContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
        int n = ctx.size();
        int rank = ctx.rank();
        if (rank != root) {
            ctx.await(ctx.recv(root, r));
            return;
        }
        MemorySegment own = s.asSlice(bytes * rank, bytes);
        if (own.address() != r.address() || own.isNative() != r.isNative()) {
            MemorySegment.copy(own, 0, r, 0, bytes);
        }
        List<P2pRequest> sq = new ArrayList<>();
        for (int i = 1; i < n; i++) {
            int to = mod(root + i, n);
            sq.add(ctx.send(to, s.asSlice(bytes * to, bytes)));
        }
        ctx.awaitAll(sq);
    }
}
