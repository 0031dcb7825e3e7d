package org.jccl.internal.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.internal.log.Log;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The INIT line per rank (issue 5: "for each GPU, the NIC it uses and whether GPUDirect RDMA is on —
 * and why not"), on the fixture hosts: dgx8 (8 GPUs, 8 HCAs, nvidia-peermem), nopeermem (the same
 * without peer memory, Linux 5.4, closed module), roce (dma-buf) and pod64 (no GPU, no RDMA).
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class NetInitReportTest {

    @TempDir
    Path dir;

    @AfterEach
    void forget() {
        NetInitReport.reset();
    }

    private static void assertHas(String line, String... parts) {
        for (String p : parts) {
            assertTrue(line.contains(p), "missing '" + p + "' in: " + line);
        }
    }

    @Test
    void eightRanksOnTheDgxNameEightDistinctHcasAndGpuDirectOn() {
        Topology t = Fixtures.discover("dgx8", dir);
        Set<String> nics = new HashSet<>();
        for (int r = 0; r < 8; r++) {
            String line = NetInitReport.line(t, r, r, null, null);
            assertHas(line, "rank " + r + " (local rank " + r + "): GPU " + r + " (", "-> NIC mlx5_", "(PIX)",
                    "GPUDirect RDMA on (nvidia-peermem loaded, nv_mem 1.3-0)");
            nics.add(line.replaceAll(".*-> NIC (mlx5_\\d+).*", "$1"));
        }
        assertEquals(8, nics.size(), "every HCA carries one GPU's traffic: " + nics);
        assertHas(NetInitReport.line(t, 0, 0, null, null), "GPU 0 (0000:13:00.0) -> NIC mlx5_0 (PIX)");
    }

    @Test
    void withoutPeerMemoryTheLineSaysOffWhyAndTheFix() {
        String line = NetInitReport.line(Fixtures.discover("nopeermem", dir), 2, 2, null, null);
        assertHas(line, "rank 2 (local rank 2): GPU 2", "-> NIC mlx5_", "GPUDirect RDMA off: no peer-memory module",
                "nv_mem/version missing", "nvidia_peermem not loaded", "Linux 5.4.0-150-generic is older than 5.12",
                "staged through host memory", "Fix: modprobe nvidia-peermem", "jccl doctor");
    }

    @Test
    void dmaBufCountsAsOnAndCudaVisibleDevicesPicksTheGpu() {
        Topology roce = Fixtures.discover("roce", dir.resolve("roce"));
        assertHas(NetInitReport.line(roce, 0, 0, null, null), "GPUDirect RDMA on (dma-buf: Linux 6.5", "open kernel module 550.54.15");
        Topology dgx = Fixtures.discover("dgx8", dir.resolve("dgx"));
        // Local rank 0 with CUDA_VISIBLE_DEVICES=7 drives physical GPU 7 and its own HCA first.
        assertHas(NetInitReport.line(dgx, 5, 0, "7", null),
                "rank 5 (local rank 0): GPU 7 (0000:b4:00.0, CUDA device 0 under CUDA_VISIBLE_DEVICES=7, the only GPU this process sees)"
                        + " -> NICs mlx5_7 (PIX), mlx5_6 (PIX)");
        // The same rule as the runtime: JCCL_CUDA_DEVICE wins, and a layout without a GPU per rank says so.
        assertHas(NetInitReport.line(dgx, 1, 1, 4, "4,5,6,7", "3", null),
                "rank 1 (local rank 1): GPU 7 (0000:b4:00.0, CUDA device 3 under CUDA_VISIBLE_DEVICES=4,5,6,7, JCCL_CUDA_DEVICE=3)");
        assertHas(NetInitReport.line(dgx, 1, 1, 4, "4,5", null, null), "rank 1 (local rank 1): no GPU of its own by jccl's rule (local rank 1"
                + " of 4 has no GPU of its own: it sees 2 GPUs", "-> NIC");
    }

    @Test
    void aHostWithoutGpusOrRdmaNamesItsNicOnly() {
        String line = NetInitReport.line(Fixtures.discover("pod64", dir), 1, 1, null, null);
        assertTrue(line.startsWith("rank 1 (local rank 1): no GPU on this host -> NIC"), line);
        assertTrue(!line.contains("GPUDirect"), "no GPUDirect verdict without a GPU: " + line);
        assertHas(NetInitReport.gpuDirect(Fixtures.discover("pod64", dir.resolve("b"))), "GPUDirect RDMA off: this host has no RDMA device");
    }

    @Test
    void logPrintsTheLineAtInfoUnderInitOnly() throws Exception {
        Log.Options saved = Log.options();
        Path file = dir.resolve("init.log");
        Topology t = Fixtures.discover("nopeermem", dir.resolve("t"));
        try {
            Log.configure(new Log.Options(Log.Level.WARN, EnumSet.of(Log.Subsys.INIT), file.toString(), false));
            NetInitReport.log(3, 3, Config.defaults());
            assertTrue(!Files.exists(file) || Files.readAllLines(file).isEmpty(), "nothing at WARN (and no discovery)");
            Log.configure(new Log.Options(Log.Level.INFO, EnumSet.of(Log.Subsys.INIT), file.toString(), false));
            NetInitReport.log(3, 3, Config.defaults(), () -> t);
            List<String> lines = Files.readAllLines(file);
            assertEquals(1, lines.size(), lines.toString());
            assertHas(lines.getFirst(), "[3] JCCL INFO rank 3 (local rank 3): GPU 3", "GPUDirect RDMA off: no peer-memory module");
        } finally {
            Log.configure(saved);
        }
    }
}
