package org.jccl.cli.mproc;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;

/**
 * A real Slurm cluster of one node, this host, for the launcher tests: {@code munged} with a key
 * made for it, {@code slurmctld} and {@code slurmd} in the foreground, all with their files
 * (slurm.conf, key, socket, state, spool, logs) in one temporary directory, talking over two free
 * loopback ports; clients ({@code srun}, {@code sbatch}) find it through {@link #env()}
 * ({@code SLURM_CONF}). The node has {@value #CPUS} CPUs whatever the machine has
 * ({@code SlurmdParameters=config_overrides}), so a 2-core CI machine runs 3-rank steps;
 * {@code proctrack/linuxproc} and {@code task/none}: no cgroups. Starts in about a second.
 *
 * <p>Needs root and Debian's slurm-wlm (slurmctld, slurmd, slurm-client) and munge; {@link #start}
 * skips the calling tests with the reason when any is missing or the daemons do not come up (with
 * the tail of their logs). {@link #close()} cancels every job, kills the daemons and every process
 * of a job (marked by {@value #MARKER} in their environment: slurmstepd and the tasks are not
 * descendants of anything the test started) and deletes the directory; a shutdown hook does the
 * same if the JVM exits before.
 */
final class SingleHostSlurm implements AutoCloseable {

    static final int CPUS = 8;
    /** Variable in the environment of the daemons and of every client, inherited by slurmstepd and the tasks. */
    static final String MARKER = "SINGLE_HOST_SLURM_DIR"; // not JCCL_*: jccl warns about unknown JCCL_ variables

    private final Path dir;
    private final String host;
    private final List<Process> daemons = new ArrayList<>();
    private final Map<String, String> env = new HashMap<>();
    private final Thread hook;
    private String pmixProblem;
    private boolean pmixChecked;

    private SingleHostSlurm(Path dir, String host) {
        this.dir = dir;
        this.host = host;
        this.hook = new Thread(this::stop, "jccl-slurm-cleanup");
    }

    /** Starts the cluster, or skips the calling test(s) saying why it cannot run here. */
    static SingleHostSlurm start() throws IOException, InterruptedException {
        Assumptions.assumeTrue(System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux"), "Slurm tests need Linux");
        Result id = exec(List.of("id", "-u"), Map.of(), Duration.ofSeconds(10));
        Assumptions.assumeTrue(id.code == 0 && id.out.strip().equals("0"), "a test Slurm cluster (slurmd launches the tasks) needs"
                + " root; this test runs as uid " + id.out.strip());
        for (String[] t : new String[][] {{"munged", "munge"}, {"slurmctld", "slurmctld"}, {"slurmd", "slurmd"}, {"srun", "slurm-client"},
            {"sbatch", "slurm-client"}, {"sinfo", "slurm-client"}, {"scancel", "slurm-client"}}) {
            Assumptions.assumeTrue(tool(t[0]) != null, t[0] + " not found: apt-get install slurm-wlm munge (Debian package " + t[1] + ")");
        }
        Path dir = Files.createTempDirectory("jccl-slurm-");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x")); // munged wants a reachable socket
        SingleHostSlurm s = new SingleHostSlurm(dir, shortHostName());
        Runtime.getRuntime().addShutdownHook(s.hook);
        boolean ok = false;
        try {
            s.boot();
            ok = true;
        } finally {
            if (!ok) {
                s.close();
            }
        }
        return s;
    }

    /** The node's name as Slurm sees it: gethostname() up to the first dot. */
    private static String shortHostName() throws IOException {
        String h = Files.readString(Path.of("/proc/sys/kernel/hostname"), StandardCharsets.US_ASCII).strip();
        int dot = h.indexOf('.');
        return dot > 0 ? h.substring(0, dot) : h;
    }

    private void boot() throws IOException, InterruptedException {
        for (String d : new String[] {"state", "spool", "log", "tmp"}) {
            Files.createDirectories(dir.resolve(d));
        }
        // munge: a fresh key, readable by its owner only (munged refuses anything else).
        Path key = dir.resolve("munge.key");
        byte[] k = new byte[1024];
        new SecureRandom().nextBytes(k);
        Files.write(key, k);
        Files.setPosixFilePermissions(key, PosixFilePermissions.fromString("r--------"));
        Path socket = dir.resolve("munge.socket");
        env.put(MARKER, dir.toString());
        daemon("munged", List.of(tool("munged"), "--foreground", "--force", "--socket=" + socket, "--key-file=" + key,
                "--pid-file=" + dir.resolve("munged.pid"), "--seed-file=" + dir.resolve("munge.seed"), "--num-threads=2"));
        waitFor(() -> Files.exists(socket), Duration.ofSeconds(10), "munged did not create its socket " + socket);

        int ctldPort = freePort();
        int slurmdPort = freePort();
        Path conf = dir.resolve("slurm.conf");
        String c = String.join("\n",
                "# a one-node test cluster written by jccl's SingleHostSlurm",
                "ClusterName=jccltest",
                "SlurmctldHost=" + host + "(127.0.0.1)",
                "SlurmctldPort=" + ctldPort,
                "SlurmdPort=" + slurmdPort,
                "AuthType=auth/munge",
                "AuthInfo=socket=" + socket,
                "CredType=cred/munge",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SlurmUser=root",
                "SlurmdUser=root",
                "StateSaveLocation=" + dir.resolve("state"),
                "SlurmdSpoolDir=" + dir.resolve("spool"),
                "SlurmctldPidFile=" + dir.resolve("slurmctld.pid"),
                "SlurmdPidFile=" + dir.resolve("slurmd.pid"),
                "SlurmctldLogFile=" + dir.resolve("log/slurmctld.log"),
                "SlurmdLogFile=" + dir.resolve("log/slurmd.log"),
                "SlurmdParameters=config_overrides",
                "JobCompType=jobcomp/none",
                "AccountingStorageType=accounting_storage/none",
                "JobAcctGatherType=jobacct_gather/none",
                "MpiDefault=none",
                "ReturnToService=2",
                "SchedulerType=sched/builtin",
                "KillWait=2",
                // sbatch --wait polls every 2 s, then 8, then 32 unless MinJobAge/2 caps it: keep it at 2 s (a finished job's
                // record then stays 4 s, twice the poll).
                "MinJobAge=4",
                // The mpi/pmix plugin makes <TmpFS>/spmix_appdir_<uid>_<job>.<step>, and job ids restart with each fresh
                // cluster: a directory left by an earlier one (a killed step) would fail the launch.
                "TmpFS=" + dir.resolve("tmp"),
                "FirstJobId=" + (1000 + new SecureRandom().nextInt(1_000_000)),
                "NodeName=" + host + " NodeAddr=127.0.0.1 CPUs=" + CPUS + " State=UNKNOWN",
                "PartitionName=jccl Nodes=" + host + " Default=YES MaxTime=INFINITE State=UP",
                "");
        Files.writeString(conf, c);
        env.put("SLURM_CONF", conf.toString());
        daemon("slurmctld", List.of(tool("slurmctld"), "-D", "-f", conf.toString()));
        daemon("slurmd", List.of(tool("slurmd"), "-D", "-f", conf.toString()));
        try {
            waitFor(() -> {
                Result r = exec(List.of(tool("sinfo"), "-h", "-o", "%T", "-n", host), env, Duration.ofSeconds(10));
                return r.code == 0 && r.out.strip().equals("idle");
            }, Duration.ofSeconds(30), "the node did not come up idle");
        } catch (IOException e) {
            Assumptions.abort("the test Slurm cluster did not start: " + e.getMessage() + "\n" + logs());
        }
    }

    /** The variables srun and sbatch need to use this cluster (and the marker that lets {@link #close} find the tasks). */
    Map<String, String> env() {
        return Map.copyOf(env);
    }

    /** The node's name (as in SLURM_STEP_NODELIST). */
    String host() {
        return host;
    }

    /** The directory with slurm.conf and the logs; scripts and outputs of a test may go here. */
    Path dir() {
        return dir;
    }

    /**
     * Why {@code srun --mpi=pmix} cannot run here (tried once with {@code true}), or null. Debian's
     * mpi/pmix plugin opens libpmix.so, which only libpmix-dev installs.
     */
    String pmixProblem() throws IOException, InterruptedException {
        if (!pmixChecked) {
            pmixChecked = true;
            Result r = exec(List.of(tool("srun"), "--mpi=pmix", "-n", "1", "true"), env, Duration.ofSeconds(60));
            if (r.code != 0) {
                pmixProblem = "srun --mpi=pmix does not work here (exit " + r.code + "; Debian's mpi/pmix plugin needs libpmix.so from"
                        + " libpmix-dev): " + r.out.strip();
            }
        }
        return pmixProblem;
    }

    /** The daemons' logs, for a message. */
    String logs() {
        StringBuilder sb = new StringBuilder();
        for (String f : new String[] {"log/slurmctld.log", "log/slurmd.log", "munged.out", "slurmctld.out", "slurmd.out"}) {
            Path p = dir.resolve(f);
            try {
                if (Files.exists(p)) {
                    List<String> lines = Files.readAllLines(p, StandardCharsets.UTF_8);
                    sb.append("----- ").append(f).append(" -----\n");
                    lines.subList(Math.max(0, lines.size() - 30), lines.size()).forEach(l -> sb.append(l).append('\n'));
                }
            } catch (IOException e) {
                sb.append("(cannot read ").append(p).append(": ").append(e).append(")\n");
            }
        }
        return sb.toString();
    }

    @Override
    public void close() {
        stop();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException e) {
            // already shutting down: the hook runs stop(), which is idempotent
        }
    }

    private synchronized void stop() {
        if (env.containsKey("SLURM_CONF") && !daemons.isEmpty()) {
            try {
                exec(List.of(tool("scancel"), "--user=root", "--full"), env, Duration.ofSeconds(10));
            } catch (IOException | InterruptedException e) {
                // the kills below end the jobs anyway
            }
        }
        List<ProcessHandle> all = new ArrayList<>();
        for (Process p : daemons) {
            p.toHandle().descendants().forEach(all::add);
            all.add(p.toHandle());
        }
        all.addAll(marked());
        all.forEach(ProcessHandle::destroyForcibly);
        for (ProcessHandle h : all) {
            try {
                h.onExit().get(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                // SIGKILL cannot be refused; a zombie is reaped by its parent
            }
        }
        daemons.clear();
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            // a temporary directory left behind changes no verdict
        }
    }

    /** Processes whose environment carries this cluster's marker: slurmstepd and the tasks of its jobs. */
    private List<ProcessHandle> marked() {
        byte[] mark = (MARKER + "=" + dir + "\0").getBytes(StandardCharsets.UTF_8);
        List<ProcessHandle> out = new ArrayList<>();
        long self = ProcessHandle.current().pid();
        ProcessHandle.allProcesses().forEach(h -> {
            if (h.pid() == self) {
                return;
            }
            try {
                byte[] e = Files.readAllBytes(Path.of("/proc", Long.toString(h.pid()), "environ"));
                if (indexOf(e, mark) >= 0) {
                    out.add(h);
                }
            } catch (IOException | RuntimeException ex) {
                // gone, or not readable: not ours
            }
        });
        return out;
    }

    private static int indexOf(byte[] hay, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= hay.length; i++) {
            if (i > 0 && hay[i - 1] != 0) {
                continue; // only at the start of a NAME=value entry
            }
            for (int j = 0; j < needle.length; j++) {
                if (hay[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }

    // ------------------------------------------------------------------------------------------ helpers

    private void daemon(String name, List<String> command) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(command);
        pb.environment().keySet().removeIf(k -> k.startsWith("SLURM_") || k.startsWith("PMIX_") || k.startsWith("OMPI_"));
        pb.environment().putAll(env);
        pb.redirectErrorStream(true);
        pb.redirectOutput(dir.resolve(name + ".out").toFile());
        pb.redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        daemons.add(pb.start());
    }

    @FunctionalInterface
    private interface Condition {
        boolean met() throws IOException, InterruptedException;
    }

    private void waitFor(Condition c, Duration limit, String what) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!c.met()) {
            for (Process p : daemons) {
                if (!p.isAlive()) {
                    throw new IOException(what + ": " + String.join(" ", p.info().command().orElse("a daemon")) + " exited with "
                            + p.exitValue());
                }
            }
            if (System.nanoTime() > deadline) {
                throw new IOException(what + " within " + limit.toSeconds() + " s");
            }
            Thread.sleep(100);
        }
    }

    record Result(int code, String out) {
    }

    /** Runs {@code command} with this JVM's environment minus any job's variables, plus {@code extra}. */
    static Result exec(List<String> command, Map<String, String> extra, Duration limit) throws IOException, InterruptedException {
        Path out = Files.createTempFile("jccl-slurm-", ".out");
        try {
            ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(out.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
            pb.environment().keySet().removeIf(k -> k.startsWith("SLURM_") || k.startsWith("PMIX_") || k.startsWith("OMPI_"));
            pb.environment().putAll(extra);
            Process p = pb.start();
            if (!p.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
                throw new IOException(String.join(" ", command) + " did not finish within " + limit.toSeconds() + " s");
            }
            return new Result(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out);
        }
    }

    private static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("no free port on the loopback interface", e);
        }
    }

    /** The path of {@code name} on PATH or in the sbin directories, or null. */
    static String tool(String name) {
        List<String> dirs = new ArrayList<>();
        String path = System.getenv("PATH");
        if (path != null) {
            dirs.addAll(List.of(path.split(":")));
        }
        dirs.addAll(List.of("/usr/sbin", "/sbin", "/usr/bin", "/bin"));
        for (String d : dirs) {
            if (!d.isEmpty() && Files.isExecutable(Path.of(d, name))) {
                return Path.of(d, name).toString();
            }
        }
        return null;
    }
}
