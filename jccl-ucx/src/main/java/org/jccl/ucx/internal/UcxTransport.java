package org.jccl.ucx.internal;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.log.Log;
import org.jccl.internal.topo.Topologies;
import org.jccl.internal.topo.Topology;
import org.jccl.spi.Endpoint;
import org.jccl.spi.LinkCosts;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.jccl.spi.TransportContext;

/**
 * The UCX transport, found by ServiceLoader at priority 30 (after LOCAL and SHM, before TCP). {@code JCCL_NET}
 * decides whether it is on: {@code Socket} never, {@code UCX} always (an error naming the reason when UCX
 * cannot be loaded), {@code auto} (the default) when this host has an active RDMA port and UCX loads (UCX is
 * not even loaded on a host without RDMA ports). It links ranks with different host identities (host hash,
 * which {@code JCCL_HOSTID} sets), and ranks of one host too under {@code JCCL_UCX_SAME_HOST=1}.
 */
public final class UcxTransport implements Transport {
    public static final String NAME = "UCX";
    static final int PRIORITY = 30;

    private volatile boolean sameHost;

    /**
     * UCX over its tcp between two ranks of one machine (loopback): TunerCalibration UCX-TCP, 2026-11-28 (half round
     * trip 8 B 4.40 us; 1 MiB 134 us, 16 MiB 2,462 us), the same method as TCP's declared costs. jccl declares these for
     * every UCX link: no RDMA link could be measured here, and an InfiniBand or RoCE link (about 2-3 us, 12-50 GB/s a
     * port) is then priced as slower than it is, which only makes the tuner favour fewer, larger messages on it.
     */
    static final LinkCosts COSTS = new LinkCosts(4.40e-6, 1.48e-10, "UCX over tcp, loopback ping-pong, TunerCalibration UCX-TCP, 2026-11-28");

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public LinkCosts costs() {
        return COSTS;
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public boolean isEnabled(Config config) {
        UcxSettings.Net net = UcxSettings.net(config);
        if (net == UcxSettings.Net.SOCKET) {
            return false;
        }
        if (net == UcxSettings.Net.AUTO) {
            List<String> ports = activeRdmaPorts();
            if (ports.isEmpty()) {
                Log.infoOnce(Log.Subsys.NET, -1, "UCX transport off: JCCL_NET=auto and this host has no active RDMA port"
                        + " (/sys/class/infiniband); TCP carries the traffic between hosts (JCCL_NET=UCX would use UCX over its tcp)");
                return false;
            }
        }
        UcxLibrary.Loaded l = UcxLibrary.get();
        if (!l.available()) {
            if (net == UcxSettings.Net.UCX) {
                throw new ConfigException("JCCL_NET=UCX, but UCX is unavailable: " + l.reason() + " (JCCL_NET=Socket uses TCP instead)");
            }
            Log.infoOnce(Log.Subsys.NET, -1, "UCX transport off: " + l.reason());
            return false;
        }
        Log.infoOnce(Log.Subsys.INIT, -1, "UCX " + l.ucp().versionString + " loaded from " + l.ucp().libraryPath + " (JCCL_NET="
                + net.name().toLowerCase(java.util.Locale.ROOT) + "); " + String.join("; ", l.notes()));
        sameHost = UcxSettings.sameHost(config);
        return true;
    }

    /** "mlx5_0:1" for every RDMA port whose state is ACTIVE (sysfs). */
    static List<String> activeRdmaPorts() {
        List<String> out = new ArrayList<>();
        Path root = Path.of("/sys/class/infiniband");
        if (!Files.isDirectory(root)) {
            return out;
        }
        try (DirectoryStream<Path> devs = Files.newDirectoryStream(root)) {
            for (Path d : devs) {
                Path ports = d.resolve("ports");
                if (!Files.isDirectory(ports)) {
                    continue;
                }
                try (DirectoryStream<Path> ps = Files.newDirectoryStream(ports)) {
                    for (Path p : ps) {
                        try {
                            if (Files.readString(p.resolve("state")).contains("ACTIVE")) {
                                out.add(d.getFileName() + ":" + p.getFileName());
                            }
                        } catch (IOException e) {
                            // a port without a readable state is not active
                        }
                    }
                }
            }
        } catch (IOException e) {
            return out;
        }
        return out;
    }

    @Override
    public Endpoint open(TransportContext ctx) throws IOException {
        UcxLibrary.Loaded l = UcxLibrary.get();
        if (!l.available()) {
            throw new IOException("UCX is unavailable: " + l.reason());
        }
        Config config = ctx.config();
        List<String> nics = ctx.nics();
        Topology topo = null;
        try {
            topo = Topologies.forHost(config);
        } catch (RuntimeException e) {
            // without a topology: no NIC mapping, GPUDirect said unknown
        }
        Map<String, String> settings = UcxSettings.translate(config, nics, topo, System.getenv());
        UcxWorker w;
        try {
            w = UcxWorker.open(l.ucp(), settings, "jccl-r" + ctx.rank(), true);
        } catch (UcxException e) {
            throw new IOException("UCX: rank " + ctx.rank() + " cannot open a UCX worker: " + e.getMessage() + " (UCX settings applied: "
                    + settings + ")", e);
        }
        Log.info(Log.Subsys.INIT, ctx.rank(), initLine(w, settings, nics, topo, ctx.gpu()));
        // Over tcp alone messages below the rendezvous threshold are copied anyway: one IOV message each up to it.
        return new UcxEndpoint(w, ctx, settings.containsKey("RNDV_THRESH") ? UcxSettings.TCP_RNDV_THRESH : UcxConnection.SPLIT_AT);
    }

    /** The one INFO line per rank: NICs, UCX transports, GPUDirect RDMA on or off and why. */
    static String initLine(UcxWorker w, Map<String, String> settings, List<String> nics, Topology topo, String gpu) {
        String devices = settings.get("NET_DEVICES");
        String nicPart = devices != null ? "NIC(s) " + devices + (gpu != null ? " (nearest to GPU " + gpu + ")" : "")
                : "no RDMA NIC assigned" + (nics == null || nics.isEmpty() ? " (no active RDMA device)" : " (" + nics + " are not RDMA devices)")
                + ": UCX picks among its devices";
        return "UCX " + w.ucp.version() + ": " + nicPart + "; UCX transports " + String.join(", ", w.resources) + "; " + gpuDirect(w, topo, gpu);
    }

    /** "GPUDirect RDMA on (...)" or "GPUDirect RDMA off: why". */
    static String gpuDirect(UcxWorker w, Topology topo, String gpu) {
        return gpuDirect(w.cudaMemory(), topo, gpu);
    }

    static String gpuDirect(boolean ucxCuda, Topology topo, String gpu) {
        if (gpu == null && (topo == null || topo.gpus().isEmpty())) {
            return "GPUDirect RDMA off: no GPU on this rank";
        }
        if (!ucxCuda) {
            return "GPUDirect RDMA off: this UCX has no CUDA support (ucp_context_query lists host memory only); GPU buffers are staged"
                    + " through pinned host memory (a UCX built with CUDA, e.g. HPC-X, lifts this)";
        }
        if (topo == null) {
            return "GPUDirect RDMA unknown: the host's topology could not be read";
        }
        Topology.GpuDirect gd = topo.gpuDirect();
        if (gd.peerMemory()) {
            return "GPUDirect RDMA on (peer memory: " + (gd.nvidiaPeermem() ? "nvidia-peermem" : "nv_peer_mem " + gd.nvMemVersion()) + ")";
        }
        if (gd.dmaBuf()) {
            return "GPUDirect RDMA on (dma-buf: kernel " + gd.kernelRelease() + ", NVIDIA open kernel module " + gd.nvidiaDriver() + ")";
        }
        return "GPUDirect RDMA off: neither nvidia-peermem (nor nv_peer_mem) is loaded nor dma-buf possible (kernel " + gd.kernelRelease()
                + ", " + (gd.openKernelModule() ? "open" : "closed") + " NVIDIA kernel module " + (gd.nvidiaDriver().isEmpty() ? "not loaded"
                : gd.nvidiaDriver()) + "); fix: modprobe nvidia-peermem, or the open kernel module on Linux 5.12+";
    }

    @Override
    public boolean canConnect(PeerInfo self, PeerInfo peer) {
        if (!self.addresses().containsKey(NAME) || !peer.addresses().containsKey(NAME)) {
            return false;
        }
        return sameHost || !self.hostHash().equals(peer.hostHash());
    }
}
