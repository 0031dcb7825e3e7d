package org.jccl.internal.topo;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jccl.internal.topo.Topology.Container;
import org.jccl.internal.topo.Topology.Gid;
import org.jccl.internal.topo.Topology.Gpu;
import org.jccl.internal.topo.Topology.GpuDirect;
import org.jccl.internal.topo.Topology.Limits;
import org.jccl.internal.topo.Topology.NetDevice;
import org.jccl.internal.topo.Topology.NumaNode;
import org.jccl.internal.topo.Topology.RdmaDevice;
import org.jccl.internal.topo.Topology.RdmaPort;
import org.jccl.internal.topo.Topology.Shm;

/**
 * Reads a {@link Topology} from sysfs and procfs under a root directory: {@code /} on a real host,
 * a synthetic tree in tests (every path below is relative to the root, symbolic links included, so
 * a fixture is a directory with the same shape as the files it imitates).
 *
 * <p>What is read:
 * <ul>
 *   <li>CPUs and NUMA nodes: {@code sys/devices/system/cpu/online}, {@code sys/devices/system/node/node*}/{cpulist,meminfo};</li>
 *   <li>network interfaces: {@code sys/class/net/*}/{operstate,speed}, the PCI path from the link, {@code device/numa_node};</li>
 *   <li>RDMA devices: {@code sys/class/infiniband/*}/{device -> PCI, device/net/*, ports/N/{state,link_layer,rate,gids/*,
 *       gid_attrs/types/*,gid_attrs/ndevs/*}};</li>
 *   <li>GPUs: {@code sys/bus/pci/devices/*} with vendor 0x10de and class 0x0300xx/0x0302xx (PCI path, numa_node, device id),
 *       UUIDs and NVLink peers from the {@link GpuProbe} (NVML) when it is available;</li>
 *   <li>GPUDirect RDMA: {@code sys/kernel/mm/memory_peers/nv_mem/version}, {@code .../nv_mem_nc}, {@code sys/module/nvidia_peermem},
 *       {@code proc/sys/kernel/osrelease}, {@code sys/module/nvidia/version}, {@code proc/driver/nvidia/version};</li>
 *   <li>limits: {@code proc/self/limits}, {@code proc/sys/net/core/somaxconn};</li>
 *   <li>container: {@code .dockerenv}, {@code run/.containerenv}, {@code proc/1/cgroup}, {@code KUBERNETES_SERVICE_HOST};</li>
 *   <li>shared memory: the {@link FsStats} of the shared-memory directory.</li>
 * </ul>
 * A file that is missing or unreadable leaves its field unknown; discovery never fails.
 */
public final class SysfsDiscovery {

    private static final Pattern NODE_DIR = Pattern.compile("node(\\d+)");
    private static final Pattern MEM_TOTAL = Pattern.compile("MemTotal:\\s+(\\d+)\\s*kB");

    private final Path root;
    private final Map<String, String> env;
    private final FsStats fs;
    private final GpuProbe gpuProbe;
    private final String shmDir;

    /**
     * @param root the directory that stands for {@code /}
     * @param env the environment (container detection)
     * @param fs statvfs of the shared-memory directory
     * @param gpuProbe NVML, or {@link GpuProbe#absent}
     * @param shmDir the shared-memory directory as the process sees it (JCCL_SHM_DIR, /dev/shm by default)
     */
    public SysfsDiscovery(Path root, Map<String, String> env, FsStats fs, GpuProbe gpuProbe, String shmDir) {
        this.root = Objects.requireNonNull(root, "root");
        this.env = Map.copyOf(env);
        this.fs = Objects.requireNonNull(fs, "fs");
        this.gpuProbe = Objects.requireNonNull(gpuProbe, "gpuProbe");
        this.shmDir = Objects.requireNonNull(shmDir, "shmDir");
    }

    /** This host: root {@code /}, the process environment, the real file systems and NVML. */
    public static Topology discoverHost(String shmDir) {
        return new SysfsDiscovery(Path.of("/"), System.getenv(), FsStats.SYSTEM, Nvml.probe(), shmDir).discover();
    }

    /** Everything. */
    public Topology discover() {
        List<NumaNode> numa = numaNodes();
        return new Topology(hostname(), cpus(numa), numa, netDevices(), rdmaDevices(), gpus(), gpuDirect(), shm(), limits(),
                container(), gpuProbe.status());
    }

    /**
     * NUMA nodes and GPUs only, for {@code jccl run}'s CPU binding (a full discovery reads every
     * interface, RDMA port and limit, which a launcher does not need); the other parts are empty or unknown.
     */
    public Topology placement() {
        List<NumaNode> numa = numaNodes();
        long u = Topology.Limits.UNKNOWN;
        return new Topology(hostname(), cpus(numa), numa, List.of(), List.of(), gpus(), new GpuDirect("", false, false, "", "", false),
                new Topology.Shm(shmDir, -1, -1), new Topology.Limits(u, u, u, u, u, u, u), new Topology.Container("", ""),
                gpuProbe.status());
    }

    private Path p(String relative) {
        return root.resolve(relative);
    }

    // ------------------------------------------------------------------ small readers

    /** The first line of a file, trimmed, or null when it cannot be read (sysfs returns EINVAL for some). */
    static String read(Path f) {
        try {
            List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
            return lines.isEmpty() ? "" : lines.getFirst().trim();
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    private static long readLong(Path f, long dflt) {
        String s = read(f);
        if (s == null) {
            return dflt;
        }
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            return dflt;
        }
    }

    private static List<Path> list(Path dir) {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.sorted(Comparator.comparing(x -> x.getFileName().toString(), SysfsDiscovery::naturalOrder)).toList();
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
    }

    /** mlx5_2 before mlx5_10, node2 before node10. */
    public static int naturalOrder(String a, String b) {
        Matcher ma = Pattern.compile("^(.*?)(\\d+)$").matcher(a);
        Matcher mb = Pattern.compile("^(.*?)(\\d+)$").matcher(b);
        if (ma.matches() && mb.matches() && ma.group(1).equals(mb.group(1)) && ma.group(2).length() < 10 && mb.group(2).length() < 10) {
            return Long.compare(Long.parseLong(ma.group(2)), Long.parseLong(mb.group(2)));
        }
        return a.compareTo(b);
    }

    /** The PCI location of a sysfs device path (following links), with the given NUMA node. */
    private static PciLocation locate(Path devicePath, int numaNode) {
        try {
            return PciLocation.fromSysfsPath(devicePath.toRealPath().toString(), numaNode);
        } catch (IOException | RuntimeException e) {
            return new PciLocation(null, List.of(), numaNode);
        }
    }

    /** Number of CPUs in a sysfs list such as {@code 0-47,96-143}; 0 for an empty or bad list. */
    static int countCpuList(String list) {
        int n = 0;
        if (list == null || list.isBlank()) {
            return 0;
        }
        for (String part : list.trim().split(",")) {
            String t = part.trim();
            try {
                int dash = t.indexOf('-');
                n += dash < 0 ? 1 : Integer.parseInt(t.substring(dash + 1)) - Integer.parseInt(t.substring(0, dash)) + 1;
            } catch (NumberFormatException e) {
                return 0;
            }
        }
        return n;
    }

    // ------------------------------------------------------------------ parts

    String hostname() {
        String h = read(p("proc/sys/kernel/hostname"));
        if (h == null || h.isEmpty()) {
            h = env.getOrDefault("HOSTNAME", "");
        }
        return h;
    }

    int cpus(List<NumaNode> numa) {
        int n = countCpuList(read(p("sys/devices/system/cpu/online")));
        if (n == 0) {
            n = numa.stream().mapToInt(x -> countCpuList(x.cpuList())).sum();
        }
        return Math.max(n, 1);
    }

    /** NUMA nodes from {@code sys/devices/system/node/node*}. */
    public List<NumaNode> numaNodes() {
        List<NumaNode> out = new ArrayList<>();
        for (Path d : list(p("sys/devices/system/node"))) {
            Matcher m = NODE_DIR.matcher(d.getFileName().toString());
            if (!m.matches()) {
                continue;
            }
            long mem = -1;
            try {
                Matcher mm = MEM_TOTAL.matcher(Files.readString(d.resolve("meminfo")));
                if (mm.find()) {
                    mem = Long.parseLong(mm.group(1));
                }
            } catch (IOException | RuntimeException e) {
                // unknown
            }
            String cpus = read(d.resolve("cpulist"));
            out.add(new NumaNode(Integer.parseInt(m.group(1)), cpus == null ? "" : cpus, mem));
        }
        return out;
    }

    /** Network interfaces from {@code sys/class/net}. */
    public List<NetDevice> netDevices() {
        List<NetDevice> out = new ArrayList<>();
        for (Path d : list(p("sys/class/net"))) {
            String name = d.getFileName().toString();
            if (!Files.isDirectory(d)) {
                continue; // bonding_masters and friends
            }
            String oper = read(d.resolve("operstate"));
            long speed = readLong(d.resolve("speed"), -1);
            int numa = (int) readLong(d.resolve("device/numa_node"), -1);
            PciLocation pci = Files.exists(d.resolve("device")) ? locate(d, numa) : PciLocation.VIRTUAL;
            out.add(new NetDevice(name, oper == null ? "unknown" : oper, speed < 0 ? -1 : speed, pci));
        }
        return out;
    }

    /** RDMA devices from {@code sys/class/infiniband}. */
    public List<RdmaDevice> rdmaDevices() {
        List<RdmaDevice> out = new ArrayList<>();
        for (Path d : list(p("sys/class/infiniband"))) {
            String name = d.getFileName().toString();
            int numa = (int) readLong(d.resolve("device/numa_node"), -1);
            PciLocation pci = locate(d.resolve("device"), numa);
            List<String> nets = list(d.resolve("device/net")).stream().map(x -> x.getFileName().toString()).toList();
            List<RdmaPort> ports = new ArrayList<>();
            for (Path pd : list(d.resolve("ports"))) {
                int number;
                try {
                    number = Integer.parseInt(pd.getFileName().toString());
                } catch (NumberFormatException e) {
                    continue;
                }
                List<Gid> gids = new ArrayList<>();
                for (Path g : list(pd.resolve("gids"))) {
                    String gid = read(g);
                    int index;
                    try {
                        index = Integer.parseInt(g.getFileName().toString());
                    } catch (NumberFormatException e) {
                        continue;
                    }
                    if (gid == null || gid.replace("0", "").replace(":", "").isEmpty()) {
                        continue; // unused entry
                    }
                    String type = read(pd.resolve("gid_attrs/types/" + index));
                    String ndev = read(pd.resolve("gid_attrs/ndevs/" + index));
                    gids.add(new Gid(index, gid, type == null ? "" : type, ndev == null ? "" : ndev));
                }
                String state = read(pd.resolve("state"));
                String ll = read(pd.resolve("link_layer"));
                String rate = read(pd.resolve("rate"));
                ports.add(new RdmaPort(number, state == null ? "unknown" : state, ll == null ? "unknown" : ll,
                        rate == null ? "" : rate, gids));
            }
            out.add(new RdmaDevice(name, pci, nets, ports));
        }
        return out;
    }

    /** NVIDIA GPUs from {@code sys/bus/pci/devices}, in PCI order. */
    public List<Gpu> gpus() {
        List<Gpu> out = new ArrayList<>();
        for (Path d : list(p("sys/bus/pci/devices"))) {
            String vendor = read(d.resolve("vendor"));
            String cls = read(d.resolve("class"));
            if (!"0x10de".equalsIgnoreCase(vendor) || cls == null) {
                continue;
            }
            String c = cls.toLowerCase(java.util.Locale.ROOT);
            if (!c.startsWith("0x0302") && !c.startsWith("0x0300")) {
                continue; // NVSwitches (0x0680), audio functions (0x0403)
            }
            int numa = (int) readLong(d.resolve("numa_node"), -1);
            PciLocation pci = locate(d, numa);
            if (!pci.onPci()) {
                pci = new PciLocation(d.getFileName().toString(), List.of("pci" + d.getFileName().toString().substring(0, 7),
                        d.getFileName().toString()), numa);
            }
            String devId = read(d.resolve("device"));
            out.add(new Gpu(pci, devId == null ? "" : devId, gpuProbe.uuid(pci.address()), gpuProbe.nvlinkPeers(pci.address())));
        }
        out.sort(Comparator.comparing(g -> g.pci().address()));
        return out;
    }

    /** GPUDirect RDMA support of the kernel. */
    public GpuDirect gpuDirect() {
        String nvMem = read(p("sys/kernel/mm/memory_peers/nv_mem/version"));
        boolean nc = Files.exists(p("sys/kernel/mm/memory_peers/nv_mem_nc"));
        boolean peermem = Files.isDirectory(p("sys/module/nvidia_peermem"));
        String kernel = read(p("proc/sys/kernel/osrelease"));
        String driver = read(p("sys/module/nvidia/version"));
        boolean open = false;
        try {
            open = Files.readString(p("proc/driver/nvidia/version")).contains("Open Kernel Module");
        } catch (IOException | RuntimeException e) {
            // closed module or no driver
        }
        return new GpuDirect(nvMem == null ? "" : nvMem, nc, peermem, kernel == null ? "" : kernel, driver == null ? "" : driver, open);
    }

    /** The shared-memory directory's size and free space. */
    public Shm shm() {
        String rel = shmDir.startsWith("/") ? shmDir.substring(1) : shmDir;
        long[] st = fs.stat(rel.isEmpty() ? root : root.resolve(rel));
        return st == null ? new Shm(shmDir, -1, -1) : new Shm(shmDir, st[0], st[1]);
    }

    /** Limits from {@code proc/self/limits} and the accept backlog cap. */
    public Limits limits() {
        long mlS = Limits.UNKNOWN;
        long mlH = Limits.UNKNOWN;
        long nfS = Limits.UNKNOWN;
        long nfH = Limits.UNKNOWN;
        long npS = Limits.UNKNOWN;
        try {
            for (String line : Files.readAllLines(p("proc/self/limits"), StandardCharsets.UTF_8)) {
                String[] cols = line.trim().split("\\s{2,}");
                if (cols.length < 3) {
                    continue;
                }
                switch (cols[0]) {
                    case "Max locked memory" -> {
                        mlS = limit(cols[1]);
                        mlH = limit(cols[2]);
                    }
                    case "Max open files" -> {
                        nfS = limit(cols[1]);
                        nfH = limit(cols[2]);
                    }
                    case "Max processes" -> npS = limit(cols[1]);
                    default -> { }
                }
            }
        } catch (IOException | RuntimeException e) {
            // unknown
        }
        String pids = read(p("sys/fs/cgroup/pids.max"));
        if (pids == null) {
            pids = read(p("sys/fs/cgroup/pids/pids.max"));
        }
        long pidsMax = pids == null ? Limits.UNKNOWN : pids.equals("max") ? Limits.UNLIMITED : limit(pids);
        return new Limits(mlS, mlH, nfS, nfH, npS, readLong(p("proc/sys/net/core/somaxconn"), Limits.UNKNOWN), pidsMax);
    }

    private static long limit(String s) {
        if (s.equals("unlimited")) {
            return Limits.UNLIMITED;
        }
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            return Limits.UNKNOWN;
        }
    }

    /** Docker, Kubernetes, another runtime, or none. */
    public Container container() {
        String k8s = env.get("KUBERNETES_SERVICE_HOST");
        String cgroup = "";
        try {
            cgroup = Files.readString(p("proc/1/cgroup"));
        } catch (IOException | RuntimeException e) {
            // no procfs: decide on the other signs
        }
        if (k8s != null && !k8s.isEmpty()) {
            return new Container("kubernetes", "KUBERNETES_SERVICE_HOST=" + k8s);
        }
        if (cgroup.contains("kubepods")) {
            return new Container("kubernetes", "/proc/1/cgroup names kubepods");
        }
        if (Files.exists(p(".dockerenv"))) {
            return new Container("docker", "/.dockerenv exists");
        }
        if (cgroup.contains("/docker")) {
            return new Container("docker", "/proc/1/cgroup names docker");
        }
        if (Files.exists(p("run/.containerenv"))) {
            return new Container("container", "/run/.containerenv exists (podman)");
        }
        if (cgroup.contains("containerd") || cgroup.contains("lxc")) {
            return new Container("container", "/proc/1/cgroup names a container runtime");
        }
        return Container.NONE;
    }
}
