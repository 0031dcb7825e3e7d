package org.jccl.cli.perf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.function.Consumer;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.cuda.CudaDevice;
import org.jccl.cuda.CudaStream;
import org.jccl.cuda.DeviceBuffer;
import org.jccl.cuda.DeviceCommunicator;

/**
 * One GPU rank's measurements: nccl-tests' {@code TimeTest}/{@code BenchTime} on a {@link
 * DeviceCommunicator}, the GPU twin of {@link Benchmark}. One platform thread drives one rank;
 * every rank of the job runs the same calls in the same order, and meets the others through a
 * {@link RankSync} (threads of this process, and other processes through the host communicator).
 *
 * <p>Per (type, op, root): a warm-up of every power-of-two multiple of the first size, then for
 * each size of the sweep, out of place and then in place:
 * <ol>
 * <li>with checking on, the send data is filled (on the host, copied to the GPU) so that the timed
 *     operations move real values;</li>
 * <li>one untimed operation, a stream synchronize, then a barrier of every rank, so that all ranks
 *     start the clock together;</li>
 * <li>{@code iters} operations enqueued back to back on this rank's stream, then one stream
 *     synchronize; time per op = host wall time ({@link System#nanoTime}) / iters, exactly as
 *     nccl-tests measures;</li>
 * <li>the time is combined across every rank of the job by {@code -a};</li>
 * <li>{@code -c} check runs: fresh data and poisoned receive buffers copied from the host, one
 *     operation, the receive buffer copied back and every element compared; wrong elements are
 *     summed across ranks.</li>
 * </ol>
 * Consecutive timed operations use consecutive regions of the buffers while they fit, as in
 * {@link Benchmark#start} and nccl-tests.
 *
 * <p>Buffers: one send and one receive buffer of {@code maxBytes} on the GPU, plus (when checking)
 * two host staging buffers of the same size for the data check. All are freed by {@link #close()},
 * which must run on the thread that made this object (the staging arena is confined to it).
 *
 * <p>Synchronisation around the checks: host-to-device copies go through the legacy default
 * stream, which does not order with the rank's non-blocking stream, so after writing the buffers
 * the device is synchronized and then every rank meets at a barrier (a peer's kernel may read this
 * rank's buffers); every measurement ends with a stream synchronize followed by a reduction across
 * ranks, so no peer can still be reading these buffers when the next check overwrites them.
 */
final class GpuBenchmark implements AutoCloseable {
    private final DeviceCommunicator comm;
    private final CudaDevice device;
    private final CudaStream stream;
    private final PerfOptions o;
    private final RankSync sync;
    private final int local;
    private final int rank;
    private final int nranks;
    private final long bufferBytes;
    private final DeviceBuffer send;
    private final DeviceBuffer recv;
    private final Arena arena;
    private final MemorySegment hostSend;
    private final MemorySegment hostRecv;

    private int rep;
    private long localErrors;
    private double busBwSum;
    private long busBwCount;
    private boolean jitWarmed;

    /**
     * Allocates this rank's buffers on {@code comm.device()}.
     *
     * @param local this rank's index among the ranks of this process (its slot in {@code sync})
     * @throws IllegalStateException when the GPU or the host has too little memory for -e
     */
    GpuBenchmark(DeviceCommunicator comm, CudaStream stream, PerfOptions options, RankSync sync, int local) {
        this.comm = comm;
        this.device = comm.device();
        this.stream = stream;
        this.o = options;
        this.sync = sync;
        this.local = local;
        this.rank = comm.rank();
        this.nranks = comm.size();
        // 64 bytes at least, as the host benchmark; device allocations are 256-byte aligned.
        this.bufferBytes = Math.max(options.maxBytes(), 64);
        DeviceBuffer s = null;
        DeviceBuffer r = null;
        try {
            s = device.allocate(bufferBytes, DataType.UINT8);
            r = device.allocate(bufferBytes, DataType.UINT8);
        } catch (RuntimeException e) {
            if (s != null) {
                s.close();
            }
            throw new IllegalStateException("cannot allocate 2 x " + bufferBytes + " bytes on " + device
                    + " for -e/--maxbytes " + options.maxBytes() + " (rank " + rank + "): " + e.getMessage()
                    + "; lower -e", e);
        }
        this.send = s;
        this.recv = r;
        this.arena = Arena.ofConfined();
        if (options.check() > 0) {
            try {
                this.hostSend = arena.allocate(bufferBytes, 64);
                this.hostRecv = arena.allocate(bufferBytes, 64);
            } catch (OutOfMemoryError | IllegalArgumentException e) {
                close();
                throw new IllegalStateException("cannot allocate 2 x " + bufferBytes + " bytes of host memory to check"
                        + " rank " + rank + "'s results (" + e.getMessage() + "); lower -e or turn checking off (-c 0)", e);
            }
        } else {
            this.hostSend = null;
            this.hostRecv = null;
        }
    }

    /** Checks (on this rank) that found wrong data, nccl-tests' per-rank error count. */
    long localErrors() {
        return localErrors;
    }

    /** Mean busbw over every measurement so far (out of place and in place), the footer's average. */
    double averageBusBw() {
        return busBwSum / busBwCount;
    }

    /** Runs every (type, op, root) the options ask for, handing each results line to {@code rows}. */
    void runAll(Consumer<ResultRow> rows) {
        o.forEachTimeTest(nranks, (t, op, root) -> timeTest(t, op, root, rows));
    }

    /** nccl-tests' TimeTest: warm-up, then one row per size. */
    void timeTest(DataType t, ReduceOp op, int root, Consumer<ResultRow> rows) {
        sync.barrier(local);
        if (!jitWarmed && o.jitWarmup() > 0) {
            // Rounds of operations at the first size until rank 0 has spent the budget, so that the
            // JIT has compiled the Java side of the issue path (the same calls the timed loop makes);
            // rank 0's decision is shared, so every rank runs the same operations.
            jitWarmed = true;
            // Cycle through the sweep's sizes up to 16 MB: small and large messages take different
            // algorithms (one-shot, push, ...), and each one's issue path must be compiled.
            List<Collective.Counts> warm = new java.util.ArrayList<>();
            for (long size : o.sizes()) {
                if (size <= (16L << 20) || warm.isEmpty()) {
                    warm.add(o.collective().counts(size, t.size(), nranks));
                }
            }
            long end = System.nanoTime() + o.jitWarmup() * 1_000_000L;
            long more = 1;
            while (more != 0) {
                for (int i = 0; i < 200; i++) {
                    start(warm.get(i % warm.size()), t, op, root, (i & 1) == 1 && inPlaceSupported(), i);
                }
                stream.synchronize();
                more = sync.reduce(local, System.nanoTime() < end ? 1L : 0L, RankSync.Reduction.RANK0);
            }
        }
        if (o.warmupIters() > 0) {
            for (long size : SizeSweep.warmupSizes(o.minBytes(), o.maxBytes())) {
                Collective.Counts counts = o.collective().counts(size, t.size(), nranks);
                for (int i = 0; i < o.warmupIters(); i++) {
                    start(counts, t, op, root, false, i);
                }
                stream.synchronize();
            }
        }
        // Every rank is done with every buffer before the first check overwrites them.
        sync.barrier(local);
        for (long size : o.sizes()) {
            rows.accept(measure(size, t, op, root));
        }
    }

    /** One results line: {@code size} out of place and in place. */
    ResultRow measure(long size, DataType t, ReduceOp op, int root) {
        Collective.Counts counts = o.collective().counts(size, t.size(), nranks);
        ResultRow.Measurement outOfPlace = benchTime(counts, t, op, root, false);
        // NCCL has no in-place all-to-all (its communicator refuses one, rather than give wrong data):
        // that half of the row is left empty (0, N/A) and out of the average.
        ResultRow.Measurement inPlace = !inPlaceSupported() ? new ResultRow.Measurement(0, 0, 0, ResultRow.Measurement.NOT_CHECKED)
                : benchTime(counts, t, op, root, true);
        return new ResultRow(counts.sizeBytes(t.size()), counts.paramCount(), t.ncclName(),
                op == null ? ResultRow.NO_OP : op.ncclName(), root, outOfPlace, inPlace);
    }

    /** False for NCCL's all-to-all, which has no in-place form. */
    private boolean inPlaceSupported() {
        return !(o.collective() == Collective.ALLTOALL && "nccl".equals(comm.backend()));
    }

    /** nccl-tests' BenchTime: one variant of one size. */
    ResultRow.Measurement benchTime(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace) {
        if (o.check() > 0) {
            initData(pattern(t, op, 0), counts, root, inPlace);
        }
        start(counts, t, op, root, inPlace, 0);
        stream.synchronize();
        sync.barrier(local);
        sync.spinBarrier();

        if (o.median()) {
            return finish(counts, t, op, root, inPlace, medianSeconds(counts, t, op, root, inPlace));
        }
        long collectiveOnly = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < o.iters(); i++) {
            long ti = System.nanoTime();
            start(counts, t, op, root, inPlace, i);
            if (o.blocking() != 0) {
                stream.synchronize();
                if (o.blocking() == 3) {
                    collectiveOnly += System.nanoTime() - ti;
                }
                if (o.blocking() == 1 || o.blocking() == 3) {
                    sync.barrier(local);
                }
            }
        }
        stream.synchronize();
        long elapsed = o.blocking() == 3 ? collectiveOnly : System.nanoTime() - t0;
        return finish(counts, t, op, root, inPlace, combine(elapsed / 1e9 / o.iters()));
    }

    /** --timing median: each operation timed alone (barrier, enqueue, synchronize); the median per rank, combined per -a. */
    private double medianSeconds(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace) {
        long[] times = new long[Math.max(1, o.iters())];
        for (int i = 0; i < times.length; i++) {
            sync.barrier(local);
            long t0 = System.nanoTime();
            start(counts, t, op, root, inPlace, i);
            stream.synchronize();
            times[i] = System.nanoTime() - t0;
        }
        java.util.Arrays.sort(times);
        return combine(times[times.length / 2] / 1e9);
    }

    /** Bandwidths and the data check for one measured time. */
    private ResultRow.Measurement finish(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace,
                                         double seconds) {
        Collective c = o.collective();
        double algBw = c.algBw(counts.paramCount(), t.size(), seconds, nranks);
        double busBw = algBw * c.busBwFactor(nranks);

        long wrong = ResultRow.Measurement.NOT_CHECKED;
        boolean report = !(inPlace && c.inPlaceUnchecked());
        if (o.check() > 0 && report) {
            for (int k = 0; k < o.check(); k++) {
                DataPattern p = pattern(t, op, ++rep);
                initData(p, counts, root, inPlace);
                start(counts, t, op, root, inPlace, 0);
                stream.synchronize();
                long local = countWrong(p, counts, root, inPlace);
                if (local != 0) {
                    localErrors++;
                }
                wrong = sync.reduce(this.local, local, RankSync.Reduction.SUM);
                if (wrong != 0) {
                    break;
                }
            }
        }
        busBwSum += busBw;
        busBwCount++;
        return new ResultRow.Measurement(seconds * 1e6, algBw, busBw, wrong);
    }

    /** The per-op time every rank reports, per -a. */
    private double combine(double seconds) {
        return sync.reduce(local, seconds, RankSync.forAverage(o.average()));
    }

    private DataPattern pattern(DataType t, ReduceOp op, int seed) {
        return new DataPattern(t, o.collective().reduces() ? op : null, nranks, seed);
    }

    /** {@code count} elements of {@code t} at byte {@code offset} of {@code buf}. */
    private static DeviceBuffer view(DeviceBuffer buf, long offset, long count, DataType t) {
        return buf.slice(offset, t.bytes(count)).as(t, count);
    }

    /**
     * Enqueues one operation on this rank's stream (nccl-tests' startColl). {@code iter} picks the
     * buffer region; in place, the send buffer is the receive buffer or, for all_gather, this rank's
     * slot in it, and for reduce_scatter the result goes to this rank's slot.
     */
    void start(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace, int iter) {
        int ws = t.size();
        long total = counts.sizeBytes(ws);
        long steps = total > 0 ? o.maxBytes() / total : 1;
        long shift = total * (iter % steps);
        long sendOffset = inPlace ? shift + counts.sendInPlaceOffset() * rank * ws : shift;
        long recvOffset = inPlace ? shift + counts.recvInPlaceOffset() * rank * ws : shift;
        DeviceBuffer s = view(inPlace ? recv : send, sendOffset, counts.sendCount(), t);
        DeviceBuffer r = view(recv, recvOffset, counts.recvCount(), t);
        switch (o.collective()) {
            case ALL_REDUCE -> comm.allReduce(s, r, op, stream);
            case ALL_GATHER -> comm.allGather(s, r, stream);
            case BROADCAST -> comm.broadcast(s, r, root, stream);
            case REDUCE -> comm.reduce(s, r, op, root, stream);
            case REDUCE_SCATTER -> comm.reduceScatter(s, r, op, stream);
            case ALLTOALL -> comm.allToAll(s, r, stream);
            case SENDRECV -> {
                // ncclGroupStart/End around ncclSend/ncclRecv: both posted together, so the ring of
                // ranks cannot deadlock.
                comm.groupStart();
                try {
                    comm.send(s, (rank + 1) % nranks, stream);
                    comm.recv(r, (rank - 1 + nranks) % nranks, stream);
                } finally {
                    comm.groupEnd();
                }
            }
        }
    }

    /**
     * Writes this rank's check data (buffer offset 0, as check runs use iter 0) through the host
     * staging buffers, waits for the copies, then waits for every rank to have done the same.
     */
    void initData(DataPattern p, Collective.Counts counts, int root, boolean inPlace) {
        int ws = p.type().size();
        long recvBytes = counts.sizeBytes(ws);
        DataCheck.initData(o.collective(), p, counts, rank, root, inPlace, hostSend, hostRecv);
        if (recvBytes > 0) {
            recv.slice(0, recvBytes).copyFrom(hostRecv);
        }
        boolean writesSend = o.collective() != Collective.BROADCAST || rank == root;
        long sendBytes = counts.sendCount() * ws;
        if (!inPlace && writesSend && sendBytes > 0) {
            send.slice(0, sendBytes).copyFrom(hostSend);
        }
        device.synchronize();
        sync.barrier(local);
    }

    /** Copies the result back to the host and counts the elements that differ from the expected values. */
    long countWrong(DataPattern p, Collective.Counts counts, int root, boolean inPlace) {
        long recvBytes = counts.sizeBytes(p.type().size());
        if (recvBytes > 0) {
            recv.slice(0, recvBytes).copyTo(hostRecv);
        }
        return DataCheck.countWrong(o.collective(), p, counts, rank, nranks, root, inPlace, hostRecv);
    }

    /** Frees the GPU and host buffers (the stream and the communicator belong to the caller). */
    @Override
    public void close() {
        try {
            send.close();
        } finally {
            try {
                recv.close();
            } finally {
                arena.close();
            }
        }
    }
}
