package org.jccl.cli.run;

import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code jccl run -np N [--cp CLASSPATH] [--timeout SECONDS] [--] TARGET [ARGS...]}: starts N ranks of a
 * program on this host with the jccl job environment, through {@link LocalLauncher}.
 *
 * <p>TARGET is a {@code .jar} file (run with {@code java -jar}), a package-qualified Java class name that
 * is not an existing file (run on jccl's classpath plus {@code --cp}), or any other program, run as is.
 */
@Command(name = "run", mixinStandardHelpOptions = true, sortOptions = false,
        modelTransformer = RunCommand.StopAtTarget.class,
        header = "Start N ranks of a Java class, a jar or a program on this host.",
        description = {
            "Start N ranks of a program on this host, as processes that find each other through the environment"
                    + " (JCCL_COMM_ID, JCCL_RANK, JCCL_WORLD_SIZE, JCCL_LOCAL_RANK, JCCL_LOCAL_SIZE and a fresh"
                    + " JCCL_AUTH_TOKEN per run), so that Jccl.init(Config.fromEnvironment()) joins them.",
            "Each output line is prefixed with its rank, e.g. \"[2] \". When one rank fails the others are stopped"
                    + " and its exit code is returned.",
            "",
            "TARGET is one of:",
            "  app.jar            run as: java -jar app.jar ARGS",
            "  com.example.Main   a Java class: run on jccl's classpath plus --cp",
            "  program            anything else, run as is (e.g. sh -c 'echo $JCCL_RANK')",
            ""},
        footer = {
            "",
            "Exit status: 0 when every rank exited 0; else the first failing rank's code (128+signal when killed by"
                    + " a signal); 124 on --timeout; 127 when a rank cannot be started; 2 for a usage error.",
            "",
            "Examples:",
            "  jccl run -np 4 --cp target/classes com.example.Train --epochs 3",
            "  jccl run -np 2 -- sh -c 'echo rank $JCCL_RANK of $JCCL_WORLD_SIZE'"})
public final class RunCommand implements Callable<Integer> {

    /** A package-qualified Java class name: at least one dot, Java identifier characters. */
    static final Pattern CLASS_NAME = Pattern.compile("[a-zA-Z_$][\\w$]*(\\.[a-zA-Z_$][\\w$]*)+");

    @Spec
    CommandSpec spec;

    @Option(names = {"-np", "--np"}, required = true, paramLabel = "N",
            description = "number of ranks (processes) to start on this host, at least 1")
    int np;

    @Option(names = {"--cp", "-cp", "--class-path"}, paramLabel = "CLASSPATH",
            description = "classpath of a Java class TARGET, added after jccl's own jars (as for java -cp)")
    String classpath;

    @Option(names = "--bind-to", paramLabel = "WHAT", defaultValue = "auto",
            description = BIND_TO_HELP)
    String bindTo;

    /** --bind-to's help, shared with jccl perf -np. */
    public static final String BIND_TO_HELP = "auto: a GPU rank (NVIDIA GPUs on this host, and jccl's GPU rule gives it one) on every"
            + " CPU of its GPU's NUMA node, a CPU rank on a core of its own when there are no more ranks than CPUs;"
            + " numa: GPU ranks as auto, CPU ranks in blocks over the NUMA nodes; core: rank r on the r-th CPU, always;"
            + " none: let the scheduler place ranks. JCCL_DEBUG=INFO prints each rank's binding and why (default: ${DEFAULT-VALUE})";

    /** Parses a --bind-to value. */
    public static LocalLauncher.Binding parseBinding(CommandLine cl, String value) {
        try {
            return LocalLauncher.Binding.valueOf(value.trim().toUpperCase(java.util.Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new ParameterException(cl, "--bind-to must be auto, numa, core or none, got '" + value + "'");
        }
    }

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "0",
            description = "stop every rank and exit 124 after this many seconds (0, the default: no limit)")
    long timeoutSeconds;

    @Parameters(index = "0", paramLabel = "TARGET", description = "a .jar file, a Java main class, or a program")
    String target;

    @Parameters(index = "1..*", paramLabel = "ARGS", description = "arguments passed to every rank")
    List<String> args = new ArrayList<>();

    @Override
    public Integer call() {
        if (np < 1) {
            throw new ParameterException(spec.commandLine(),
                    "-np must be at least 1 (the number of ranks to start), got " + np);
        }
        if (timeoutSeconds < 0) {
            throw new ParameterException(spec.commandLine(),
                    "--timeout must be 0 (no limit) or a number of seconds, got " + timeoutSeconds);
        }
        List<String> command = commandFor(target, args, classpath);
        Duration timeout = timeoutSeconds == 0 ? null : Duration.ofSeconds(timeoutSeconds);
        LocalLauncher.Binding binding = parseBinding(spec.commandLine(), bindTo);
        try {
            return LocalLauncher.launch(np, command, Map.of(), System.out, System.err, timeout, binding);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage());
        }
    }

    /** What kind of program a TARGET names. */
    enum Kind { JAR, JAVA_CLASS, COMMAND }

    static Kind kindOf(String target) {
        if (target.endsWith(".jar")) {
            return Kind.JAR;
        }
        return CLASS_NAME.matcher(target).matches() && !exists(target) ? Kind.JAVA_CLASS : Kind.COMMAND;
    }

    private static boolean exists(String path) {
        try {
            return Files.exists(Path.of(path));
        } catch (InvalidPathException e) {
            return false;
        }
    }

    /** The command line every rank runs for {@code target} and {@code args}. */
    List<String> commandFor(String target, List<String> args, String classpath) {
        List<String> cmd = new ArrayList<>();
        Kind kind = kindOf(target);
        if (classpath != null && kind != Kind.JAVA_CLASS) {
            throw new ParameterException(spec.commandLine(), "--cp applies to a Java class TARGET, but '" + target + "' is "
                    + (kind == Kind.JAR ? "a jar (its classpath comes from its manifest's Class-Path)" : "a program")
                    + "; drop --cp, or name the main class instead");
        }
        switch (kind) {
            case JAR -> {
                if (!Files.isRegularFile(Path.of(target))) {
                    throw new ParameterException(spec.commandLine(), "jar file '" + target + "' not found (looked in "
                            + Path.of("").toAbsolutePath() + "); check the path, or build the jar first");
                }
                cmd.add(JavaCommand.javaBinary());
                // Like the class case: jccl's optional native modules need it, and it is harmless otherwise.
                cmd.add("--enable-native-access=ALL-UNNAMED");
                cmd.add("--add-modules"); // the Vector API reduction kernels
                cmd.add("jdk.incubator.vector");
                cmd.add("-jar");
                cmd.add(target);
            }
            case JAVA_CLASS -> cmd.addAll(LocalLauncher.javaCommand(target, classpath));
            case COMMAND -> cmd.add(target);
        }
        cmd.addAll(args);
        return cmd;
    }

    /**
     * Makes everything after TARGET an argument of the program, even when it looks like an option
     * ({@code jccl run -np 2 com.example.Main --epochs 3}), as mpirun and torchrun do.
     */
    static final class StopAtTarget implements CommandLine.IModelTransformer {
        @Override
        public CommandSpec transform(CommandSpec commandSpec) {
            commandSpec.parser().stopAtPositional(true);
            return commandSpec;
        }
    }
}
