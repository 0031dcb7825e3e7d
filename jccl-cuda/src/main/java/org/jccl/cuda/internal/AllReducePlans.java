package org.jccl.cuda.internal;

import static org.jccl.cuda.internal.Align.ceilDiv;
import static org.jccl.cuda.internal.Align.roundUp;
import static org.jccl.cuda.internal.Plan.in;
import static org.jccl.cuda.internal.Plan.out;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.cuda.CudaException;

/**
 * The all-reduce variants on the kernels (jccl_kernels.cu): one-shot, two-shot, push (and
 * push-serial) and ring; the copy-engine variant is {@link CopyEngine#reduce}. Which one runs is
 * {@link GpuTuner#allReduce}'s choice.
 */
public final class AllReducePlans {
    private final KernelLauncher k;
    private final CopyEngine ce;

    public AllReducePlans(KernelLauncher launcher, CopyEngine ce) {
        this.k = launcher;
        this.ce = ce;
    }

    /** The plan of all-reduce call {@code c} by variant {@code v}; {@code guard}: the call's mismatch guard word. */
    public Plan plan(GpuTuner.AllReduce v, Plan.Call c, long guard) {
        return switch (v) {
            case ONESHOT -> oneShot(c, guard);
            case TWOSHOT -> twoShot(c);
            case PUSH -> push(c, false);
            case PUSH_SERIAL -> push(c, true);
            case RING -> ring(c);
            case CE -> ce.reduce("allReduce", c, true);
        };
    }

    /**
     * One-shot: every rank pushes its input into a slot of every peer's inbox and reduces its own inbox.
     * No peer reads this rank's buffers: nothing to exchange but the epoch. The kernels compare the guard
     * words (jccl_kernels.cu, oneshot_body); the exchange gets a note, for peers whose call exchanges records.
     */
    private Plan oneShot(Plan.Call c, long guard) {
        DataType t = c.type();
        MemorySegment os = k.kernels().oneShot(t, c.op());
        SignalArea area = k.area();
        int rank = k.rank();
        return new Plan(0, 0, 1, (peers, e) -> {
            long parity = e & 1;
            KernelArgs a = k.oneShotArgs;
            for (int q = 0; q < k.size(); q++) {
                a.oneShotInbox(q, q == rank ? 0 : area.inbox(k.signal(q), parity, rank),
                        q == rank ? c.send() : area.inbox(k.signal(), parity, q));
            }
            boolean vec = (c.send() | c.recv()) % 16 == 0;
            a.oneShotOp(c.send(), c.recv(), c.count(), e, vec, guard);
            CudaDriver.launchKernel(os, k.blocksFor(t.bytes(c.count())), Kernels.THREADS, 0, c.stream(), a.params(),
                    "allReduce one-shot");
        });
    }

    /** Two-shot by loads: GPU r loads slice r from every peer, reduces it and stores it into every peer's output. */
    private Plan twoShot(Plan.Call c) {
        DataType t = c.type();
        int es = t.size();
        int size = k.size();
        long count = c.count();
        MemorySegment fn = k.kernels().reduce(t, c.op());
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            KernelArgs a = k.args;
            a.clear0();
            long slice = roundUp(ceilDiv(count, size), 16 / es);
            long lo = Math.min(k.rank() * slice, count);
            long hi = Math.min(lo + slice, count);
            boolean aligned = true;
            for (int q = 0; q < size; q++) {
                a.src(q, in(peers, q) + lo * es);
                a.dst(q, out(peers, q) + lo * es);
                aligned &= (in(peers, q) | out(peers, q)) % 16 == 0;
            }
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | (aligned ? KernelArgs.MODE_VEC : 0);
            k.launchReduce(fn, hi - lo, e, size, size, mode, t.bytes(slice), c.stream(), "allReduce two-shot");
        });
    }

    /**
     * Two-shot by stores only, in chunks of at most size() x JCCL_CUDA_PUSH_SLOT bytes (one kernel and epoch each);
     * {@code serial}: the reduced slice is stored locally, then to one peer after another.
     */
    private Plan push(Plan.Call c, boolean serial) {
        DataType t = c.type();
        int es = t.size();
        int size = k.size();
        int rank = k.rank();
        long count = c.count();
        long per = 16 / es;
        long slotElems = k.area().pushSlot() / es / per * per;
        long chunkMax = slotElems * size;
        int chunks = (int) ceilDiv(count, chunkMax);
        MemorySegment fn = k.kernels().push(t, c.op());
        SignalArea area = k.area();
        return new Plan(c.send(), c.recv(), chunks, (peers, e) -> {
            KernelArgs a = k.pushArgs;
            for (int j = 0; j < chunks; j++) {
                long off = j * chunkMax;
                long n = Math.min(chunkMax, count - off);
                long slice = roundUp(ceilDiv(n, size), per);
                boolean vec = true;
                for (int q = 0; q < size; q++) {
                    long po = out(peers, q) + off * es;
                    a.pushPeer(q, area.pushScratch(k.signal(q), rank), area.pushScratch(k.signal(), q), po);
                    vec &= po % 16 == 0;
                }
                long in = c.send() + off * es;
                vec &= in % 16 == 0;
                a.pushOp(in, c.recv() + off * es, n, slice, e + j, vec, serial);
                CudaDriver.launchKernel(fn, k.blocksFor(t.bytes(slice)), Kernels.THREADS, 0, c.stream(), a.params(), "allReduce push");
            }
        });
    }

    /**
     * Ring all-reduce (jccl_kernels.cu, ring_body): one kernel; every GPU stores only to its successor,
     * partial sums through RING_SLOTS slots per block in the successor's push scratch, the completed
     * chunks straight into the successor's output. Slices: JCCL_CUDA_RING_SLICE per block and step,
     * capped so that every block's slots fit the push scratch region (ranks x JCCL_CUDA_PUSH_SLOT).
     */
    private Plan ring(Plan.Call c) {
        DataType t = c.type();
        int es = t.size();
        int size = k.size();
        long count = c.count();
        long chunkBytes = t.bytes(ceilDiv(count, size));
        int blocks = k.blocksFor(chunkBytes);
        long region = (long) size * k.area().pushSlot();
        long sliceBytes = Math.min(k.tuner().settings().ringSlice(), region / ((long) blocks * SignalArea.RING_SLOTS)) / 256 * 256;
        if (sliceBytes < 256) {
            throw new CudaException("ring all-reduce: " + blocks + " blocks x " + SignalArea.RING_SLOTS + " slots do not fit the push"
                    + " scratch of " + region + " bytes (JCCL_CUDA_PUSH_SLOT x ranks); raise JCCL_CUDA_PUSH_SLOT or lower"
                    + " JCCL_CUDA_NBLOCKS");
        }
        long slice = sliceBytes / es;
        int succ = (k.rank() + 1) % size;
        MemorySegment fn = k.kernels().ring(t, c.op());
        SignalArea area = k.area();
        return new Plan(c.send(), c.recv(), 1, (peers, e) -> {
            KernelArgs a = k.pushArgs;
            for (int q = 0; q < size; q++) {
                a.pushPeer(q, area.pushScratch(k.signal(q), 0), area.pushScratch(k.signal(), 0), out(peers, q));
            }
            boolean vec = (c.send() | c.recv() | out(peers, succ)) % 16 == 0;
            a.pushOp(c.send(), c.recv(), count, slice, e, vec, false);
            CudaDriver.launchKernel(fn, blocks, Kernels.THREADS, 0, c.stream(), a.params(), "allReduce ring");
        });
    }
}
