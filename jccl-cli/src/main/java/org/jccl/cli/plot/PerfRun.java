package org.jccl.cli.plot;

import java.util.List;
import java.util.Objects;

/**
 * One measured run as the plot sees it: where it came from, what it measured, and its bus-bandwidth
 * curve(s), one per (data type, operator, root) combination the run swept (usually one).
 *
 * @param source the file it was read from (for messages), or a description such as "this run"
 * @param collective nccl-tests' name of the collective ("all_reduce", ...)
 * @param label the legend text made from the run's metadata (implementation, ranks, device, host,
 *     date, settings); {@code jccl plot --label} replaces it
 * @param curves the curves, in the order the run measured them
 */
public record PerfRun(String source, String collective, String label, List<Curve> curves) {

    public PerfRun {
        Objects.requireNonNull(source, "source");
        Objects.requireNonNull(collective, "collective");
        Objects.requireNonNull(label, "label");
        curves = List.copyOf(curves);
    }

    /** This run with another legend text. */
    public PerfRun withLabel(String newLabel) {
        return new PerfRun(source, collective, newLabel, curves);
    }

    /**
     * The rows of one (type, operator, root) combination.
     *
     * @param type nccl-tests' type name ("float", "half", ...), or "" when the source does not say
     * @param redop nccl-tests' operator name ("sum", ...), "none" for collectives without one, or ""
     * @param root the root column as written ("-1" or a rank), or ""
     * @param points one per message size, in the order measured
     */
    public record Curve(String type, String redop, String root, List<Point> points) {
        public Curve {
            points = List.copyOf(points);
        }

        /** "float sum", "float sum root 2": what tells this curve from the run's others. */
        String describe() {
            StringBuilder b = new StringBuilder(type);
            if (!redop.isEmpty() && !redop.equals("none")) {
                b.append(b.isEmpty() ? "" : " ").append(redop);
            }
            if (!root.isEmpty() && !root.equals("-1")) {
                b.append(b.isEmpty() ? "" : " ").append("root ").append(root);
            }
            return b.toString();
        }
    }

    /**
     * One row.
     *
     * @param bytes the message size (nccl-tests' size column)
     * @param outOfPlace bus bandwidth out of place, GB/s (NaN when not measured)
     * @param inPlace bus bandwidth in place, GB/s (NaN when not measured)
     */
    public record Point(long bytes, double outOfPlace, double inPlace) {
    }
}
