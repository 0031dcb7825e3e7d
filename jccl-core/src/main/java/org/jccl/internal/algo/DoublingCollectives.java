package org.jccl.internal.algo;

import static org.jccl.internal.algo.Collectives.mod;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.spi.P2pRequest;

/**
 * The recursive doubling family: the recursive doubling all-reduce (log2 n steps, latency bound),
 * Rabenseifner's all-reduce (reduce-scatter by recursive halving, all-gather by recursive doubling)
 * and the recursive doubling all-gather. All fold non-powers of two the same way: the first 2(n-p)
 * ranks pair up (p the largest power of two not above n), the even one of each pair hands its data
 * to the odd one and sits out while p ranks run the core, and gets the result back.
 */
final class DoublingCollectives {
    private DoublingCollectives() {
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
     * One halving step: sends {@code give} and receives the partner's copy of the kept range into
     * {@code tmp}, both in {@code JCCL_CHUNK_SIZE} slices (the partner cuts its half the same way:
     * equal lengths), and writes {@code keepIn op received} into {@code keep} slice by slice as each
     * arrives.
     */
    private static void reduceExchange(CollectiveContext ctx, int peer, MemorySegment give, MemorySegment keepIn, MemorySegment keep,
                                       MemorySegment tmp, DataType t, ReduceOp op) {
        int esz = t.size();
        long slice = Math.max(1, ctx.chunkBytes() / esz) * esz;
        long inBytes = keep.byteSize();
        int nrecv = (int) ((inBytes + slice - 1) / slice);
        P2pRequest[] rq = new P2pRequest[nrecv];
        for (int k = 0; k < nrecv; k++) {
            rq[k] = ctx.recv(peer, tmp.asSlice(k * slice, Math.min(slice, inBytes - k * slice)));
        }
        long outBytes = give.byteSize();
        int nsend = (int) ((outBytes + slice - 1) / slice);
        P2pRequest[] sq = new P2pRequest[nsend];
        for (int k = 0; k < nsend; k++) {
            sq[k] = ctx.send(peer, give.asSlice(k * slice, Math.min(slice, outBytes - k * slice)));
        }
        for (int k = 0; k < nrecv; k++) {
            ctx.await(rq[k]);
            long off = k * slice;
            long len = Math.min(slice, inBytes - off);
            Reductions.reduce(keep.asSlice(off, len), keepIn.asSlice(off, len), tmp.asSlice(off, len), len / esz, t, op);
        }
        ctx.awaitAll(sq);
    }

    /**
     * Rabenseifner's all-reduce of {@code s} into {@code r} (the same memory when in place): the
     * vector is cut into p balanced chunks; reduce-scatter by recursive halving (at each step a rank
     * keeps half of its current range, sends the other half to its partner and reduces the partner's
     * copy of the kept half into its own), after which core rank v holds chunk v fully reduced; then
     * all-gather by recursive doubling (ranges double each step). Non-powers of two are folded as in
     * recursive doubling. Moves 2(p-1)/p of the vector per rank instead of log2 p vectors.
     *
     * <p>Each halving step moves its half in {@code JCCL_CHUNK_SIZE} slices and reduces slice k as
     * soon as it has arrived, while later slices are still on the wire (a transport that moves bytes
     * on threads of its own, TCP's stream threads, overlaps the two; for the others the slice is
     * reduced while it is still in cache). Out of place with p = n, the first step reads {@code s}
     * and writes the reductions into {@code r}: the input is never copied as a whole.
     */
    static void rabenseifnerAllReduce(CollectiveContext ctx, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = ctx.size();
        int rank = ctx.rank();
        int esz = t.size();
        long bytes = t.bytes(count);
        int p = Integer.highestOneBit(n);
        int rem = n - p;
        MemorySegment src = s;
        if (s != r && (rem != 0 || p == 1)) {
            // The fold reduces into r, and a single rank only copies.
            MemorySegment.copy(s, 0, r, 0, bytes);
            src = r;
        }
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
                MemorySegment keepIn = src.asSlice(ch.rangeOffset(keepLo) * esz, keepElems * esz);
                MemorySegment give = src.asSlice(ch.rangeOffset(sendLo) * esz, ch.rangeLength(sendLo, sendHi) * esz);
                reduceExchange(ctx, partner, give, keepIn, keep, tmp, t, op);
                src = r;
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
                MemorySegment mine = ch.range(w, v, v + 1);
                if (mine.byteSize() > 0) {
                    ctx.await(ctx.send(mod(v + 1 + shift, n), mine));
                }
                vr = -1;
            } else {
                MemorySegment theirs = ch.range(w, v - 1, v);
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
                MemorySegment mine = ch.range(w, coreFirst(base, rem), coreFirst(base + mask, rem));
                MemorySegment theirs = ch.range(w, coreFirst(pbase, rem), coreFirst(pbase + mask, rem));
                exchange(ctx, mod(coreToRank(vp, rem) + shift, n), mine, theirs);
            }
        }
        if (v < 2 * rem) {
            MemorySegment all = ch.range(w, 0, n);
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
}
