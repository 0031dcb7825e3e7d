package org.jccl.cli.plot;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code jccl plot a.json b.json -o busbw.svg}: bus bandwidth against message size from the
 * {@code -J} reports of {@code jccl perf} (and of nccl-tests, and the CPU anchors' output), one line
 * per run, so that jccl can be seen beside NCCL or an anchor. Each line's legend is made from its
 * run's metadata (implementation and version, ranks and device, host, date, settings); {@code --label}
 * replaces it.
 *
 * <p>Exit codes: 0 written; 1 an input that cannot be drawn (missing, not a report, different
 * collectives) or the file cannot be written; 2 usage.
 */
@Command(name = "plot", sortOptions = false, usageHelpAutoWidth = true,
        description = {"Draws bus bandwidth against message size, one line per run, from jccl perf -J reports",
                "(CPU or GPU, --backend jccl or nccl), nccl-tests -J reports or the CPU anchors' output.",
                "Example: jccl plot jccl.json nccl.json -o busbw.svg"},
        footer = {"", "Exit codes: 0 written, 1 an input that cannot be drawn or an unwritable output, 2 usage error."})
public final class PlotCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Parameters(paramLabel = "FILE", arity = "1..*",
            description = "runs to draw, one line each: jccl perf -J reports, nccl-tests -J reports, anchor output")
    List<Path> files;

    @Option(names = {"-o", "--output"}, paramLabel = "OUT", required = true,
            description = "the picture to write, .svg or .png (replaced if it exists)")
    Path output;

    @Option(names = "--label", paramLabel = "TEXT",
            description = "legend text of the n-th FILE instead of the one made from its metadata (repeat in FILE order)")
    List<String> labels = new ArrayList<>();

    @Option(names = "--in-place", description = "plot the in-place bus bandwidth (default: out-of-place)")
    boolean inPlace;

    @Option(names = "--y", paramLabel = "auto|log|linear", defaultValue = "auto",
            description = "y axis: log, linear, or auto = log when the values span more than two decades (default: ${DEFAULT-VALUE})")
    String y;

    @Option(names = "--title", paramLabel = "TEXT", description = "title instead of \"<collective>: bus bandwidth (...)\"")
    String title;

    @Option(names = {"-h", "--help"}, usageHelp = true, description = "show this help and exit")
    boolean help;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        BusBwChart.YScale scale = parseScale(y);
        if (labels.size() > files.size()) {
            throw new CommandLine.ParameterException(spec.commandLine(), "jccl plot: " + labels.size() + " --label for "
                    + files.size() + " FILE(s): give at most one label per file, in the same order");
        }
        try {
            PlotOutput.checkWritable(output);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "jccl plot: " + e.getMessage(), e);
        }
        try {
            List<PerfRun> runs = new ArrayList<>();
            for (int i = 0; i < files.size(); i++) {
                PerfRun r = PerfRunReader.read(files.get(i));
                runs.add(i < labels.size() ? r.withLabel(labels.get(i)) : r);
            }
            BusBwChart.write(runs, new BusBwChart.Options(inPlace, scale, title), output);
            out.println("jccl plot: wrote " + output + " (" + runs.size() + (runs.size() == 1 ? " run" : " runs") + ")");
            out.flush();
            return 0;
        } catch (PlotInputException e) {
            err.println("jccl plot: " + e.getMessage());
        } catch (IOException e) {
            err.println("jccl plot: cannot write " + output + ": " + e.getMessage());
        }
        err.flush();
        return 1;
    }

    private BusBwChart.YScale parseScale(String value) {
        try {
            return BusBwChart.YScale.valueOf(value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "jccl plot: --y '" + value + "' is not auto, log or linear");
        }
    }
}
