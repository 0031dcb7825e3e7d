package org.jccl.cli.perf;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * The validated settings of one {@code jccl perf} run; {@link PerfCommand} makes it from the
 * command line, tests make it directly.
 *
 * @param collective what to measure
 * @param minBytes first size (-b)
 * @param maxBytes last size (-e); also the size of each rank's two buffers
 * @param stepBytes additive step (-i), used when {@code stepFactor <= 1}
 * @param stepFactor multiplicative step (-f); 1 means "step by bytes" as in nccl-tests
 * @param iters timed operations per size (-n)
 * @param warmupIters untimed operations per warm-up size (-w)
 * @param check check runs per measurement (-c); 0 disables checking and prints N/A
 * @param ops reductions to measure in turn (-o; ignored by collectives without one)
 * @param types element types to measure in turn (-d)
 * @param root the root for broadcast and reduce (-r), or {@link #ALL_ROOTS}
 * @param average how ranks' times combine (-a): 0 rank 0's, 1 mean, 2 min, 3 max
 * @param blocking nccl-tests' -z: 0 issue all then wait, 1 wait and barrier after each op,
 *     2 wait after each op, 3 wait and barrier after each op with the barrier left out of the time
 * @param jsonFile where to write the JSON report (-J), or null
 * @param minBusBw nccl-tests' NCCL_TESTS_MIN_BW: fail when the average busbw is below 90% of it;
 *     negative when not set
 * @param args the command line as given, for the JSON report
 * @param jitWarmup milliseconds of untimed measurement passes over the sweep's sizes before the first row (longer
 *     while a rank's JIT is still compiling, see {@code Benchmark.jitWarmup}), so that the JVM's JIT has compiled
 *     the hot paths (nccl-tests needs none: its code is compiled ahead of time)
 * @param median time each operation alone (barrier, then one blocking operation) and report the
 *     median, which is how the Open MPI and Gloo anchor scripts measure; false: nccl-tests' mean of
 *     {@code iters} back-to-back operations
 * @param plotFile where to draw bus bandwidth against size (--plot, .svg or .png), or null
 * @param pairs {@code --timing paired}: each row times both methods, alternated this many times (each pair in
 *     turn starting with the other method), reports the mean method's time and notes both and their ratio; 0:
 *     one method per {@code median}
 */
record PerfOptions(Collective collective, long minBytes, long maxBytes, long stepBytes, long stepFactor, int iters,
                   int warmupIters, int check, List<ReduceOp> ops, List<DataType> types, int root, int average,
                   int blocking, Path jsonFile, double minBusBw, List<String> args, int jitWarmup,
                   boolean median, Path plotFile, int pairs) {

    /** The options with one timing method. */
    PerfOptions(Collective collective, long minBytes, long maxBytes, long stepBytes, long stepFactor, int iters,
                int warmupIters, int check, List<ReduceOp> ops, List<DataType> types, int root, int average,
                int blocking, Path jsonFile, double minBusBw, List<String> args, int jitWarmup, boolean median,
                Path plotFile) {
        this(collective, minBytes, maxBytes, stepBytes, stepFactor, iters, warmupIters, check, ops, types, root, average,
                blocking, jsonFile, minBusBw, args, jitWarmup, median, plotFile, 0);
    }

    /** The options without a plot. */
    PerfOptions(Collective collective, long minBytes, long maxBytes, long stepBytes, long stepFactor, int iters,
                int warmupIters, int check, List<ReduceOp> ops, List<DataType> types, int root, int average,
                int blocking, Path jsonFile, double minBusBw, List<String> args, int jitWarmup, boolean median) {
        this(collective, minBytes, maxBytes, stepBytes, stepFactor, iters, warmupIters, check, ops, types, root, average,
                blocking, jsonFile, minBusBw, args, jitWarmup, median, null);
    }

    /** {@link #root} value meaning "every rank in turn" (nccl-tests' -r -1). */
    static final int ALL_ROOTS = -1;

    /** nccl-tests' order for {@code -o all}. */
    static final List<ReduceOp> ALL_OPS = List.of(ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.AVG);

    /** nccl-tests' order for {@code -d all}. */
    static final List<DataType> ALL_TYPES = List.of(DataType.INT8, DataType.UINT8, DataType.INT32, DataType.UINT32,
            DataType.INT64, DataType.UINT64, DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64, DataType.BFLOAT16);

    /** Checks ranges; the messages say which flag is wrong. */
    PerfOptions {
        ops = List.copyOf(ops);
        types = List.copyOf(types);
        args = List.copyOf(args);
        if (ops.isEmpty() || types.isEmpty()) {
            throw new IllegalArgumentException("at least one op and one data type are needed");
        }
        if (iters < 1) {
            throw new IllegalArgumentException("-n/--iters must be at least 1, got " + iters);
        }
        if (warmupIters < 0) {
            throw new IllegalArgumentException("-w/--warmup_iters must not be negative, got " + warmupIters);
        }
        if (check < 0) {
            throw new IllegalArgumentException("-c/--check must not be negative, got " + check);
        }
        if (average < 0 || average > 3) {
            throw new IllegalArgumentException("-a/--average must be 0 (rank 0), 1 (mean), 2 (min) or 3 (max), got " + average);
        }
        if (blocking < 0 || blocking > 3) {
            throw new IllegalArgumentException("-z/--blocking must be 0, 1, 2 or 3, got " + blocking);
        }
        if (pairs < 0 || (pairs > 0 && median)) {
            throw new IllegalArgumentException("--timing paired times both methods: " + pairs + " pairs with median set");
        }
        if (root < ALL_ROOTS) {
            throw new IllegalArgumentException("-r/--root must be a rank or 'all' (-1), got " + root);
        }
        // Throws for sweeps that would never end.
        SizeSweep.sizes(minBytes, maxBytes, stepBytes, stepFactor);
    }

    /** The sizes measured, in order. */
    List<Long> sizes() {
        return SizeSweep.sizes(minBytes, maxBytes, stepBytes, stepFactor);
    }

    /** Parses -o: one op name or "all". */
    static List<ReduceOp> parseOps(String text) {
        String t = text.trim().toLowerCase(Locale.ROOT);
        if (t.equals("all")) {
            return ALL_OPS;
        }
        if (t.equals("mulsum")) {
            throw new IllegalArgumentException("-o mulsum (NCCL's pre-multiplied sum) is not supported by jccl;"
                    + " use sum, prod, min, max, avg or all");
        }
        return List.of(ReduceOp.parse(t));
    }

    /** Parses -d: one type name (nccl-tests' or jccl's) or "all". */
    static List<DataType> parseTypes(String text) {
        return text.trim().equalsIgnoreCase("all") ? ALL_TYPES : List.of(DataType.parse(text));
    }

    /** Parses -r: a rank, or "all"/-1 for every rank in turn. */
    static int parseRoot(String text) {
        String t = text.trim();
        if (t.equalsIgnoreCase("all")) {
            return ALL_ROOTS;
        }
        try {
            return Integer.parseInt(t);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("-r/--root takes a rank number or 'all', got '" + text + "'");
        }
    }

    /** One nccl-tests TimeTest: a (type, op, root) combination; op is null and root NO_ROOT where the collective has none. */
    interface TimeTest {
        void run(DataType type, ReduceOp op, int root);
    }

    /**
     * Calls {@code test} for every (type, op, root) these options ask for, in nccl-tests' order
     * (types, then ops, then roots; -r all walks every rank).
     *
     * @throws IllegalArgumentException when -r names a rank the job does not have
     */
    void forEachTimeTest(int nranks, TimeTest test) {
        Collective c = collective();
        if (c.hasRoot() && root() >= nranks) {
            throw new IllegalArgumentException("-r/--root " + root() + " is not a rank of this " + nranks + "-rank job");
        }
        List<ReduceOp> opList = c.hasOp() ? ops() : java.util.Collections.singletonList(null);
        for (DataType t : types()) {
            for (ReduceOp op : opList) {
                if (!c.hasRoot()) {
                    test.run(t, op, ResultRow.NO_ROOT);
                } else if (root() == ALL_ROOTS) {
                    for (int r = 0; r < nranks; r++) {
                        test.run(t, op, r);
                    }
                } else {
                    test.run(t, op, root());
                }
            }
        }
    }
}
