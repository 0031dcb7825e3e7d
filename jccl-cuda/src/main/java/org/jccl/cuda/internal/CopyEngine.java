package org.jccl.cuda.internal;

import static org.jccl.cuda.internal.Align.ceilDiv;
import static org.jccl.cuda.internal.Align.roundUp;
import static org.jccl.cuda.internal.Plan.out;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.internal.log.Log;

/**
 * The copy-engine variants (opt-in: JCCL_CUDA_ALLREDUCE=ce, JCCL_CUDA_REDUCE_SCATTER=ce,
 * JCCL_CUDA_BROADCAST=ce) and their lanes: side streams (JCCL_CUDA_CE_LANES per peer and direction)
 * and events, created by the first copy-engine operation and released with the communicator. Every
 * byte crosses NVLink as a copy-engine write ({@code cuMemcpyDtoDAsync}); one-block jccl_flags
 * kernels between the copies raise and wait for the words of {@link SignalArea#CE} (every wait polls
 * the abort word and the deadline).
 */
public final class CopyEngine {
    private final KernelLauncher k;
    private final int lanes;
    private final long chunk;
    /** Created by the first copy-engine operation. */
    private Lanes ce;

    public CopyEngine(KernelLauncher launcher) {
        this.k = launcher;
        this.lanes = launcher.tuner().settings().ceLanes();
        this.chunk = launcher.tuner().settings().ceChunk();
    }

    /** Flag value for piece {@code j} of operation {@code e}: grows with both, so waits are ">=". */
    private static long tag(long e, int j) {
        return (e << 24) | (j + 1L);
    }

    /** The slot of piece {@code j} from {@code src} in the push scratch of the area at {@code area}. */
    private long slot(long area, int src, int j, long slotBytes) {
        return k.area().pushScratch(area, src) + (j % SignalArea.CE_SLOTS) * slotBytes;
    }

    private long word(long area, int index) {
        return SignalArea.word(area, index);
    }

    /**
     * Copy-engine reduce-scatter (and all-reduce = reduce-scatter + all-gather), for large messages;
     * every byte crosses NVLink as a copy-engine write (copy engines write to peers faster than SMs
     * store, and far faster than they read from peers: docs/PERFORMANCE.md). Rank r owns one range of
     * the elements (all-reduce: slice r of the buffer; reduce-scatter: block r of the input), cut in
     * pieces of at most JCCL_CUDA_CE_CHUNK bytes. For each peer q, JCCL_CUDA_CE_LANES streams of r
     * (consecutive pieces alternate between them, so copies overlap the flag kernels in between) copy
     * the pieces of q's range from r's input into q's push scratch (CE_SLOTS rotating slots per
     * source) and, after each piece, a one-block flags kernel raises q's "arrived from r on this
     * lane" word. On r's own stream,
     * for each piece of its range, a flags kernel waits until every peer's piece arrived (and tells
     * every peer that the slot of the piece before is free again), a kernel reduces the slots and
     * r's input in rank order into r's output, and (all-reduce) the lanes of each peer copy the
     * reduced piece into that peer's output. A sender waits for "slot free" before it refills a slot.
     * The end: every rank raises "done" at every peer after its last copy and waits for everyone's
     * "done", so its output is complete and no slot of the next operation is still being read.
     * No start barrier: a peer's output and slots are written only after that peer's own stream
     * reached this operation (its "arrived" words come from streams that waited for it). Every wait
     * is a kernel that polls the abort word and the deadline.
     *
     * @param what "allReduce" or "reduceScatter", for launch errors
     * @param c the call; {@code c.count()}: all-reduce elements of the buffer, reduce-scatter elements of each rank's block
     * @param gather all-reduce (the reduced pieces go to every peer's output) rather than reduce-scatter
     */
    public Plan reduce(String what, Plan.Call c, boolean gather) {
        DataType t = c.type();
        int es = t.size();
        int size = k.size();
        int rank = k.rank();
        long count = c.count();
        long per = 16 / es;
        long slice = gather ? roundUp(ceilDiv(count, size), per) : count;
        long[] lo = new long[size];
        long[] hi = new long[size];
        for (int q = 0; q < size; q++) {
            lo[q] = Math.min(q * slice, gather ? count : q * count);
            hi[q] = gather ? Math.min(lo[q] + slice, count) : lo[q] + count;
        }
        long slotBytes = k.area().pushSlot() / SignalArea.CE_SLOTS / 256 * 256;
        long pieceElems = Math.max(per, Math.min(chunk, slotBytes) / es / per * per);
        int[] pieces = new int[size];
        int most = 0;
        for (int q = 0; q < size; q++) {
            pieces[q] = (int) ceilDiv(hi[q] - lo[q], pieceElems);
            most = Math.max(most, pieces[q]);
        }
        final int mostPieces = most;
        MemorySegment fn = k.kernels().reduce(t, c.op());
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            Lanes l = lanes();
            KernelArgs flags = k.flags;
            KernelArgs args = k.args;
            long signal = k.signal();
            MemorySegment main = c.stream();
            CudaDriver.eventRecord(l.start, main);
            for (int q = 0; q < size; q++) {
                for (int j = 0; j < lanes && q != rank; j++) {
                    CudaDriver.streamWaitEvent(l.pull[j][q], l.start);
                    CudaDriver.streamWaitEvent(l.push[j][q], l.start);
                }
            }
            // output offset of input element i: all-reduce the same place, reduce-scatter block-relative
            long outShift = gather ? 0 : lo[rank];
            for (int j = 0; j < mostPieces; j++) {
                // phase 1: piece j of every peer's range into that peer's slot for me, on lane j % lanes
                for (int q = 0; q < size; q++) {
                    if (q == rank || j >= pieces[q]) {
                        continue;
                    }
                    int lane = j % lanes;
                    long p = lo[q] + j * pieceElems;
                    long len = Math.min(pieceElems, hi[q] - p);
                    CudaDriver.memcpyDtoDAsync(slot(k.signal(q), rank, j, slotBytes), c.send() + p * es, len * es, l.pull[lane][q]);
                    // raise "arrived"; before this lane's next piece, wait until q freed the slot it refills
                    flags.flagReset(e);
                    flags.flagSet(word(k.signal(q), SignalArea.ceArrived(lane, rank)), tag(e, j));
                    int next = j + lanes;
                    if (next < pieces[q] && next >= SignalArea.CE_SLOTS) {
                        flags.flagWait(word(signal, SignalArea.ceFreed(q)), tag(e, next - SignalArea.CE_SLOTS), q);
                    }
                    k.launchFlags(l.pull[lane][q], what + " copy-engine arrived");
                }
                if (j >= pieces[rank]) {
                    continue;
                }
                // my piece j: wait until every peer's piece arrived, free the slots of piece j - 1, reduce
                flags.flagReset(e);
                args.clear0();
                long p = lo[rank] + j * pieceElems;
                long len = Math.min(pieceElems, hi[rank] - p);
                boolean vec = true;
                for (int q = 0; q < size; q++) {
                    long src = q == rank ? c.send() + p * es : slot(signal, q, j, slotBytes);
                    if (q != rank) {
                        flags.flagWait(word(signal, SignalArea.ceArrived(j % lanes, q)), tag(e, j), q);
                        if (j > 0) {
                            flags.flagSet(word(k.signal(q), SignalArea.ceFreed(rank)), tag(e, j - 1));
                        }
                    }
                    args.src(q, src);
                    vec &= src % 16 == 0;
                }
                k.launchFlags(main, what + " copy-engine wait");
                long dst = c.recv() + (p - outShift) * es;
                args.dst(0, dst);
                vec &= dst % 16 == 0;
                k.launchReduce(fn, len, e, size, 1, vec ? KernelArgs.MODE_VEC : 0, t.bytes(len), c.stream(),
                        what + " copy-engine reduce");
                if (gather) {
                    CudaDriver.eventRecord(l.reduced, main);
                    for (int i = 1; i < size; i++) {
                        int q = (rank + i) % size;
                        MemorySegment lane = l.push[j % lanes][q];
                        CudaDriver.streamWaitEvent(lane, l.reduced);
                        CudaDriver.memcpyDtoDAsync(out(peers, q) + p * es, dst, len * es, lane);
                    }
                }
            }
            // every copy of mine has landed: raise "done" at every peer, wait for every peer's
            for (int q = 0; q < size; q++) {
                for (int j = 0; j < lanes && q != rank; j++) {
                    CudaDriver.eventRecord(l.pushed[j][q], l.push[j][q]);
                    CudaDriver.streamWaitEvent(main, l.pushed[j][q]);
                    CudaDriver.eventRecord(l.pulled[j][q], l.pull[j][q]);
                    CudaDriver.streamWaitEvent(main, l.pulled[j][q]);
                }
            }
            flags.flagReset(e);
            for (int q = 0; q < size; q++) {
                if (q != rank) {
                    flags.flagSet(word(k.signal(q), SignalArea.ceDone(rank)), e);
                    flags.flagWait(word(signal, SignalArea.ceDone(q)), e, q);
                }
            }
            k.launchFlags(main, what + " copy-engine done");
        });
    }

    /**
     * Copy-engine chain broadcast: root -> root+1 -> ... -> root-1, every GPU's copy engines writing
     * to its successor only, in pieces (JCCL_CUDA_CE_LANES streams alternating, so one piece's copy
     * overlaps the flag kernel between the next two). A piece is forwarded as soon as it arrived;
     * each rank first tells its predecessor "ready" (its stream reached this operation, so its
     * output is free), and the predecessor's lanes wait for that before their first copy. The last
     * rank's lanes only wait for the pieces. No slots: pieces land straight in the outputs.
     *
     * @param c the call; {@code c.send()} 0 off the root
     */
    public Plan broadcast(Plan.Call c) {
        int size = k.size();
        int rank = k.rank();
        int root = c.root();
        long total = c.type().bytes(c.count());
        long piece = Math.min(Math.max(chunk, 256), Math.max(1L << 20, roundUp(ceilDiv(total, 32), 256)));
        int pieces = (int) ceilDiv(total, piece);
        int pos = (rank - root + size) % size;
        int succ = (rank + 1) % size;
        int pred = (rank - 1 + size) % size;
        boolean last = pos == size - 1;
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            Lanes l = lanes();
            KernelArgs flags = k.flags;
            long signal = k.signal();
            MemorySegment main = c.stream();
            flags.flagReset(e);
            if (pos > 0) {
                flags.flagSet(word(k.signal(pred), SignalArea.ceDone(rank)), e); // ready: my output is free
            }
            if (flags.flagAny()) {
                k.launchFlags(main, "broadcast copy-engine ready");
            }
            if (rank == root && c.send() != c.recv()) {
                CudaDriver.memcpyDtoDAsync(c.recv(), c.send(), total, main);
            }
            CudaDriver.eventRecord(l.start, main);
            int used = Math.min(lanes, pieces);
            for (int j = 0; j < used; j++) {
                CudaDriver.streamWaitEvent(l.pull[j][succ], l.start);
            }
            long src = rank == root ? c.send() : c.recv();
            long dst = out(peers, succ);
            for (int j = 0; j < pieces; j++) {
                MemorySegment lane = l.pull[j % used][succ];
                // before the lane's copy of piece j: the piece is here (not the root), the successor is ready (first round)
                flags.flagReset(e);
                if (j >= used && !last) {
                    flags.flagSet(word(k.signal(succ), SignalArea.ceArrived(j % used, rank)), tag(e, j - used));
                }
                if (pos > 0) {
                    flags.flagWait(word(signal, SignalArea.ceArrived(j % used, pred)), tag(e, j), pred);
                }
                if (j < used && !last) {
                    flags.flagWait(word(signal, SignalArea.ceDone(succ)), e, succ);
                }
                if (flags.flagAny()) {
                    k.launchFlags(lane, "broadcast copy-engine piece");
                }
                if (!last) {
                    long off = j * piece;
                    CudaDriver.memcpyDtoDAsync(dst + off, src + off, Math.min(piece, total - off), lane);
                }
            }
            for (int i = 0; i < used; i++) {
                MemorySegment lane = l.pull[i][succ];
                if (!last) {
                    // the lane's last piece
                    int j = i + (pieces - 1 - i) / used * used;
                    flags.flagReset(e);
                    flags.flagSet(word(k.signal(succ), SignalArea.ceArrived(i, rank)), tag(e, j));
                    k.launchFlags(lane, "broadcast copy-engine arrived");
                }
                CudaDriver.eventRecord(l.pulled[i][succ], lane);
                CudaDriver.streamWaitEvent(main, l.pulled[i][succ]);
            }
        });
    }

    private Lanes lanes() {
        if (ce == null) {
            ce = new Lanes();
        }
        return ce;
    }

    /** Releases the lanes, if any were created (the device must be idle). */
    public void close() {
        if (ce != null) {
            ce.close();
            ce = null;
        }
    }

    /** Side streams (JCCL_CUDA_CE_LANES per peer and direction) and events of the copy-engine operations. */
    private final class Lanes {
        final MemorySegment[][] pull = new MemorySegment[lanes][k.size()];
        final MemorySegment[][] push = new MemorySegment[lanes][k.size()];
        final MemorySegment[][] pulled = new MemorySegment[lanes][k.size()];
        final MemorySegment[][] pushed = new MemorySegment[lanes][k.size()];
        final MemorySegment start = CudaDriver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);
        final MemorySegment reduced = CudaDriver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);

        Lanes() {
            for (int j = 0; j < lanes; j++) {
                for (int q = 0; q < k.size(); q++) {
                    if (q != k.rank()) {
                        pull[j][q] = CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
                        push[j][q] = CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
                        pulled[j][q] = CudaDriver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);
                        pushed[j][q] = CudaDriver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);
                    }
                }
            }
            Log.info(Log.Subsys.ALLOC, k.rank(), k.name() + ": copy-engine lanes: " + 2 * lanes * (k.size() - 1) + " streams; pieces"
                    + " of at most " + (Math.min(chunk, k.area().pushSlot() / SignalArea.CE_SLOTS) >> 10) + " KiB through "
                    + SignalArea.CE_SLOTS + " slots of each source's push scratch (JCCL_CUDA_CE_CHUNK, JCCL_CUDA_PUSH_SLOT,"
                    + " JCCL_CUDA_CE_LANES)");
        }

        void close() {
            for (int j = 0; j < lanes; j++) {
                for (int q = 0; q < k.size(); q++) {
                    if (q != k.rank()) {
                        CudaDriver.streamDestroy(pull[j][q]);
                        CudaDriver.streamDestroy(push[j][q]);
                        CudaDriver.eventDestroy(pulled[j][q]);
                        CudaDriver.eventDestroy(pushed[j][q]);
                    }
                }
            }
            CudaDriver.eventDestroy(reduced);
            CudaDriver.eventDestroy(start);
        }
    }
}
