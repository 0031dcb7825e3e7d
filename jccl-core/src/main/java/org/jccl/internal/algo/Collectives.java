package org.jccl.internal.algo;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.internal.tune.AlgoSelector.Algo;
import org.jccl.internal.tune.AlgoSelector.Coll;
import org.jccl.internal.tune.Tuner;
import org.jccl.spi.P2pRequest;

/**
 * The entry point of the collective algorithms, written once against {@link CollectiveContext}'s
 * point-to-point layer so that every transport runs all of them: for each collective the cases with
 * nothing to move, then the choice of algorithm, then the call to the class that runs it. All run on
 * the thread running the communicator's operations; buffers are native segments already validated
 * and staged by the runtime.
 *
 * <ul>
 * <li>allReduce: recursive doubling (log2 n steps, latency bound), Rabenseifner (reduce-scatter by
 *     recursive halving, all-gather by recursive doubling) ({@link DoublingCollectives}), or a pipelined
 *     ring: reduce-scatter then all-gather, 2(n-1) steps, each chunk cut into {@code JCCL_CHUNK_SIZE}
 *     slices so that receiving slice k+1 overlaps reducing slice k and a slice moves on to the next rank
 *     as soon as it is reduced ({@link RingCollectives}).</li>
 * <li>allGather: ring, recursive doubling or Bruck ({@link BruckCollectives}). reduceScatter: the first
 *     half of the ring.</li>
 * <li>broadcast: binomial tree pipelined by slices, or binomial scatter + all-gather. reduce: binomial
 *     tree. gather, scatter: direct to/from the root ({@link RootedCollectives}).</li>
 * <li>allToAll: pairwise exchange (step i sends to rank+i and receives from rank-i) or Bruck;
 *     allToAllv: pairwise. barrier: dissemination (log2 n rounds of empty messages)
 *     ({@link PairwiseCollectives}).</li>
 * <li>allReduce, broadcast, reduce, allGather, reduceScatter of ranks on several hosts: also hierarchical
 *     ({@link HierCollectives}), whose stages are these algorithms run on groups of ranks.</li>
 * <li>allReduce, allGather, reduceScatter, barrier: also the transport's collective provider
 *     ({@link CollectiveContext#provider()}) where it takes the call.</li>
 * </ul>
 * Where a collective has several algorithms the {@link Tuner} picks one from its cost model, within
 * what {@code JCCL_ALGO} allows. Every rank of a collective computes the same message sizes and order
 * from the same arguments, which is what lets connections match messages in FIFO order without tags.
 */
public final class Collectives {
    private Collectives() {
    }

    /** {@code a} mod {@code n} in [0, n), for rank arithmetic ({@code n > 0}). */
    static int mod(int a, int n) {
        int m = a % n;
        return m < 0 ? m + n : m;
    }

    // ------------------------------------------------------------------------------------ allReduce

    public static void allReduce(CollectiveContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        long bytes = t.bytes(count);
        int n = ctx.size();
        if (n == 1 || count == 0) {
            if (bytes > 0 && !same(s, r)) {
                MemorySegment.copy(s, 0, r, 0, bytes);
            }
            return;
        }
        Algo algo = chooseAllReduce(ctx, bytes, t, op);
        if (algo == Algo.HIER) {
            HierCollectives.allReduce(ctx, ctx.hierarchy(), s, r, count, t, op);
            return;
        }
        if (algo == Algo.SHARED) {
            ctx.provider().allReduce(ctx.providerCall(t, op), s, r, count, t, op);
            Reductions.finishAvg(r, count, t, op, n);
            return;
        }
        if (algo == Algo.RING) {
            // No initial copy: the ring reads the caller's send buffer and writes reductions into recv.
            Chunks ch = Chunks.balanced(count, n, ctx.chunkBytes() / t.size());
            List<P2pRequest> gatherSends = new ArrayList<>();
            RingCollectives.ringReduceScatter(ctx, s, r, ch, t, op, 0, gatherSends);
            RingCollectives.ringAllGather(ctx, r, ch, t.size(), mod(ctx.rank() + 1, n), gatherSends);
            return;
        }
        if (algo == Algo.RABENSEIFNER) {
            // It copies the input itself, only where it must (a rank count that is not a power of two).
            DoublingCollectives.rabenseifnerAllReduce(ctx, same(s, r) ? r : s, r, count, t, op);
            return;
        }
        if (!same(s, r)) {
            MemorySegment.copy(s, 0, r, 0, bytes);
        }
        DoublingCollectives.recursiveDoublingAllReduce(ctx, r, count, t, op);
    }

    private static final Algo[] ALLREDUCE_P2P = {Algo.RD, Algo.RABENSEIFNER, Algo.RING};
    private static final Algo[] ALLREDUCE_SHARED = {Algo.RD, Algo.RABENSEIFNER, Algo.RING, Algo.SHARED};
    private static final Algo[] ALLREDUCE_HIER = {Algo.RD, Algo.RABENSEIFNER, Algo.RING, Algo.HIER};

    /**
     * JCCL_RD_THRESHOLD, when set, splits rd from the rest; the tuner picks within what is left, the collective
     * provider among them when it takes this type and operator.
     */
    private static Algo chooseAllReduce(CollectiveContext ctx, long bytes, DataType t, ReduceOp op) {
        Tuner tu = ctx.tuner();
        long thr = ctx.rdThreshold();
        if (thr >= 0) {
            if (bytes <= thr && tu.selector().allowed(Coll.ALLREDUCE, Algo.RD)) {
                return Algo.RD;
            }
            if (bytes > thr && (tu.selector().allowed(Coll.ALLREDUCE, Algo.RING)
                    || tu.selector().allowed(Coll.ALLREDUCE, Algo.RABENSEIFNER))) {
                return tu.choose(Coll.ALLREDUCE, bytes, Algo.RING, Algo.RABENSEIFNER);
            }
        }
        if (ctx.hierarchy() != null) {
            return tu.chooseAllReduceCached(bytes, ALLREDUCE_HIER);
        }
        return tu.providerTakes(Coll.ALLREDUCE, t, op) ? tu.chooseAllReduceCached(bytes, ALLREDUCE_SHARED)
                : tu.chooseAllReduceCached(bytes, ALLREDUCE_P2P);
    }

    /** Whether two staged segments are the same memory (staging makes them native). */
    private static boolean same(MemorySegment a, MemorySegment b) {
        return a.address() == b.address() && a.isNative() == b.isNative();
    }

    // ------------------------------------------------------------------------------------ allGather / reduceScatter

    public static void allGather(CollectiveContext ctx, MemorySegment s, MemorySegment r, long bytesPerRank) {
        int n = ctx.size();
        int rank = ctx.rank();
        MemorySegment own = r.asSlice(bytesPerRank * rank, bytesPerRank);
        if (s.address() != own.address() || s.isNative() != own.isNative()) {
            MemorySegment.copy(s, 0, own, 0, bytesPerRank);
        }
        if (n == 1 || bytesPerRank == 0) {
            return;
        }
        // Bytes as the element type: the split is the same on every rank.
        Tuner tu = ctx.tuner();
        if (tu.providerTakes(Coll.ALLGATHER, null, null)
                && tu.choose(Coll.ALLGATHER, bytesPerRank * n, Algo.RING, Algo.RD, Algo.BRUCK, Algo.SHARED) == Algo.SHARED) {
            ctx.provider().allGather(ctx.providerCall(null, null), r, bytesPerRank);
            return;
        }
        Algo algo = ctx.hierarchy() != null
                ? tu.choose(Coll.ALLGATHER, bytesPerRank * n, Algo.RING, Algo.RD, Algo.BRUCK, Algo.HIER)
                : tu.choose(Coll.ALLGATHER, bytesPerRank * n, Algo.RING, Algo.RD, Algo.BRUCK);
        if (algo == Algo.HIER) {
            HierCollectives.allGather(ctx, ctx.hierarchy(), r, bytesPerRank);
            return;
        }
        Chunks ch = Chunks.equal(bytesPerRank, n, ctx.chunkBytes());
        allGatherChunks(ctx, r, ch, 0, algo);
    }

    /**
     * All-gather in place over {@code w} (bytes) where chunk c belongs to the rank c + shift (mod n):
     * shift 0 for allGather, the root for the all-gather stage of a broadcast.
     */
    static void allGatherChunks(CollectiveContext ctx, MemorySegment w, Chunks ch, int shift, Algo algo) {
        int v = mod(ctx.rank() - shift, ctx.size());
        switch (algo) {
            case RD -> DoublingCollectives.rdAllGather(ctx, w, ch, shift);
            case BRUCK -> BruckCollectives.bruckAllGather(ctx, w, ch, shift);
            default -> RingCollectives.ringAllGather(ctx, w, ch, 1, v, new ArrayList<>());
        }
    }

    public static void reduceScatter(CollectiveContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = t.bytes(count);
        if (n == 1 || count == 0) {
            if (bytes > 0 && s.asSlice(0, bytes).address() != r.address()) {
                MemorySegment.copy(s, 0, r, 0, bytes);
            }
            return;
        }
        Tuner tu = ctx.tuner();
        if (ctx.hierarchy() != null && tu.choose(Coll.REDUCESCATTER, bytes * n, Algo.RING, Algo.HIER) == Algo.HIER) {
            HierCollectives.reduceScatter(ctx, ctx.hierarchy(), s, r, count, t, op);
            return;
        }
        if (tu.providerTakes(Coll.REDUCESCATTER, t, op) && tu.choose(Coll.REDUCESCATTER, bytes * n, Algo.RING, Algo.SHARED) == Algo.SHARED) {
            ctx.provider().reduceScatter(ctx.providerCall(t, op), s, r, count, t, op);
            Reductions.finishAvg(r, count, t, op, n);
            return;
        }
        // Partial reductions go to scratch, so the caller's send buffer is left as it was.
        MemorySegment w = ctx.scratch(1, bytes * n);
        Chunks ch = Chunks.equal(count, n, ctx.chunkBytes() / t.size());
        RingCollectives.ringReduceScatter(ctx, s, w, ch, t, op, -1, null);
        MemorySegment.copy(w, bytes * rank, r, 0, bytes);
    }

    // ------------------------------------------------------------------------------------ broadcast / reduce

    public static void broadcast(CollectiveContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
        int n = ctx.size();
        int rank = ctx.rank();
        if (rank == root && (s.address() != r.address() || s.isNative() != r.isNative())) {
            MemorySegment.copy(s, 0, r, 0, bytes);
        }
        if (n == 1 || bytes == 0) {
            return;
        }
        Algo algo = ctx.hierarchy() != null
                ? ctx.tuner().choose(Coll.BROADCAST, bytes, Algo.TREE, Algo.SCATTER_ALLGATHER, Algo.HIER)
                : ctx.tuner().choose(Coll.BROADCAST, bytes, Algo.TREE, Algo.SCATTER_ALLGATHER);
        if (algo == Algo.HIER) {
            HierCollectives.broadcast(ctx, ctx.hierarchy(), r, bytes, root);
            return;
        }
        if (algo == Algo.SCATTER_ALLGATHER) {
            RootedCollectives.scatterAllGatherBroadcast(ctx, r, bytes, root);
            return;
        }
        RootedCollectives.treeBroadcast(ctx, r, bytes, root);
    }

    public static void reduce(CollectiveContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op, int root) {
        long bytes = t.bytes(count);
        if (count == 0) {
            return;
        }
        if (ctx.hierarchy() != null && ctx.tuner().choose(Coll.REDUCE, bytes, Algo.TREE, Algo.HIER) == Algo.HIER) {
            HierCollectives.reduce(ctx, ctx.hierarchy(), s, r, count, t, op, root);
            return;
        }
        RootedCollectives.treeReduce(ctx, s, r, count, t, op, root);
    }

    // ------------------------------------------------------------------------------------ all-to-all

    public static void allToAll(CollectiveContext ctx, MemorySegment s, MemorySegment r, long block) {
        int n = ctx.size();
        if (n > 1 && block > 0
                && ctx.tuner().choose(Coll.ALLTOALL, block * n, Algo.PAIRWISE, Algo.BRUCK) == Algo.BRUCK) {
            BruckCollectives.bruckAllToAll(ctx, s, r, block);
            return;
        }
        PairwiseCollectives.allToAll(ctx, s, r, block);
    }

    public static void allToAllv(CollectiveContext ctx, MemorySegment s, long[] sc, long[] sd, MemorySegment r, long[] rc, long[] rd,
                                 int esz) {
        PairwiseCollectives.allToAllv(ctx, s, sc, sd, r, rc, rd, esz);
    }

    // ------------------------------------------------------------------------------------ gather / scatter / barrier

    public static void gather(CollectiveContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
        RootedCollectives.gather(ctx, s, r, bytes, root);
    }

    public static void scatter(CollectiveContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
        RootedCollectives.scatter(ctx, s, r, bytes, root);
    }

    public static void barrier(CollectiveContext ctx) {
        Tuner tu = ctx.tuner();
        if (tu.providerTakes(Coll.BARRIER, null, null) && tu.selector().allowed(Coll.BARRIER, Algo.SHARED)) {
            // The only barrier with a JCCL_ALGO name: chosen (and logged) through the tuner when
            // allowed; excluded, the barrier stays the dissemination one.
            tu.choose(Coll.BARRIER, 0, Algo.SHARED);
            ctx.provider().barrier(ctx.providerCall(null, null));
            return;
        }
        PairwiseCollectives.disseminationBarrier(ctx);
    }
}
