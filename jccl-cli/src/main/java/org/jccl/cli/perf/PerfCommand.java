package org.jccl.cli.perf;

import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.cli.run.LocalLauncher;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Model.PositionalParamSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.Spec;

/**
 * {@code jccl perf <collective> [flags]}: nccl-tests' benchmark for jccl, with its flags, defaults,
 * table layout and bus-bandwidth definitions, so the two outputs can be compared line by line.
 *
 * <p>Two ways to run: with {@code -np N} this process starts N local ranks (through {@link
 * LocalLauncher}) that each run the same command without {@code -np}; without it, this process
 * is one rank of a job whose identity comes from the environment ({@code jccl run}, torchrun,
 * mpirun, srun). Rank 0 prints the report.
 *
 * <p>On GPUs ({@code --device cuda}, {@code -g N}, {@code --backend nccl}) see {@link GpuPerfRunner}:
 * without a launcher one process drives N GPUs, one thread each; under a launcher each process
 * drives the GPU of its local rank.
 *
 * <p>Exit codes: 0 success, 1 wrong results or a failed run (also: no GPU, too few GPUs, no NCCL),
 * 2 bad usage.
 */
@Command(name = "perf", sortOptions = false, usageHelpAutoWidth = true,
        description = {"Measures a collective like nccl-tests (all_reduce_perf, ...): same flags, same table, same busbw.",
                "Start N local ranks with -np N, or run one rank per process under jccl run, torchrun, mpirun or srun.",
                "On GPUs: -g N drives N GPUs from this process (one thread each); --backend nccl measures NCCL the same way."},
        footer = {"", "Sizes take K, M, G suffixes (powers of 1024). Exit codes: 0 ok, 1 wrong results or failure, 2 usage error."})
public final class PerfCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Parameters(index = "0", paramLabel = "COLLECTIVE",
            description = "all_reduce, all_gather, broadcast, reduce, reduce_scatter, alltoall or sendrecv"
                    + " (nccl-tests binary names such as all_reduce_perf work too)")
    String collective;

    @Option(names = {"-b", "--minbytes"}, paramLabel = "SIZE", defaultValue = "32M",
            description = "first message size (default: ${DEFAULT-VALUE})")
    String minBytes;

    @Option(names = {"-e", "--maxbytes"}, paramLabel = "SIZE", defaultValue = "32M",
            description = "last message size (default: ${DEFAULT-VALUE})")
    String maxBytes;

    @Option(names = {"-i", "--stepbytes"}, paramLabel = "SIZE", defaultValue = "1M",
            description = "size increment when -f is 1 (default: ${DEFAULT-VALUE})")
    String stepBytes;

    @Option(names = {"-f", "--stepfactor"}, paramLabel = "N", defaultValue = "1",
            description = "size multiplier; above 1 it replaces -i (default: ${DEFAULT-VALUE})")
    long stepFactor;

    @Option(names = {"-n", "--iters"}, paramLabel = "N", defaultValue = "20",
            description = "timed operations per size (default: ${DEFAULT-VALUE})")
    int iters;

    @Option(names = {"-w", "--warmup_iters"}, paramLabel = "N", defaultValue = "1",
            description = "warm-up operations per size, before the sweep (default: ${DEFAULT-VALUE})")
    int warmupIters;

    @Option(names = "--jit-warmup", paramLabel = "MS", defaultValue = "1500",
            description = "milliseconds of untimed measurement passes over the sweep's sizes (up to 1M) before the"
                    + " first row, continued while a rank's JIT compiler is still finishing compilations (at most 5x"
                    + " MS), so the rows time compiled code; 0 disables (default: ${DEFAULT-VALUE})")
    int jitWarmup;

    @Option(names = "--timing", paramLabel = "MODE", defaultValue = "mean",
            description = "mean: nccl-tests' average of back-to-back operations; median: median of operations timed one"
                    + " by one after a barrier, the method of the Open MPI and Gloo anchor scripts; paired: both, alternated"
                    + " " + PAIRS + " times per row (host memory only): the table shows mean's time and a '#paired' line after"
                    + " each row gives both and their ratio, so that a host whose speed drifts between runs cannot bias"
                    + " the comparison (default: ${DEFAULT-VALUE})")
    String timing;

    /** How many times --timing paired alternates the two methods per row. */
    static final int PAIRS = 3;

    @Option(names = {"-c", "--check"}, paramLabel = "N", defaultValue = "1",
            description = "check runs per measurement; 0 turns checking off (default: ${DEFAULT-VALUE})")
    int check;

    @Option(names = {"-o", "--op"}, paramLabel = "OP", defaultValue = "sum",
            description = "sum, prod, min, max, avg or all (default: ${DEFAULT-VALUE})")
    String op;

    @Option(names = {"-d", "--datatype"}, paramLabel = "TYPE", defaultValue = "float",
            description = "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all (default: ${DEFAULT-VALUE})")
    String datatype;

    @Option(names = {"-r", "--root"}, paramLabel = "RANK", defaultValue = "0",
            description = "root of broadcast and reduce; all (or -1) for every rank in turn (default: ${DEFAULT-VALUE})")
    String root;

    @Option(names = {"-a", "--average"}, paramLabel = "0-3", defaultValue = "1",
            description = "time reported: 0 rank 0's, 1 mean of ranks, 2 min, 3 max (default: ${DEFAULT-VALUE})")
    int average;

    @Option(names = {"-z", "--blocking"}, paramLabel = "0-3", defaultValue = "0",
            description = "0 issue all then wait; 1 wait and barrier after each op; 2 wait after each op;"
                    + " 3 like 1 with the barrier left out of the time (default: ${DEFAULT-VALUE})")
    int blocking;

    @Option(names = {"-J", "--output_file", "--json"}, paramLabel = "FILE",
            description = "also write the results as JSON (nccl-tests' layout); an existing file is kept and FILE.0, FILE.1, ... used")
    Path json;

    @Option(names = "--plot", paramLabel = "FILE",
            description = "also draw busbw against message size into FILE (.svg or .png; replaced if it exists); overlay"
                    + " several runs' -J files with jccl plot")
    Path plot;

    @Option(names = "-np", paramLabel = "N",
            description = "start N ranks on this host, each running this command without -np (on GPUs: one GPU per"
                    + " rank, the GPU numbered by its local rank; see --bind-to)")
    Integer np;

    @Option(names = "--bind-to", paramLabel = "WHAT", defaultValue = "auto",
            description = "with -np: where the ranks may run. " + org.jccl.cli.run.RunCommand.BIND_TO_HELP)
    String bindTo;

    @Option(names = {"-g", "--ngpus"}, paramLabel = "N",
            description = "GPUs driven by this process, one thread each, rank i on GPU i (nccl-tests' -g); implies"
                    + " --device cuda (default: CPU mode)")
    Integer ngpus;

    @Option(names = "--device", paramLabel = "cpu|cuda",
            description = "cpu: host memory; cuda: GPU memory, one GPU per process unless -g says more; a launched rank"
                    + " drives JCCL_CUDA_DEVICE if set, else the only GPU it sees, else GPU number local rank"
                    + " (default: cpu, or cuda with -g or --backend nccl)")
    String device;

    @Option(names = "--backend", paramLabel = "jccl|nccl",
            description = "on GPUs: jccl's kernels or NCCL (libnccl.so.2), measured the same way (default: jccl)")
    String backend;

    @Option(names = {"-h", "--help"}, usageHelp = true, description = "show this help and exit")
    boolean help;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        PerfOptions options = options(System.getenv());
        DeviceOptions dev = deviceOptions();
        if (dev.gpu() && options.pairs() > 0) {
            throw new CommandLine.ParameterException(spec.commandLine(), "jccl perf: --timing paired measures host memory only;"
                    + " on GPUs use --timing mean or median");
        }
        if (np != null) {
            if (np < 1) {
                throw new CommandLine.ParameterException(spec.commandLine(), "-np must be at least 1, got " + np);
            }
            if (dev.gpu()) {
                // Checked once here rather than by each of the N ranks.
                if (dev.ngpus() > 1) {
                    throw new CommandLine.ParameterException(spec.commandLine(), "jccl perf: -np " + np + " with -g/--ngpus "
                            + dev.ngpus() + " is not supported yet: use -np P (one GPU per rank) or -g N (N GPUs, one process)");
                }
                String problem = GpuPerfRunner.environmentProblem(dev);
                if (problem == null && np > 1) {
                    // Every rank gets this environment, so each needs its own GPU among those it sees (GpuMapping's rule).
                    problem = GpuPerfRunner.tooFewGpus(np, "-np " + np + " (one GPU per rank)");
                    if (problem != null) {
                        problem += ": every rank of -np gets this environment, so each needs its own GPU among the visible ones;"
                                + " to give each rank one GPU of its own, run jccl run -np " + np + " -- sh -c"
                                + " 'CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK exec bin/jccl perf ...', or make " + np + " GPUs visible";
                    }
                }
                if (problem != null) {
                    err.println("jccl perf: " + problem);
                    err.flush();
                    return PerfRunner.FAILED;
                }
            }
            List<String> command = new ArrayList<>(LocalLauncher.javaCommand("org.jccl.cli.JcclCli"));
            command.add("perf");
            command.addAll(rankArgs(spec.commandLine().getParseResult()));
            // Only rank 0 prints to stdout; dropping the launcher's "[0] " prefix there keeps the
            // report in nccl-tests' layout. stderr keeps every prefix: there the rank matters.
            try (PrintStream report = new PrintStream(new RankZeroOutput(System.out), true, StandardCharsets.UTF_8)) {
                return LocalLauncher.launch(np, command, Map.of(), report, System.err, null,
                        org.jccl.cli.run.RunCommand.parseBinding(spec.commandLine(), bindTo));
            }
        }
        Config config = Config.fromEnvironment();
        if (dev.gpu()) {
            return GpuPerfRunner.run(config, options, dev, out, err, System.getenv());
        }
        if (config.launch().isEmpty()) {
            err.println("jccl perf: this process is not part of a job (no JCCL_COMM_ID/RANK/WORLD_SIZE, torchrun, Open MPI"
                    + " or Slurm variables). Start ranks with `jccl perf -np N " + String.join(" ", options.args())
                    + "`, or run it under jccl run, torchrun, mpirun or srun.");
            err.flush();
            return PerfRunner.USAGE;
        }
        int rank = config.launch().get().rank();
        try (Communicator comm = Jccl.init(config)) {
            return PerfRunner.run(comm, options, out, err, System.getenv());
        } catch (RuntimeException e) {
            err.println("jccl perf: rank " + rank + ": " + (e.getMessage() != null ? e.getMessage() : e.toString()));
            err.flush();
            return PerfRunner.FAILED;
        }
    }

    /** Validates the flags into {@link PerfOptions}; a bad value is a usage error (exit code 2). */
    PerfOptions options(Map<String, String> env) {
        try {
            Collective c = Collective.parse(collective);
            long min = SizeSweep.parseSize(minBytes, "-b/--minbytes");
            long max = SizeSweep.parseSize(maxBytes, "-e/--maxbytes");
            long step = SizeSweep.parseSize(stepBytes, "-i/--stepbytes");
            if (stepFactor < 0) {
                throw new IllegalArgumentException("-f/--stepfactor must not be negative, got " + stepFactor);
            }
            double minBw = -1;
            String minBwText = env.get("NCCL_TESTS_MIN_BW");
            if (minBwText != null && !minBwText.isBlank()) {
                try {
                    minBw = Double.parseDouble(minBwText.trim());
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("NCCL_TESTS_MIN_BW='" + minBwText + "' is not a number (GB/s)");
                }
            }
            if (plot != null) {
                // Before anything is measured: a wrong name or folder, or missing libraries, end the run now.
                org.jccl.cli.plot.PlotOutput.checkWritable(plot);
            }
            return new PerfOptions(c, min, max, step, stepFactor, iters, warmupIters, check, PerfOptions.parseOps(op),
                    PerfOptions.parseTypes(datatype), PerfOptions.parseRoot(root), average, blocking, json, minBw,
                    rankArgs(spec.commandLine().getParseResult()), jitWarmup, parseTiming(timing), plot, pairs(timing));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "jccl perf: " + e.getMessage(), e);
        }
    }

    /** Validates -g, --device and --backend; a bad value or combination is a usage error (exit code 2). */
    DeviceOptions deviceOptions() {
        try {
            return DeviceOptions.parse(device, ngpus, backend);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "jccl perf: " + e.getMessage(), e);
        }
    }

    /**
     * The command line for each rank: every option as the user typed it, except -np. Rebuilt from
     * the parse result (long names, original values) rather than by editing the raw arguments,
     * where "-np" might also be the value of another option.
     */
    static List<String> rankArgs(ParseResult pr) {
        List<String> args = new ArrayList<>();
        for (PositionalParamSpec p : pr.matchedPositionals()) {
            args.addAll(p.originalStringValues());
        }
        for (OptionSpec o : pr.matchedOptions()) {
            if (o.longestName().equals("-np") || o.longestName().equals("--bind-to") || o.usageHelp()) {
                continue;
            }
            for (String v : o.originalStringValues()) {
                args.add(o.longestName());
                args.add(v);
            }
        }
        return args;
    }

    private static boolean parseTiming(String mode) {
        return switch (mode.trim().toLowerCase(java.util.Locale.ROOT)) {
            case "mean", "paired" -> false;
            case "median" -> true;
            default -> throw new IllegalArgumentException("--timing '" + mode + "' is not mean, median or paired");
        };
    }

    private static int pairs(String mode) {
        return mode.trim().equalsIgnoreCase("paired") ? PAIRS : 0;
    }
}
