package org.jccl.internal.transport.shm;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.internal.tune.AlgoSelector.Coll;
import org.jccl.internal.tune.Tuner;
import org.jccl.spi.CollectiveCall;
import org.jccl.spi.CollectiveProvider;

/**
 * SHM's collective provider: collectives straight through the communicator's shared collective
 * segment ({@link ShmCollArea}), which {@link ShmTransport#openCollectives} opens when every pair of
 * the communicator's ranks uses SHM ({@code JCCL_ALGO} name {@code shared}): allReduce, allGather,
 * reduceScatter, barrier, of every type and operator, priced by {@link Tuner#sharedCost}. No message,
 * request or progress engine: each rank copies what its peers need into its own area, publishes the
 * round with a release store, and reads the peers' areas after acquire loads of theirs. They run on
 * whichever thread runs the operation (the caller's own for a blocking call with nothing queued), in
 * issue order with every other operation of the communicator.
 *
 * <p>Waits ({@link #awaitAll}, {@link #awaitOne}) poll the peers' words, then go through the call's
 * idle step ({@link CollectiveCall#idle}); they fail in bounded time when the communicator is aborted,
 * a peer closed its communicator or a peer's process is gone. Every arrive carries the call's guard
 * word and, with {@code JCCL_CHECK=1}, its signature; a peer's are compared through the call before
 * its data of that round is read.
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
public final class ShmCollectives implements CollectiveProvider {
    /** How often a waiting rank asks the OS whether a peer's process still exists. */
    private static final long LIVENESS_PERIOD_NANOS = ShmCollArea.LIVENESS_PERIOD_NANOS;

    /**
     * Pure polling (no PAUSE) at the start of a wait; see {@link #awaitPeer}. Short: it covers the
     * sub-microsecond waits of small operations, while a rank that waits for a peer busy copying goes
     * back to PAUSE (should the two vCPUs be SMT siblings on the host, a PAUSE-less spin would slow the
     * peer's copy down).
     */
    private static final long HOT_SPIN_NANOS = 5_000;

    private final ShmCollArea a;
    /** The running call's guard word (0: none) and signature (null: none), published with every arrive and compared. */
    private long guard;
    private MemorySegment signature;
    /**
     * The running call's first round: its guard and signature are compared from there on. Its first wait
     * (for every peer to reach the round before, the previous call's last) looks at words of the previous call.
     */
    private long from;

    ShmCollectives(ShmCollArea area) {
        this.a = area;
    }

    /** The segment (tests, logs). */
    public ShmCollArea area() {
        return a;
    }

    @Override
    public String describe() {
        return Tuner.SHARED.transport();
    }

    @Override
    public String toString() {
        return "SHM shared collective segment of " + a.ranks() + " ranks, " + Tuner.SHARED;
    }

    /** Every collective of {@link Collective}, every type and operator. */
    @Override
    public boolean supports(Collective kind, DataType type, ReduceOp op) {
        return true;
    }

    /** {@link Tuner#sharedCost}, with the rounds of the near mode (what every operation can count on). */
    @Override
    public double cost(Collective kind, long bytes) {
        Coll c = switch (kind) {
            case ALL_REDUCE -> Coll.ALLREDUCE;
            case ALL_GATHER -> Coll.ALLGATHER;
            case REDUCE_SCATTER -> Coll.REDUCESCATTER;
            case BARRIER -> Coll.BARRIER;
        };
        return Tuner.sharedCost(c, bytes, a.ranks(), a.nearSlotBytes());
    }

    @Override
    public void close() {
        a.close();
    }

    /** Takes the call's guard word and signature: every arrive of its rounds carries them. */
    private void begin(CollectiveCall call) {
        long g = call.guard();
        MemorySegment sig = call.signature();
        guard = g;
        signature = sig;
        a.guard(g);
        a.sign(sig);
        from = a.currentRound() + 1;
    }

    /**
     * Piece per round of the all-gather: small enough that the readers copy a piece out while it is
     * still in the writer's cache, as the rings' 512 KiB chunks are; a whole 2 MiB slot per
     * round measured half the rings' bandwidth (copy in, then copy out, from memory), 256 KiB
     * pieces ahead of the rings from 2 MiB up (docs/PERFORMANCE.md).
     */
    private static final long PIPELINE_PIECE = 256 << 10;

    /** All-reduce of {@code count} elements from {@code s} into {@code r} (may be the same memory). */
    @Override
    public void allReduce(CollectiveCall call, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        try {
            int n = a.ranks();
            long bytes = t.bytes(count);
            begin(call);
            a.beginOperation();
            long slot = a.slotBytes();
            if (Tuner.sharedOneShot(bytes, n, slot)) {
                oneShot(call, s, r, count, t, op);
                call.moved(bytes);
            } else {
                int esz = t.size();
                // Whole elements per round, at least one per rank where there are that many.
                long perRound = Math.max(1, slot / esz);
                for (long off = 0; off < count; off += perRound) {
                    twoShot(call, s, r, off, Math.min(perRound, count - off), t, op);
                }
                movedSlices(call, count, perRound, esz);
            }
        } catch (IllegalStateException unmapped) {
            throw closedUnder(call, unmapped);
        }
    }

    /**
     * All-gather: this rank's block, already in place in {@code r} (the caller copied it), is
     * published piece by piece (at most one slot per round); every rank copies the others'
     * pieces straight out of their areas into {@code r}. One copy in, n-1 copies out.
     */
    @Override
    public void allGather(CollectiveCall call, MemorySegment r, long bytesPerRank) {
        try {
            int n = a.ranks();
            int me = a.rank();
            begin(call);
            a.beginOperation();
            long per = Math.min(a.slotBytes(), PIPELINE_PIECE);
            for (long off = 0; off < bytesPerRank; off += per) {
                long len = Math.min(per, bytesPerRank - off);
                long k = startRound(call, len);
                MemorySegment.copy(r, me * bytesPerRank + off, a.slot(me, k), 0, len);
                a.arrive(k);
                for (int i = 1; i < n; i++) {
                    int q = (me + i) % n;
                    awaitOne(call, q, false, k);
                    MemorySegment.copy(a.slot(q, k), 0, r, q * bytesPerRank + off, len);
                }
            }
            call.moved(bytesPerRank);
        } catch (IllegalStateException unmapped) {
            throw closedUnder(call, unmapped);
        }
    }

    /**
     * Reduce-scatter of n blocks of {@code count} elements of {@code s} into this rank's block
     * {@code r}: per round a piece of every block; each rank copies the pieces of the others' blocks
     * into its area (slot q for rank q), arrives, and reduces its own block's piece from its own
     * input and the peers' slots, in rank order. The send buffer is left intact.
     */
    @Override
    public void reduceScatter(CollectiveCall call, MemorySegment s, MemorySegment r, long count, DataType t,
                              ReduceOp op) {
        try {
            int n = a.ranks();
            int me = a.rank();
            int esz = t.size();
            begin(call);
            a.beginOperation();
            long per = Math.max(1, a.slotBytes() / ((long) n * esz));
            boolean inPlace = s.address() + (long) me * count * esz == r.address() && s.isNative() == r.isNative();
            boolean ownFromArea = inPlace && me >= 2;
            for (long off = 0; off < count; off += per) {
                long len = Math.min(per, count - off);
                long pieceBytes = len * esz;
                long k = startRound(call, n * pieceBytes);
                MemorySegment mine = a.slot(me, k);
                for (int q = 0; q < n; q++) {
                    if (q != me || ownFromArea) {
                        MemorySegment.copy(s, (q * count + off) * esz, mine, q * pieceBytes, pieceBytes);
                    }
                }
                a.arrive(k);
                awaitAll(call, false, k);
                MemorySegment dst = r.asSlice(off * esz, pieceBytes);
                call.reduce(dst, rsSource(s, k, 0, me, ownFromArea, count, off, pieceBytes, esz),
                        rsSource(s, k, 1, me, ownFromArea, count, off, pieceBytes, esz), len);
                for (int q = 2; q < n; q++) {
                    call.reduce(dst, dst, rsSource(s, k, q, me, ownFromArea, count, off, pieceBytes, esz), len);
                }
            }
            call.moved(count * esz);
        } catch (IllegalStateException unmapped) {
            throw closedUnder(call, unmapped);
        }
    }

    /** Rank q's contribution to this rank's block piece in round k: its area slot, or this rank's own input. */
    private MemorySegment rsSource(MemorySegment s, long k, int q, int me, boolean ownFromArea, long count, long off,
                                   long pieceBytes, int esz) {
        if (q == me && !ownFromArea) {
            return s.asSlice((me * count + off) * esz, pieceBytes);
        }
        return a.slot(q, k).asSlice(me * pieceBytes, pieceBytes);
    }

    /** Barrier: every rank arrives at the same round before any leaves it. */
    @Override
    public void barrier(CollectiveCall call) {
        try {
            begin(call);
            fence(call);
        } catch (IllegalStateException unmapped) {
            throw closedUnder(call, unmapped);
        }
    }

    /** A round without data: arrive, wait for every peer (after it no peer reads any earlier round). */
    private void fence(CollectiveCall call) {
        long k = a.nextRound(0);
        a.arrive(k);
        awaitAll(call, false, k);
    }

    /**
     * Starts a round in which every rank publishes {@code bytes} (0: inline only) and returns its
     * number once this rank may write its region: after a fence round when the region would overlap
     * the previous round's ({@link ShmCollArea#needsFence}), then when every peer has finished
     * reading round k-2 and every round before it (arrived at k-1).
     */
    private long startRound(CollectiveCall call, long bytes) {
        if (a.needsFence(bytes)) {
            fence(call);
        }
        long k = a.nextRound(bytes);
        awaitAll(call, false, k - 1);
        return k;
    }

    private void oneShot(CollectiveCall call, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = a.ranks();
        int me = a.rank();
        long bytes = t.bytes(count);
        boolean tiny = bytes <= ShmCollArea.INLINE_BYTES;
        // A peer at k-1 is done reading round k-2 (the inline slot of this parity) and every region before.
        long k = startRound(call, tiny ? 0 : bytes);
        MemorySegment mine = tiny ? a.inline(me, k) : a.slot(me, k);
        MemorySegment.copy(s, 0, mine, 0, bytes);
        a.arrive(k);
        awaitAll(call, false, k);
        call.reduce(r, tiny ? a.inline(0, k) : a.slot(0, k), tiny ? a.inline(1, k) : a.slot(1, k), count);
        for (int q = 2; q < n; q++) {
            call.reduce(r, r, tiny ? a.inline(q, k) : a.slot(q, k), count);
        }
    }

    /** One round of the two-step all-reduce over elements [off, off + len). */
    private void twoShot(CollectiveCall call, MemorySegment s, MemorySegment r, long off, long len, DataType t,
                         ReduceOp op) {
        int n = a.ranks();
        int me = a.rank();
        int esz = t.size();
        long k = startRound(call, len * esz);
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
        awaitAll(call, false, k);
        if (myLen > 0) {
            long sliceBytes = myLen * esz;
            MemorySegment dst = r.asSlice((off + myLo) * esz, sliceBytes);
            call.reduce(dst, source(s, k, 0, me, ownFromArea, off, myLo, sliceBytes, esz),
                    source(s, k, 1, me, ownFromArea, off, myLo, sliceBytes, esz), myLen);
            for (int q = 2; q < n; q++) {
                call.reduce(dst, dst, source(s, k, q, me, ownFromArea, off, myLo, sliceBytes, esz), myLen);
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
                awaitOne(call, q, true, k);
            }
            MemorySegment.copy(a.slot(q, k), qLo * esz, r, (off + qLo) * esz, qLen * esz);
        }
    }

    /** Rank q's copy of this rank's slice in round k: its area, or this rank's own input. */
    private MemorySegment source(MemorySegment s, long k, int q, int me, boolean ownFromArea, long off, long myLo,
                                 long sliceBytes, int esz) {
        if (q == me && !ownFromArea) {
            return s.asSlice((off + myLo) * esz, sliceBytes);
        }
        return a.slot(q, k).asSlice(myLo * esz, sliceBytes);
    }

    // ------------------------------------------------------------------------------------------ waits

    /**
     * Waits until every peer's {@code arrive} word (or {@code reduced} word) has reached {@code round},
     * then, for arrive words, compares each peer's signature and guard word of the round with this
     * rank's call. The common case, peers already there, is one acquire load per peer.
     */
    private void awaitAll(CollectiveCall call, boolean reducedWord, long round) {
        int n = a.ranks();
        int me = a.rank();
        for (int q = 0; q < n; q++) {
            if (q != me) {
                awaitOne(call, q, reducedWord, round);
            }
        }
    }

    /** {@link #awaitAll} for one peer {@code q}. */
    private void awaitOne(CollectiveCall call, int q, boolean reducedWord, long round) {
        if (word(q, reducedWord) < round) {
            awaitPeer(call, q, reducedWord, round);
        }
        if (!reducedWord && round >= from) {
            if (signature != null) {
                call.checkSignature(q, a.signatureOf(q, round));
            }
            long g = guard;
            if (g != 0) {
                // q's word is of this round when bit 0 is the round's parity; else q is a round ahead, which it got
                // only after comparing this rank's word of this round with its own (ShmCollArea#guardOf).
                long theirs = a.guardOf(q);
                if (((theirs ^ round) & 1) == 0) {
                    call.checkGuard(q, theirs & ~1L);
                }
            }
        }
    }

    private long word(int q, boolean reducedWord) {
        return reducedWord ? a.reducedOf(q) : a.arrivedOf(q);
    }

    /**
     * Polls {@code q}'s word until it reaches {@code round}: 31 polls between the call's idle steps
     * (which read the clock, ~25 ns here: most waits of small operations end before the first, and a
     * read at the start would delay noticing the peer's arrive by as much), without PAUSE for the
     * first {@link #HOT_SPIN_NANOS}. Between idle steps it fails when the peer closed its
     * communicator, and every {@link #LIVENESS_PERIOD_NANOS} when its process is gone.
     */
    private void awaitPeer(CollectiveCall call, int q, boolean reducedWord, long round) {
        long nextLiveness = LIVENESS_PERIOD_NANOS;
        boolean started = false;
        int spins = 0;
        boolean polite = false;
        while (word(q, reducedWord) < round) {
            call.checkAborted();
            if ((++spins & 31) != 0) {
                // No PAUSE (Thread.onSpinWait) for the first HOT_SPIN_NANOS: under KVM a PAUSE loop
                // can make the hypervisor deschedule the vCPU (pause-loop exiting), and measured on
                // the 2-core VM a cache-line round trip between two processes took 0.5-1.4 us with
                // it and 0.16 us without. Past that, peers are late anyway and PAUSE is polite.
                if (polite) {
                    Thread.onSpinWait();
                }
                continue;
            }
            long waited = call.idle(!started);
            started = true;
            if (a.closedBy(q)) {
                // The peer stores its words before its closed state: re-read before blaming it.
                if (word(q, reducedWord) >= round) {
                    return;
                }
                throw call.peerFailed(q, new IOException(a.closedMessage(q)));
            }
            if (waited >= nextLiveness) {
                nextLiveness = waited + LIVENESS_PERIOD_NANOS;
                String gone = a.processGone(q);
                if (gone != null && word(q, reducedWord) < round) {
                    throw call.peerFailed(q, new IOException(gone));
                }
            }
            polite = waited > HOT_SPIN_NANOS;
        }
    }

    /**
     * Counts a two-step all-reduce of {@code count} elements of {@code elementBytes}, in rounds of
     * {@code perRound} elements cut into one slice per rank: per round a peer reads its slice out of
     * this rank's area and this rank's reduced slice, and this rank reads as much from it, so each
     * pair moves (its slice + this rank's slice) each way.
     */
    private void movedSlices(CollectiveCall call, long count, long perRound, int elementBytes) {
        int n = a.ranks();
        int me = a.rank();
        long full = count / perRound;
        long last = count % perRound;
        for (int q = 0; q < n; q++) {
            if (q != me) {
                long elems = full * (slice(perRound, n, q) + slice(perRound, n, me)) + (last == 0 ? 0 : slice(last, n, q) + slice(last, n, me));
                call.movedWith(q, elems * elementBytes);
            }
        }
    }

    /** Elements of rank q's slice when {@code len} elements are cut into n slices, the first len % n one longer. */
    private static long slice(long len, int n, int q) {
        return len / n + (q < len % n ? 1 : 0);
    }

    /** The segment was unmapped under this operation: the communicator was closed or aborted. */
    private JcclException closedUnder(CollectiveCall call, IllegalStateException e) {
        return new JcclException(ErrorCode.ABORTED, "rank " + call.rank() + ": the shared collective segment was unmapped during the"
                + " operation (its communicator was closed or aborted)", e);
    }
}
