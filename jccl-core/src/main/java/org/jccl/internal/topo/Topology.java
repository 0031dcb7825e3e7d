package org.jccl.internal.topo;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.jccl.internal.util.Json;

/**
 * What this host has, as far as collective communication cares: NUMA nodes, network interfaces,
 * RDMA devices, GPUs, GPUDirect RDMA support, the shared-memory directory, resource limits and the
 * container it runs in. Made by {@link SysfsDiscovery} from sysfs/procfs (and NVML when present),
 * or loaded from the JSON that {@code jccl topo --json} writes ({@link #fromJson}).
 *
 * <p>Immutable; every list is in a stable order (by name or PCI address), so two discoveries of one
 * host compare equal and a saved topology reads back equal to what was written.
 *
 * @param hostname the host's name
 * @param cpus logical CPUs online
 * @param numaNodes NUMA nodes, by id (empty when sysfs has none)
 * @param netDevices network interfaces, by name
 * @param rdmaDevices RDMA devices (HCAs), by name
 * @param gpus NVIDIA GPUs, by PCI address (the order nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID use)
 * @param gpuDirect GPUDirect RDMA support of the kernel
 * @param shm the shared-memory directory
 * @param limits resource limits of this process
 * @param container the container this process runs in, if any
 * @param nvml what NVML said: "ok", or why it was not used
 */
public record Topology(String hostname, int cpus, List<NumaNode> numaNodes, List<NetDevice> netDevices, List<RdmaDevice> rdmaDevices,
                       List<Gpu> gpus, GpuDirect gpuDirect, Shm shm, Limits limits, Container container, String nvml) {

    /** Version of the JSON layout; a file of another version is refused with a message. */
    public static final int FORMAT_VERSION = 1;

    public Topology {
        numaNodes = List.copyOf(numaNodes);
        netDevices = List.copyOf(netDevices);
        rdmaDevices = List.copyOf(rdmaDevices);
        gpus = List.copyOf(gpus);
    }

    /** Whether the host has at most one NUMA node (then devices of unknown node are local to each other). */
    public boolean singleNumaNode() {
        return numaNodes.size() <= 1;
    }

    /** PCI path type between two located devices on this host. */
    public PciDistance distance(PciLocation a, PciLocation b) {
        return a.distanceTo(b, singleNumaNode());
    }

    /** The RDMA device called exactly {@code name}. */
    public Optional<RdmaDevice> rdma(String name) {
        return rdmaDevices.stream().filter(d -> d.name().equals(name)).findFirst();
    }

    /** The GPU at PCI address {@code busId} (any case, with or without the 0000 domain). */
    public Optional<Gpu> gpu(String busId) {
        String b = normaliseBusId(busId);
        return gpus.stream().filter(g -> g.pci().address().equals(b)).findFirst();
    }

    /** {@code 00000000:1B:00.0} or {@code 1b:00.0} -> {@code 0000:1b:00.0}. */
    static String normaliseBusId(String busId) {
        String b = busId.trim().toLowerCase(java.util.Locale.ROOT);
        int colon = b.indexOf(':');
        if (b.chars().filter(c -> c == ':').count() == 1) {
            return "0000:" + b;
        }
        String domain = b.substring(0, colon);
        if (domain.length() > 4) {
            domain = domain.substring(domain.length() - 4);
        }
        return String.format("%4s", domain).replace(' ', '0') + b.substring(colon);
    }

    // ------------------------------------------------------------------ parts

    /**
     * One NUMA node.
     *
     * @param id node number
     * @param cpuList its CPUs in sysfs list syntax, e.g. {@code 0-47,96-143}
     * @param memTotalKib its memory in KiB, -1 when unknown
     */
    public record NumaNode(int id, String cpuList, long memTotalKib) {
    }

    /**
     * One network interface.
     *
     * @param name e.g. {@code ens1f0}
     * @param operState {@code up}, {@code down}, {@code unknown} ... as /sys/class/net/X/operstate says
     * @param speedMbps link speed in Mb/s, -1 when unknown (virtual interfaces, link down)
     * @param pci where it sits on PCI (virtual interfaces: {@link PciLocation#VIRTUAL})
     */
    public record NetDevice(String name, String operState, long speedMbps, PciLocation pci) {
        public boolean up() {
            return operState.equals("up");
        }
    }

    /**
     * One RDMA device (an HCA, or a RoCE NIC).
     *
     * @param name e.g. {@code mlx5_0}
     * @param pci where it sits on PCI
     * @param netDevices the network interfaces of the same PCI function (RoCE: the Ethernet interface; IB: ipoib)
     * @param ports its ports, by number
     */
    public record RdmaDevice(String name, PciLocation pci, List<String> netDevices, List<RdmaPort> ports) {
        public RdmaDevice {
            netDevices = List.copyOf(netDevices);
            ports = List.copyOf(ports);
        }

        /** Whether any port is ACTIVE. */
        public boolean active() {
            return ports.stream().anyMatch(RdmaPort::active);
        }
    }

    /**
     * One port of an RDMA device.
     *
     * @param number port number (from 1)
     * @param state e.g. {@code 4: ACTIVE}, {@code 1: DOWN}, {@code 2: INIT}
     * @param linkLayer {@code InfiniBand} or {@code Ethernet}
     * @param rate e.g. {@code 400 Gb/sec (4X NDR)}
     * @param gids the non-zero GIDs of the port, by index
     */
    public record RdmaPort(int number, String state, String linkLayer, String rate, List<Gid> gids) {
        public RdmaPort {
            gids = List.copyOf(gids);
        }

        public boolean active() {
            return state.contains("ACTIVE");
        }

        public boolean ethernet() {
            return linkLayer.equalsIgnoreCase("Ethernet");
        }

        /** Rate in Gb/s from the rate text, or -1. */
        public double gbps() {
            String r = rate.trim();
            int sp = r.indexOf(' ');
            try {
                return Double.parseDouble(sp < 0 ? r : r.substring(0, sp));
            } catch (NumberFormatException e) {
                return -1;
            }
        }
    }

    /**
     * One GID table entry.
     *
     * @param index its index (what NCCL_IB_GID_INDEX / JCCL_IB_GID_INDEX selects)
     * @param gid the GID, as sysfs prints it ({@code 0000:0000:0000:0000:0000:ffff:0a00:0001})
     * @param type {@code RoCE v2}, {@code IB/RoCE v1}, or empty when sysfs does not say
     * @param netDevice the interface it belongs to (RoCE), or empty
     */
    public record Gid(int index, String gid, String type, String netDevice) {
        /** Whether this is a RoCE v2 GID (routable, UDP/IP). */
        public boolean roceV2() {
            return type.equalsIgnoreCase("RoCE v2");
        }

        /** Whether the GID is an IPv4-mapped address ({@code ::ffff:a.b.c.d}). */
        public boolean ipv4() {
            return gid.toLowerCase(java.util.Locale.ROOT).startsWith("0000:0000:0000:0000:0000:ffff:");
        }

        /** Whether the GID is an IPv6 link-local address (fe80::/10: the default GID made from the MAC). */
        public boolean linkLocal() {
            return gid.toLowerCase(java.util.Locale.ROOT).startsWith("fe80:");
        }
    }

    /**
     * One NVIDIA GPU.
     *
     * @param pci where it sits on PCI (address = bus id)
     * @param deviceId PCI device id, e.g. {@code 0x2335}
     * @param uuid {@code GPU-...} from NVML, or empty without NVML
     * @param nvlinkPeers PCI addresses at the other end of its active NVLinks (GPUs or NVSwitches), from NVML
     */
    public record Gpu(PciLocation pci, String deviceId, String uuid, List<String> nvlinkPeers) {
        public Gpu {
            nvlinkPeers = List.copyOf(nvlinkPeers);
        }
    }

    /**
     * GPUDirect RDMA support of the kernel: the NIC reads and writes GPU memory directly.
     *
     * @param nvMemVersion contents of /sys/kernel/mm/memory_peers/nv_mem/version (nv_peer_mem or nvidia-peermem), or empty
     * @param nvMemNc whether /sys/kernel/mm/memory_peers/nv_mem_nc exists (the non-contiguous variant)
     * @param nvidiaPeermem whether /sys/module/nvidia_peermem exists (the module is loaded)
     * @param kernelRelease /proc/sys/kernel/osrelease
     * @param nvidiaDriver /sys/module/nvidia/version, or empty when the driver is not loaded
     * @param openKernelModule whether /proc/driver/nvidia/version names the open kernel module (needed for dma-buf)
     */
    public record GpuDirect(String nvMemVersion, boolean nvMemNc, boolean nvidiaPeermem, String kernelRelease, String nvidiaDriver,
                            boolean openKernelModule) {

        /** Whether a peer-memory client is loaded (nv_peer_mem or nvidia-peermem). */
        public boolean peerMemory() {
            return !nvMemVersion.isEmpty() || nvidiaPeermem;
        }

        /**
         * Whether GPUDirect RDMA through dma-buf is possible: Linux 5.12+, and NVIDIA's open kernel
         * module of driver 515+ (the closed module does not export dma-buf).
         */
        public boolean dmaBuf() {
            return kernelAtLeast(5, 12) && openKernelModule && driverMajor() >= 515;
        }

        public boolean kernelAtLeast(int major, int minor) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("^(\\d+)\\.(\\d+)").matcher(kernelRelease);
            if (!m.find()) {
                return false;
            }
            int a = Integer.parseInt(m.group(1));
            int b = Integer.parseInt(m.group(2));
            return a > major || (a == major && b >= minor);
        }

        int driverMajor() {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("^(\\d+)").matcher(nvidiaDriver);
            return m.find() ? Integer.parseInt(m.group(1)) : -1;
        }
    }

    /**
     * The shared-memory directory ({@code JCCL_SHM_DIR}, /dev/shm by default).
     *
     * @param dir the directory
     * @param totalBytes its file system's size, -1 when unknown (missing directory)
     * @param freeBytes what an unprivileged process may still use, -1 when unknown
     */
    public record Shm(String dir, long totalBytes, long freeBytes) {
    }

    /**
     * Resource limits of this process, from /proc/self/limits; {@link #UNLIMITED} for unlimited,
     * -2 when unknown.
     *
     * @param memlockSoft max locked memory in bytes (RDMA registers buffers against it)
     * @param memlockHard its hard limit
     * @param nofileSoft max open files (sockets count)
     * @param nofileHard its hard limit
     * @param nprocSoft max processes/threads of the user
     * @param somaxconn /proc/sys/net/core/somaxconn (accept backlog cap), -2 when unknown
     * @param pidsMax the cgroup's pids.max (threads of the whole container count), {@link #UNLIMITED} for "max", -2 when unknown
     */
    public record Limits(long memlockSoft, long memlockHard, long nofileSoft, long nofileHard, long nprocSoft, long somaxconn,
                         long pidsMax) {
        public static final long UNLIMITED = -1;
        public static final long UNKNOWN = -2;
    }

    /**
     * The container this process runs in.
     *
     * @param kind {@code none}, {@code docker}, {@code kubernetes} or {@code container} (other runtimes)
     * @param evidence what showed it, e.g. {@code /.dockerenv}, {@code KUBERNETES_SERVICE_HOST}
     */
    public record Container(String kind, String evidence) {
        public static final Container NONE = new Container("none", "");

        public boolean kubernetes() {
            return kind.equals("kubernetes");
        }

        public boolean docker() {
            return kind.equals("docker");
        }

        /** The fix for a small /dev/shm in this environment, one sentence without the full stop. */
        public String shmFix(String needed) {
            return switch (kind) {
                case "kubernetes" -> "mount an emptyDir volume with medium: Memory (sizeLimit at least " + needed
                        + ") at /dev/shm in the pod spec";
                case "docker" -> "restart the container with --shm-size=" + needed + " (or --ipc=host)";
                case "container" -> "give the container a larger /dev/shm (Docker: --shm-size; Kubernetes: emptyDir with medium:"
                        + " Memory at /dev/shm)";
                default -> "remount it larger (mount -o remount,size=" + needed + " /dev/shm)";
            };
        }
    }

    // ------------------------------------------------------------------ JSON

    /** The JSON document {@code jccl topo --json} prints and {@code JCCL_TOPO_FILE} reads. */
    public Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", "jccl-topology");
        m.put("version", FORMAT_VERSION);
        m.put("hostname", hostname);
        m.put("cpus", cpus);
        m.put("numa_nodes", numaNodes.stream().map(n -> (Object) map("id", n.id(), "cpulist", n.cpuList(),
                "mem_total_kib", n.memTotalKib())).toList());
        m.put("net", netDevices.stream().map(n -> (Object) map("name", n.name(), "operstate", n.operState(),
                "speed_mbps", n.speedMbps(), "pci", pciJson(n.pci()))).toList());
        m.put("rdma", rdmaDevices.stream().map(d -> (Object) map("name", d.name(), "pci", pciJson(d.pci()),
                "net", d.netDevices(), "ports", d.ports().stream().map(p -> (Object) map("port", p.number(), "state", p.state(),
                        "link_layer", p.linkLayer(), "rate", p.rate(), "gids", p.gids().stream().map(g -> (Object) map("index", g.index(),
                                "gid", g.gid(), "type", g.type(), "ndev", g.netDevice())).toList())).toList())).toList());
        m.put("gpus", gpus.stream().map(g -> (Object) map("pci", pciJson(g.pci()), "device_id", g.deviceId(), "uuid", g.uuid(),
                "nvlink_peers", g.nvlinkPeers())).toList());
        m.put("gpudirect", map("nv_mem_version", gpuDirect.nvMemVersion(), "nv_mem_nc", gpuDirect.nvMemNc(),
                "nvidia_peermem", gpuDirect.nvidiaPeermem(), "kernel", gpuDirect.kernelRelease(), "nvidia_driver", gpuDirect.nvidiaDriver(),
                "open_kernel_module", gpuDirect.openKernelModule(), "dma_buf", gpuDirect.dmaBuf()));
        m.put("shm", map("dir", shm.dir(), "total_bytes", shm.totalBytes(), "free_bytes", shm.freeBytes()));
        m.put("limits", map("memlock_soft", limits.memlockSoft(), "memlock_hard", limits.memlockHard(), "nofile_soft",
                limits.nofileSoft(), "nofile_hard", limits.nofileHard(), "nproc_soft", limits.nprocSoft(), "somaxconn",
                limits.somaxconn(), "pids_max", limits.pidsMax()));
        m.put("container", map("kind", container.kind(), "evidence", container.evidence()));
        m.put("nvml", nvml);
        return m;
    }

    private static Map<String, Object> pciJson(PciLocation p) {
        return map("address", p.address(), "chain", p.chain(), "numa_node", p.numaNode());
    }

    private static PciLocation pciFrom(Object o) {
        Map<String, Object> m = Json.obj(o, "pci");
        return new PciLocation(Json.str(m, "address"), Json.strings(m, "chain"), (int) Json.num(m, "numa_node", -1));
    }

    private static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    /**
     * Reads what {@link #toJson} wrote.
     *
     * @throws IllegalArgumentException naming what is wrong (not a jccl topology, another version, a bad member)
     */
    public static Topology fromJson(Object doc) {
        Map<String, Object> m = Json.obj(doc, "topology");
        if (!"jccl-topology".equals(m.get("format"))) {
            throw new IllegalArgumentException("not a jccl topology (no \"format\": \"jccl-topology\"); write one with jccl topo --json");
        }
        long v = Json.num(m, "version", -1);
        if (v != FORMAT_VERSION) {
            throw new IllegalArgumentException("topology format version " + v + ", this jccl reads version " + FORMAT_VERSION
                    + "; write it again with this jccl's topo --json");
        }
        List<NumaNode> numa = new ArrayList<>();
        for (Object o : Json.list(m, "numa_nodes")) {
            Map<String, Object> n = Json.obj(o, "numa_nodes[]");
            numa.add(new NumaNode((int) Json.num(n, "id", 0), orEmpty(Json.str(n, "cpulist")), Json.num(n, "mem_total_kib", -1)));
        }
        List<NetDevice> net = new ArrayList<>();
        for (Object o : Json.list(m, "net")) {
            Map<String, Object> n = Json.obj(o, "net[]");
            net.add(new NetDevice(Json.str(n, "name"), orEmpty(Json.str(n, "operstate")), Json.num(n, "speed_mbps", -1),
                    pciFrom(n.get("pci"))));
        }
        List<RdmaDevice> rdma = new ArrayList<>();
        for (Object o : Json.list(m, "rdma")) {
            Map<String, Object> d = Json.obj(o, "rdma[]");
            List<RdmaPort> ports = new ArrayList<>();
            for (Object po : Json.list(d, "ports")) {
                Map<String, Object> p = Json.obj(po, "ports[]");
                List<Gid> gids = new ArrayList<>();
                for (Object go : Json.list(p, "gids")) {
                    Map<String, Object> g = Json.obj(go, "gids[]");
                    gids.add(new Gid((int) Json.num(g, "index", 0), orEmpty(Json.str(g, "gid")), orEmpty(Json.str(g, "type")),
                            orEmpty(Json.str(g, "ndev"))));
                }
                ports.add(new RdmaPort((int) Json.num(p, "port", 1), orEmpty(Json.str(p, "state")), orEmpty(Json.str(p, "link_layer")),
                        orEmpty(Json.str(p, "rate")), gids));
            }
            rdma.add(new RdmaDevice(Json.str(d, "name"), pciFrom(d.get("pci")), Json.strings(d, "net"), ports));
        }
        List<Gpu> gpus = new ArrayList<>();
        for (Object o : Json.list(m, "gpus")) {
            Map<String, Object> g = Json.obj(o, "gpus[]");
            gpus.add(new Gpu(pciFrom(g.get("pci")), orEmpty(Json.str(g, "device_id")), orEmpty(Json.str(g, "uuid")),
                    Json.strings(g, "nvlink_peers")));
        }
        Map<String, Object> gd = Json.obj(m.getOrDefault("gpudirect", Map.of()), "gpudirect");
        GpuDirect gpuDirect = new GpuDirect(orEmpty(Json.str(gd, "nv_mem_version")), Json.bool(gd, "nv_mem_nc"),
                Json.bool(gd, "nvidia_peermem"), orEmpty(Json.str(gd, "kernel")), orEmpty(Json.str(gd, "nvidia_driver")),
                Json.bool(gd, "open_kernel_module"));
        Map<String, Object> sh = Json.obj(m.getOrDefault("shm", Map.of()), "shm");
        Shm shm = new Shm(Json.str(sh, "dir") == null ? "/dev/shm" : Json.str(sh, "dir"), Json.num(sh, "total_bytes", -1),
                Json.num(sh, "free_bytes", -1));
        Map<String, Object> li = Json.obj(m.getOrDefault("limits", Map.of()), "limits");
        Limits limits = new Limits(Json.num(li, "memlock_soft", Limits.UNKNOWN), Json.num(li, "memlock_hard", Limits.UNKNOWN),
                Json.num(li, "nofile_soft", Limits.UNKNOWN), Json.num(li, "nofile_hard", Limits.UNKNOWN),
                Json.num(li, "nproc_soft", Limits.UNKNOWN), Json.num(li, "somaxconn", Limits.UNKNOWN),
                Json.num(li, "pids_max", Limits.UNKNOWN));
        Map<String, Object> c = Json.obj(m.getOrDefault("container", Map.of()), "container");
        Container container = new Container(Json.str(c, "kind") == null ? "none" : Json.str(c, "kind"), orEmpty(Json.str(c, "evidence")));
        return new Topology(orEmpty(Json.str(m, "hostname")), (int) Json.num(m, "cpus", 1), numa, net, rdma, gpus, gpuDirect, shm, limits,
                container, orEmpty(Json.str(m, "nvml")));
    }

    private static String orEmpty(String s) {
        return s == null ? "" : s;
    }
}
