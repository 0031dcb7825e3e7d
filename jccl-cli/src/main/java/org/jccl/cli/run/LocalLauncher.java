package org.jccl.cli.run;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.CodeSource;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.stream.Stream;
import org.jccl.internal.log.Log;
import org.jccl.internal.topo.CpuBinding;
import org.jccl.internal.topo.FsStats;
import org.jccl.internal.topo.GpuMapping;
import org.jccl.internal.topo.GpuProbe;
import org.jccl.internal.topo.Nvml;
import org.jccl.internal.topo.SysfsDiscovery;
import org.jccl.internal.topo.Topologies;
import org.jccl.internal.topo.Topology;

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
 * {@value #INCUBATOR_WARNING} line. The job fails fast: when one rank exits non-zero the others are stopped.
 *
 * <p>Thread safety: every method may be called from any thread; each {@code launch} call owns its
 * processes and threads.
 */
public final class LocalLauncher {

    /** How long stopped ranks get to run their shutdown hooks before they are killed. */
    static final Duration GRACE = Duration.ofSeconds(3);

    /** Exit code when {@code --timeout} expires, as coreutils' timeout(1) uses. */
    public static final int EXIT_TIMEOUT = 124;

    /** Exit code when a rank cannot be started at all, as a shell uses for "command not found". */
    public static final int EXIT_CANNOT_START = 127;

    /**
     * Variables of other launcher conventions. jccl reads them when the JCCL_* ones are absent, so an
     * inherited set (jccl run started inside an mpirun or Slurm job) would describe the wrong job.
     */
    static final Set<String> CONFLICTING = Set.of(
            "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
            "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "NCCL_COMM_ID");

    /** Prefixes of conflicting variables (all of Open MPI's per-rank identity). */
    static final List<String> CONFLICTING_PREFIXES = List.of("OMPI_COMM_WORLD_");

    /**
     * What a JVM prints to stderr while it boots with the Vector API module, before any of its code
     * runs. The ranks of a command jccl composed ({@link #javaCommand}, a {@code .jar} TARGET) do not
     * show it: jccl added the module, not the user (see {@link #isJcclJavaCommand}).
     */
    static final String INCUBATOR_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector";

    /** A rank's output line longer than this is passed on in pieces, so a rank cannot exhaust our heap. */
    private static final int MAX_LINE = 64 * 1024;

    private static final SecureRandom RANDOM = new SecureRandom();

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

    /** The CPUs this process may run on (Linux: Cpus_allowed_list), else 0..availableProcessors-1. */
    static List<Integer> allowedCpus() {
        List<Integer> cpus = new ArrayList<>();
        try {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
                if (line.startsWith("Cpus_allowed_list:")) {
                    cpus.addAll(CpuBinding.parse(line.substring(line.indexOf(':') + 1)));
                }
            }
        } catch (IOException | RuntimeException e) {
            cpus.clear();
        }
        if (cpus.isEmpty()) {
            for (int c = 0; c < Runtime.getRuntime().availableProcessors(); c++) {
                cpus.add(c);
            }
        }
        return cpus;
    }

    private static String taskset() {
        for (String dir : String.valueOf(System.getenv("PATH")).split(java.io.File.pathSeparator)) {
            java.nio.file.Path p = java.nio.file.Path.of(dir.isEmpty() ? "." : dir, "taskset");
            if (java.nio.file.Files.isExecutable(p)) {
                return p.toString();
            }
        }
        return null;
    }

    private static boolean resolvable(String program) {
        if (program.contains(java.io.File.separator)) {
            return java.nio.file.Files.isExecutable(java.nio.file.Path.of(program));
        }
        for (String dir : String.valueOf(System.getenv("PATH")).split(java.io.File.pathSeparator)) {
            if (java.nio.file.Files.isExecutable(java.nio.file.Path.of(dir.isEmpty() ? "." : dir, program))) {
                return true;
            }
        }
        return false;
    }

    /** {@code command} prefixed with {@code taskset -c LIST} when {@code plan} binds and taskset exists. */
    static List<String> bound(List<String> command, CpuBinding.Plan plan, String taskset) {
        // A program that cannot be found is reported by the launcher itself, not by taskset.
        if (!plan.bound() || taskset == null || !resolvable(command.getFirst())) {
            return command;
        }
        List<String> c = new ArrayList<>(command.size() + 3);
        c.add(taskset);
        c.add("-c");
        c.add(plan.cpuList());
        c.addAll(command);
        return c;
    }

    /**
     * Each rank's binding on this host for {@code binding}, given the ranks' environment
     * ({@code rankEnv}: CUDA_VISIBLE_DEVICES, JCCL_CUDA_DEVICE). The host is read only for auto and
     * numa: from {@code JCCL_TOPO_FILE} when the ranks have it (the host as jccl's other readers see
     * it), else from sysfs, with NVML only when CUDA_VISIBLE_DEVICES or JCCL_CUDA_DEVICE names a UUID.
     */
    static List<CpuBinding.Plan> plans(Binding binding, int np, Map<String, String> rankEnv, List<Integer> cpus) {
        Topology topo = null;
        if (binding == Binding.AUTO || binding == Binding.NUMA) {
            try {
                String file = rankEnv.get("JCCL_TOPO_FILE");
                if (file != null && !file.isBlank()) {
                    return CpuBinding.plan(binding.mode(), Topologies.read(Path.of(file.trim())), rankEnv, np, cpus);
                }
                String cvd = rankEnv.getOrDefault("CUDA_VISIBLE_DEVICES", "");
                GpuProbe probe = cvd.contains("GPU-") || cvd.contains("MIG-") || rankEnv.getOrDefault(GpuMapping.SETTING, "").contains("-")
                        ? Nvml.probe() : GpuProbe.absent("not needed: no UUID in CUDA_VISIBLE_DEVICES or JCCL_CUDA_DEVICE");
                topo = new SysfsDiscovery(Path.of("/"), rankEnv, FsStats.SYSTEM, probe, "/dev/shm").placement();
            } catch (RuntimeException e) {
                topo = null; // bound as CPU ranks on one node; the plan says so
            }
        }
        return CpuBinding.plan(binding.mode(), topo, rankEnv, np, cpus);
    }

    /** Whether JCCL_DEBUG in the ranks' environment asks for INFO lines (the launcher then says how it bound them). */
    static boolean infoWanted(Map<String, String> rankEnv) {
        try {
            return Log.parseLevel(rankEnv.get("JCCL_DEBUG")).compareTo(Log.Level.INFO) >= 0;
        } catch (RuntimeException e) {
            return false;
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
        if ((binding == Binding.CORE || binding == Binding.NUMA) && taskset() == null) {
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
        return new Job(np, List.copyOf(command), extra, out, err, timeout, binding).run();
    }

    /**
     * The command line that starts a JVM on jccl's own classpath (java binary, flags, -cp) running
     * {@code mainClass}: the java of the running JVM, {@code --enable-native-access=ALL-UNNAMED} (jccl's
     * optional native modules use the FFM API), {@code --add-modules jdk.incubator.vector} (the Vector
     * API reduction kernels), and a classpath of the running JVM's classpath plus the
     * jars next to the jccl-cli jar ({@code jccl-cli/target/lib/*}).
     */
    public static List<String> javaCommand(String mainClass) {
        return javaCommand(mainClass, null);
    }

    /**
     * {@link #javaCommand(String)} with {@code extraClasspath} (path-separator list, may be null) added
     * after jccl's own jars.
     */
    public static List<String> javaCommand(String mainClass, String extraClasspath) {
        Objects.requireNonNull(mainClass, "mainClass");
        Set<String> cp = new LinkedHashSet<>(ownClasspath());
        if (extraClasspath != null && !extraClasspath.isBlank()) {
            for (String e : extraClasspath.split(File.pathSeparator)) {
                if (!e.isEmpty()) {
                    cp.add(e);
                }
            }
        }
        List<String> cmd = new ArrayList<>();
        cmd.add(javaBinary());
        String modulePath = System.getProperty("jdk.module.path", "");
        if (LocalLauncher.class.getModule().isNamed() && !modulePath.isEmpty() && (extraClasspath == null || extraClasspath.isBlank())
                && mainClass.startsWith("org.jccl.cli.")) {
            // jccl runs as modules (java --module-path ... -m org.jccl.cli/...): the ranks run the same way.
            cmd.add("--enable-native-access=org.jccl.core,org.jccl.cuda");
            cmd.add("--module-path");
            cmd.add(modulePath);
            // The modules this JVM resolved from the module path (optional ones added with --add-modules, such
            // as the plot libraries, included), so each rank resolves the same set.
            List<String> resolved = ModuleLayer.boot().modules().stream()
                    .filter(m -> m.getDescriptor() != null && !m.getName().startsWith("java.") && !m.getName().startsWith("jdk."))
                    .map(Module::getName).sorted().toList();
            if (!resolved.isEmpty()) {
                cmd.add("--add-modules");
                cmd.add(String.join(",", resolved));
            }
            cmd.add("-m");
            cmd.add(LocalLauncher.class.getModule().getName() + "/" + mainClass);
            return cmd;
        }
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("--add-modules"); // the Vector API reduction kernels (jccl falls back to scalar without it)
        cmd.add("jdk.incubator.vector");
        cmd.add("-cp");
        cmd.add(String.join(File.pathSeparator, cp));
        cmd.add(mainClass);
        return cmd;
    }

    /**
     * Whether {@code command} starts a JVM with the flags jccl itself puts first ({@link #javaCommand},
     * {@code jccl run} with a {@code .jar} TARGET): the java binary, {@code --enable-native-access=ALL-UNNAMED},
     * {@code --add-modules jdk.incubator.vector} (or, when jccl runs as modules, the native access of its
     * modules and the module path). The incubator warning of such a rank is jccl's doing
     * and is dropped; a command the user wrote keeps it.
     */
    static boolean isJcclJavaCommand(List<String> command) {
        if (command.size() > 4 && command.get(0).equals(javaBinary()) && command.get(1).equals("--enable-native-access=org.jccl.core,org.jccl.cuda")
                && command.get(2).equals("--module-path")) {
            return true; // the module form: org.jccl.core requires the incubator module
        }
        return command.size() > 4
                && command.get(0).equals(javaBinary())
                && command.get(1).equals("--enable-native-access=ALL-UNNAMED")
                && command.get(2).equals("--add-modules")
                && command.get(3).equals("jdk.incubator.vector");
    }

    /** The java launcher of the running JVM. */
    static String javaBinary() {
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        if (Files.isExecutable(java)) {
            return java.toString();
        }
        // java.home may be unusual (jlink image without bin/java): fall back to how we were started.
        return ProcessHandle.current().info().command().orElse("java");
    }

    /**
     * The running JVM's classpath entries (made absolute) plus, when jccl runs from its jar, the jars its
     * manifest's {@code Class-Path} names ({@code java -jar} reads those from the manifest, so they are not
     * in {@code java.class.path}); for a jar without one, the jars of the {@code lib/} folder beside it.
     * The manifest decides because {@code lib/} may also hold jars of an older build (another version).
     */
    static List<String> ownClasspath() {
        Set<String> cp = new LinkedHashSet<>();
        for (String e : System.getProperty("java.class.path", "").split(File.pathSeparator)) {
            if (!e.isEmpty()) {
                cp.add(Path.of(e).toAbsolutePath().normalize().toString());
            }
        }
        Path self = ownLocation();
        if (self != null && Files.isRegularFile(self)) {
            cp.add(self.toString());
            List<Path> fromManifest = manifestClassPath(self);
            if (!fromManifest.isEmpty()) {
                fromManifest.forEach(p -> cp.add(p.toString()));
                return List.copyOf(cp);
            }
            Path lib = self.resolveSibling("lib");
            if (Files.isDirectory(lib)) {
                try (Stream<Path> jars = Files.list(lib)) {
                    jars.filter(p -> p.getFileName().toString().endsWith(".jar"))
                            .sorted()
                            .forEach(p -> cp.add(p.toAbsolutePath().normalize().toString()));
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot list " + lib + " for the ranks' classpath: " + e.getMessage()
                            + "; rebuild jccl (bin/jccl rebuilds it when it is missing)", e);
                }
            }
        }
        return List.copyOf(cp);
    }

    /**
     * The entries of {@code jar}'s manifest {@code Class-Path} (relative to the jar's folder, made absolute)
     * that exist; empty when it has none or cannot be read.
     */
    static List<Path> manifestClassPath(Path jar) {
        try (java.util.jar.JarFile jf = new java.util.jar.JarFile(jar.toFile())) {
            java.util.jar.Manifest m = jf.getManifest();
            String value = m == null ? null : m.getMainAttributes().getValue(java.util.jar.Attributes.Name.CLASS_PATH);
            if (value == null || value.isBlank()) {
                return List.of();
            }
            List<Path> entries = new ArrayList<>();
            Path dir = jar.toAbsolutePath().normalize().getParent();
            for (String e : value.trim().split("\\s+")) {
                Path p;
                try {
                    p = e.startsWith("file:") ? Path.of(java.net.URI.create(e)) : dir.resolve(java.net.URLDecoder.decode(e,
                            StandardCharsets.UTF_8));
                } catch (IllegalArgumentException bad) { // a malformed URI or path: not an entry
                    continue;
                }
                p = p.normalize();
                if (Files.exists(p)) {
                    entries.add(p);
                }
            }
            return entries;
        } catch (IOException e) {
            return List.of();
        }
    }

    private static Path ownLocation() {
        CodeSource src = LocalLauncher.class.getProtectionDomain().getCodeSource();
        if (src == null || src.getLocation() == null) {
            return null;
        }
        try {
            return Path.of(src.getLocation().toURI()).toAbsolutePath().normalize();
        } catch (URISyntaxException | IllegalArgumentException e) {
            return null;
        }
    }

    /** A fresh job secret: 16 random bytes as 32 lower-case hex digits. */
    static String newToken() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    /**
     * A loopback port that was free a moment ago, for rank 0's bootstrap root. Another process could take
     * it before rank 0 binds it; rank 0 then fails with "address in use" and the job stops (fail fast).
     */
    static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot find a free TCP port on 127.0.0.1 for the bootstrap root: " + e.getMessage()
                    + "; check that the loopback interface is up", e);
        }
    }

    /** Applies the job identity of {@code rank} to {@code env} (a copy of the parent's environment). */
    static void applyRankEnvironment(Map<String, String> env, String commId, String token, int rank, int np,
            Map<String, String> extraEnv) {
        env.keySet().removeIf(k -> CONFLICTING.contains(k) || CONFLICTING_PREFIXES.stream().anyMatch(k::startsWith));
        env.put("JCCL_COMM_ID", commId);
        env.put("JCCL_RANK", Integer.toString(rank));
        env.put("JCCL_WORLD_SIZE", Integer.toString(np));
        env.put("JCCL_LOCAL_RANK", Integer.toString(rank));
        env.put("JCCL_LOCAL_SIZE", Integer.toString(np));
        env.put("JCCL_AUTH_TOKEN", token);
        for (Map.Entry<String, String> e : extraEnv.entrySet()) {
            if (e.getValue() == null) {
                env.remove(e.getKey());
            } else {
                env.put(e.getKey(), e.getValue());
            }
        }
    }

    /** Writes {@code line} plus a newline to {@code to} as one unit, so lines of different ranks never mix. */
    static void writeLine(PrintStream to, byte[] prefix, byte[] buf, int off, int len) {
        synchronized (to) {
            to.write(prefix, 0, prefix.length);
            to.write(buf, off, len);
            to.write('\n');
            to.flush();
        }
    }

    static void message(PrintStream to, String text) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        writeLine(to, new byte[0], b, 0, b.length);
    }

    /** One run of {@code np} processes. */
    private static final class Job {
        private final int np;
        private final List<String> command;
        private final Map<String, String> extraEnv;
        private final PrintStream out;
        private final PrintStream err;
        private final Duration timeout;
        /** Written by the launching thread, read by the shutdown hook too. */
        private final AtomicReferenceArray<Process> procs;
        private volatile boolean shuttingDown;
        private final List<Thread> pumps = new ArrayList<>();
        private final Binding binding;
        /** Whether each rank's stderr loses its JVM's boot-time incubator warning (a command jccl composed). */
        private final boolean dropIncubatorWarning;

        Job(int np, List<String> command, Map<String, String> extraEnv, PrintStream out, PrintStream err, Duration timeout,
                Binding binding) {
            this.binding = binding;
            this.np = np;
            this.command = command;
            this.extraEnv = extraEnv;
            this.out = out;
            this.err = err;
            this.timeout = timeout == null || timeout.isZero() || timeout.isNegative() ? null : timeout;
            this.procs = new AtomicReferenceArray<>(np);
            this.dropIncubatorWarning = isJcclJavaCommand(command);
        }

        int run() {
            String commId = "127.0.0.1:" + freePort();
            String token = newToken();
            // Ctrl-C or SIGTERM on the launcher must not leave ranks behind (a rank blocked in init would
            // otherwise hold its port and wait for its init timeout).
            Thread hook = new Thread(() -> {
                shuttingDown = true;
                List<Integer> live = liveRanks();
                if (!live.isEmpty()) {
                    message(err, "jccl run: interrupted (SIGINT/SIGTERM); stopping ranks " + live);
                    stop(live);
                }
            }, "jccl-run-shutdown");
            Runtime.getRuntime().addShutdownHook(hook);
            List<Integer> cpus = allowedCpus();
            String taskset = taskset();
            Map<String, String> rankEnv = new java.util.HashMap<>(System.getenv());
            applyRankEnvironment(rankEnv, commId, token, 0, np, extraEnv);
            List<CpuBinding.Plan> plans = plans(binding, np, rankEnv, cpus);
            if (infoWanted(rankEnv)) {
                for (int r = 0; r < np; r++) {
                    CpuBinding.Plan p = plans.get(r);
                    message(err, "jccl run: rank " + r + (p.bound() && taskset != null ? " bound to CPUs " + p.cpuList() + ": " + p.why()
                            : " not bound: " + (p.bound() ? "taskset (util-linux) is not installed; wanted CPUs " + p.cpuList() + ": "
                            : "") + p.why()));
                }
            }
            try {
                for (int r = 0; r < np; r++) {
                    ProcessBuilder pb = new ProcessBuilder(bound(command, plans.get(r), taskset));
                    applyRankEnvironment(pb.environment(), commId, token, r, np, extraEnv);
                    try {
                        procs.set(r, pb.start());
                    } catch (IOException e) {
                        List<Integer> started = liveRanks();
                        stop(started);
                        message(err, "jccl run: cannot start rank " + r + " (" + String.join(" ", command) + "): "
                                + String.valueOf(e.getMessage()).strip() + hint(command.getFirst()) + stoppedText(started));
                        return EXIT_CANNOT_START;
                    }
                    // The rank reads nothing from us; an open stdin would let a rank block on it forever.
                    try {
                        procs.get(r).getOutputStream().close();
                    } catch (IOException ignored) {
                        // Closing a pipe the child has already closed is harmless.
                    }
                    pump(r, procs.get(r).getInputStream(), out, "out");
                    pump(r, procs.get(r).getErrorStream(), err, "err");
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
                    List<Integer> live = liveRanks();
                    stop(live);
                    drainOutput();
                    message(err, "jccl run: interrupted" + stoppedText(live));
                    Thread.currentThread().interrupt();
                    return 130;
                }
                if (rank == null) {
                    List<Integer> live = liveRanks();
                    stop(live);
                    drainOutput();
                    message(err, "jccl run: timed out after " + timeout.toSeconds() + " s (--timeout); ranks still running: "
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
                    List<Integer> live = liveRanks();
                    stop(live);
                    drainOutput();
                    message(err, "jccl run: rank " + rank + " exited with code " + code + signalText(code) + stoppedText(live));
                    return code;
                }
            }
            drainOutput();
            return 0;
        }

        private List<Integer> liveRanks() {
            List<Integer> live = new ArrayList<>();
            for (int r = 0; r < np; r++) {
                Process p = procs.get(r);
                if (p != null && p.isAlive()) {
                    live.add(r);
                }
            }
            return live;
        }

        /**
         * Stops the given ranks and everything they started: SIGTERM first, so JVM ranks run their shutdown
         * hooks, then SIGKILL after {@link #GRACE}. Descendants are collected before the first signal
         * because once a parent (say {@code sh -c}) is gone its children are re-parented and out of reach.
         */
        private void stop(List<Integer> ranks) {
            List<ProcessHandle> all = new ArrayList<>();
            for (int r : ranks) {
                ProcessHandle h = procs.get(r).toHandle();
                all.add(h);
                h.descendants().forEach(all::add);
            }
            if (all.isEmpty()) {
                return;
            }
            all.forEach(ProcessHandle::destroy);
            CompletableFuture<?> gone = CompletableFuture.allOf(all.stream().map(ProcessHandle::onExit).toArray(CompletableFuture[]::new));
            try {
                gone.get(GRACE.toMillis(), TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
                // Past the grace period: kill what is left, including children started meanwhile.
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            List<ProcessHandle> left = new ArrayList<>();
            for (ProcessHandle h : all) {
                if (h.isAlive()) {
                    h.descendants().forEach(left::add);
                    left.add(h);
                }
            }
            left.forEach(ProcessHandle::destroyForcibly);
            for (ProcessHandle h : left) {
                try {
                    h.onExit().get(GRACE.toMillis(), TimeUnit.MILLISECONDS);
                } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
                    // SIGKILL cannot be refused; a process in uninterruptible sleep goes when the kernel lets it.
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }

        /** Copies one output stream of rank {@code rank} to {@code to}, line by line, prefixed. */
        private void pump(int rank, InputStream in, PrintStream to, String which) {
            byte[] prefix = ("[" + rank + "] ").getBytes(StandardCharsets.UTF_8);
            byte[] incubatorWarning = INCUBATOR_WARNING.getBytes(StandardCharsets.US_ASCII);
            boolean dropWarning = dropIncubatorWarning && which.equals("err");
            Thread t = Thread.ofPlatform().daemon().name("jccl-run-rank" + rank + "-" + which).start(() -> {
                // Bytes, not chars: a rank's output is passed on exactly as written, whatever its encoding.
                byte[] line = new byte[1024];
                int len = 0;
                byte[] buf = new byte[8192];
                // The JVM prints the warning once, at boot: only its first occurrence is dropped.
                boolean dropNext = dropWarning;
                try (in) {
                    int n;
                    while ((n = in.read(buf)) > 0) {
                        for (int i = 0; i < n; i++) {
                            byte b = buf[i];
                            if (b == '\n') {
                                if (dropNext && Arrays.equals(line, 0, len, incubatorWarning, 0, incubatorWarning.length)) {
                                    dropNext = false;
                                } else {
                                    writeLine(to, prefix, line, 0, len);
                                }
                                len = 0;
                                continue;
                            }
                            if (len == line.length) {
                                if (len >= MAX_LINE) {
                                    writeLine(to, prefix, line, 0, len);
                                    len = 0;
                                } else {
                                    line = Arrays.copyOf(line, Math.min(MAX_LINE, len * 2));
                                }
                            }
                            line[len++] = b;
                        }
                    }
                } catch (IOException e) {
                    // The stream closes under us when the process is killed: the rest of the output is gone.
                }
                if (len > 0) {
                    writeLine(to, prefix, line, 0, len);
                }
            });
            pumps.add(t);
        }

        /**
         * Waits briefly for the output threads, so every line a rank wrote is printed before our summary.
         * Bounded: a grandchild that outlived its rank may hold the pipe open indefinitely.
         */
        private void drainOutput() {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            for (Thread t : pumps) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                try {
                    t.join(Duration.ofNanos(left));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
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
}
