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
 * The collective algorithms, written once against {@link CollectiveContext}'s point-to-point layer so that
 * every transport runs all of them. All run on the communicator's operation thread; buffers are
 * native segments already validated and staged by the runtime.
 *
 * <ul>
 * <li>allReduce: recursive doubling (log2 n steps, latency bound), Rabenseifner (reduce-scatter by
 *     recursive halving, all-gather by recursive doubling), or a pipelined ring: reduce-scatter then
 *     all-gather, 2(n-1) steps, each chunk cut into {@code JCCL_CHUNK_SIZE} slices so that receiving
 *     slice k+1 overlaps reducing slice k and a slice moves on to the next rank as soon as it is reduced.</li>
 * <li>allGather: ring, recursive doubling or Bruck. reduceScatter: the first half of the ring.</li>
 * <li>broadcast: binomial tree pipelined by slices, or binomial scatter + all-gather. reduce: binomial tree.</li>
 * <li>allToAll: pairwise exchange (step i sends to rank+i and receives from rank-i) or Bruck;
 *     allToAllv: pairwise.</li>
 * <li>gather, scatter: direct to/from the root. barrier: dissemination (log2 n rounds of empty messages).</li>
 * <li>allReduce, broadcast, reduce, allGather, reduceScatter of ranks on several hosts: also hierarchical
 *     ({@link HierCollectives}), whose stages are these algorithms run on groups of ranks.</li>
 * </ul>
 * Where a collective has several algorithms the {@link Tuner} picks one from its cost model, within
 * what {@code JCCL_ALGO} allows. Recursive doubling and Rabenseifner fold non-powers of two: the
 * first 2(n-p) ranks pair up (p the largest power of two not above n), the even one of each pair
 * hands its data to the odd one and sits out while p ranks run the core, and gets the result back.
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
            ringReduceScatter(ctx, s, r, ch, t, op, 0, gatherSends);
            ringAllGather(ctx, r, ch, t.size(), mod(ctx.rank() + 1, n), gatherSends);
            return;
        }
        if (!same(s, r)) {
            MemorySegment.copy(s, 0, r, 0, bytes);
        }
        if (algo == Algo.RABENSEIFNER) {
            rabenseifnerAllReduce(ctx, r, count, t, op);
        } else {
            recursiveDoublingAllReduce(ctx, r, count, t, op);
        }
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

    /**
     * Recursive doubling with the usual fold for non-powers of two: the first 2*(n-p) ranks pair up,
     * the even one hands its vector to the odd one and sits out, p ranks exchange-and-reduce log2 p
     * times, and the result is handed back. Every op is commutative, so both partners of an
     * exchange compute bit-identical results.
     */
    static void recursiveDoublingAllReduce(CollectiveContext ctx, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = t.bytes(count);
        int p = Integer.highestOneBit(n);
        int rem = n - p;
        MemorySegment tmp = ctx.scratch(0, bytes);
        int vrank = foldIn(ctx, r, tmp, count, t, op, rem);
        if (vrank >= 0) {
            for (int mask = 1; mask < p; mask <<= 1) {
                int vpartner = vrank ^ mask;
                int partner = coreToRank(vpartner, rem);
                P2pRequest rq = ctx.recv(partner, tmp);
                P2pRequest sq = ctx.send(partner, r);
                ctx.await(rq);
                ctx.await(sq);
                Reductions.reduce(r, tmp, count, t, op);
            }
        }
        foldOut(ctx, r, rem);
        Reductions.finishAvg(r, count, t, op, n);
    }

    /**
     * The fold of a non-power-of-two rank count into its power-of-two core: of the first 2*rem
     * ranks, each even one hands its vector to the odd one above it and sits out (returns -1); the
     * odd one reduces it into {@code r}. Returns this rank's core rank.
     */
    private static int foldIn(CollectiveContext ctx, MemorySegment r, MemorySegment tmp, long count, DataType t, ReduceOp op, int rem) {
        int rank = ctx.rank();
        if (rank >= 2 * rem) {
            return rank - rem;
        }
        if ((rank & 1) == 0) {
            ctx.await(ctx.send(rank + 1, r));
            return -1;
        }
        ctx.await(ctx.recv(rank - 1, tmp));
        Reductions.reduce(r, tmp, count, t, op);
        return rank / 2;
    }

    /** Undoes {@link #foldIn}: each odd rank of the first 2*rem hands the result back to its even partner. */
    private static void foldOut(CollectiveContext ctx, MemorySegment r, int rem) {
        int rank = ctx.rank();
        if (rank < 2 * rem) {
            if ((rank & 1) == 1) {
                ctx.await(ctx.send(rank - 1, r));
            } else {
                ctx.await(ctx.recv(rank + 1, r));
            }
        }
    }

    /** Actual rank of core rank {@code v} of a fold over n ranks with {@code rem} extra ranks. */
    private static int coreToRank(int v, int rem) {
        return v < rem ? v * 2 + 1 : v + rem;
    }

    /** Posts a receive and a send (each skipped when empty: both sides compute the same lengths) and waits for both. */
    private static void exchange(CollectiveContext ctx, int peer, MemorySegment send, MemorySegment recv) {
        P2pRequest rq = recv.byteSize() > 0 ? ctx.recv(peer, recv) : null;
        P2pRequest sq = send.byteSize() > 0 ? ctx.send(peer, send) : null;
        ctx.awaitAll(rq, sq);
    }

    /**
     * Rabenseifner's all-reduce in place over {@code r}: the vector is cut into p balanced chunks;
     * reduce-scatter by recursive halving (at each step a rank keeps half of its current range,
     * sends the other half to its partner and reduces the partner's copy of the kept half into its
     * own), after which core rank v holds chunk v fully reduced; then all-gather by recursive
     * doubling (ranges double each step). Non-powers of two are folded as in recursive doubling.
     * Moves 2(p-1)/p of the vector per rank instead of log2 p vectors.
     */
    static void rabenseifnerAllReduce(CollectiveContext ctx, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = ctx.size();
        int rank = ctx.rank();
        int esz = t.size();
        long bytes = t.bytes(count);
        int p = Integer.highestOneBit(n);
        int rem = n - p;
        MemorySegment tmp = ctx.scratch(0, bytes);
        int vrank = foldIn(ctx, r, tmp, count, t, op, rem);
        if (vrank >= 0) {
            Chunks ch = Chunks.balanced(count, p, count);
            int lo = 0;
            int hi = p;
            for (int mask = p >> 1; mask > 0; mask >>= 1) {
                int partner = coreToRank(vrank ^ mask, rem);
                int mid = lo + mask;
                boolean lower = (vrank & mask) == 0;
                int keepLo = lower ? lo : mid;
                int keepHi = lower ? mid : hi;
                int sendLo = lower ? mid : lo;
                int sendHi = lower ? hi : mid;
                long keepElems = ch.rangeLength(keepLo, keepHi);
                MemorySegment keep = r.asSlice(ch.rangeOffset(keepLo) * esz, keepElems * esz);
                MemorySegment give = r.asSlice(ch.rangeOffset(sendLo) * esz, ch.rangeLength(sendLo, sendHi) * esz);
                MemorySegment in = tmp.asSlice(0, keepElems * esz);
                exchange(ctx, partner, give, in);
                if (keepElems > 0) {
                    Reductions.reduce(keep, in, keepElems, t, op);
                }
                lo = keepLo;
                hi = keepHi;
            }
            long own = ch.rangeLength(vrank, vrank + 1);
            if (own > 0) {
                Reductions.finishAvg(r.asSlice(ch.rangeOffset(vrank) * esz, own * esz), own, t, op, n);
            }
            for (int mask = 1; mask < p; mask <<= 1) {
                int vp = vrank ^ mask;
                int base = vrank & ~(mask - 1);
                int pbase = vp & ~(mask - 1);
                MemorySegment mine = r.asSlice(ch.rangeOffset(base) * esz, ch.rangeLength(base, base + mask) * esz);
                MemorySegment theirs = r.asSlice(ch.rangeOffset(pbase) * esz, ch.rangeLength(pbase, pbase + mask) * esz);
                exchange(ctx, coreToRank(vp, rem), mine, theirs);
            }
        }
        foldOut(ctx, r, rem);
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
    static void ringReduceScatter(CollectiveContext ctx, MemorySegment src, MemorySegment w, Chunks ch, DataType t, ReduceOp op,
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
    static void ringAllGather(CollectiveContext ctx, MemorySegment w, Chunks ch, int esz, int own, List<P2pRequest> sends) {
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
    private static void allGatherChunks(CollectiveContext ctx, MemorySegment w, Chunks ch, int shift, Algo algo) {
        int v = mod(ctx.rank() - shift, ctx.size());
        switch (algo) {
            case RD -> rdAllGather(ctx, w, ch, shift);
            case BRUCK -> bruckAllGather(ctx, w, ch, shift);
            default -> ringAllGather(ctx, w, ch, 1, v, new ArrayList<>());
        }
    }

    /** Bytes of chunks [lo, hi) of w. */
    private static MemorySegment range(MemorySegment w, Chunks ch, int lo, int hi) {
        return w.asSlice(ch.rangeOffset(lo), ch.rangeLength(lo, hi));
    }

    /**
     * Recursive-doubling all-gather (bytes) with the fold: in core step k a rank swaps its 2^k
     * chunks with its partner's, so the core needs log2 p steps; with folding, core rank v holds the
     * chunks of both ranks of its pair, which are adjacent, so every message is one contiguous range.
     */
    static void rdAllGather(CollectiveContext ctx, MemorySegment w, Chunks ch, int shift) {
        int n = ctx.size();
        int v = mod(ctx.rank() - shift, n);
        int p = Integer.highestOneBit(n);
        int rem = n - p;
        int vr;
        if (v < 2 * rem) {
            if ((v & 1) == 0) {
                MemorySegment mine = range(w, ch, v, v + 1);
                if (mine.byteSize() > 0) {
                    ctx.await(ctx.send(mod(v + 1 + shift, n), mine));
                }
                vr = -1;
            } else {
                MemorySegment theirs = range(w, ch, v - 1, v);
                if (theirs.byteSize() > 0) {
                    ctx.await(ctx.recv(mod(v - 1 + shift, n), theirs));
                }
                vr = v / 2;
            }
        } else {
            vr = v - rem;
        }
        if (vr >= 0) {
            for (int mask = 1; mask < p; mask <<= 1) {
                int vp = vr ^ mask;
                int base = vr & ~(mask - 1);
                int pbase = vp & ~(mask - 1);
                MemorySegment mine = range(w, ch, coreFirst(base, rem), coreFirst(base + mask, rem));
                MemorySegment theirs = range(w, ch, coreFirst(pbase, rem), coreFirst(pbase + mask, rem));
                exchange(ctx, mod(coreToRank(vp, rem) + shift, n), mine, theirs);
            }
        }
        if (v < 2 * rem) {
            MemorySegment all = range(w, ch, 0, n);
            if (all.byteSize() > 0) {
                if ((v & 1) == 1) {
                    ctx.await(ctx.send(mod(v - 1 + shift, n), all));
                } else {
                    ctx.await(ctx.recv(mod(v + 1 + shift, n), all));
                }
            }
        }
    }

    /** First (virtual) rank, hence chunk, of core rank c in a fold with rem extra ranks (c may be p: n). */
    private static int coreFirst(int c, int rem) {
        return c < rem ? 2 * c : c + rem;
    }

    /**
     * Bruck all-gather (bytes), in place: at step k (d = 2^k) rank v sends the min(d, n-d) chunks
     * starting at its own to v - d and receives those starting at v + d from v + d, so after
     * ceil(log2 n) steps it holds all n. The chunks are read and written where they belong in
     * {@code w} (a cyclic range that wraps is sent as two messages, split identically on both
     * sides), so there is no rotation copy.
     */
    static void bruckAllGather(CollectiveContext ctx, MemorySegment w, Chunks ch, int shift) {
        int n = ctx.size();
        int v = mod(ctx.rank() - shift, n);
        List<P2pRequest> rs = new ArrayList<>(4);
        for (int d = 1; d < n; d <<= 1) {
            int cnt = Math.min(d, n - d);
            int from = mod(v + d + shift, n);
            int to = mod(v - d + shift, n);
            int rstart = mod(v + d, n);
            postCyclic(ctx, rs, from, w, ch, rstart, cnt, false);
            postCyclic(ctx, rs, to, w, ch, v, cnt, true);
            ctx.awaitAll(rs);
        }
    }

    /** Posts the chunks [start, start + cnt) mod n as one or two messages (empty parts skipped). */
    private static void postCyclic(CollectiveContext ctx, List<P2pRequest> rs, int peer, MemorySegment w, Chunks ch, int start, int cnt,
                                   boolean send) {
        int n = ch.count();
        int end1 = Math.min(start + cnt, n);
        MemorySegment a = range(w, ch, start, end1);
        MemorySegment b = range(w, ch, 0, start + cnt - end1);
        for (MemorySegment x : new MemorySegment[] {a, b}) {
            if (x.byteSize() > 0) {
                rs.add(send ? ctx.send(peer, x) : ctx.recv(peer, x));
            }
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
            scatterAllGatherBroadcast(ctx, r, bytes, root);
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
            MemorySegment mine = range(r, ch, v, Math.min(v + top, n));
            if (mine.byteSize() > 0) {
                ctx.await(ctx.recv(mod(v - top + root, n), mine));
            }
        }
        List<P2pRequest> sends = new ArrayList<>();
        for (int mask = top >> 1; mask > 0; mask >>= 1) {
            int c = v + mask;
            if (c < n) {
                MemorySegment sub = range(r, ch, c, Math.min(c + mask, n));
                if (sub.byteSize() > 0) {
                    sends.add(ctx.send(mod(c + root, n), sub));
                }
            }
        }
        ctx.awaitAll(sends);
        allGatherChunks(ctx, r, ch, root, ctx.tuner().choose(Coll.ALLGATHER, bytes, Algo.RING, Algo.RD, Algo.BRUCK));
    }

    public static void reduce(CollectiveContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op, int root) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = t.bytes(count);
        if (count == 0) {
            return;
        }
        if (ctx.hierarchy() != null && ctx.tuner().choose(Coll.REDUCE, bytes, Algo.TREE, Algo.HIER) == Algo.HIER) {
            HierCollectives.reduce(ctx, ctx.hierarchy(), s, r, count, t, op, root);
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

    private static void postChildren(CollectiveContext ctx, List<Integer> children, MemorySegment tmp, P2pRequest[] rq, int set,
                                     long slot, long len) {
        int nc = children.size();
        for (int j = 0; j < nc; j++) {
            rq[j] = ctx.recv(children.get(j), tmp.asSlice(((long) set * nc + j) * slot, len));
        }
    }

    // ------------------------------------------------------------------------------------ all-to-all

    public static void allToAll(CollectiveContext ctx, MemorySegment s, MemorySegment r, long block) {
        int n = ctx.size();
        int rank = ctx.rank();
        if (n > 1 && block > 0
                && ctx.tuner().choose(Coll.ALLTOALL, block * n, Algo.PAIRWISE, Algo.BRUCK) == Algo.BRUCK) {
            bruckAllToAll(ctx, s, r, block);
            return;
        }
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

    /**
     * Bruck all-to-all: rotate so that position i holds the block for rank + i; in step k every
     * block whose position has bit k set is packed, sent to rank + 2^k and replaced by what arrives
     * from rank - 2^k (a block at position i travels i ranks in total); finally position i holds the
     * block from rank - i. ceil(log2 n) messages instead of n - 1, each about half the buffer.
     * The send buffer is read only by the first rotation, so in place needs nothing more.
     */
    static void bruckAllToAll(CollectiveContext ctx, MemorySegment s, MemorySegment r, long block) {
        int n = ctx.size();
        int rank = ctx.rank();
        long total = block * n;
        MemorySegment tmp = ctx.scratch(1, total);
        MemorySegment.copy(s, block * rank, tmp, 0, block * (n - rank));
        MemorySegment.copy(s, 0, tmp, block * (n - rank), block * rank);
        MemorySegment out = ctx.scratch(2, total / 2 + block);
        MemorySegment in = ctx.scratch(3, total / 2 + block);
        for (int d = 1; d < n; d <<= 1) {
            long k = 0;
            for (int i = 0; i < n; i++) {
                if ((i & d) != 0) {
                    MemorySegment.copy(tmp, block * i, out, block * k++, block);
                }
            }
            exchangeTo(ctx, mod(rank + d, n), out.asSlice(0, block * k), mod(rank - d, n), in.asSlice(0, block * k));
            k = 0;
            for (int i = 0; i < n; i++) {
                if ((i & d) != 0) {
                    MemorySegment.copy(in, block * k++, tmp, block * i, block);
                }
            }
        }
        for (int i = 0; i < n; i++) {
            MemorySegment.copy(tmp, block * i, r, block * mod(rank - i, n), block);
        }
    }

    private static void exchangeTo(CollectiveContext ctx, int to, MemorySegment send, int from, MemorySegment recv) {
        P2pRequest rq = ctx.recv(from, recv);
        P2pRequest sq = ctx.send(to, send);
        ctx.await(rq);
        ctx.await(sq);
    }

    public static void allToAllv(CollectiveContext ctx, MemorySegment s, long[] sc, long[] sd, MemorySegment r, long[] rc, long[] rd,
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

    public static void gather(CollectiveContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
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

    public static void scatter(CollectiveContext ctx, MemorySegment s, MemorySegment r, long bytes, int root) {
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
    public static void barrier(CollectiveContext ctx) {
        Tuner tu = ctx.tuner();
        if (tu.providerTakes(Coll.BARRIER, null, null) && tu.selector().allowed(Coll.BARRIER, Algo.SHARED)) {
            // The only barrier with a JCCL_ALGO name: chosen (and logged) through the tuner when
            // allowed; excluded, the barrier stays the dissemination one.
            tu.choose(Coll.BARRIER, 0, Algo.SHARED);
            ctx.provider().barrier(ctx.providerCall(null, null));
            return;
        }
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
