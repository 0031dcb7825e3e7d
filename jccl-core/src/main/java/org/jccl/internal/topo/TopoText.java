package org.jccl.internal.topo;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.jccl.ConfigException;
import org.jccl.internal.net.DeviceList;
import org.jccl.internal.topo.Topology.Gpu;
import org.jccl.internal.topo.Topology.Limits;
import org.jccl.internal.topo.Topology.NetDevice;
import org.jccl.internal.topo.Topology.NumaNode;
import org.jccl.internal.topo.Topology.RdmaDevice;
import org.jccl.internal.topo.Topology.RdmaPort;

/**
 * The text {@code jccl topo} prints: the PCI tree of each NUMA node with its GPUs, RDMA devices
 * and interfaces, then the GPU-to-NIC distance matrix (as {@code nvidia-smi topo -m} prints it),
 * the NIC each GPU gets, GPUDirect RDMA, /dev/shm, limits and the container.
 */
public final class TopoText {
    private TopoText() {
    }

    /** One PCI tree node: a bridge or a device, with the labels of what sits there. */
    private static final class Node {
        final Map<String, Node> children = new TreeMap<>();
        final List<String> labels = new ArrayList<>();
    }

    /**
     * Renders {@code t}.
     *
     * @param cudaVisibleDevices the environment's CUDA_VISIBLE_DEVICES (null when unset), for the NIC assignment
     * @param ibHca the JCCL_IB_HCA value (null when unset)
     */
    public static String render(Topology t, String cudaVisibleDevices, String ibHca) {
        StringBuilder sb = new StringBuilder();
        sb.append("host ").append(t.hostname().isEmpty() ? "(unknown)" : t.hostname()).append(": ").append(t.cpus()).append(" CPUs, ")
                .append(t.numaNodes().size()).append(" NUMA node(s), ").append(t.gpus().size()).append(" GPU(s), ")
                .append(t.rdmaDevices().size()).append(" RDMA device(s)\n");
        // Devices by NUMA node, then along their PCI chains.
        Map<Integer, Node> byNuma = new TreeMap<>();
        for (int i = 0; i < t.gpus().size(); i++) {
            Gpu g = t.gpus().get(i);
            add(byNuma, t, g.pci(), "GPU " + i + " " + g.deviceId() + (g.uuid().isEmpty() ? "" : " " + g.uuid())
                    + (g.nvlinkPeers().isEmpty() ? "" : " NVLinks: " + g.nvlinkPeers().size()));
        }
        for (RdmaDevice d : t.rdmaDevices()) {
            StringBuilder l = new StringBuilder(d.name());
            for (RdmaPort p : d.ports()) {
                l.append(" port ").append(p.number()).append(' ').append(p.state().replaceAll("^\\d+:\\s*", "")).append(' ')
                        .append(p.linkLayer()).append(' ').append(p.rate());
            }
            if (!d.netDevices().isEmpty()) {
                l.append(" (").append(String.join(", ", d.netDevices())).append(')');
            }
            add(byNuma, t, d.pci(), l.toString());
        }
        List<String> virtual = new ArrayList<>();
        for (NetDevice n : t.netDevices()) {
            String l = n.name() + " " + n.operState() + (n.speedMbps() > 0 ? " " + n.speedMbps() + " Mb/s" : "");
            if (n.pci().onPci()) {
                boolean rdmaNet = t.rdmaDevices().stream().anyMatch(d -> d.netDevices().contains(n.name()));
                if (!rdmaNet) {
                    add(byNuma, t, n.pci(), l);
                }
            } else {
                virtual.add(l);
            }
        }
        for (Map.Entry<Integer, Node> e : byNuma.entrySet()) {
            int id = e.getKey();
            NumaNode nn = t.numaNodes().stream().filter(x -> x.id() == id).findFirst().orElse(null);
            sb.append(id < 0 ? "NUMA node unknown" : "NUMA node " + id);
            if (nn != null) {
                sb.append(": CPUs ").append(nn.cpuList());
                if (nn.memTotalKib() > 0) {
                    sb.append(", ").append(bytes(nn.memTotalKib() * 1024)).append(" memory");
                }
            }
            sb.append('\n');
            print(sb, e.getValue(), "  ");
        }
        for (NumaNode nn : t.numaNodes()) {
            if (!byNuma.containsKey(nn.id())) {
                sb.append("NUMA node ").append(nn.id()).append(": CPUs ").append(nn.cpuList()).append(" (no devices)\n");
            }
        }
        if (!virtual.isEmpty()) {
            sb.append("virtual interfaces: ").append(String.join(", ", virtual)).append('\n');
        }
        matrix(sb, t);
        assignment(sb, t, cudaVisibleDevices, ibHca);
        Topology.GpuDirect g = t.gpuDirect();
        sb.append("GPUDirect RDMA: ").append(g.peerMemory() ? "peer memory (" + (g.nvidiaPeermem() ? "nvidia_peermem" : "nv_mem")
                + (g.nvMemVersion().isEmpty() ? "" : " " + g.nvMemVersion()) + (g.nvMemNc() ? ", nv_mem_nc" : "") + ")" : "no peer-memory module")
                .append(g.dmaBuf() ? "; dma-buf possible" : "; no dma-buf").append(" (kernel ")
                .append(g.kernelRelease().isEmpty() ? "?" : g.kernelRelease()).append(", NVIDIA driver ")
                .append(g.nvidiaDriver().isEmpty() ? "not loaded" : g.nvidiaDriver() + (g.openKernelModule() ? " open" : "")).append(")\n");
        sb.append("shared memory: ").append(t.shm().dir()).append(' ').append(bytes(t.shm().freeBytes())).append(" free of ")
                .append(bytes(t.shm().totalBytes())).append('\n');
        Limits l = t.limits();
        sb.append("limits: memlock ").append(lim(l.memlockSoft(), true)).append(", open files ").append(lim(l.nofileSoft(), false))
                .append(", processes ").append(lim(l.nprocSoft(), false)).append(", pids.max ").append(lim(l.pidsMax(), false))
                .append(", somaxconn ").append(lim(l.somaxconn(), false)).append('\n');
        sb.append("container: ").append(t.container().kind()).append(t.container().evidence().isEmpty() ? "" : " (" + t.container().evidence() + ")")
                .append('\n');
        sb.append("NVML: ").append(t.nvml()).append('\n');
        return sb.toString();
    }

    private static String lim(long v, boolean bytes) {
        return v == Limits.UNLIMITED ? "unlimited" : v == Limits.UNKNOWN ? "?" : bytes ? bytes(v) : Long.toString(v);
    }

    private static void add(Map<Integer, Node> byNuma, Topology t, PciLocation pci, String label) {
        // On a one-node host a device without a node (virtio, numa_node -1) is on that node.
        int numa = pci.numaNode() < 0 && t.numaNodes().size() == 1 ? t.numaNodes().getFirst().id() : pci.numaNode();
        Node n = byNuma.computeIfAbsent(numa, k -> new Node());
        if (!pci.onPci()) {
            n.labels.add(label);
            return;
        }
        for (String c : pci.chain()) {
            n = n.children.computeIfAbsent(c, k -> new Node());
        }
        n.labels.add(label);
    }

    private static void print(StringBuilder sb, Node node, String indent) {
        for (Map.Entry<String, Node> e : node.children.entrySet()) {
            Node c = e.getValue();
            sb.append(indent).append(e.getKey());
            if (e.getKey().startsWith("pci")) {
                sb.append(" (host bridge)");
            } else if (c.labels.isEmpty()) {
                sb.append(" (bridge)");
            }
            if (!c.labels.isEmpty()) {
                sb.append("  ").append(String.join("; ", c.labels));
            }
            sb.append('\n');
            print(sb, c, indent + "  ");
        }
    }

    private static void matrix(StringBuilder sb, Topology t) {
        List<NicAssignment.Nic> nics = new ArrayList<>();
        for (RdmaDevice d : t.rdmaDevices()) {
            nics.add(new NicAssignment.Nic(d.name(), d.pci(), true));
        }
        if (t.gpus().isEmpty() || nics.isEmpty()) {
            return;
        }
        int w = Math.max(6, nics.stream().mapToInt(n -> n.name().length()).max().orElse(6) + 1);
        sb.append("distance (PIX same switch, PXB same root port, PHB same NUMA node, SYS across sockets):\n");
        sb.append(String.format("%-8s", ""));
        nics.forEach(n -> sb.append(String.format("%-" + w + "s", n.name())));
        sb.append('\n');
        for (int i = 0; i < t.gpus().size(); i++) {
            sb.append(String.format("%-8s", "GPU" + i));
            Gpu g = t.gpus().get(i);
            nics.forEach(n -> sb.append(String.format("%-" + w + "s", t.distance(g.pci(), n.pci()))));
            sb.append('\n');
        }
    }

    private static void assignment(StringBuilder sb, Topology t, String cvd, String ibHca) {
        List<NicAssignment.Nic> nics;
        try {
            nics = NicAssignment.candidates(t, DeviceList.parse("JCCL_IB_HCA", ibHca, true));
        } catch (ConfigException e) {
            sb.append("NIC assignment: ").append(e.getMessage()).append('\n');
            return;
        }
        List<Gpu> visible = CudaVisibleDevices.resolve(t, cvd).visible();
        if (visible.isEmpty() || nics.isEmpty()) {
            return;
        }
        NicAssignment.Result r = NicAssignment.assign(visible.stream().map(Gpu::pci).toList(), nics, t.singleNumaNode());
        sb.append("NIC per local rank (balanced nearest):\n");
        for (int i = 0; i < visible.size(); i++) {
            sb.append("  rank ").append(i).append(" GPU ").append(t.gpus().indexOf(visible.get(i))).append(" -> ")
                    .append(String.join(" + ", r.perGpu().get(i).stream().map(NicAssignment.Choice::toString).toList())).append('\n');
        }
    }

    /** A byte count in binary units ("1.5 GiB"), "unknown" when negative. */
    public static String bytes(long b) {
        if (b < 0) {
            return "unknown";
        }
        String[] u = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = b;
        int i = 0;
        while (v >= 1024 && i < u.length - 1) {
            v /= 1024;
            i++;
        }
        return i == 0 ? b + " B" : String.format(Locale.ROOT, "%.1f %s", v, u[i]);
    }
}
