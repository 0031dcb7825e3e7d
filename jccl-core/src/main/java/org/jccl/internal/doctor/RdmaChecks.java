package org.jccl.internal.doctor;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.doctor.Doctor.Finding;
import org.jccl.internal.doctor.Doctor.Input;
import org.jccl.internal.net.DeviceList;
import org.jccl.internal.topo.CudaVisibleDevices;
import org.jccl.internal.topo.NicAssignment;
import org.jccl.internal.topo.PciDistance;
import org.jccl.internal.topo.SysfsDiscovery;
import org.jccl.internal.topo.Topology.Gid;
import org.jccl.internal.topo.Topology.Gpu;
import org.jccl.internal.topo.Topology.GpuDirect;
import org.jccl.internal.topo.Topology.RdmaDevice;
import org.jccl.internal.topo.Topology.RdmaPort;

/**
 * {@link Doctor}'s checks of RDMA: GPUDirect RDMA, the ports' state and link layer, the RoCE GID,
 * {@code JCCL_IB_HCA}, and which NIC each local rank would use.
 */
final class RdmaChecks extends Checks {

    RdmaChecks(Input in, Config config) {
        super(in, config);
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
}
