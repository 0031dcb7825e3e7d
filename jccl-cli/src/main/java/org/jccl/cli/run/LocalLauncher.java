package org.jccl.cli.run;

import java.io.PrintStream;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jccl.internal.topo.CpuBinding;

/**
 * Starts the ranks of a job as processes of this host: the engine of {@code jccl run} and of
 * {@code jccl perf -np N}.
 *
 * <p>Each rank gets the parent's environment plus the jccl job identity ({@code JCCL_COMM_ID},
 * {@code JCCL_RANK}, {@code JCCL_WORLD_SIZE}, {@code JCCL_LOCAL_RANK}, {@code JCCL_LOCAL_SIZE},
 * {@code JCCL_AUTH_TOKEN}); the variables of other launchers (torchrun, Open MPI, Slurm) are removed so
 * that a rank started from inside such a job cannot mistake the outer job's identity for its own.
 * Every output line of a rank is copied to our stdout or stderr with a {@code "[rank] "} prefix, one
 * whole line at a time; a JVM that jccl started with the Vector API module loses its boot-time
 * {@code "WARNING: Using incubator modules: jdk.incubator.vector"} line. The job fails fast: when one rank exits non-zero the others are stopped.
 *
 * <p>This class is the entry point and checks the arguments; {@code LocalJob} runs one job, with
 * {@code RankEnvironment} (the job identity), {@code RankBinding} (CPU binding), {@code RankOutput}
 * (output relaying) and {@code RankProcesses} (stopping ranks); {@code JavaCommand} composes a
 * rank's java command line (all package-private, in this package).
 *
 * <p>Thread safety: every method may be called from any thread; each {@code launch} call owns its
 * processes and threads.
 */
public final class LocalLauncher {

    /** Exit code when {@code --timeout} expires, as coreutils' timeout(1) uses. */
    public static final int EXIT_TIMEOUT = 124;

    /** Exit code when a rank cannot be started at all, as a shell uses for "command not found". */
    public static final int EXIT_CANNOT_START = 127;

    private LocalLauncher() {
    }

    /**
     * Starts {@code np} copies of {@code command} on this host with the jccl job environment (JCCL_COMM_ID,
     * JCCL_RANK, JCCL_WORLD_SIZE, JCCL_LOCAL_RANK, JCCL_LOCAL_SIZE, JCCL_AUTH_TOKEN) plus {@code extraEnv},
     * prefixes each output line with its rank, stops the others when one fails, and returns the exit code
     * (0 when all succeeded). Same as {@link #launch(int, List, Map, PrintStream, PrintStream, Duration)}
     * without a time limit.
     */
    public static int launch(int np, List<String> command, Map<String, String> extraEnv, PrintStream out, PrintStream err) {
        return launch(np, command, extraEnv, out, err, null);
    }

    /**
     * Starts {@code np} copies of {@code command} on this host and waits for them.
     *
     * @param np number of ranks, at least 1
     * @param command program and arguments, the same for every rank (see {@link #javaCommand(String)})
     * @param extraEnv variables set for every rank after the job identity (so they may override it); a
     *        null value removes the variable
     * @param out receives each rank's stdout lines, prefixed {@code "[rank] "}
     * @param err receives each rank's stderr lines, prefixed, and the launcher's own messages
     * @param timeout the whole job's time limit, or null (or zero) for none
     * @return 0 when every rank exited 0; the exit code of the first rank that failed (128 + signal
     *         when it was killed by a signal); {@value #EXIT_TIMEOUT} when the time limit expired;
     *         {@value #EXIT_CANNOT_START} when a rank could not be started
     * @throws IllegalArgumentException when {@code np < 1} or {@code command} is empty
     */
    public static int launch(int np, List<String> command, Map<String, String> extraEnv, PrintStream out, PrintStream err,
            Duration timeout) {
        return launch(np, command, extraEnv, out, err, timeout, Binding.AUTO);
    }

    /**
     * Where ranks may run ({@link CpuBinding} has the rules; docs/PERFORMANCE.md the measurements).
     */
    public enum Binding {
        /**
         * A GPU rank (the host has NVIDIA GPUs and jccl's GPU rule gives the rank one) on every CPU of its
         * GPU's NUMA node; a CPU rank on a core of its own when every rank can have one (two ranks that spin
         * waiting for each other must not share a core), else not bound.
         */
        AUTO,
        /** Rank r on the r-th allowed CPU (ranks beyond the CPU count wrap around). */
        CORE,
        /** A GPU rank on its GPU's NUMA node (as auto); CPU ranks in blocks over the NUMA nodes. */
        NUMA,
        /** No binding: the scheduler places ranks. */
        NONE;

        CpuBinding.Mode mode() {
            return CpuBinding.Mode.valueOf(name());
        }
    }

    /**
     * {@link #launch(int, List, Map, PrintStream, PrintStream, Duration)} with an explicit CPU binding.
     *
     * @throws IllegalArgumentException when {@code binding} is CORE but taskset is not installed
     */
    public static int launch(int np, List<String> command, Map<String, String> extraEnv, PrintStream out, PrintStream err,
            Duration timeout, Binding binding) {
        Objects.requireNonNull(binding, "binding");
        if ((binding == Binding.CORE || binding == Binding.NUMA) && RankBinding.taskset() == null) {
            throw new IllegalArgumentException("--bind-to " + binding.name().toLowerCase(java.util.Locale.ROOT) + " needs taskset (Debian"
                    + " package util-linux), which is not on PATH");
        }
        if (np < 1) {
            throw new IllegalArgumentException("the number of ranks must be at least 1, got " + np);
        }
        Objects.requireNonNull(command, "command");
        if (command.isEmpty()) {
            throw new IllegalArgumentException("no command to run: give a Java main class, a .jar file or a program");
        }
        Objects.requireNonNull(out, "out");
        Objects.requireNonNull(err, "err");
        Map<String, String> extra = extraEnv == null ? Map.of() : extraEnv;
        return new LocalJob(np, List.copyOf(command), extra, out, err, timeout, binding).run();
    }

    /**
     * The command line that starts a JVM on jccl's own classpath (java binary, flags, -cp) running
     * {@code mainClass}: the java of the running JVM, {@code --enable-native-access=ALL-UNNAMED} (jccl's
     * optional native modules use the FFM API), {@code --add-modules jdk.incubator.vector} (the Vector
     * API reduction kernels), and a classpath of the running JVM's classpath plus the
     * jars next to the jccl-cli jar ({@code jccl-cli/target/lib/*}).
     */
    public static List<String> javaCommand(String mainClass) {
        return JavaCommand.javaCommand(mainClass, null);
    }

    /**
     * {@link #javaCommand(String)} with {@code extraClasspath} (path-separator list, may be null) added
     * after jccl's own jars.
     */
    public static List<String> javaCommand(String mainClass, String extraClasspath) {
        return JavaCommand.javaCommand(mainClass, extraClasspath);
    }
}
