package org.jccl.internal.algo;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.internal.tune.Tuner;
import org.jccl.internal.transport.shm.ShmCollArea;

/**
 * Collectives straight through the communicator's shared collective segment ({@link ShmCollArea}),
 * for communicators whose ranks are all on this host over SHM ({@code JCCL_ALGO} name {@code
 * shared}): allReduce, allGather, reduceScatter, barrier. No message, request or progress engine: each rank copies what its peers need into its
 * own area, publishes the round with a release store, and reads the peers' areas after acquire
 * loads of theirs. They run on whichever thread runs the operation (the caller's own for a blocking
 * call with nothing queued), in issue order with every other operation of the communicator.
 *
 * <ul>
 * <li>allReduce, one step (small messages, {@link Tuner#sharedOneShot}): copy the input in (up to 24
 *     bytes into the inline slot next to the {@code arrive} word, so that it travels in the same
 *     cache line), arrive,
 *     wait for every peer, then {@code out = area_0 op area_1 op ... op area_{n-1}}, in rank order on
 *     every rank, so all ranks compute the same expression and get bit-identical results.</li>
 * <li>allReduce, two steps, in rounds of at most one slot of an area: the round's piece is cut into n
 *     slices; each rank copies the slices the others reduce into its area (not its own), arrives,
 *     reduces its slice from its own input and the peers' areas in rank order into its output and
 *     into its area, says "reduced", and copies the peers' reduced slices out of their areas. Each
 *     slice is reduced once, so all ranks hold the same bits. About 4 passes over the data per rank
 *     (one copy in, one reduction, one copy out) instead of the rings' two copies per transfer.</li>
 * <li>allGather, reduceScatter: the same rounds; every byte is copied once into the writer's area
 *     and once out of it (reduceScatter: reduced out of it). Broadcast stays on the rings: a
 *     broadcast through the segment (the root one round ahead of the readers at most) measured
 *     slower than the rings' 8 slots in flight.</li>
 * <li>barrier: arrive, wait for every peer.</li>
 * </ul>
 */
public final class SharedCollectives {
    private SharedCollectives() {
    }

    /**
     * Piece per round of the all-gather: small enough that the readers copy a piece out while it is
     * still in the writer's cache, as the rings' 512 KiB chunks are; a whole 2 MiB slot per
     * round measured half the rings' bandwidth (copy in, then copy out, from memory), 256 KiB
     * pieces ahead of the rings from 2 MiB up (docs/PERFORMANCE.md).
     */
    private static final long PIPELINE_PIECE = 256 << 10;

    /** All-reduce of {@code count} elements from {@code s} into {@code r} (may be the same memory). */
    public static void allReduce(CollectiveContext ctx, ShmCollArea a, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        try {
            int n = a.ranks();
            long bytes = t.bytes(count);
            a.beginOperation();
            long slot = a.slotBytes();
            if (Tuner.sharedOneShot(bytes, n, slot)) {
                oneShot(ctx, a, s, r, count, t, op);
                ctx.countShared(bytes);
            } else {
                int esz = t.size();
                // Whole elements per round, at least one per rank where there are that many.
                long perRound = Math.max(1, slot / esz);
                for (long off = 0; off < count; off += perRound) {
                    twoShot(ctx, a, s, r, off, Math.min(perRound, count - off), t, op);
                }
                ctx.countSharedSlices(count, perRound, esz);
            }
            Reductions.finishAvg(r, count, t, op, n);
        } catch (IllegalStateException unmapped) {
            throw closedUnder(ctx, unmapped);
        }
    }

    /**
     * All-gather: this rank's block, already in place in {@code r} (the caller copied it), is
     * published piece by piece (at most one slot per round); every rank copies the others'
     * pieces straight out of their areas into {@code r}. One copy in, n-1 copies out.
     */
    public static void allGather(CollectiveContext ctx, ShmCollArea a, MemorySegment r, long bytesPerRank) {
        try {
            int n = a.ranks();
            int me = a.rank();
            a.beginOperation();
            long per = Math.min(a.slotBytes(), PIPELINE_PIECE);
            for (long off = 0; off < bytesPerRank; off += per) {
                long len = Math.min(per, bytesPerRank - off);
                long k = startRound(ctx, a, len);
                MemorySegment.copy(r, me * bytesPerRank + off, a.slot(me, k), 0, len);
                a.arrive(k);
                for (int i = 1; i < n; i++) {
                    int q = (me + i) % n;
                    ctx.awaitSharedOne(a, q, false, k);
                    MemorySegment.copy(a.slot(q, k), 0, r, q * bytesPerRank + off, len);
                }
            }
            ctx.countShared(bytesPerRank);
        } catch (IllegalStateException unmapped) {
            throw closedUnder(ctx, unmapped);
        }
    }

    /**
     * Reduce-scatter of n blocks of {@code count} elements of {@code s} into this rank's block
     * {@code r}: per round a piece of every block; each rank copies the pieces of the others' blocks
     * into its area (slot q for rank q), arrives, and reduces its own block's piece from its own
     * input and the peers' slots, in rank order. The send buffer is left intact.
     */
    public static void reduceScatter(CollectiveContext ctx, ShmCollArea a, MemorySegment s, MemorySegment r, long count, DataType t,
                                     ReduceOp op) {
        try {
            int n = a.ranks();
            int me = a.rank();
            int esz = t.size();
            a.beginOperation();
            long per = Math.max(1, a.slotBytes() / ((long) n * esz));
            boolean inPlace = s.address() + (long) me * count * esz == r.address() && s.isNative() == r.isNative();
            boolean ownFromArea = inPlace && me >= 2;
            for (long off = 0; off < count; off += per) {
                long len = Math.min(per, count - off);
                long pieceBytes = len * esz;
                long k = startRound(ctx, a, n * pieceBytes);
                MemorySegment mine = a.slot(me, k);
                for (int q = 0; q < n; q++) {
                    if (q != me || ownFromArea) {
                        MemorySegment.copy(s, (q * count + off) * esz, mine, q * pieceBytes, pieceBytes);
                    }
                }
                a.arrive(k);
                ctx.awaitShared(a, false, k);
                MemorySegment dst = r.asSlice(off * esz, pieceBytes);
                Reductions.reduce(dst, rsSource(a, s, k, 0, me, ownFromArea, count, off, pieceBytes, esz),
                        rsSource(a, s, k, 1, me, ownFromArea, count, off, pieceBytes, esz), len, t, op);
                for (int q = 2; q < n; q++) {
                    Reductions.reduce(dst, dst, rsSource(a, s, k, q, me, ownFromArea, count, off, pieceBytes, esz), len, t, op);
                }
            }
            ctx.countShared(count * esz);
            Reductions.finishAvg(r, count, t, op, n);
        } catch (IllegalStateException unmapped) {
            throw closedUnder(ctx, unmapped);
        }
    }

    /** Rank q's contribution to this rank's block piece in round k: its area slot, or this rank's own input. */
    private static MemorySegment rsSource(ShmCollArea a, MemorySegment s, long k, int q, int me, boolean ownFromArea, long count, long off,
                                          long pieceBytes, int esz) {
        if (q == me && !ownFromArea) {
            return s.asSlice((me * count + off) * esz, pieceBytes);
        }
        return a.slot(q, k).asSlice(me * pieceBytes, pieceBytes);
    }

    /** Barrier: every rank arrives at the same round before any leaves it. */
    public static void barrier(CollectiveContext ctx, ShmCollArea a) {
        try {
            fence(ctx, a);
        } catch (IllegalStateException unmapped) {
            throw closedUnder(ctx, unmapped);
        }
    }

    /** A round without data: arrive, wait for every peer (after it no peer reads any earlier round). */
    private static void fence(CollectiveContext ctx, ShmCollArea a) {
        long k = a.nextRound(0);
        a.arrive(k);
        ctx.awaitShared(a, false, k);
    }

    /**
     * Starts a round in which every rank publishes {@code bytes} (0: inline only) and returns its
     * number once this rank may write its region: after a fence round when the region would overlap
     * the previous round's ({@link ShmCollArea#needsFence}), then when every peer has finished
     * reading round k-2 and every round before it (arrived at k-1).
     */
    private static long startRound(CollectiveContext ctx, ShmCollArea a, long bytes) {
        if (a.needsFence(bytes)) {
            fence(ctx, a);
        }
        long k = a.nextRound(bytes);
        ctx.awaitShared(a, false, k - 1);
        return k;
    }

    private static void oneShot(CollectiveContext ctx, ShmCollArea a, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = a.ranks();
        int me = a.rank();
        long bytes = t.bytes(count);
        boolean tiny = bytes <= ShmCollArea.INLINE_BYTES;
        // A peer at k-1 is done reading round k-2 (the inline slot of this parity) and every region before.
        long k = startRound(ctx, a, tiny ? 0 : bytes);
        MemorySegment mine = tiny ? a.inline(me, k) : a.slot(me, k);
        MemorySegment.copy(s, 0, mine, 0, bytes);
        a.arrive(k);
        ctx.awaitShared(a, false, k);
        Reductions.reduce(r, tiny ? a.inline(0, k) : a.slot(0, k), tiny ? a.inline(1, k) : a.slot(1, k), count, t, op);
        for (int q = 2; q < n; q++) {
            Reductions.reduce(r, r, tiny ? a.inline(q, k) : a.slot(q, k), count, t, op);
        }
    }

    /** One round of the two-step all-reduce over elements [off, off + len). */
    private static void twoShot(CollectiveContext ctx, ShmCollArea a, MemorySegment s, MemorySegment r, long off, long len, DataType t,
                                ReduceOp op) {
        int n = a.ranks();
        int me = a.rank();
        int esz = t.size();
        long k = startRound(ctx, a, len * esz);
        long base = len / n;
        long extra = len % n;
        long myLo = me * base + Math.min(me, extra);
        long myLen = base + (me < extra ? 1 : 0);
        boolean inPlace = s.address() == r.address() && s.isNative() == r.isNative();
        // In place, a rank above 1 would read its own input after the rank-order sum has begun to
        // overwrite it: it takes its own slice from its area, so it copies that in too.
        boolean ownFromArea = inPlace && me >= 2;
        MemorySegment mine = a.slot(me, k);
        long srcOff = off * esz;
        // Rank 0 times this copy in the near mode: how fast it rewrites lines the peers read tells
        // the host's two CPU-pair states apart (ShmCollArea#copiedIn).
        long t0 = a.timesCopies() ? System.nanoTime() : 0;
        if (ownFromArea) {
            MemorySegment.copy(s, srcOff, mine, 0, len * esz);
        } else {
            if (myLo > 0) {
                MemorySegment.copy(s, srcOff, mine, 0, myLo * esz);
            }
            long after = myLo + myLen;
            if (after < len) {
                MemorySegment.copy(s, srcOff + after * esz, mine, after * esz, (len - after) * esz);
            }
        }
        if (t0 != 0) {
            a.copiedIn((len - (ownFromArea ? 0 : myLen)) * esz, System.nanoTime() - t0);
        }
        a.arrive(k);
        ctx.awaitShared(a, false, k);
        if (myLen > 0) {
            long sliceBytes = myLen * esz;
            MemorySegment dst = r.asSlice((off + myLo) * esz, sliceBytes);
            Reductions.reduce(dst, source(a, s, k, 0, me, ownFromArea, off, myLo, sliceBytes, esz),
                    source(a, s, k, 1, me, ownFromArea, off, myLo, sliceBytes, esz), myLen, t, op);
            for (int q = 2; q < n; q++) {
                Reductions.reduce(dst, dst, source(a, s, k, q, me, ownFromArea, off, myLo, sliceBytes, esz), myLen, t, op);
            }
            MemorySegment.copy(dst, 0, mine, myLo * esz, sliceBytes);
        }
        a.reduced(k);
        for (int i = 1; i < n; i++) {
            int q = (me + i) % n;
            long qLo = q * base + Math.min(q, extra);
            long qLen = base + (q < extra ? 1 : 0);
            if (qLen == 0) {
                continue;
            }
            if (a.reducedOf(q) < k) {
                ctx.awaitSharedOne(a, q, true, k);
            }
            MemorySegment.copy(a.slot(q, k), qLo * esz, r, (off + qLo) * esz, qLen * esz);
        }
    }

    /** Rank q's copy of this rank's slice in round k: its area, or this rank's own input. */
    private static MemorySegment source(ShmCollArea a, MemorySegment s, long k, int q, int me, boolean ownFromArea, long off, long myLo,
                                        long sliceBytes, int esz) {
        if (q == me && !ownFromArea) {
            return s.asSlice((off + myLo) * esz, sliceBytes);
        }
        return a.slot(q, k).asSlice(myLo * esz, sliceBytes);
    }

    /** The segment was unmapped under this operation: the communicator was closed or aborted. */
    private static JcclException closedUnder(CollectiveContext ctx, IllegalStateException e) {
        return new JcclException(ErrorCode.ABORTED, "rank " + ctx.rank() + ": the shared collective segment was unmapped during the"
                + " operation (its communicator was closed or aborted)", e);
    }
}
