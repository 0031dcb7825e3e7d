package org.jccl.cli.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.Buffer;
import org.jccl.Communicator;

/**
 * One rank's whole {@code jccl perf} run on an existing communicator: device report, table,
 * footer, JSON file. Rank 0 prints and writes; the other ranks take part silently.
 *
 * <p>Used by {@link PerfCommand} for a rank started by a launcher, and by tests with the
 * in-process ranks of {@code Jccl.initLocal(n)} (one thread per rank).
 */
final class PerfRunner {
    /** Exit code: every check passed. */
    static final int OK = 0;
    /** Exit code: wrong results (or the average busbw below NCCL_TESTS_MIN_BW), or a failed run. */
    static final int FAILED = 1;
    /** Exit code: bad arguments (same as picocli's usage errors). */
    static final int USAGE = 2;

    private PerfRunner() {
    }

    /**
     * Runs the benchmark on {@code comm}; every rank of the job must call this with the same options.
     *
     * @param out where rank 0 prints the report (unused on other ranks)
     * @param env the environment, for the JSON report's "env" list
     * @return {@link #OK}, {@link #FAILED} or {@link #USAGE}; the same on every rank
     * @throws org.jccl.JcclException when communication fails
     */
    static int run(Communicator comm, PerfOptions o, PrintWriter out, PrintWriter err, Map<String, String> env) {
        int rank = comm.rank();
        boolean printer = rank == 0;
        Collective c = o.collective();

        // Every rank must agree on whether to go on: a rank that stopped alone would leave the
        // others waiting in the first collective.
        String problem = null;
        if (c.hasRoot() && o.root() >= comm.size()) {
            problem = "-r/--root " + o.root() + " is not a rank of this " + comm.size() + "-rank job";
        }
        Path json = null;
        if (printer && problem == null && o.jsonFile() != null) {
            try {
                json = JsonReport.create(o.jsonFile());
            } catch (IOException | RuntimeException e) {
                problem = "cannot write the JSON report to " + o.jsonFile() + ": " + e;
            }
        }
        int[] verdict = {problem == null ? 0 : 1};
        comm.allReduce(verdict, org.jccl.ReduceOp.MAX);
        if (verdict[0] != 0) {
            if (problem != null && printer) {
                err.println("jccl perf: " + problem);
                err.flush();
            }
            return USAGE;
        }
        if (json != null) {
            out.println("# Writing JSON output to " + json);
        }
        if (printer && o.plotFile() != null) {
            out.println("# Drawing busbw against size to " + o.plotFile());
        }

        List<RankInfo> ranks = gatherRankInfo(comm);
        if (printer) {
            Table.deviceReport(o, ranks).forEach(out::println);
            Table.resultHeader().forEach(out::println);
            out.flush();
        }

        // Buffers are allocated on every rank before any timed collective; a rank short of memory
        // must stop all of them, not leave them waiting for it.
        Benchmark bench = null;
        String allocProblem = null;
        try {
            bench = new Benchmark(comm, o);
        } catch (IllegalStateException e) {
            allocProblem = e.getMessage();
        }
        int[] allocated = {allocProblem == null ? 0 : 1};
        comm.allReduce(allocated, org.jccl.ReduceOp.MAX);
        if (allocated[0] != 0) {
            if (allocProblem != null) {
                err.println("jccl perf: " + allocProblem);
                err.flush();
            }
            if (bench != null) {
                bench.close();
            }
            return FAILED;
        }

        // The plot is drawn from the report, exactly what -J writes.
        JsonReport report = json != null || (printer && o.plotFile() != null) ? new JsonReport() : null;
        long errors;
        double avgBusBw;
        try (Benchmark b = bench) {
            b.runAll(row -> {
                String paired = b.takePairedNote();
                if (printer) {
                    out.println(Table.row(row));
                    if (paired != null) {
                        out.println(paired);
                    }
                    out.flush();
                    if (report != null) {
                        report.add(row, o.iters());
                    }
                }
            });
            long[] e = {b.localErrors()};
            comm.allReduce(e, org.jccl.ReduceOp.SUM);
            errors = e[0];
            avgBusBw = b.averageBusBw();
        }
        if (printer) {
            Table.footer(errors, avgBusBw, o.minBusBw(), c).forEach(out::println);
            out.flush();
            if (report != null) {
                String document = report.document(o, ranks, env, errors, avgBusBw, o.minBusBw(), List.of());
                if (json != null) {
                    try {
                        JsonReport.write(json, document);
                    } catch (IOException e) {
                        err.println("jccl perf: could not write " + json + ": " + e);
                        err.flush();
                        return FAILED;
                    }
                }
                if (o.plotFile() != null && !PerfPlot.draw(document, o.plotFile(), err)) {
                    return FAILED;
                }
            }
        }
        boolean bwFailed = o.minBusBw() >= 0 && avgBusBw < o.minBusBw() * 0.9;
        return errors != 0 || bwFailed ? FAILED : OK;
    }

    /** Every rank's device line, in rank order: an all-gather of fixed-size records. */
    static List<RankInfo> gatherRankInfo(Communicator comm) {
        byte[] mine = RankInfo.local(comm.rank()).encode();
        byte[] all = new byte[RankInfo.RECORD_BYTES * comm.size()];
        comm.allGather(Buffer.of(mine), Buffer.of(all));
        List<RankInfo> ranks = new ArrayList<>(comm.size());
        for (int r = 0; r < comm.size(); r++) {
            ranks.add(RankInfo.decode(all, r * RankInfo.RECORD_BYTES));
        }
        return ranks;
    }
}
