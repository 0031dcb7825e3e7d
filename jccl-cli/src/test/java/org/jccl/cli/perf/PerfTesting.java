package org.jccl.cli.perf;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.Writer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/** Helpers shared by the perf tests: options with small defaults, and running every rank on its own thread. */
final class PerfTesting {
    private PerfTesting() {
    }

    /** Mutable option set, so a test changes just what it is about. */
    static final class Opts {
        Collective collective = Collective.ALL_REDUCE;
        long min = 8;
        long max = 4096;
        long step = 1 << 20;
        long factor = 4;
        int iters = 3;
        int warmup = 1;
        int check = 1;
        List<ReduceOp> ops = List.of(ReduceOp.SUM);
        List<DataType> types = List.of(DataType.FLOAT32);
        int root = 0;
        int average = 1;
        int blocking = 0;
        Path json;
        double minBw = -1;

        Opts coll(Collective c) {
            collective = c;
            return this;
        }

        PerfOptions build() {
            return new PerfOptions(collective, min, max, step, factor, iters, warmup, check, ops, types, root, average,
                    blocking, json, minBw, List.of(collective.ncclName()), 0, false);
        }
    }

    /**
     * What one run printed and returned.
     *
     * @param out rank 0's standard output
     * @param err every rank's error output
     * @param codes exit code per rank
     */
    record Run(String out, String err, int[] codes) {
        List<String> rows() {
            return out.lines().filter(l -> !l.startsWith("#") && !l.isBlank()).toList();
        }

        int code() {
            for (int c : codes) {
                if (c != codes[0]) {
                    throw new AssertionError("ranks disagree on the exit code: " + java.util.Arrays.toString(codes));
                }
            }
            return codes[0];
        }
    }

    /** Runs {@link PerfRunner#run} on every communicator, one thread each, and waits (at most 60 s). */
    static Run runRanks(List<Communicator> comms, PerfOptions o) throws Exception {
        int n = comms.size();
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        PrintWriter errWriter = new PrintWriter(err, true);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Future<Integer>> results = new ArrayList<>();
            for (Communicator c : comms) {
                PrintWriter rankOut = c.rank() == 0 ? new PrintWriter(out, true) : new PrintWriter(Writer.nullWriter());
                results.add(pool.submit(() -> PerfRunner.run(c, o, rankOut, errWriter, Map.of("JCCL_AUTH_TOKEN", "secret",
                        "JCCL_DEBUG", "WARN", "HOME", "/root"))));
            }
            int[] codes = new int[n];
            for (int r = 0; r < n; r++) {
                codes[r] = results.get(r).get(60, TimeUnit.SECONDS);
            }
            return new Run(out.toString(), err.toString(), codes);
        } finally {
            pool.shutdownNow();
        }
    }

    /** The whitespace-separated fields of a results line. */
    static String[] fields(String row) {
        return row.trim().split("\\s+");
    }
}
