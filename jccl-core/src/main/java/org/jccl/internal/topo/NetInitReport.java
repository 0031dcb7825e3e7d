package org.jccl.internal.topo;

import java.util.List;
import java.util.function.Supplier;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.topo.Topology.Gpu;
import org.jccl.internal.topo.Topology.GpuDirect;

/**
 * The INIT line that ends two field stories at a glance ("only 4 of 8 HCAs carried traffic",
 * "GPU Direct RDMA Disabled" unnoticed): for a rank, the GPU it drives, the NIC(s) it uses (from
 * {@link NicAssignment}, the same call the RDMA transport makes) and whether GPUDirect RDMA is on —
 * and, when it is off, why and how to turn it on. For example:
 *
 * <pre>
 * rank 3 (local rank 3): GPU 3 (0000:47:00.0) -&gt; NIC mlx5_3 (PIX); GPUDirect RDMA on (nvidia-peermem loaded, nv_mem 1.1)
 * rank 0 (local rank 0): GPU 0 (0000:07:00.0) -&gt; NIC mlx5_0 (PIX); GPUDirect RDMA off: no peer-memory module (...) ...
 * </pre>
 *
 * <p>Pure functions of a {@link Topology} (tests use the fixture trees); {@link #log} discovers this
 * host once per process, and only when INFO lines of INIT are printed.
 */
public final class NetInitReport {

    private static volatile Topology host;

    private NetInitReport() {
    }

    /** {@link #line(Topology, int, int, int, String, String, String)} with the local size and JCCL_CUDA_DEVICE unknown. */
    public static String line(Topology t, int rank, int localRank, String cudaVisibleDevices, String ibHca) {
        return line(t, rank, localRank, -1, cudaVisibleDevices, null, ibHca);
    }

    /**
     * The line for {@code rank}, which is local rank {@code localRank} of {@code localSize} on its host;
     * its GPU is the one {@link GpuMapping} gives it (the runtime's rule).
     *
     * @param localSize ranks on this host, -1 when unknown
     * @param cudaVisibleDevices the process's CUDA_VISIBLE_DEVICES, null when unset
     * @param cudaDevice JCCL_CUDA_DEVICE, null when unset
     * @param ibHca JCCL_IB_HCA, null when unset
     */
    public static String line(Topology t, int rank, int localRank, int localSize, String cudaVisibleDevices, String cudaDevice,
            String ibHca) {
        CudaVisibleDevices cvd = CudaVisibleDevices.resolve(t, cudaVisibleDevices);
        List<Gpu> visible = cvd.visible();
        List<NicAssignment.Choice> nics = NicAssignment.forLocalRank(t, localRank, localSize, cudaVisibleDevices, cudaDevice, ibHca);
        StringBuilder sb = new StringBuilder("rank ").append(rank).append(" (local rank ").append(localRank).append("): ");
        boolean gpu = false;
        if (cvd.entries().isEmpty()) {
            sb.append(t.gpus().isEmpty() ? "no GPU on this host" : "no GPU visible (CUDA_VISIBLE_DEVICES=" + cudaVisibleDevices + ")");
        } else {
            GpuMapping.Result r = GpuMapping.choose(GpuMapping.devices(cvd), cudaDevice, localRank, localSize, cudaVisibleDevices);
            if (!r.ok()) {
                String e = r.error();
                int fix = e.indexOf(". Fix:");
                sb.append("no GPU of its own by jccl's rule (").append(fix > 0 ? e.substring(0, fix) : e).append(")");
            } else {
                gpu = true;
                int index = r.choice().device().ordinal();
                Gpu g = cvd.entries().get(index).gpu();
                int physical = g == null ? -1 : t.gpus().indexOf(g);
                List<String> notes = new java.util.ArrayList<>();
                notes.add(g == null ? r.choice().device().identity() : g.pci().address());
                if (cudaVisibleDevices != null) {
                    notes.add("CUDA device " + index + " under CUDA_VISIBLE_DEVICES=" + cudaVisibleDevices);
                }
                if (r.choice().reason() != GpuMapping.Reason.LOCAL_RANK) {
                    notes.add(r.choice().why());
                }
                sb.append(physical >= 0 ? "GPU " + physical : "CUDA device " + index).append(" (").append(String.join(", ", notes)).append(")");
            }
        }
        sb.append(" -> ");
        if (nics.isEmpty()) {
            sb.append("no NIC (no active RDMA port").append(ibHca == null ? "" : " allowed by JCCL_IB_HCA=" + ibHca)
                    .append(" and no physical interface that is up)");
        } else {
            sb.append(nics.size() == 1 ? "NIC " : "NICs ");
            for (int i = 0; i < nics.size(); i++) {
                sb.append(i == 0 ? "" : ", ").append(nics.get(i));
            }
        }
        if (gpu || !visible.isEmpty()) {
            sb.append("; ").append(gpuDirect(t));
        }
        return sb.toString();
    }

    /** "GPUDirect RDMA on (...)" or "GPUDirect RDMA off: why; fix: how". */
    public static String gpuDirect(Topology t) {
        GpuDirect g = t.gpuDirect();
        if (t.rdmaDevices().isEmpty()) {
            return "GPUDirect RDMA off: this host has no RDMA device (/sys/class/infiniband is empty), so GPU buffers to other hosts"
                    + " go through host memory and TCP";
        }
        if (g.peerMemory()) {
            return "GPUDirect RDMA on (" + (g.nvidiaPeermem() ? "nvidia-peermem loaded" : "nv_mem peer-memory client registered")
                    + (g.nvMemVersion().isEmpty() ? "" : ", nv_mem " + g.nvMemVersion()) + (g.nvMemNc() ? ", nv_mem_nc" : "") + ")";
        }
        if (g.dmaBuf()) {
            return "GPUDirect RDMA on (dma-buf: Linux " + g.kernelRelease() + ", NVIDIA open kernel module " + g.nvidiaDriver() + ")";
        }
        String kernel = g.kernelRelease().isEmpty() ? "unknown" : g.kernelRelease();
        String dma = g.kernelAtLeast(5, 12)
                ? (g.openKernelModule() ? "driver " + g.nvidiaDriver() + " is older than 515" : "the NVIDIA kernel module is the closed one")
                : "Linux " + kernel + " is older than 5.12";
        return "GPUDirect RDMA off: no peer-memory module (/sys/kernel/mm/memory_peers/nv_mem/version missing, nvidia_peermem not"
                + " loaded) and no dma-buf (" + dma + "); GPU buffers are staged through host memory. Fix: modprobe nvidia-peermem,"
                + " or the open kernel module (driver 515+) on Linux 5.12+; `jccl doctor` checks it (gpudirect-rdma)";
    }

    /**
     * Logs {@link #line} at INFO under INIT for this process's host; does nothing (not even discovery)
     * when those lines are not printed. Discovery failures cost a WARN-free TRACE line, never the init.
     */
    public static void log(int rank, int localRank, Config config) {
        log(rank, localRank, -1, config);
    }

    /** {@link #log(int, int, Config)} knowing the number of ranks on this host. */
    public static void log(int rank, int localRank, int localSize, Config config) {
        if (!Log.enabled(Log.Level.INFO, Log.Subsys.INIT)) {
            return;
        }
        log(rank, localRank, localSize, config, () -> Topologies.forHost(config));
    }

    /** {@link #log} with the topology from {@code discover} (tests). */
    static void log(int rank, int localRank, Config config, Supplier<Topology> discover) {
        log(rank, localRank, -1, config, discover);
    }

    static void log(int rank, int localRank, int localSize, Config config, Supplier<Topology> discover) {
        Topology t;
        try {
            t = host;
            if (t == null) {
                t = discover.get();
                host = t;
            }
            Log.info(Log.Subsys.INIT, rank, line(t, rank, localRank, localSize, System.getenv("CUDA_VISIBLE_DEVICES"),
                    Settings.CUDA_DEVICE.getString(config), Settings.IB_HCA.getString(config)));
        } catch (RuntimeException e) {
            Log.trace(Log.Subsys.INIT, rank, "GPU/NIC line skipped: topology discovery failed: " + e);
        }
    }

    /** Forgets the cached host topology (tests). */
    static void reset() {
        host = null;
    }
}
