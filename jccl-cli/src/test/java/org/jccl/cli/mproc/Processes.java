package org.jccl.cli.mproc;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.cli.run.LocalLauncher;
import org.jccl.examples.CollectiveCheck;

/**
 * Real processes for the multi-process tests: started with a clean job environment, their
 * combined stdout and stderr written to a file each (a pipe nobody reads would block a chatty
 * rank), waited for with a deadline, and killed with everything they started on {@link #close()},
 * so no test leaves a process behind whatever happens to it.
 *
 * <p>Not thread-safe: one test thread owns an instance.
 */
final class Processes implements AutoCloseable {

    /** Variables by which jccl would recognise a job: removed so only what a test sets describes it. */
    private static final Set<String> JOB_VARIABLES = Set.of(
            "JCCL_COMM_ID", "JCCL_RANK", "JCCL_WORLD_SIZE", "JCCL_LOCAL_RANK", "JCCL_LOCAL_SIZE", "JCCL_AUTH_TOKEN", "NCCL_COMM_ID",
            "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT");
    private static final List<String> JOB_PREFIXES = List.of("OMPI_COMM_WORLD_", "SLURM_", "PMIX_RANK", "PMI_RANK");

    private static final SecureRandom RANDOM = new SecureRandom();

    /** One started process and the file its output goes to. */
    record Proc(String name, Process process, Path log) {
        /** What the process has written so far, stdout and stderr interleaved. */
        String output() {
            try {
                return Files.readString(log, StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read the output of " + name + " from " + log, e);
            }
        }
    }

    private final Path dir;
    private final List<Proc> procs = new ArrayList<>();

    Processes() {
        try {
            dir = Files.createTempDirectory("jccl-mproc-");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a temporary directory for the ranks' output", e);
        }
    }

    /** Starts {@code command} with this JVM's environment minus any job identity, plus {@code env}. */
    Proc start(String name, List<String> command, Map<String, String> env) {
        ProcessBuilder pb = new ProcessBuilder(command);
        Map<String, String> e = pb.environment();
        e.keySet().removeIf(k -> JOB_VARIABLES.contains(k) || JOB_PREFIXES.stream().anyMatch(k::startsWith));
        e.putAll(env);
        Path out = dir.resolve(name.replaceAll("[^A-Za-z0-9_.-]", "_") + ".log");
        pb.redirectErrorStream(true);
        pb.redirectOutput(out.toFile());
        pb.redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        try {
            Proc p = new Proc(name, pb.start(), out);
            procs.add(p);
            return p;
        } catch (IOException ex) {
            throw new UncheckedIOException("cannot start " + name + ": " + String.join(" ", command), ex);
        }
    }

    /**
     * Waits until every started process has exited or {@code limit} has passed since the call.
     *
     * @return the exit codes, in start order
     * @throws AssertionError naming the processes still running, with every process's output
     */
    List<Integer> waitAll(Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        List<Integer> codes = new ArrayList<>();
        for (Proc p : procs) {
            try {
                long left = deadline - System.nanoTime();
                if (!p.process().waitFor(Math.max(0, left), TimeUnit.NANOSECONDS)) {
                    List<String> running = procs.stream().filter(q -> q.process().isAlive()).map(Proc::name).toList();
                    throw new AssertionError("still running after " + limit.toSeconds() + " s: " + running + "\n" + outputs());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting for " + p.name(), e);
            }
            codes.add(p.process().exitValue());
        }
        return codes;
    }

    /** The {@code i}-th process started. */
    Proc get(int i) {
        return procs.get(i);
    }

    /** Every process's output, labelled, for assertion messages. */
    String outputs() {
        StringBuilder sb = new StringBuilder();
        for (Proc p : procs) {
            sb.append("----- ").append(p.name()).append(" (pid ").append(p.process().pid()).append(") -----\n").append(p.output());
        }
        return sb.toString();
    }

    /** Kills every started process and its descendants (collected first: orphans are out of reach), then removes the logs. */
    @Override
    public void close() {
        List<ProcessHandle> all = new ArrayList<>();
        for (Proc p : procs) {
            ProcessHandle h = p.process().toHandle();
            h.descendants().forEach(all::add);
            all.add(h);
        }
        all.forEach(ProcessHandle::destroyForcibly);
        for (ProcessHandle h : all) {
            try {
                h.onExit().get(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                // SIGKILL cannot be refused; what is left is a zombie the kernel reaps with its parent.
            }
        }
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) {
                Files.deleteIfExists(f);
            }
            Files.deleteIfExists(dir);
        } catch (IOException e) {
            // A temporary directory left behind is harmless; the test's verdict does not depend on it.
        }
    }

    // ------------------------------------------------------------------------------------------ helpers

    /** The command that runs {@link CollectiveCheck} with {@code args} on this JVM's classpath. */
    static List<String> collectiveCheck(String... args) {
        return javaMain(CollectiveCheck.class.getName(), args);
    }

    /** The command that runs {@code mainClass} with {@code args} on this JVM's classpath. */
    static List<String> javaMain(String mainClass, String... args) {
        List<String> cmd = new ArrayList<>(LocalLauncher.javaCommand(mainClass));
        cmd.addAll(List.of(args));
        return cmd;
    }

    /** A fresh job secret, 32 hex digits. */
    static String newToken() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    /** A loopback port that was free a moment ago, for a bootstrap root. */
    static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("no free port on the loopback interface", e);
        }
    }

    private static final Pattern CHECK_OK = Pattern.compile("(?m)^(?:\\[\\d+] )?CHECK OK (\\d+) checks$");

    /**
     * The number of checks of the one {@code CHECK OK <n> checks} line in {@code output} (optionally
     * prefixed {@code [rank] } by jccl run).
     *
     * @throws AssertionError when there is no such line or more than one
     */
    static long checkOk(String output) {
        Matcher m = CHECK_OK.matcher(output);
        if (!m.find()) {
            throw new AssertionError("no 'CHECK OK <n> checks' line in:\n" + output);
        }
        long n = Long.parseLong(m.group(1));
        if (m.find()) {
            throw new AssertionError("more than one 'CHECK OK' line (only rank 0 prints it):\n" + output);
        }
        return n;
    }
}
