package org.jccl.internal.algo;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.internal.runtime.AlgoSelector.Algo;
import org.jccl.internal.runtime.AlgoSelector.Coll;
import org.jccl.internal.runtime.OpContext;
import org.jccl.spi.P2pRequest;

/**
 * The collective algorithms, written once against {@link OpContext}'s point-to-point layer so that
 * every transport runs all of them. All run on the communicator's operation thread; buffers are
 * native segments already validated and staged by the runtime.
 *
 * <ul>
 * <li>allReduce: recursive doubling up to {@code JCCL_RD_THRESHOLD} bytes (log2 n steps, latency
 *     bound), else a pipelined ring: reduce-scatter then all-gather, 2(n-1) steps, each chunk cut
 *     into {@code JCCL_CHUNK_SIZE} slices so that receiving slice k+1 overlaps reducing slice k and a
 *     slice moves on to the next rank as soon as it is reduced.</li>
 * <li>allGather and reduceScatter: the two halves of that ring.</li>
 * <li>broadcast and reduce: binomial trees, pipelined by slices.</li>
 * <li>allToAll(v): pairwise exchange, step i sends to rank+i and receives from rank-i.</li>
 * <li>gather, scatter: direct to/from the root. barrier: dissemination (log2 n rounds of empty messages).</li>
 * </ul>
 * Every rank of a collective computes the same message sizes and order from the same arguments,
 * which is what lets connections match messages in FIFO order without tags.
 */
public final class Collectives {
    /** Receive slices in flight per ring step (bounds scratch memory to WINDOW x slice). */
    private static final int WINDOW = 8;

    private Collectives() {
    }

    private static int mod(int a, int n) {
        int m = a % n;
        return m < 0 ? m + n : m;
    }

    // ------------------------------------------------------------------------------------ allReduce

    public static void allReduce(OpContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        long bytes = t.bytes(count);
        int n = ctx.size();
        Algo algo = n == 1 || count == 0 || bytes <= ctx.rdThreshold() || count < n
                ? ctx.algorithms().choose(Coll.ALLREDUCE, Algo.RD, Algo.RING)
                : ctx.algorithms().choose(Coll.ALLREDUCE, Algo.RING, Algo.RD);
        if (algo == Algo.RING && n > 1 && count > 0) {
            // No initial copy: the ring reads the caller's send buffer and writes reductions into recv.
            Chunks ch = Chunks.balanced(count, n, ctx.chunkBytes() / t.size());
            List<P2pRequest> gatherSends = new ArrayList<>();
            ringReduceScatter(ctx, s, r, ch, t, op, 0, gatherSends);
            ringAllGather(ctx, r, ch, t.size(), mod(ctx.rank() + 1, n), gatherSends);
            return;
        }
        if (!same(s, r)) {
            MemorySegment.copy(s, 0, r, 0, bytes);
        }
        if (n > 1 && count > 0) {
            recursiveDoublingAllReduce(ctx, r, count, t, op);
        }
    }

    /** Whether two staged segments are the same memory (staging makes them native). */
    private static boolean same(MemorySegment a, MemorySegment b) {
        return a.address() == b.address() && a.isNative() == b.isNative();
    }

    /**
     * Recursive doubling with the usual fold for non-powers of two: the first 2*(n-p) ranks pair up,
     * the even one hands its vector to the odd one and sits out, p ranks exchange-and-reduce log2 p
     * times, and the result is handed back. Every op is commutative, so both partners of an
     * exchange compute bit-identical results.
     */
    static void recursiveDoublingAllReduce(OpContext ctx, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = t.bytes(count);
        int p = Integer.highestOneBit(n);
        int rem = n - p;
        MemorySegment tmp = ctx.scratch(0, bytes);
        int vrank;
        if (rank < 2 * rem) {
            if ((rank & 1) == 0) {
                ctx.await(ctx.send(rank + 1, r));
                vrank = -1;
            } else {
                ctx.await(ctx.recv(rank - 1, tmp));
                Reductions.reduce(r, tmp, count, t, op);
                vrank = rank / 2;
            }
        } else {
            vrank = rank - rem;
        }
        if (vrank >= 0) {
            for (int mask = 1; mask < p; mask <<= 1) {
                int vpartner = vrank ^ mask;
                int partner = vpartner < rem ? vpartner * 2 + 1 : vpartner + rem;
                P2pRequest rq = ctx.recv(partner, tmp);
                P2pRequest sq = ctx.send(partner, r);
                ctx.await(rq);
                ctx.await(sq);
                Reductions.reduce(r, tmp, count, t, op);
            }
        }
        if (rank < 2 * rem) {
            if ((rank & 1) == 1) {
                ctx.await(ctx.send(rank - 1, r));
            } else {
                ctx.await(ctx.recv(rank + 1, r));
            }
        }
        Reductions.finishAvg(r, count, t, op, n);
    }

    /**
     * Ring reduce-scatter from {@code src} into {@code w} (which may be the same memory): at step s
     * this rank sends chunk (rank - s + shift) and writes (its own src chunk op the chunk received
     * from its left neighbour) into w; after n-1 steps chunk (rank + 1 + shift) of w holds the full
     * reduction (shift -1 makes that chunk {@code rank}). Step 0 sends straight from src, and every
     * chunk of w this rank reduces is written once, so out of place needs no initial copy.
     * When {@code gatherSends} is not null, each finished slice is also sent on at once as the first
     * step of the ring all-gather, and those sends are added to it (the all-gather awaits them:
     * waiting here could deadlock the ring, since the neighbour takes them only after its own
     * reduce-scatter).
     */
    static void ringReduceScatter(OpContext ctx, MemorySegment src, MemorySegment w, Chunks ch, DataType t, ReduceOp op,
                                  int shift, List<P2pRequest> gatherSends) {
        int n = ctx.size();
        int rank = ctx.rank();
        int next = mod(rank + 1, n);
        int prev = mod(rank - 1, n);
        int esz = t.size();
        long sliceBytes = ch.sliceElems() * esz;
        MemorySegment tmp = ctx.scratch(0, Math.min(WINDOW, Math.max(1, ch.slices(0))) * sliceBytes);
        int window = (int) (tmp.byteSize() / sliceBytes);
        List<P2pRequest> sends = new ArrayList<>();
        int first = mod(rank + shift, n);
        for (int k = 0; k < ch.slices(first); k++) {
            sends.add(ctx.send(next, slice(src, ch, first, k, esz)));
        }
        for (int s = 0; s < n - 1; s++) {
            int c = mod(rank - s - 1 + shift, n);
            int ns = ch.slices(c);
            P2pRequest[] rq = new P2pRequest[ns];
            int posted = 0;
            for (; posted < Math.min(window, ns); posted++) {
                rq[posted] = ctx.recv(prev, tmp.asSlice((posted % window) * sliceBytes, ch.sliceLength(c, posted) * esz));
            }
            boolean last = s == n - 2;
            for (int k = 0; k < ns; k++) {
                ctx.await(rq[k]);
                long len = ch.sliceLength(c, k);
                MemorySegment dst = slice(w, ch, c, k, esz);
                Reductions.reduce(dst, slice(src, ch, c, k, esz), tmp.asSlice((k % window) * sliceBytes, len * esz), len, t, op);
                if (posted < ns) {
                    rq[posted] = ctx.recv(prev, tmp.asSlice((posted % window) * sliceBytes, ch.sliceLength(c, posted) * esz));
                    posted++;
                }
                if (!last) {
                    sends.add(ctx.send(next, dst));
                } else {
                    Reductions.finishAvg(dst, len, t, op, n);
                    if (gatherSends != null) {
                        gatherSends.add(ctx.send(next, dst));
                    }
                }
            }
        }
        // The all-gather overwrites chunks these sends read: they must be done first.
        ctx.awaitAll(sends);
    }

    /**
     * Ring all-gather in place over {@code w}: this rank holds chunk {@code own}; at step s it
     * receives chunk (own - s - 1) from its left neighbour straight into {@code w} and forwards it
     * at the next step. {@code sends} holds step-0 sends already posted (by the reduce-scatter), or
     * is empty, in which case step 0 is posted here.
     */
    static void ringAllGather(OpContext ctx, MemorySegment w, Chunks ch, int esz, int own, List<P2pRequest> sends) {
        int n = ctx.size();
        int rank = ctx.rank();
        int next = mod(rank + 1, n);
        int prev = mod(rank - 1, n);
        if (sends.isEmpty()) {
            for (int k = 0; k < ch.slices(own); k++) {
                sends.add(ctx.send(next, slice(w, ch, own, k, esz)));
            }
        }
        for (int s = 0; s < n - 1; s++) {
            int c = mod(own - s - 1, n);
            int ns = ch.slices(c);
            P2pRequest[] rq = new P2pRequest[ns];
            for (int k = 0; k < ns; k++) {
                rq[k] = ctx.recv(prev, slice(w, ch, c, k, esz));
            }
            for (int k = 0; k < ns; k++) {
                ctx.await(rq[k]);
                if (s < n - 2) {
                    sends.add(ctx.send(next, slice(w, ch, c, k, esz)));
                }
            }
        }
        ctx.awaitAll(sends);
    }

    private static MemorySegment slice(MemorySegment w, Chunks ch, int c, int k, int esz) {
        return w.asSlice(ch.sliceOffset(c, k) * esz, ch.sliceLength(c, k) * esz);
    }

    // ------------------------------------------------------------------------------------ allGather / reduceScatter

    public static void allGather(OpContext ctx, MemorySegment s, MemorySegment r, long bytesPerRank) {
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
        Chunks ch = Chunks.equal(bytesPerRank, n, ctx.chunkBytes());
        ringAllGather(ctx, r, ch, 1, rank, new ArrayList<>());
    }

    public static void reduceScatter(OpContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = t.bytes(count);
        if (n == 1 || count == 0) {
            if (bytes > 0 && s.asSlice(0, bytes).address() != r.address()) {
                MemorySegment.copy(s, 0, r, 0, bytes);
            }
            return;
        }
        // Partial reductions go to scratch, so the caller's send buffer is left as it was.
        MemorySegment w = ctx.scratch(1, bytes * n);
        Chunks ch = Chunks.equal(count, n, ctx.chunkBytes() / t.size());
        ringReduceScatter(ctx, s, w, ch, t, op, -1, null);
        MemorySegment.copy(w, bytes * rank, r, 0, bytes);
    }

    // ------------------------------------------------------------------------------------ broadcast / reduce

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

    public static void broadcast(OpContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
        int n = ctx.size();
        int rank = ctx.rank();
        if (rank == root && (s.address() != r.address() || s.isNative() != r.isNative())) {
            MemorySegment.copy(s, 0, r, 0, bytes);
        }
        if (n == 1 || bytes == 0) {
            return;
        }
        List<Integer> children = new ArrayList<>();
        int parent = tree(rank, root, n, children);
        Chunks ch = Chunks.equal(bytes, 1, ctx.chunkBytes());
        int ns = ch.slices(0);
        List<P2pRequest> sends = new ArrayList<>();
        if (parent < 0) {
            for (int k = 0; k < ns; k++) {
                for (int child : children) {
                    sends.add(ctx.send(child, slice(r, ch, 0, k, 1)));
                }
            }
        } else {
            P2pRequest[] rq = new P2pRequest[ns];
            for (int k = 0; k < ns; k++) {
                rq[k] = ctx.recv(parent, slice(r, ch, 0, k, 1));
            }
            for (int k = 0; k < ns; k++) {
                ctx.await(rq[k]);
                for (int child : children) {
                    sends.add(ctx.send(child, slice(r, ch, 0, k, 1)));
                }
            }
        }
        ctx.awaitAll(sends);
    }

    public static void reduce(OpContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op, int root) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = t.bytes(count);
        if (count == 0) {
            return;
        }
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
            MemorySegment dst = slice(acc, ch, 0, k, esz);
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

    private static void postChildren(OpContext ctx, List<Integer> children, MemorySegment tmp, P2pRequest[] rq, int set,
                                     long slot, long len) {
        int nc = children.size();
        for (int j = 0; j < nc; j++) {
            rq[j] = ctx.recv(children.get(j), tmp.asSlice(((long) set * nc + j) * slot, len));
        }
    }

    // ------------------------------------------------------------------------------------ all-to-all

    public static void allToAll(OpContext ctx, MemorySegment s, MemorySegment r, long block) {
        int n = ctx.size();
        int rank = ctx.rank();
        MemorySegment src = s;
        if (s.address() == r.address() && s.isNative() == r.isNative() && n > 1) {
            // In place: every block is overwritten by the receive from its rank, so send from a copy.
            src = ctx.scratch(1, block * n);
            MemorySegment.copy(s, 0, src, 0, block * n);
        }
        if (src != r || n == 1) {
            MemorySegment.copy(src, block * rank, r, block * rank, block);
        }
        for (int i = 1; i < n; i++) {
            int to = mod(rank + i, n);
            int from = mod(rank - i, n);
            P2pRequest rq = ctx.recv(from, r.asSlice(block * from, block));
            P2pRequest sq = ctx.send(to, src.asSlice(block * to, block));
            ctx.await(rq);
            ctx.await(sq);
        }
    }

    public static void allToAllv(OpContext ctx, MemorySegment s, long[] sc, long[] sd, MemorySegment r, long[] rc, long[] rd,
                                 int esz) {
        int n = ctx.size();
        int rank = ctx.rank();
        if (sc[rank] > 0) {
            MemorySegment.copy(s, sd[rank] * esz, r, rd[rank] * esz, sc[rank] * esz);
        }
        for (int i = 1; i < n; i++) {
            int to = mod(rank + i, n);
            int from = mod(rank - i, n);
            // Empty blocks still travel (as empty messages) so that mismatched counts are detected, not waited on.
            P2pRequest rq = ctx.recv(from, block(r, rd[from], rc[from], esz));
            P2pRequest sq = ctx.send(to, block(s, sd[to], sc[to], esz));
            ctx.await(rq);
            ctx.await(sq);
        }
    }

    /** Elements [displ, displ + count) of seg; an empty block may lie anywhere (even past the end). */
    private static MemorySegment block(MemorySegment seg, long displ, long count, int esz) {
        return count == 0 ? MemorySegment.NULL : seg.asSlice(displ * esz, count * esz);
    }

    // ------------------------------------------------------------------------------------ gather / scatter / barrier

    public static void gather(OpContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
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

    public static void scatter(OpContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
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

    /** Dissemination barrier: in round k every rank signals rank + 2^k and waits for rank - 2^k. */
    public static void barrier(OpContext ctx) {
        int n = ctx.size();
        int rank = ctx.rank();
        for (int d = 1; d < n; d <<= 1) {
            P2pRequest rq = ctx.recv(mod(rank - d, n), MemorySegment.NULL);
            P2pRequest sq = ctx.send(mod(rank + d, n), MemorySegment.NULL);
            ctx.await(rq);
            ctx.await(sq);
        }
    }
}
