package org.jccl.cli.run;

import static org.jccl.cli.run.LocalLauncher.EXIT_CANNOT_START;
import static org.jccl.cli.run.LocalLauncher.EXIT_TIMEOUT;

import java.io.IOException;
import java.io.PrintStream;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.jccl.cli.run.LocalLauncher.Binding;
import org.jccl.internal.topo.CpuBinding;

/**
 * One run of {@code np} processes ({@link LocalLauncher#launch}): starts each rank with its
 * environment ({@link RankEnvironment}) and binding ({@link RankBinding}), relays its output
 * ({@link RankOutput}), waits for them, and fails fast: the first rank that exits non-zero, the
 * time limit, an interrupt or a signal to the launcher stops the others ({@link RankProcesses}) and
 * ends the job with one message saying why.
 */
final class LocalJob {
    private final int np;
    private final List<String> command;
    private final Map<String, String> extraEnv;
    private final PrintStream out;
    private final PrintStream err;
    private final Duration timeout;
    private final RankProcesses procs;
    private volatile boolean shuttingDown;
    private final RankOutput output;
    private final Binding binding;

    LocalJob(int np, List<String> command, Map<String, String> extraEnv, PrintStream out, PrintStream err, Duration timeout,
            Binding binding) {
        this.binding = binding;
        this.np = np;
        this.command = command;
        this.extraEnv = extraEnv;
        this.out = out;
        this.err = err;
        this.timeout = timeout == null || timeout.isZero() || timeout.isNegative() ? null : timeout;
        this.procs = new RankProcesses(np);
        this.output = new RankOutput(JavaCommand.isJcclJavaCommand(command));
    }

    int run() {
        String commId = "127.0.0.1:" + RankEnvironment.freePort();
        String token = RankEnvironment.newToken();
        // Ctrl-C or SIGTERM on the launcher must not leave ranks behind (a rank blocked in init would
        // otherwise hold its port and wait for its init timeout).
        Thread hook = new Thread(() -> {
            shuttingDown = true;
            List<Integer> live = procs.live();
            if (!live.isEmpty()) {
                RankOutput.message(err, "jccl run: interrupted (SIGINT/SIGTERM); stopping ranks " + live);
                procs.stop(live);
            }
        }, "jccl-run-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        List<Integer> cpus = RankBinding.allowedCpus();
        String taskset = RankBinding.taskset();
        Map<String, String> rankEnv = new java.util.HashMap<>(System.getenv());
        RankEnvironment.apply(rankEnv, commId, token, 0, np, extraEnv);
        List<CpuBinding.Plan> plans = RankBinding.plans(binding, np, rankEnv, cpus);
        if (RankBinding.infoWanted(rankEnv)) {
            for (int r = 0; r < np; r++) {
                CpuBinding.Plan p = plans.get(r);
                RankOutput.message(err, "jccl run: rank " + r + (p.bound() && taskset != null ? " bound to CPUs " + p.cpuList() + ": " + p.why()
                        : " not bound: " + (p.bound() ? "taskset (util-linux) is not installed; wanted CPUs " + p.cpuList() + ": "
                        : "") + p.why()));
            }
        }
        try {
            for (int r = 0; r < np; r++) {
                ProcessBuilder pb = new ProcessBuilder(RankBinding.bound(command, plans.get(r), taskset));
                RankEnvironment.apply(pb.environment(), commId, token, r, np, extraEnv);
                try {
                    procs.set(r, pb.start());
                } catch (IOException e) {
                    List<Integer> started = procs.live();
                    procs.stop(started);
                    RankOutput.message(err, "jccl run: cannot start rank " + r + " (" + String.join(" ", command) + "): "
                            + String.valueOf(e.getMessage()).strip() + hint(command.getFirst()) + stoppedText(started));
                    return EXIT_CANNOT_START;
                }
                // The rank reads nothing from us; an open stdin would let a rank block on it forever.
                try {
                    procs.get(r).getOutputStream().close();
                } catch (IOException ignored) {
                    // Closing a pipe the child has already closed is harmless.
                }
                output.relay(r, procs.get(r).getInputStream(), out, "out");
                output.relay(r, procs.get(r).getErrorStream(), err, "err");
            }
            return waitForRanks();
        } finally {
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException exiting) {
                // The JVM is exiting and the hook is running or has run: it stops the ranks.
            }
        }
    }

    private int waitForRanks() {
        BlockingQueue<Integer> exited = new LinkedBlockingQueue<>();
        for (int r = 0; r < np; r++) {
            int rank = r;
            procs.get(r).onExit().thenRun(() -> exited.add(rank));
        }
        long deadline = timeout == null ? Long.MAX_VALUE : System.nanoTime() + timeout.toNanos();
        int remaining = np;
        while (remaining > 0) {
            Integer rank;
            try {
                long left = deadline - System.nanoTime();
                rank = timeout == null ? exited.take() : exited.poll(Math.max(0, left), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                List<Integer> live = procs.live();
                procs.stop(live);
                output.drain();
                RankOutput.message(err, "jccl run: interrupted" + stoppedText(live));
                Thread.currentThread().interrupt();
                return 130;
            }
            if (rank == null) {
                List<Integer> live = procs.live();
                procs.stop(live);
                output.drain();
                RankOutput.message(err, "jccl run: timed out after " + timeout.toSeconds() + " s (--timeout); ranks still running: "
                        + live + ", stopped them. Raise --timeout if the job needs longer, or run with JCCL_DEBUG=INFO"
                        + " to see where the ranks wait.");
                return EXIT_TIMEOUT;
            }
            remaining--;
            int code = procs.get(rank).exitValue();
            if (shuttingDown) {
                // The shutdown hook stopped the ranks and said so; their exit codes are its doing.
                return 130;
            }
            if (code != 0) {
                List<Integer> live = procs.live();
                procs.stop(live);
                output.drain();
                RankOutput.message(err, "jccl run: rank " + rank + " exited with code " + code + signalText(code) + stoppedText(live));
                return code;
            }
        }
        output.drain();
        return 0;
    }

    private static String stoppedText(List<Integer> stopped) {
        return stopped.isEmpty() ? "; no other rank was running" : "; stopped ranks " + stopped;
    }

    private static String signalText(int code) {
        // Java reports a child killed by signal s as exit code 128 + s, the shell convention.
        int sig = code - 128;
        return switch (sig) {
            case 1 -> " (killed by SIGHUP)";
            case 2 -> " (killed by SIGINT)";
            case 6 -> " (killed by SIGABRT: the rank aborted)";
            case 9 -> " (killed by SIGKILL, e.g. by the kernel's out-of-memory killer: see dmesg)";
            case 11 -> " (killed by SIGSEGV: the rank crashed)";
            case 15 -> " (killed by SIGTERM)";
            default -> sig > 0 && sig < 65 ? " (killed by signal " + sig + ")" : "";
        };
    }

    private static String hint(String program) {
        if (program.matches("[A-Za-z_$][\\w$]*") && !program.contains("/")) {
            return ". If " + program + " is a Java class, give its package-qualified name (e.g. com.example." + program
                    + ") and --cp with where it is; if it is a program, check that it is on PATH";
        }
        return ". Check that the program exists and is executable";
    }
}
