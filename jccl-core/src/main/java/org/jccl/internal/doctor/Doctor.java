package org.jccl.internal.doctor;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.net.DeviceList;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.topo.CudaVisibleDevices;
import org.jccl.internal.topo.GpuMapping;
import org.jccl.internal.topo.GpuProbe;
import org.jccl.internal.topo.NicAssignment;
import org.jccl.internal.topo.PciDistance;
import org.jccl.internal.topo.SysfsDiscovery;
import org.jccl.internal.topo.TopoText;
import org.jccl.internal.topo.Topology;
import org.jccl.internal.topo.Topology.Container;
import org.jccl.internal.topo.Topology.Gid;
import org.jccl.internal.topo.Topology.Gpu;
import org.jccl.internal.topo.Topology.GpuDirect;
import org.jccl.internal.topo.Topology.Limits;
import org.jccl.internal.topo.Topology.NetDevice;
import org.jccl.internal.topo.Topology.RdmaDevice;
import org.jccl.internal.topo.Topology.RdmaPort;
import org.jccl.internal.transport.shm.ShmReservation;

/**
 * {@code jccl doctor}: preflight checks of a host for a job of N local ranks, each PASS, WARN or
 * FAIL (or SKIP, with the reason) with the fix in one sentence. Every check is a pure function of
 * a {@link Topology}, the environment, N and the interface list, so each is tested on a synthetic
 * host (docs/DOCTOR.md maps the field reports to the checks).
 *
 * <p>Exit code: 0 when nothing warns or fails, 1 with warnings, 2 with a failure.
 */
public final class Doctor {

    /** Outcome of one check, mildest first. */
    public enum Status { PASS, SKIP, WARN, FAIL }

    /**
     * One check's outcome.
     *
     * @param id short stable name ({@code shm}, {@code gpudirect}, ...)
     * @param status PASS, SKIP, WARN or FAIL
     * @param message what was found, with the numbers
     * @param fix one sentence saying what to do (empty for PASS and SKIP)
     */
    public record Finding(String id, Status status, String message, String fix) {
        public Finding {
            Objects.requireNonNull(id, "id");
            Objects.requireNonNull(status, "status");
            fix = fix == null ? "" : fix;
        }
    }

    /**
     * All findings of one run.
     *
     * @param host the host's name
     * @param localRanks the N checked for
     * @param findings in check order
     */
    public record Report(String host, int localRanks, List<Finding> findings) {
        public Report {
            findings = List.copyOf(findings);
        }

        /** 0 pass, 1 warnings, 2 failures. */
        public int exitCode() {
            Status worst = findings.stream().map(Finding::status).max(Enum::compareTo).orElse(Status.PASS);
            return worst == Status.FAIL ? 2 : worst == Status.WARN ? 1 : 0;
        }

        /** The finding called {@code id}. */
        public Finding get(String id) {
            return findings.stream().filter(f -> f.id().equals(id)).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("no check " + id));
        }

        /** The report as the terminal shows it. */
        public String text() {
            StringBuilder sb = new StringBuilder();
            sb.append("jccl doctor: ").append(localRanks).append(" local rank(s) on ").append(host.isEmpty() ? "this host" : host)
                    .append('\n');
            for (Finding f : findings) {
                sb.append(String.format("%-5s %-20s %s%n", f.status(), f.id(), f.message()));
                if (!f.fix().isEmpty()) {
                    sb.append(String.format("%-26s fix: %s%n", "", f.fix()));
                }
            }
            Map<Status, Integer> n = counts();
            sb.append(String.format("%d pass, %d warn, %d fail, %d skipped (exit code %d)%n", n.get(Status.PASS), n.get(Status.WARN),
                    n.get(Status.FAIL), n.get(Status.SKIP), exitCode()));
            return sb.toString();
        }

        private Map<Status, Integer> counts() {
            Map<Status, Integer> n = new LinkedHashMap<>();
            for (Status s : Status.values()) {
                n.put(s, 0);
            }
            findings.forEach(f -> n.merge(f.status(), 1, Integer::sum));
            return n;
        }

        /** The report as {@code jccl doctor --json} prints it. */
        public Map<String, Object> toJson() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("host", host);
            m.put("local_ranks", localRanks);
            m.put("exit_code", exitCode());
            List<Object> l = new ArrayList<>();
            for (Finding f : findings) {
                Map<String, Object> o = new LinkedHashMap<>();
                o.put("id", f.id());
                o.put("status", f.status().name());
                o.put("message", f.message());
                o.put("fix", f.fix());
                l.add(o);
            }
            m.put("checks", l);
            return m;
        }
    }

    /**
     * What the checks look at.
     *
     * @param topo the host
     * @param env the environment of the job (the settings and CUDA_VISIBLE_DEVICES are read from it)
     * @param localRanks N, the ranks the job will start on this host (at least 1)
     * @param interfaces the interfaces with their addresses (for JCCL_SOCKET_IFNAME), e.g. {@link Interfaces#systemInterfaces()}
     * @param gpuProbe NVML for the P2P check, or {@link GpuProbe#absent}
     * @param perRankCvd each local rank's CUDA_VISIBLE_DEVICES (null entry: unset) when the launcher gives each its own, N
     *        entries; null when every rank has {@code env}'s
     * @param localRank the one local rank this doctor runs as (it was started inside a rank, whose environment says which),
     *        or -1 to check every local rank
     */
    public record Input(Topology topo, Map<String, String> env, int localRanks, List<Interfaces.Nic> interfaces, GpuProbe gpuProbe,
                        List<String> perRankCvd, int localRank) {
        public Input {
            env = Map.copyOf(env);
            interfaces = List.copyOf(interfaces);
            if (localRanks < 1) {
                throw new IllegalArgumentException("local ranks must be at least 1, not " + localRanks);
            }
            if (perRankCvd != null) {
                if (perRankCvd.size() != localRanks) {
                    throw new IllegalArgumentException(perRankCvd.size() + " per-rank CUDA_VISIBLE_DEVICES values for " + localRanks
                            + " local ranks: give one per rank");
                }
                perRankCvd = java.util.Collections.unmodifiableList(new ArrayList<>(perRankCvd));
            }
            if (localRank >= localRanks) {
                throw new IllegalArgumentException("local rank " + localRank + " is not below the " + localRanks + " local ranks");
            }
        }

        /** Every rank with {@code env}'s CUDA_VISIBLE_DEVICES, every rank checked. */
        public Input(Topology topo, Map<String, String> env, int localRanks, List<Interfaces.Nic> interfaces, GpuProbe gpuProbe) {
            this(topo, env, localRanks, interfaces, gpuProbe, null, -1);
        }
    }

    /** Launchers' local-rank variables, innermost convention first (as LaunchEnvironment orders them). */
    static final List<String> LOCAL_RANK_VARIABLES = List.of("JCCL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID");

    /**
     * The local rank the environment gives this process (a doctor started inside a rank), with the
     * variable that said so, or null when none does.
     */
    public static Map.Entry<String, Integer> localRankFromEnv(Map<String, String> env) {
        for (String k : LOCAL_RANK_VARIABLES) {
            String v = env.get(k);
            if (v != null && v.trim().matches("\\d{1,6}")) {
                return Map.entry(k, Integer.parseInt(v.trim()));
            }
        }
        return null;
    }

    private final Input in;
    private final Topology t;
    private final Config config;

    private Doctor(Input in) {
        this.in = in;
        this.t = in.topo();
        this.config = Config.fromEnvironment(in.env());
    }

    /**
     * N when the user gives none: the launcher's local size if the environment has one, else the
     * visible GPUs, else the CPUs.
     */
    public static int defaultLocalRanks(Topology topo, Map<String, String> env) {
        for (String k : List.of("JCCL_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")) {
            String v = env.get(k);
            if (v != null && v.trim().matches("\\d+") && Integer.parseInt(v.trim()) > 0) {
                return Integer.parseInt(v.trim());
            }
        }
        int gpus = CudaVisibleDevices.resolve(topo, env.get("CUDA_VISIBLE_DEVICES")).visible().size();
        return gpus > 0 ? gpus : Math.max(1, topo.cpus());
    }

    /** Runs every check. */
    public static Report run(Input in) {
        Doctor d = new Doctor(in);
        List<Finding> out = new ArrayList<>();
        d.guard(out, "container", d::container);
        d.guard(out, "shm", d::shm);
        d.guard(out, "memlock", d::memlock);
        d.guard(out, "open-files", d::openFiles);
        d.guard(out, "threads", d::threads);
        d.guard(out, "listen-backlog", d::listenBacklog);
        d.guard(out, "gpudirect-rdma", d::gpuDirect);
        d.guard(out, "rdma-ports", d::rdmaPorts);
        d.guard(out, "rdma-link-layer", d::linkLayer);
        d.guard(out, "roce-gid", d::roceGid);
        d.guard(out, "ib-hca", d::ibHca);
        d.guard(out, "nic-assignment", d::nicAssignment);
        d.guard(out, "socket-ifname", d::socketIfname);
        d.guard(out, "cuda-visible-devices", d::cudaVisibleDevices);
        d.guard(out, "gpu-p2p", d::p2p);
        d.guard(out, "env", d::env);
        return new Report(in.topo().hostname(), in.localRanks(), out);
    }

    /** A check that throws (a bad setting it needed) is a FAIL naming the error, never a crash of the doctor. */
    private void guard(List<Finding> out, String id, Supplier<Finding> check) {
        try {
            out.add(check.get());
        } catch (ConfigException e) {
            out.add(new Finding(id, Status.FAIL, "cannot check: " + e.getMessage(), "correct the setting named above"));
        } catch (RuntimeException e) {
            out.add(new Finding(id, Status.SKIP, "could not be checked: " + e, ""));
        }
    }

    private static Finding pass(String id, String msg) {
        return new Finding(id, Status.PASS, msg, "");
    }

    private static Finding skip(String id, String why) {
        return new Finding(id, Status.SKIP, why, "");
    }

    private static Finding warn(String id, String msg, String fix) {
        return new Finding(id, Status.WARN, msg, fix);
    }

    private static Finding fail(String id, String msg, String fix) {
        return new Finding(id, Status.FAIL, msg, fix);
    }


    private static String limit(long v, boolean bytes) {
        if (v == Limits.UNLIMITED) {
            return "unlimited";
        }
        if (v == Limits.UNKNOWN) {
            return "unknown";
        }
        return bytes ? TopoText.bytes(v) : Long.toString(v);
    }

    /** World size: the environment's if it says more than N (a multi-host job), else N. */
    private int world() {
        for (String k : List.of("JCCL_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")) {
            String v = in.env().get(k);
            if (v != null && v.trim().matches("\\d+")) {
                return Math.max(in.localRanks(), Integer.parseInt(v.trim()));
            }
        }
        return in.localRanks();
    }

    private int socketsPerPeer() {
        return Settings.SOCKET_NTHREADS.getInt(config) * Settings.NSOCKS_PERTHREAD.getInt(config);
    }

    private List<RdmaDevice> allowedRdma() {
        DeviceList spec = DeviceList.parse(Settings.IB_HCA.name(), Settings.IB_HCA.getString(config), true);
        return t.rdmaDevices().stream().filter(d -> d.ports().stream().anyMatch(p -> spec.accepts(d.name(), p.number()))).toList();
    }

    // ------------------------------------------------------------------ the checks

    Finding container() {
        Container c = t.container();
        if (c.kind().equals("none")) {
            return pass("container", "not in a container (no /.dockerenv, no container in /proc/1/cgroup, no KUBERNETES_SERVICE_HOST)");
        }
        String what = switch (c.kind()) {
            case "kubernetes" -> "a Kubernetes pod";
            case "docker" -> "a Docker container";
            default -> "a container";
        };
        return pass("container", "running in " + what + " (" + c.evidence() + "); the fixes below are given for it");
    }

    Finding shm() {
        String id = "shm";
        if (Settings.SHM_DISABLE.getBool(config)) {
            return skip(id, "JCCL_SHM_DISABLE=1: same-host ranks use TCP, no shared memory is reserved");
        }
        int n = in.localRanks();
        Topology.Shm shm = t.shm();
        if (n <= 1) {
            return pass(id, "1 local rank reserves no shared memory (" + shm.dir() + ": " + TopoText.bytes(shm.freeBytes())
                    + " free); run jccl doctor -np N to check N ranks");
        }
        int slots = Settings.SHM_SLOTS.getInt(config);
        long chunk = Settings.SHM_CHUNK.getLong(config);
        long ring = ShmReservation.ringBytes(slots, chunk);
        long need = ShmReservation.hostBytes(n, slots, chunk);
        String how = n + " local ranks need " + TopoText.bytes(need) + " (each rank reserves " + (n - 1) + " ring(s) of " + slots + " x "
                + TopoText.bytes(chunk) + " = " + TopoText.bytes(ring) + " each, JCCL_SHM_SLOTS x JCCL_SHM_CHUNK)";
        String suggest = suggestSize(need);
        String fix = t.container().shmFix(suggest) + "; or point JCCL_SHM_DIR at a larger tmpfs, make the rings smaller"
                + " (JCCL_SHM_SLOTS, JCCL_SHM_CHUNK), or set JCCL_SHM_DISABLE=1 to use TCP between same-host ranks";
        if (shm.totalBytes() < 0) {
            return fail(id, shm.dir() + " does not exist or cannot be examined; " + how,
                    "create it as a tmpfs (mount -t tmpfs -o size=" + suggest + " tmpfs " + shm.dir()
                            + ") or point JCCL_SHM_DIR at one, or set JCCL_SHM_DISABLE=1");
        }
        String have = shm.dir() + " has " + TopoText.bytes(shm.freeBytes()) + " free of " + TopoText.bytes(shm.totalBytes());
        if (shm.freeBytes() < need) {
            return fail(id, have + "; " + how + ": communicator creation fails with 'not enough shared memory'", fix);
        }
        if (shm.freeBytes() < 2 * need) {
            return warn(id, have + "; " + how + ", which leaves little for others (PyTorch DataLoader workers, NCCL also use it)", fix);
        }
        return pass(id, have + "; " + how);
    }

    /** A size to suggest: twice the need, rounded up to a power of two, at least 1g. */
    public static String suggestSize(long need) {
        long want = Math.max(1L << 30, Long.highestOneBit(Math.max(1, 2 * need - 1)) << 1);
        return want % (1L << 30) == 0 ? (want >> 30) + "g" : (want >> 20) + "m";
    }

    private String limitsFix(String dockerUlimit, String limitsConf, String systemd) {
        Container c = t.container();
        if (c.docker()) {
            return "restart the container with --ulimit " + dockerUlimit;
        }
        if (c.kubernetes()) {
            return "raise the container runtime's default limit on the node (" + systemd + " in containerd.service or docker.service),"
                    + " since pod specs cannot set ulimits";
        }
        return "add '" + limitsConf + "' to /etc/security/limits.conf (" + systemd + " for services) and log in again";
    }

    Finding memlock() {
        String id = "memlock";
        Limits l = t.limits();
        String have = "max locked memory: " + limit(l.memlockSoft(), true) + " (hard " + limit(l.memlockHard(), true) + ")";
        if (t.rdmaDevices().isEmpty()) {
            return pass(id, have + "; no RDMA devices here, so nothing is registered against it");
        }
        if (l.memlockSoft() == Limits.UNKNOWN) {
            return skip(id, "/proc/self/limits could not be read");
        }
        if (l.memlockSoft() == Limits.UNLIMITED) {
            return pass(id, have + "; RDMA may register any buffer");
        }
        String fix = l.memlockHard() == Limits.UNLIMITED || l.memlockHard() > l.memlockSoft()
                ? "run ulimit -l " + limit(l.memlockHard(), false).replace(" ", "") + " in the job's shell before starting it"
                : limitsFix("memlock=-1", "* - memlock unlimited", "LimitMEMLOCK=infinity");
        String why = "; RDMA registers (pins) every communication buffer against it, so registrations fail"
                + " ('ibv_reg_mr: Cannot allocate memory') once it is used up";
        if (l.memlockSoft() < 64L << 20) {
            return fail(id, have + why, fix);
        }
        return warn(id, have + why + "; unlimited is the safe setting", fix);
    }

    Finding openFiles() {
        String id = "open-files";
        Limits l = t.limits();
        if (l.nofileSoft() == Limits.UNKNOWN) {
            return skip(id, "/proc/self/limits could not be read");
        }
        int world = world();
        int spp = socketsPerPeer();
        long need = 64 + (long) world * (spp + 2);
        String have = "max open files: " + limit(l.nofileSoft(), false) + " (hard " + limit(l.nofileHard(), false) + "); a rank of a "
                + world + "-rank job needs about " + need + " (" + spp + " socket(s) per peer, JCCL_SOCKET_NTHREADS x"
                + " JCCL_NSOCKS_PERTHREAD, plus doorbells and the JVM's own)";
        if (l.nofileSoft() == Limits.UNLIMITED || l.nofileSoft() >= 4 * need) {
            return pass(id, have);
        }
        String fix = l.nofileHard() == Limits.UNLIMITED || l.nofileHard() >= 4 * need
                ? "run ulimit -n " + (l.nofileHard() == Limits.UNLIMITED ? 1048576 : l.nofileHard()) + " in the job's shell"
                : limitsFix("nofile=1048576:1048576", "* - nofile 1048576", "LimitNOFILE=1048576");
        if (l.nofileSoft() < need) {
            return fail(id, have + ": connections fail with 'Too many open files'", fix);
        }
        return warn(id, have + ", with little headroom", fix);
    }

    Finding threads() {
        String id = "threads";
        Limits l = t.limits();
        int n = in.localRanks();
        // A JVM rank: GC and compiler threads grow with the CPUs, plus jccl's op, acceptor and init threads.
        long perRank = 40 + t.cpus();
        long need = n * perRank;
        StringBuilder have = new StringBuilder();
        Status st = Status.PASS;
        String fix = "";
        if (l.pidsMax() != Limits.UNKNOWN) {
            have.append("cgroup pids.max ").append(limit(l.pidsMax(), false));
            if (l.pidsMax() != Limits.UNLIMITED && l.pidsMax() < 2 * need) {
                st = l.pidsMax() < need ? Status.FAIL : Status.WARN;
                fix = t.container().kubernetes() ? "raise the kubelet's podPidsLimit (--pod-max-pids) for this node pool"
                        : t.container().docker() ? "restart the container with a larger --pids-limit (or -1)"
                        : "raise pids.max of the job's cgroup (systemd: TasksMax=infinity)";
            }
        }
        if (l.nprocSoft() != Limits.UNKNOWN) {
            have.append(have.isEmpty() ? "" : ", ").append("max user processes ").append(limit(l.nprocSoft(), false));
            if (l.nprocSoft() != Limits.UNLIMITED && l.nprocSoft() < 2 * need) {
                Status s2 = l.nprocSoft() < need ? Status.FAIL : Status.WARN;
                if (s2.compareTo(st) > 0 || fix.isEmpty()) {
                    fix = "run ulimit -u unlimited (or add '* - nproc unlimited' to /etc/security/limits.conf)";
                }
                st = s2.compareTo(st) > 0 ? s2 : st;
            }
        }
        if (have.isEmpty()) {
            return skip(id, "neither /proc/self/limits nor the cgroup's pids.max could be read");
        }
        String msg = have + "; " + n + " JVM ranks on " + t.cpus() + " CPUs start about " + need + " threads (" + perRank + " each)";
        return switch (st) {
            case FAIL -> fail(id, msg + ": thread creation fails with EAGAIN ('Resource temporarily unavailable', 'unable to create"
                    + " native thread')", fix);
            case WARN -> warn(id, msg + ", close to the limit: other processes of the user or pod count too", fix);
            default -> pass(id, msg);
        };
    }

    Finding listenBacklog() {
        String id = "listen-backlog";
        long cap = t.limits().somaxconn();
        if (cap == Limits.UNKNOWN) {
            return skip(id, "/proc/sys/net/core/somaxconn could not be read");
        }
        int world = world();
        long need = Math.max(world, (long) (world - 1) * socketsPerPeer());
        String msg = "net.core.somaxconn = " + cap + "; at initialisation up to " + need + " connections of a " + world
                + "-rank job arrive at one listener at once";
        if (cap < need) {
            return warn(id, msg + ": connections beyond the backlog are dropped and retried (slow start) or refused with EAGAIN"
                    + " ('Resource temporarily unavailable')", "sysctl -w net.core.somaxconn=" + Math.max(4096, Long.highestOneBit(need) << 1)
                    + (t.container().kubernetes() ? " (in a pod: securityContext.sysctls, net.core.somaxconn is a namespaced sysctl)" : ""));
        }
        return pass(id, msg);
    }

    Finding gpuDirect() {
        String id = "gpudirect-rdma";
        GpuDirect g = t.gpuDirect();
        if (t.gpus().isEmpty() || t.rdmaDevices().isEmpty()) {
            return skip(id, "needs GPUs and RDMA devices; this host has " + t.gpus().size() + " GPU(s) and " + t.rdmaDevices().size()
                    + " RDMA device(s)");
        }
        if (g.peerMemory()) {
            String how = g.nvidiaPeermem() ? "nvidia-peermem is loaded" : "a peer-memory client is registered";
            return pass(id, "GPUDirect RDMA is on: " + how + (g.nvMemVersion().isEmpty() ? "" : " (nv_mem version " + g.nvMemVersion() + ")")
                    + (g.nvMemNc() ? ", nv_mem_nc present" : ""));
        }
        if (g.dmaBuf()) {
            return pass(id, "GPUDirect RDMA is on through dma-buf: Linux " + g.kernelRelease() + " and NVIDIA's open kernel module "
                    + g.nvidiaDriver() + " (no nvidia-peermem needed)");
        }
        String dma = "dma-buf is not possible (" + (g.kernelAtLeast(5, 12) ? "Linux " + g.kernelRelease() + " is recent enough, but "
                : "Linux " + (g.kernelRelease().isEmpty() ? "unknown" : g.kernelRelease()) + " is older than 5.12; ")
                + (g.openKernelModule() ? "driver " + g.nvidiaDriver() + " is older than 515" : "the NVIDIA kernel module is the closed one")
                + ")";
        return warn(id, "GPUDirect RDMA is off: no peer-memory module (/sys/kernel/mm/memory_peers/nv_mem/version is missing,"
                        + " nvidia_peermem is not loaded) and " + dma + "; every GPU buffer is staged through host memory, at a fraction"
                        + " of the " + t.rdmaDevices().size() + " NICs' bandwidth",
                "load the module that ships with the driver: modprobe nvidia-peermem (and list it in /etc/modules-load.d/ so it"
                        + " survives a reboot), or use the open kernel module (driver 515+) on Linux 5.12+ for dma-buf");
    }

    Finding rdmaPorts() {
        String id = "rdma-ports";
        List<RdmaDevice> devs = allowedRdma();
        if (devs.isEmpty()) {
            return skip(id, t.rdmaDevices().isEmpty() ? "no RDMA devices (/sys/class/infiniband is empty or absent)"
                    : "JCCL_IB_HCA allows none of the RDMA devices (see ib-hca)");
        }
        List<String> active = new ArrayList<>();
        List<String> bad = new ArrayList<>();
        boolean init = false;
        for (RdmaDevice d : devs) {
            for (RdmaPort p : d.ports()) {
                String name = d.name() + ":" + p.number();
                if (p.active()) {
                    active.add(name);
                } else {
                    init |= p.state().contains("INIT");
                    bad.add(name + " is " + p.state());
                }
            }
        }
        String fix = init ? "INIT means no subnet manager has configured the port: start opensm on one host or enable the switch's"
                + " subnet manager; DOWN means no link: check the cable, the switch port and ibstat"
                : "DOWN means no link: check the cable and the switch port (ibstat, ibv_devinfo), or exclude the device with JCCL_IB_HCA=^name";
        if (active.isEmpty()) {
            return fail(id, "no RDMA port is ACTIVE: " + String.join(", ", bad), fix);
        }
        if (!bad.isEmpty()) {
            return warn(id, active.size() + " port(s) ACTIVE, " + bad.size() + " not: " + String.join(", ", bad)
                    + "; GPUs nearest to those devices fall back to farther ones", fix);
        }
        return pass(id, "all " + active.size() + " RDMA port(s) ACTIVE: " + String.join(", ", active));
    }

    Finding linkLayer() {
        String id = "rdma-link-layer";
        Map<String, List<String>> byLayer = new LinkedHashMap<>();
        for (RdmaDevice d : allowedRdma()) {
            for (RdmaPort p : d.ports()) {
                if (p.active()) {
                    byLayer.computeIfAbsent(p.linkLayer(), k -> new ArrayList<>()).add(d.name() + ":" + p.number() + " " + p.rate());
                }
            }
        }
        if (byLayer.isEmpty()) {
            return skip(id, "no active RDMA port");
        }
        if (byLayer.size() > 1) {
            StringBuilder sb = new StringBuilder();
            byLayer.forEach((k, v) -> sb.append(sb.isEmpty() ? "" : "; ").append(k).append(": ").append(String.join(", ", v)));
            return warn(id, "active ports on different fabrics (" + sb + "): a rank on one cannot reach a rank on the other over RDMA",
                    "keep one fabric for the job with JCCL_IB_HCA (e.g. the InfiniBand devices only)");
        }
        Map.Entry<String, List<String>> e = byLayer.entrySet().iterator().next();
        return pass(id, e.getKey() + (e.getKey().equalsIgnoreCase("Ethernet") ? " (RoCE)" : "") + " on every active port: "
                + String.join(", ", e.getValue()));
    }

    Finding roceGid() {
        String id = "roce-gid";
        Integer forced = Settings.IB_GID_INDEX.raw(config) == null ? null : Settings.IB_GID_INDEX.getInt(config);
        List<String> ok = new ArrayList<>();
        List<String> warns = new ArrayList<>();
        List<String> fails = new ArrayList<>();
        String fix = "";
        for (RdmaDevice d : allowedRdma()) {
            for (RdmaPort p : d.ports()) {
                if (!p.active() || !p.ethernet()) {
                    continue;
                }
                String name = d.name() + ":" + p.number();
                Gid best = p.gids().stream().filter(x -> x.roceV2() && x.ipv4()).findFirst()
                        .orElse(p.gids().stream().filter(x -> x.roceV2() && !x.linkLocal()).findFirst().orElse(null));
                String nets = d.netDevices().isEmpty() ? "its interface" : String.join("/", d.netDevices());
                if (forced == null) {
                    if (best == null) {
                        fails.add(name + " has no RoCE v2 GID with an IP address (" + nets + " has no IP address?)");
                        fix = "give " + nets + " an IP address (RoCE v2 GIDs are made from it), or set JCCL_IB_GID_INDEX to a RoCE v2 GID";
                    } else {
                        ok.add(name + " uses GID " + best.index() + " (" + best.type() + ", " + describe(best) + ")");
                    }
                    continue;
                }
                Gid g = p.gids().stream().filter(x -> x.index() == forced).findFirst().orElse(null);
                String better = best == null ? "" : "; GID " + best.index() + " is RoCE v2 " + describe(best);
                if (g == null) {
                    fails.add(name + ": JCCL_IB_GID_INDEX=" + forced + " is an empty GID entry" + better);
                    fix = best == null ? "unset JCCL_IB_GID_INDEX and give " + nets + " an IP address"
                            : "set JCCL_IB_GID_INDEX=" + best.index() + " (or unset it: jccl picks the RoCE v2 IPv4 GID)";
                } else if (!g.roceV2() || g.linkLocal()) {
                    warns.add(name + ": JCCL_IB_GID_INDEX=" + forced + " is " + (g.type().isEmpty() ? "a" : g.type()) + " GID "
                            + describe(g) + (g.roceV2() ? " (link-local: not routable between subnets)" : " (RoCE v1: not routable, needs"
                            + " the same L2 domain)") + better);
                    if (fix.isEmpty()) {
                        fix = best == null ? "use a RoCE v2 GID with an IP address" : "set JCCL_IB_GID_INDEX=" + best.index()
                                + " (or unset it: jccl picks the RoCE v2 IPv4 GID)";
                    }
                } else {
                    ok.add(name + " uses GID " + g.index() + " (" + g.type() + ", " + describe(g) + ")");
                }
            }
        }
        if (ok.isEmpty() && warns.isEmpty() && fails.isEmpty()) {
            return skip(id, "no active RoCE (Ethernet) port" + (t.rdmaDevices().isEmpty() ? "" : "; InfiniBand ports use LIDs, not GIDs"));
        }
        List<String> all = new ArrayList<>(fails);
        all.addAll(warns);
        all.addAll(ok);
        if (!fails.isEmpty()) {
            return fail(id, String.join("; ", all), fix);
        }
        if (!warns.isEmpty()) {
            return warn(id, String.join("; ", all), fix);
        }
        return pass(id, String.join("; ", all));
    }

    private static String describe(Gid g) {
        if (g.ipv4()) {
            String[] h = g.gid().split(":");
            int a = Integer.parseInt(h[6], 16);
            int b = Integer.parseInt(h[7], 16);
            return "IPv4 " + (a >> 8) + "." + (a & 255) + "." + (b >> 8) + "." + (b & 255);
        }
        return g.gid();
    }

    Finding ibHca() {
        String id = "ib-hca";
        String raw = Settings.IB_HCA.getString(config);
        List<String> names = t.rdmaDevices().stream().map(RdmaDevice::name).toList();
        if (raw == null || raw.isBlank()) {
            return t.rdmaDevices().isEmpty() ? skip(id, "JCCL_IB_HCA is unset and there are no RDMA devices")
                    : pass(id, "JCCL_IB_HCA is unset: every device with an active port may be used (" + String.join(", ",
                            t.rdmaDevices().stream().filter(RdmaDevice::active).map(RdmaDevice::name).toList()) + ")");
        }
        DeviceList spec;
        try {
            spec = DeviceList.parse(Settings.IB_HCA.name(), raw, true);
        } catch (ConfigException e) {
            return fail(id, e.getMessage(), "write JCCL_IB_HCA as name[:port],... (e.g. mlx5_0:1,mlx5_1:1)");
        }
        List<String> missing = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        for (DeviceList.Entry e : spec.entries()) {
            List<RdmaDevice> m = t.rdmaDevices().stream().filter(d -> e.matchesName(d.name())).toList();
            if (m.isEmpty()) {
                List<String> near = names.stream().filter(n -> n.startsWith(e.name()) || e.name().startsWith(n)
                        || EnvCheck.editDistance(n, e.name()) <= 2).limit(3).toList();
                missing.add("'" + e + "' names no RDMA device" + (near.isEmpty() ? "" : " (did you mean " + String.join(" or ", near) + "?)"));
                continue;
            }
            if (e.port() >= 0 && m.stream().noneMatch(d -> d.ports().stream().anyMatch(p -> p.number() == e.port()))) {
                missing.add("'" + e + "': " + m.getFirst().name() + " has no port " + e.port());
            }
            if (!e.prefix()) {
                List<String> longer = names.stream().filter(n -> n.startsWith(e.name()) && !n.equals(e.name())).toList();
                if (!longer.isEmpty()) {
                    notes.add(e.name() + " means exactly " + e.name() + " (NCCL would also take " + String.join(", ", longer) + ")");
                }
            }
        }
        String devices = "devices present: " + (names.isEmpty() ? "none" : String.join(", ", names));
        if (!missing.isEmpty()) {
            return fail(id, "JCCL_IB_HCA=" + raw + ": " + String.join("; ", missing) + "; " + devices,
                    "list devices by their exact names from /sys/class/infiniband (ibv_devices), e.g. JCCL_IB_HCA=" + names.stream()
                            .limit(2).reduce((a, b) -> a + "," + b).orElse("mlx5_0"));
        }
        List<String> allowed = allowedRdma().stream().map(RdmaDevice::name).toList();
        if (allowed.isEmpty()) {
            return fail(id, "JCCL_IB_HCA=" + raw + " leaves no RDMA device; " + devices, "remove the ^ or name a device to use");
        }
        return pass(id, "JCCL_IB_HCA=" + raw + " selects " + String.join(", ", allowed) + (notes.isEmpty() ? "" : "; " + String.join("; ", notes)));
    }

    Finding nicAssignment() {
        String id = "nic-assignment";
        DeviceList spec = DeviceList.parse(Settings.IB_HCA.name(), Settings.IB_HCA.getString(config), true);
        List<NicAssignment.Nic> nics = NicAssignment.candidates(t, spec);
        if (nics.isEmpty()) {
            return skip(id, "no NIC to assign: no RDMA device with an active port and no PCI network interface that is up");
        }
        List<Gpu> visible = CudaVisibleDevices.resolve(t, in.env().get("CUDA_VISIBLE_DEVICES")).visible();
        int n = in.localRanks();
        if (visible.isEmpty()) {
            StringBuilder sb = new StringBuilder("no GPUs: local ranks take the NICs in turn:");
            for (int r = 0; r < Math.min(n, 16); r++) {
                sb.append(" rank ").append(r).append(" -> ").append(nics.get(r % nics.size()).name()).append(r + 1 < Math.min(n, 16) ? "," : "");
            }
            return pass(id, sb.toString());
        }
        NicAssignment.Result res = NicAssignment.assign(visible.stream().map(Gpu::pci).toList(), nics, t.singleNumaNode());
        StringBuilder map = new StringBuilder();
        Set<String> used = new TreeSet<>(SysfsDiscovery::naturalOrder);
        List<String> far = new ArrayList<>();
        int ranksWithGpu = Math.min(n, visible.size());
        for (int r = 0; r < ranksWithGpu; r++) {
            List<NicAssignment.Choice> c = res.perGpu().get(r);
            c.forEach(x -> used.add(x.nic()));
            map.append(map.isEmpty() ? "" : ", ").append("rank ").append(r).append(" GPU ").append(visible.get(r).pci().address())
                    .append(" -> ").append(c.stream().map(NicAssignment.Choice::toString).reduce((a, b) -> a + " + " + b).orElse("?"));
            if (!c.isEmpty() && c.getFirst().distance() == PciDistance.SYS) {
                far.add("rank " + r);
            }
        }
        // Devices that would carry traffic if allowed and active, but do not.
        List<String> idle = new ArrayList<>();
        List<String> reasons = new ArrayList<>();
        boolean rdma = nics.getFirst().rdma();
        if (rdma) {
            for (RdmaDevice d : t.rdmaDevices()) {
                if (used.contains(d.name())) {
                    continue;
                }
                idle.add(d.name());
                if (!d.active()) {
                    reasons.add(d.name() + ": no active port");
                } else if (d.ports().stream().noneMatch(p -> spec.accepts(d.name(), p.number()))) {
                    reasons.add(d.name() + ": excluded by JCCL_IB_HCA");
                } else {
                    reasons.add(d.name() + ": only " + ranksWithGpu + " rank(s) with a GPU");
                }
            }
        }
        String kind = rdma ? "HCA" : "NIC";
        int total = rdma ? t.rdmaDevices().size() : nics.size();
        if (!idle.isEmpty()) {
            return warn(id, "only " + used.size() + " of " + total + " " + kind + "s carry traffic (" + String.join("; ", reasons) + "): "
                            + map,
                    reasons.stream().anyMatch(s -> s.endsWith("JCCL_IB_HCA")) ? "unset JCCL_IB_HCA (or list every device) so each GPU"
                            + " uses the HCA on its own PCIe switch"
                            : reasons.stream().anyMatch(s -> s.endsWith("no active port")) ? "bring the idle HCAs' ports up (see rdma-ports)"
                            : "start one rank per GPU (-np " + visible.size() + ") so every HCA is used");
        }
        if (!far.isEmpty()) {
            return warn(id, String.join(", ", far) + " reach their NIC across sockets (SYS): " + map,
                    "bind those ranks' GPUs to the socket of a NIC, or add a NIC on that socket; check JCCL_IB_HCA");
        }
        return pass(id, "every " + kind + " carries traffic (" + used.size() + " of " + total + "): " + map);
    }

    Finding socketIfname() {
        String id = "socket-ifname";
        String spec = Settings.SOCKET_IFNAME.getString(config);
        Interfaces.Family fam = Interfaces.Family.parse(Settings.SOCKET_FAMILY.getString(config));
        Interfaces.Selection s;
        try {
            s = Interfaces.choose(spec, fam, in.interfaces());
        } catch (ConfigException e) {
            return fail(id, e.getMessage(), "set JCCL_SOCKET_IFNAME to one of the interfaces listed (names are exact; a trailing * matches by prefix)");
        }
        String label = "JCCL_SOCKET_IFNAME" + (spec == null ? " is unset" : "=" + spec) + ": bootstrap and TCP use " + s.interfaceName()
                + " (" + s.address().getHostAddress() + ")";
        // Names the spec reaches only because an entry is a prefix of them (eth1 -> eth10): asked of
        // Interfaces itself, one interface at a time, so this follows whatever its grammar is.
        List<String> surprises = new ArrayList<>();
        if (spec != null && !spec.isBlank()) {
            boolean exclude = spec.trim().startsWith("^");
            for (Interfaces.Nic x : in.interfaces()) {
                if (!x.up() || x.loopback()) {
                    continue;
                }
                List<String> shorter = in.interfaces().stream().map(Interfaces.Nic::name)
                        .filter(p -> x.name().startsWith(p) && !x.name().equals(p) && spec.contains(p)).toList();
                if (shorter.isEmpty()) {
                    continue;
                }
                boolean selected;
                try {
                    selected = Interfaces.choose(spec, fam, List.of(x)).interfaceName().equals(x.name());
                } catch (ConfigException e) {
                    selected = false;
                }
                if (selected != exclude) {
                    surprises.add(shorter.getFirst() + " is a prefix: it also " + (exclude ? "excludes " : "matches ") + x.name());
                }
            }
        }
        if (!surprises.isEmpty()) {
            return warn(id, label + "; " + String.join("; ", surprises), "write =" + spec.trim().replace("^", "").split(",")[0].trim()
                    + " (exact names) to mean only that interface" + (spec.trim().startsWith("^") ? ", after the ^" : ""));
        }
        boolean loopback = in.interfaces().stream().anyMatch(x -> x.name().equals(s.interfaceName()) && x.loopback());
        if (loopback && world() > in.localRanks()) {
            return fail(id, label + ", a loopback interface, but the job has " + world() + " ranks and only " + in.localRanks()
                    + " here: other hosts cannot reach it", "set JCCL_SOCKET_IFNAME to the interface other hosts reach this one on");
        }
        // Only when TCP carries the data (no RDMA): warn about a slow interface chosen while a faster one is up.
        if (NicAssignment.candidates(t, DeviceList.parse(Settings.IB_HCA.name(), null, true)).stream().noneMatch(NicAssignment.Nic::rdma)) {
            long chosen = t.netDevices().stream().filter(d -> d.name().equals(s.interfaceName())).mapToLong(NetDevice::speedMbps)
                    .findFirst().orElse(-1);
            NetDevice fastest = t.netDevices().stream().filter(d -> d.up() && d.pci().onPci())
                    .max(java.util.Comparator.comparingLong(NetDevice::speedMbps)).orElse(null);
            if (chosen > 0 && fastest != null && fastest.speedMbps() >= 4 * chosen && !fastest.name().equals(s.interfaceName())) {
                return warn(id, label + " at " + chosen + " Mb/s while " + fastest.name() + " is up at " + fastest.speedMbps()
                        + " Mb/s; TCP carries the data here", "set JCCL_SOCKET_IFNAME=" + fastest.name() + " if other hosts reach it");
            }
        }
        return pass(id, label);
    }

    /**
     * Which GPU each local rank drives, by the rule the runtime uses ({@link GpuMapping}), and whether
     * two ranks would share one (the same {@link GpuMapping#conflicts} the ranks run at creation).
     * Every rank has the job's CUDA_VISIBLE_DEVICES, or each its own ({@link Input#perRankCvd()});
     * a doctor started inside a rank ({@link Input#localRank()}) answers for that rank.
     */
    Finding cudaVisibleDevices() {
        String id = "cuda-visible-devices";
        String raw = in.env().get("CUDA_VISIBLE_DEVICES");
        if (t.gpus().isEmpty()) {
            return skip(id, "no NVIDIA GPUs on this host" + (raw == null ? "" : " (CUDA_VISIBLE_DEVICES=" + raw + " has nothing to select)"));
        }
        int n = in.localRanks();
        boolean perRank = in.perRankCvd() != null;
        String cudaDevice = Settings.CUDA_DEVICE.getString(config);
        String deviceNote = cudaDevice == null ? "" : ", JCCL_CUDA_DEVICE=" + cudaDevice;
        String shown = perRank ? "per-rank CUDA_VISIBLE_DEVICES " + perRankText() : raw == null ? "CUDA_VISIBLE_DEVICES is unset"
                : "CUDA_VISIBLE_DEVICES=" + raw;
        shown += deviceNote;
        String indexFix = "list each GPU once, by index 0-" + (t.gpus().size() - 1) + " (PCI order, as nvidia-smi) or by UUID (nvidia-smi -L)";
        List<Integer> ranks = new ArrayList<>();
        if (in.localRank() >= 0) {
            ranks.add(in.localRank());
        } else {
            for (int r = 0; r < n; r++) {
                ranks.add(r);
            }
        }
        List<GpuMapping.Claim> claims = new ArrayList<>();
        StringBuilder map = new StringBuilder();
        List<String> unchecked = new ArrayList<>();
        Set<Gpu> used = new java.util.HashSet<>();
        List<Integer> failing = new ArrayList<>();
        String firstError = null;
        for (int r : ranks) {
            String cvdText = perRank ? in.perRankCvd().get(r) : raw;
            CudaVisibleDevices cvd = CudaVisibleDevices.resolve(t, cvdText);
            String rankLabel = perRank || in.localRank() >= 0 ? "local rank " + r + ": " : "";
            if (!cvd.problems().isEmpty()) {
                return fail(id, rankLabel + GpuMapping.cvdText(cvdText) + ": " + String.join("; ", cvd.problems()), indexFix);
            }
            if (cvd.entries().isEmpty()) {
                if (!perRank) {
                    return fail(id, shown + " hides every one of the " + t.gpus().size() + " GPUs", "unset it, or list the GPUs this job may use");
                }
            }
            GpuMapping.Result res = GpuMapping.choose(GpuMapping.devices(cvd), cudaDevice, r, n, cvdText);
            if (!res.ok()) {
                failing.add(r);
                firstError = firstError == null ? res.error() : firstError;
                continue;
            }
            GpuMapping.Choice c = res.choice();
            CudaVisibleDevices.Entry e = cvd.entries().get(c.device().ordinal());
            if (e.gpu() != null) {
                used.add(e.gpu());
            } else {
                unchecked.add(e.text());
            }
            List<String> notes = new ArrayList<>();
            notes.add(e.gpu() != null ? e.gpu().pci().address() : c.device().identity());
            if (e.mig()) {
                notes.add("MIG instance " + e.text());
            }
            if (perRank) {
                notes.add(GpuMapping.cvdText(cvdText));
            }
            if (c.reason() != GpuMapping.Reason.LOCAL_RANK) {
                notes.add(c.why());
            }
            map.append(map.isEmpty() ? "" : ", ").append("local rank ").append(r).append(" -> ")
                    .append(e.gpu() != null ? "GPU " + t.gpus().indexOf(e.gpu()) : "CUDA device " + c.device().ordinal())
                    .append(" (").append(String.join(", ", notes)).append(')');
            claims.add(GpuMapping.Claim.of(r, "this host", t.hostname().isEmpty() ? "this host" : t.hostname(), 0, r, c.device(), cvdText,
                    c.why()));
        }
        if (!failing.isEmpty()) {
            String which = failing.size() == ranks.size() && ranks.size() > 1 ? " (every local rank alike: ranks 0-" + (n - 1) + ")"
                    : failing.size() > 1 ? " (local ranks " + failing + " alike)" : "";
            int fix = firstError.indexOf(" Fix: ");
            String head = fix > 0 ? firstError.substring(0, fix) : firstError;
            head = head.endsWith(".") && !which.isEmpty() ? head.substring(0, head.length() - 1) : head;
            return fail(id, shown + ": " + head + which
                    + (map.isEmpty() ? "" : "; the others: " + map), fix > 0 ? firstError.substring(fix + 6) : "see the message");
        }
        String conflict = GpuMapping.conflicts(claims);
        if (conflict != null) {
            int fix = conflict.indexOf(" Fix: ");
            String m = conflict.substring(0, fix > 0 ? fix : conflict.length());
            String f = fix > 0 ? conflict.substring(fix + 6) : "";
            if (!perRank && in.localRank() < 0) {
                m = shown + ", the same for all " + n + " local ranks: " + m;
                f = "if the launcher gives each rank its own CUDA_VISIBLE_DEVICES (srun --gpus-per-task=1, Kubernetes, a script setting"
                        + " it from LOCAL_RANK), check that layout with --cuda-visible-devices-per-rank, or run jccl doctor inside each"
                        + " rank; otherwise " + f;
            }
            return fail(id, m, f);
        }
        List<String> hidden = perRank || in.localRank() >= 0 ? List.of() : t.gpus().stream().filter(g -> !used.contains(g))
                .map(g -> t.gpus().indexOf(g) + " (" + g.pci().address() + ")").toList();
        String hiddenNote = hidden.isEmpty() ? "" : "; hidden: GPU " + String.join(", ", hidden);
        if (!perRank && in.localRank() < 0) {
            List<Gpu> visible = CudaVisibleDevices.resolve(t, raw).visible();
            hiddenNote = visible.size() == t.gpus().size() ? "" : "; hidden: GPU " + String.join(", ", t.gpus().stream()
                    .filter(g -> !visible.contains(g)).map(g -> t.gpus().indexOf(g) + " (" + g.pci().address() + ")").toList());
        }
        String uncheckedNote = unchecked.isEmpty() ? "" : "; not checked against this host without NVML (" + in.gpuProbe().status()
                + "): " + String.join(", ", new java.util.TreeSet<>(unchecked));
        String self = in.localRank() >= 0 ? "; this doctor runs as local rank " + in.localRank() + " of " + n + " (its environment says"
                + " so): run it in every rank, or give --cuda-visible-devices-per-rank, to check the others" : "";
        boolean mixed = used.stream().map(Gpu::deviceId).distinct().count() > 1;
        String order = in.env().getOrDefault("CUDA_DEVICE_ORDER", "FASTEST_FIRST");
        if (mixed && !order.equals("PCI_BUS_ID")) {
            return warn(id, shown + ": the GPUs differ (" + used.stream().map(Gpu::deviceId).distinct().sorted().toList()
                    + ") and CUDA_DEVICE_ORDER is " + order + ", so CUDA numbers them fastest first, not in nvidia-smi's PCI order:"
                    + " ranks may land on other GPUs than listed (" + map + hiddenNote + ")", "export CUDA_DEVICE_ORDER=PCI_BUS_ID");
        }
        int visibleCount = perRank || in.localRank() >= 0 ? 0 : CudaVisibleDevices.resolve(t, raw).entries().size();
        return pass(id, shown + ": " + map + hiddenNote + uncheckedNote + self + (visibleCount > n ? "; GPUs beyond rank " + (n - 1)
                + " stay idle" : ""));
    }

    private String perRankText() {
        List<String> parts = new ArrayList<>();
        for (String c : in.perRankCvd()) {
            parts.add(c == null ? "-" : c);
        }
        return String.join(":", parts);
    }

    Finding p2p() {
        String id = "gpu-p2p";
        List<Gpu> v = CudaVisibleDevices.resolve(t, in.env().get("CUDA_VISIBLE_DEVICES")).visible();
        if (v.size() < 2) {
            return skip(id, "fewer than two visible GPUs");
        }
        if (!in.gpuProbe().available()) {
            return skip(id, "P2P access between GPUs needs NVML: " + in.gpuProbe().status());
        }
        List<String> bad = new ArrayList<>();
        int pairs = 0;
        for (int i = 0; i < v.size(); i++) {
            for (int j = 0; j < v.size(); j++) {
                if (i == j) {
                    continue;
                }
                String a = v.get(i).pci().address();
                String b = v.get(j).pci().address();
                String st = in.gpuProbe().p2pRead(a, b);
                pairs++;
                if (st == null) {
                    bad.add(a + " -> " + b + ": unknown");
                } else if (!st.equals("OK")) {
                    bad.add(a + " -> " + b + ": " + st);
                }
            }
        }
        if (!bad.isEmpty()) {
            return warn(id, bad.size() + " of " + pairs + " GPU pairs cannot read each other's memory (" + String.join("; ", bad)
                            + "): jccl-cuda stages those through host memory",
                    "check nvidia-smi topo -p2p r; in a VM enable P2P in the hypervisor, on bare metal disable ACS on the PCIe switches"
                            + " (or set JCCL_CUDA_P2P_DISABLE=1 to stage all traffic on purpose)");
        }
        long nvlinked = v.stream().filter(g -> !g.nvlinkPeers().isEmpty()).count();
        return pass(id, "all " + pairs + " GPU pairs can read each other's memory" + (nvlinked > 0 ? "; " + nvlinked
                + " GPU(s) have active NVLinks" : ""));
    }

    Finding env() {
        String id = "env";
        EnvCheck.Result r = EnvCheck.check(in.env());
        String nccl = r.ncclOnly().isEmpty() ? "" : "; read by NCCL only (jccl perf --backend nccl): " + String.join(", ", r.ncclOnly());
        if (!r.badValues().isEmpty()) {
            List<String> all = new ArrayList<>(r.badValues());
            all.addAll(r.problems());
            return fail(id, String.join("; ", all) + nccl, "correct or unset the variables named above (jccl env lists every setting)");
        }
        if (!r.problems().isEmpty()) {
            return warn(id, String.join("; ", r.problems()) + nccl, "remove or rename the variables named above (jccl env lists every"
                    + " setting)");
        }
        return pass(id, "every JCCL_ variable is a known setting with an allowed value" + nccl);
    }
}
