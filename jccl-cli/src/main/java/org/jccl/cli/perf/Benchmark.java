package org.jccl.cli.perf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.Group;
import org.jccl.ReduceOp;
import org.jccl.Work;

/**
 * One rank's measurements, nccl-tests' {@code TimeTest}/{@code BenchTime} on a {@link Communicator}.
 * Every rank of the job runs the same calls in the same order; every rank gets the same rows
 * (times are combined across ranks before bandwidths are computed).
 *
 * <p>Per (type, op, root): a warm-up of every power-of-two multiple of the first size; once per
 * process, after it and before the first row, the JIT warm-up (--jit-warmup, see {@link #jitWarmup}),
 * shortened passes of this very procedure over the sweep's sizes; then for each size of the sweep,
 * out of place and then in place:
 * <ol>
 * <li>with checking on, the send data is filled so that the timed operations move real values;</li>
 * <li>one untimed operation, then a barrier, so that every rank starts the clock together;</li>
 * <li>{@code iters} operations issued back to back and only the last one joined (operations on a
 *     communicator complete in order), timed with {@link System#nanoTime}; time per op = total / iters;</li>
 * <li>the time is combined across ranks by {@code -a} (rank 0's, mean, min or max);</li>
 * <li>{@code -c} check runs: fresh data, poisoned receive buffers, one operation, every element
 *     compared with the expected value; wrong elements are summed across ranks.</li>
 * </ol>
 * Like nccl-tests, consecutive timed operations use consecutive regions of the buffers (while they
 * fit) so that a result cannot be served from a cache warmed by the previous operation.
 *
 * <p>Buffers: one send and one receive buffer of {@code maxBytes} in native memory, allocated once
 * from a shared arena (the runtime's progress threads touch them, which a confined arena forbids).
 * Not thread safe: one thread drives one rank.
 */
final class Benchmark implements AutoCloseable {
    private final Communicator comm;
    private final PerfOptions o;
    private final int rank;
    private final int nranks;
    private final Arena arena;
    private final MemorySegment send;
    private final MemorySegment recv;

    private int rep;
    private long localErrors;
    private double busBwSum;
    private long busBwCount;

    Benchmark(Communicator comm, PerfOptions options) {
        this.comm = comm;
        this.o = options;
        this.rank = comm.rank();
        this.nranks = comm.size();
        this.arena = Arena.ofShared();
        // 64-byte alignment: cache lines, and every element type's natural alignment.
        long bytes = Math.max(options.maxBytes(), 64);
        try {
            this.send = arena.allocate(bytes, 64);
            this.recv = arena.allocate(bytes, 64);
        } catch (OutOfMemoryError | IllegalArgumentException e) {
            arena.close();
            throw new IllegalStateException("cannot allocate 2 x " + bytes + " bytes of native memory for -e/--maxbytes "
                    + options.maxBytes() + " on rank " + rank + " (" + e.getMessage() + "); lower -e", e);
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

    /**
     * Runs every (type, op, root) the options ask for, handing each results line to {@code rows}
     * as soon as it is measured.
     *
     * @throws IllegalArgumentException when -r names a rank the job does not have
     */
    void runAll(Consumer<ResultRow> rows) {
        o.forEachTimeTest(nranks, (t, op, root) -> timeTest(t, op, root, rows));
    }

    /** Whether the one-off JIT warm-up (--jit-warmup) already ran in this process. */
    private boolean jitWarmed;

    /**
     * Largest size the JIT warm-up (--jit-warmup) runs: it cycles through every size of the sweep up
     * to this, so that the code of each size (e.g. the reduction kernels' vector loops, which an
     * 8-byte operation never enters) is compiled before its row; larger ones take the same code.
     */
    static final long JIT_WARMUP_MAX_BYTES = 1 << 20;

    /** Bytes the JIT warm-up moves per size, variant and pass (fewer operations for larger sizes). */
    private static final long JIT_WARMUP_PASS_BYTES = 256 << 10;

    /**
     * The JIT warm-up goes on past --jit-warmup while the JIT compiler of any rank has finished a
     * compilation within this long, up to {@link #JIT_WARMUP_MAX_FACTOR} times --jit-warmup: on a
     * loaded host (two spinning ranks on two cores starve the compiler threads) 1.5 s of operations
     * left the C2 compilations of the measured path unfinished.
     */
    private static final long JIT_QUIET_NANOS = 300_000_000L;

    /** The longest JIT warm-up, in multiples of --jit-warmup. */
    static final int JIT_WARMUP_MAX_FACTOR = 5;

    /**
     * Whether this JVM's JIT compiler is still busy, from the total compilation time of {@link
     * java.lang.management.CompilationMXBean} (which grows as compilations finish); a JVM that does
     * not report it counts as quiet.
     */
    static final class CompilationWatch {
        private final java.lang.management.CompilationMXBean bean;
        private long lastTotalMs;
        private long lastChange = System.nanoTime();

        CompilationWatch() {
            java.lang.management.CompilationMXBean b = java.lang.management.ManagementFactory.getCompilationMXBean();
            this.bean = b != null && b.isCompilationTimeMonitoringSupported() ? b : null;
            this.lastTotalMs = bean == null ? 0 : bean.getTotalCompilationTime();
        }

        /** Whether a compilation finished within {@code windowNanos} before {@code now} (as far as polls saw). */
        boolean compiledWithin(long now, long windowNanos) {
            if (bean == null) {
                return false;
            }
            long total = bean.getTotalCompilationTime();
            if (total != lastTotalMs) {
                lastTotalMs = total;
                lastChange = now;
            }
            return now - lastChange < windowNanos;
        }
    }

    /** nccl-tests' TimeTest: warm-up, then one row per size. */
    void timeTest(DataType t, ReduceOp op, int root, Consumer<ResultRow> rows) {
        comm.barrier();
        // The -w warm-up first: its sizes reach past the JIT warm-up's (up to -e), and code the JIT compiled
        // without having seen them was deoptimised by their first operations and recompiled while the first rows
        // were timed (with -e 64M, 16-64 B rows of nccl-tests' method at 50-550 us per operation against 0.4-1,
        // where -e 256 showed none); the JIT warm-up then goes on until the compiler is quiet.
        if (o.warmupIters() > 0) {
            for (long size : SizeSweep.warmupSizes(o.minBytes(), o.maxBytes())) {
                Collective.Counts counts = o.collective().counts(size, t.size(), nranks);
                Work last = null;
                for (int i = 0; i < o.warmupIters(); i++) {
                    last = start(counts, t, op, root, false, i);
                }
                last.join();
            }
        }
        if (!jitWarmed && o.jitWarmup() > 0) {
            jitWarmed = true;
            jitWarmup(t, op, root);
        }
        for (long size : o.sizes()) {
            rows.accept(measure(size, t, op, root));
        }
    }

    /**
     * The one-off JIT warm-up: passes of the measurement procedure itself (the untimed first operation,
     * the barrier, the timed loop of --timing, the combination of the times across ranks, the check
     * runs), shortened and discarded, over every size of the sweep up to {@link #JIT_WARMUP_MAX_BYTES},
     * out of place and in place, for --jit-warmup milliseconds and then for as long as any rank's JIT
     * compiler is still finishing compilations ({@link #JIT_QUIET_NANOS}, at most {@link
     * #JIT_WARMUP_MAX_FACTOR} times --jit-warmup in all). The ranks sum their "more" votes after each
     * pass, so every rank runs the same operations.
     *
     * <p>Why the whole procedure: the JVM compiles a method for the paths its profile has seen and
     * deoptimises it when another one is taken. A warm-up of another shape (only the first size,
     * without the barriers, the time combination or the check runs of the measurement) left the JIT
     * recompiling the measured path during the first rows: the rows then timed interpreted and C1
     * code (the 8-byte all-reduce at 3-5 us where its compiled steady state is ~0.5 us), and a size
     * first met in its own row ran the reduction kernels' vector loops interpreted (2 KB at 50-80 us).
     */
    void jitWarmup(DataType t, ReduceOp op, int root) {
        java.util.List<Collective.Counts> shapes = new java.util.ArrayList<>();
        for (long size : o.sizes()) {
            if (shapes.isEmpty() || size <= JIT_WARMUP_MAX_BYTES) {
                shapes.add(o.collective().counts(size, t.size(), nranks));
            }
        }
        CompilationWatch jit = new CompilationWatch();
        long start = System.nanoTime();
        long min = start + o.jitWarmup() * 1_000_000L;
        long max = start + o.jitWarmup() * JIT_WARMUP_MAX_FACTOR * 1_000_000L;
        long[] more = {1};
        while (more[0] != 0) {
            for (Collective.Counts counts : shapes) {
                long bytes = Math.max(1, counts.sizeBytes(t.size()));
                int ops = (int) Math.max(4, Math.min(200, JIT_WARMUP_PASS_BYTES / bytes));
                for (boolean inPlace : new boolean[] {false, true}) {
                    double sec = seconds(counts, t, op, root, inPlace, ops);
                    if (o.pairs() > 0) {
                        seconds(counts, t, op, root, inPlace, ops, true); // paired: the median method's path too
                    }
                    if (o.check() > 0 && !(inPlace && o.collective().inPlaceUnchecked())) {
                        checks(counts, t, op, root, inPlace, false);
                    }
                    if (rank == 0) {
                        formatRow(counts, t, op, root, sec);
                    }
                }
            }
            long now = System.nanoTime();
            more[0] = now - min < 0 || (jit.compiledWithin(now, JIT_QUIET_NANOS) && now - max < 0) ? 1 : 0;
            comm.allReduce(more, ReduceOp.SUM);
        }
        comm.barrier();
    }

    /**
     * Formats (and drops) the results line of a warm-up pass, on rank 0, which prints the real ones: the
     * exact decimal formatting of the table ({@code CFormat}, BigDecimal arithmetic) compiled during the
     * warm-up. Otherwise the first printed line set the JIT compiler to work while the second size was
     * timed: the 16-byte row of {@code -b 8}, out of place, took 8-28 us per operation against 0.4-0.8 for
     * its neighbours, on 2 and 4 ranks alike, with or without printing the line at once.
     */
    private void formatRow(Collective.Counts counts, DataType t, ReduceOp op, int root, double seconds) {
        Collective c = o.collective();
        double algBw = c.algBw(counts.paramCount(), t.size(), seconds, nranks);
        ResultRow.Measurement m = new ResultRow.Measurement(seconds * 1e6, algBw, algBw * c.busBwFactor(nranks), 0);
        Table.row(new ResultRow(counts.sizeBytes(t.size()), counts.paramCount(), t.ncclName(),
                op == null ? ResultRow.NO_OP : op.ncclName(), root, m, m));
    }

    /** One results line: {@code size} out of place and in place. */
    ResultRow measure(long size, DataType t, ReduceOp op, int root) {
        Collective c = o.collective();
        Collective.Counts counts = c.counts(size, t.size(), nranks);
        ResultRow.Measurement outOfPlace = benchTime(counts, t, op, root, false);
        ResultRow.Measurement inPlace = benchTime(counts, t, op, root, true);
        return new ResultRow(counts.sizeBytes(t.size()), counts.paramCount(), t.ncclName(),
                op == null ? ResultRow.NO_OP : op.ncclName(), root, outOfPlace, inPlace);
    }

    /** nccl-tests' BenchTime: one variant of one size. */
    ResultRow.Measurement benchTime(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace) {
        if (o.pairs() > 0) {
            return pairedTime(counts, t, op, root, inPlace);
        }
        return finish(counts, t, op, root, inPlace, seconds(counts, t, op, root, inPlace, o.iters()));
    }

    /** What {@code --timing paired} found for the last measured row (both variants), for rank 0 to print after it; else null. */
    private StringBuilder pairedNote;

    /** The '#paired' lines of the row just measured, or null; clears them. */
    String takePairedNote() {
        String s = pairedNote == null ? null : pairedNote.toString();
        pairedNote = null;
        return s;
    }

    /**
     * {@code --timing paired}: both methods on the same size, alternated {@code pairs} times (pair k starts
     * with the mean method when k is even, with the median method when odd), so that both see the same state of
     * the host; the row reports the mean method's time (the median of its runs) and the note gives the median of
     * the pairs' ratios. Every rank runs the same sequence; the times are combined across ranks as usual.
     */
    private ResultRow.Measurement pairedTime(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace) {
        int k = o.pairs();
        double[] mean = new double[k];
        double[] median = new double[k];
        double[] ratio = new double[k];
        for (int i = 0; i < k; i++) {
            if ((i & 1) == 0) {
                mean[i] = seconds(counts, t, op, root, inPlace, o.iters(), false);
                median[i] = seconds(counts, t, op, root, inPlace, o.iters(), true);
            } else {
                median[i] = seconds(counts, t, op, root, inPlace, o.iters(), true);
                mean[i] = seconds(counts, t, op, root, inPlace, o.iters(), false);
            }
            ratio[i] = mean[i] / median[i];
        }
        StringBuilder pairs = new StringBuilder();
        for (double r : ratio) {
            pairs.append(pairs.isEmpty() ? "" : " ").append(String.format(java.util.Locale.ROOT, "%.3f", r));
        }
        if (pairedNote == null) {
            pairedNote = new StringBuilder();
        } else {
            pairedNote.append(System.lineSeparator());
        }
        pairedNote.append(String.format(java.util.Locale.ROOT, "#paired %d %s mean_us %.3f median_us %.3f ratio %.3f pairs %s",
                counts.sizeBytes(t.size()), inPlace ? "in" : "out", middle(mean) * 1e6, middle(median) * 1e6, middle(ratio), pairs));
        return finish(counts, t, op, root, inPlace, middle(mean));
    }

    /** The median of {@code v} (the upper one of an even count); sorts a copy. */
    private static double middle(double[] v) {
        double[] c = v.clone();
        java.util.Arrays.sort(c);
        return c[c.length / 2];
    }

    /** The time per operation of {@code iters} timed operations per --timing, combined across ranks per -a. */
    private double seconds(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace, int iters) {
        return seconds(counts, t, op, root, inPlace, iters, o.median());
    }

    /** The time per operation of {@code iters} timed operations by one method, combined across ranks per -a. */
    private double seconds(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace, int iters, boolean median) {
        if (o.check() > 0) {
            initData(pattern(t, op, 0), counts, root, inPlace);
        }
        start(counts, t, op, root, inPlace, 0).join();
        comm.barrier();

        if (median) {
            return medianSeconds(counts, t, op, root, inPlace, iters);
        }
        long collectiveOnly = 0;
        long t0 = System.nanoTime();
        Work last = null;
        for (int i = 0; i < iters; i++) {
            long ti = System.nanoTime();
            last = start(counts, t, op, root, inPlace, i);
            if (o.blocking() != 0) {
                last.join();
                if (o.blocking() == 3) {
                    collectiveOnly += System.nanoTime() - ti;
                }
                if (o.blocking() == 1 || o.blocking() == 3) {
                    comm.barrier();
                }
            }
        }
        last.join();
        long elapsed = o.blocking() == 3 ? collectiveOnly : System.nanoTime() - t0;
        return combine(elapsed / 1e9 / iters);
    }

    /**
     * The anchors' method: each operation timed alone, after a barrier, waited for; the median of
     * {@code iters} such times on each rank, then combined across ranks per -a.
     */
    private double medianSeconds(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace, int iters) {
        long[] times = new long[Math.max(1, iters)];
        for (int i = 0; i < times.length; i++) {
            comm.barrier();
            long t0 = System.nanoTime();
            start(counts, t, op, root, inPlace, i, true);
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
            wrong = checks(counts, t, op, root, inPlace, true);
        }
        busBwSum += busBw;
        busBwCount++;
        return new ResultRow.Measurement(seconds * 1e6, algBw, busBw, wrong);
    }

    /** The per-op time every rank reports, per -a: rank 0's, the mean, the minimum or the maximum. */
    private double combine(double seconds) {
        double[] v = {seconds};
        switch (o.average()) {
            case 0 -> comm.broadcast(v, 0);
            case 1 -> {
                comm.allReduce(v, ReduceOp.SUM);
                v[0] /= nranks;
            }
            case 2 -> comm.allReduce(v, ReduceOp.MIN);
            default -> comm.allReduce(v, ReduceOp.MAX);
        }
        return v[0];
    }

    /**
     * The -c check runs of one measurement: fresh data, poisoned receive buffers, one operation, the
     * wrong elements summed across ranks; stops at the first run that finds any. With {@code record},
     * a run that finds wrong data on this rank counts in {@link #localErrors()}.
     */
    private long checks(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace, boolean record) {
        long wrong = 0;
        for (int k = 0; k < o.check(); k++) {
            DataPattern p = pattern(t, op, ++rep);
            initData(p, counts, root, inPlace);
            start(counts, t, op, root, inPlace, 0).join();
            long local = countWrong(p, counts, root, inPlace);
            if (local != 0 && record) {
                localErrors++;
            }
            long[] total = {local};
            comm.allReduce(total, ReduceOp.SUM);
            wrong = total[0];
            if (wrong != 0) {
                break;
            }
        }
        return wrong;
    }

    private DataPattern pattern(DataType t, ReduceOp op, int seed) {
        return new DataPattern(t, o.collective().reduces() ? op : null, nranks, seed);
    }

    /**
     * Starts one operation (nccl-tests' startColl). {@code iter} picks the buffer region; in place,
     * the send buffer is the receive buffer or, for all_gather, this rank's slot in it, and for
     * reduce_scatter the result goes to this rank's slot.
     */
    Work start(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace, int iter) {
        return start(counts, t, op, root, inPlace, iter, false);
    }

    /** A completed Work, for operations run through the blocking API. */
    private static final Work DONE = new Work() {
        @Override
        public void join() {
        }

        @Override
        public boolean join(java.time.Duration timeout) {
            return true;
        }

        @Override
        public boolean isDone() {
            return true;
        }
    };

    /**
     * Issues one operation; with {@code blocking} through the blocking API (what a program that waits
     * for each collective calls; it may run on the calling thread), returning a completed Work.
     */
    Work start(Collective.Counts counts, DataType t, ReduceOp op, int root, boolean inPlace, int iter, boolean blocking) {
        int ws = t.size();
        long total = counts.sizeBytes(ws);
        long steps = total > 0 ? o.maxBytes() / total : 1;
        long shift = total * (iter % steps);
        MemorySegment recvBase = recv.asSlice(shift);
        MemorySegment sendBase = inPlace ? recvBase : send.asSlice(shift);
        long sendOffset = inPlace ? counts.sendInPlaceOffset() * rank * ws : 0;
        long recvOffset = inPlace ? counts.recvInPlaceOffset() * rank * ws : 0;
        Buffer s = Buffer.of(sendBase.asSlice(sendOffset), counts.sendCount(), t);
        Buffer r = Buffer.of(recvBase.asSlice(recvOffset), counts.recvCount(), t);
        if (blocking) {
            switch (o.collective()) {
                case ALL_REDUCE -> comm.allReduce(s, r, op);
                case ALL_GATHER -> comm.allGather(s, r);
                case BROADCAST -> comm.broadcast(s, r, root);
                case REDUCE -> comm.reduce(s, r, op, root);
                case REDUCE_SCATTER -> comm.reduceScatter(s, r, op);
                case ALLTOALL -> comm.allToAll(s, r);
                case SENDRECV -> {
                    try (Group g = comm.group()) {
                        comm.send(s, (rank + 1) % nranks);
                        comm.recv(r, (rank - 1 + nranks) % nranks);
                    }
                }
            }
            return DONE;
        }
        return switch (o.collective()) {
            case ALL_REDUCE -> comm.allReduceAsync(s, r, op);
            case ALL_GATHER -> comm.allGatherAsync(s, r);
            case BROADCAST -> comm.broadcastAsync(s, r, root);
            case REDUCE -> comm.reduceAsync(s, r, op, root);
            case REDUCE_SCATTER -> comm.reduceScatterAsync(s, r, op);
            case ALLTOALL -> comm.allToAllAsync(s, r);
            case SENDRECV -> {
                // Like ncclGroupStart/End around ncclSend/ncclRecv: both posted together, so the
                // ring of ranks cannot deadlock; the group's close waits for both.
                Work w;
                try (Group g = comm.group()) {
                    comm.sendAsync(s, (rank + 1) % nranks);
                    w = comm.recvAsync(r, (rank - 1 + nranks) % nranks);
                }
                yield w;
            }
        };
    }

    /** Poisons the receive region and writes this rank's send data (at buffer offset 0, as check runs use iter 0). */
    void initData(DataPattern p, Collective.Counts counts, int root, boolean inPlace) {
        DataCheck.initData(o.collective(), p, counts, rank, root, inPlace, send, recv);
    }

    /** Elements of this rank's result that differ from what the pattern says they must be. */
    long countWrong(DataPattern p, Collective.Counts counts, int root, boolean inPlace) {
        return DataCheck.countWrong(o.collective(), p, counts, rank, nranks, root, inPlace, recv);
    }

    /** Frees the buffers; the communicator stays open (it belongs to the caller). */
    @Override
    public void close() {
        arena.close();
    }
}
