package org.jccl.cli.perf;

import java.util.ArrayList;
import java.util.List;
import org.jccl.Jccl;

/**
 * The text report in nccl-tests 2.19.6's layout, line for line, so that
 * {@code diff <(all_reduce_perf ...) <(jccl perf all_reduce ...)} lines up column by column.
 *
 * <p>The format strings are nccl-tests' ({@code src/util.cu}): the preamble
 * {@code "%12li  %12li  %8s  %6s  %6s"}, each variant {@code "  %7s  %6s  %6s  %6g"} with numbers
 * squeezed into their width by {@link CFormat#fit}, {@code "    N/A"} when unchecked, and the
 * header lines with their trailing blanks. The first header line names jccl instead of the
 * nccl-tests and NCCL versions, and the device lines describe host memory.
 */
final class Table {
    private Table() {
    }

    /** The nccl-tests version whose layout this reproduces. */
    static final String NCCL_TESTS_LAYOUT = "2.19.6";

    /**
     * The run-parameter and device block printed before the table (nccl-tests' writeDeviceReport).
     */
    static List<String> deviceReport(PerfOptions o, List<RankInfo> ranks) {
        return deviceReport(o, ranks, 1, null);
    }

    /**
     * The device block of a run that drives {@code nGpus} GPUs per process (nccl-tests' -g), with a
     * "# Backend: ..." line after the parameters when {@code backend} is not null.
     */
    static List<String> deviceReport(PerfOptions o, List<RankInfo> ranks, int nGpus, String backend) {
        List<String> l = new ArrayList<>();
        l.add("# jccl perf version " + Jccl.version() + " (nccl-tests " + NCCL_TESTS_LAYOUT + " layout) java="
                + Runtime.version());
        l.add("# Collective test starting: " + o.collective().programName());
        boolean factor = o.stepFactor() > 1;
        l.add("# nThread 1 nGpus " + nGpus + " minBytes " + o.minBytes() + " maxBytes " + o.maxBytes() + " step: "
                + (factor ? o.stepFactor() : o.stepBytes()) + "(" + (factor ? "factor" : "bytes") + ") warmup iters: "
                + o.warmupIters() + " iters: " + o.iters() + " agg iters: 1 validation: " + o.check()
                + " graph: 0 unalign: 0");
        switch (o.blocking()) {
            case 1 -> l.add("# Blocking Enabled: wait and barrier after each inner iteration (-m) ");
            case 2 -> l.add("# Blocking Enabled: wait after each inner iteration (-m), no barrier ");
            case 3 -> l.add("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier ");
            default -> {
            }
        }
        if (backend != null) {
            l.add("# Backend: " + backend);
        }
        l.add("#");
        l.add("# Using devices");
        for (RankInfo r : ranks) {
            l.add(deviceLine(r));
        }
        return l;
    }

    /** nccl-tests' {@code "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s"}. */
    static String deviceLine(RankInfo r) {
        return "#  Rank " + CFormat.right(Integer.toString(r.rank()), 2) + " Group  0 Pid "
                + CFormat.right(Long.toString(r.pid()), 6) + " on " + CFormat.right(r.host(), 10) + " device "
                + CFormat.right(Integer.toString(r.device()), 2) + " [" + r.busId() + "] " + r.description();
    }

    /** The three column-title lines after a "#" line (nccl-tests' writeResultHeader). */
    static List<String> resultHeader() {
        return List.of(
                "#",
                "# " + blanks(10) + "  " + blanks(12) + "  " + blanks(8) + "  " + blanks(6) + "  " + blanks(6)
                        + "           out-of-place                       in-place          ",
                "# " + cols("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                        "time", "algbw", "busbw", "#wrong") + " ",
                "# " + cols("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
                        "(us)", "(GB/s)", "(GB/s)", "") + " ");
    }

    /** One results line. */
    static String row(ResultRow r) {
        StringBuilder b = new StringBuilder(128);
        b.append(CFormat.right(Long.toString(r.sizeBytes()), 12)).append("  ")
                .append(CFormat.right(Long.toString(r.count()), 12)).append("  ")
                .append(CFormat.right(r.type(), 8)).append("  ")
                .append(CFormat.right(r.redop(), 6)).append("  ")
                .append(CFormat.right(Integer.toString(r.root()), 6));
        body(b, r.outOfPlace());
        body(b, r.inPlace());
        return b.toString();
    }

    private static void body(StringBuilder b, ResultRow.Measurement m) {
        b.append("  ").append(CFormat.fit(m.timeUs(), 7))
                .append("  ").append(CFormat.fit(m.algBw(), 6))
                .append("  ").append(CFormat.fit(m.busBw(), 6));
        if (m.checked()) {
            b.append("  ").append(CFormat.right(CFormat.g(m.wrong()), 6));
        } else {
            b.append("    N/A");
        }
    }

    /**
     * The lines after the table (nccl-tests' writeResultFooter, finalizeFooter and writeErrors):
     * out-of-bounds count, average bus bandwidth, the "concluded" line, "#" and an empty line.
     *
     * @param errors checks (rank by variant) that found wrong data, summed over ranks
     * @param avgBusBw mean busbw over every out-of-place and in-place measurement
     * @param minBusBw NCCL_TESTS_MIN_BW, or a negative value when it is not set
     */
    static List<String> footer(long errors, double avgBusBw, double minBusBw, Collective c) {
        String bwVerdict = minBusBw < 0 ? "" : (avgBusBw < minBusBw * 0.9 ? "FAILED" : "OK");
        return List.of(
                "# " + CFormat.left("Out of bounds values", 20) + " : " + errors + " " + (errors != 0 ? "FAILED" : "OK"),
                "# " + CFormat.left("Avg bus bandwidth", 20) + " : " + CFormat.g(avgBusBw) + " " + bwVerdict,
                "#",
                "# Collective test concluded: " + c.programName(),
                "#",
                "");
    }

    private static String cols(String size, String count, String type, String redop, String root, String t1, String a1,
            String b1, String w1, String t2, String a2, String b2, String w2) {
        return CFormat.right(size, 10) + "  " + CFormat.right(count, 12) + "  " + CFormat.right(type, 8) + "  "
                + CFormat.right(redop, 6) + "  " + CFormat.right(root, 6) + "  " + CFormat.right(t1, 7) + "  "
                + CFormat.right(a1, 6) + "  " + CFormat.right(b1, 6) + "  " + CFormat.right(w1, 6) + "  "
                + CFormat.right(t2, 7) + "  " + CFormat.right(a2, 6) + "  " + CFormat.right(b2, 6) + "  "
                + CFormat.right(w2, 6);
    }

    private static String blanks(int n) {
        return " ".repeat(n);
    }
}
