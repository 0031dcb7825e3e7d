package org.jccl.cli.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import org.jccl.cli.plot.BusBwChart;
import org.jccl.cli.plot.PerfRunReader;

/** {@code jccl perf --plot FILE}: rank 0 draws the run's report (what {@code -J} writes) when the run is over. */
final class PerfPlot {
    private PerfPlot() {
    }

    /**
     * Draws {@code report} (a {@link JsonReport} document) into {@code file}.
     *
     * @return true when written; false after printing why not to {@code err}
     */
    static boolean draw(String report, Path file, PrintWriter err) {
        try {
            BusBwChart.write(List.of(PerfRunReader.parse(report, "this run")), BusBwChart.Options.defaults(), file);
            return true;
        } catch (IOException | IllegalArgumentException e) {
            err.println("jccl perf: could not draw the plot to " + file + ": " + e.getMessage()
                    + " (add -J FILE to keep the numbers and draw them later with jccl plot)");
            err.flush();
            return false;
        }
    }
}
