package org.jccl.internal.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.jccl.ConfigException;
import org.jccl.internal.net.DeviceList;
import org.jccl.internal.topo.Topology.Gpu;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** NIC assignment (balanced nearest), CUDA_VISIBLE_DEVICES and JCCL_IB_HCA parsing. */
@Timeout(30)
class TopoNicAssignmentTest {

    @TempDir
    Path dir;

    private static List<PciLocation> gpus(Topology t) {
        return t.gpus().stream().map(Gpu::pci).toList();
    }

    @Test
    void eightGpusAndEightHcasUseEveryHcaEachThroughItsOwnSwitch() {
        Topology t = Fixtures.discover("dgx8", dir);
        List<NicAssignment.Nic> nics = NicAssignment.candidates(t, DeviceList.parse("JCCL_IB_HCA", null, true));
        assertEquals(8, nics.size());
        NicAssignment.Result r = NicAssignment.assign(gpus(t), nics, t.singleNumaNode());
        assertEquals(8, r.used().size(), "every HCA carries traffic: " + r.perGpu());
        for (int i = 0; i < 8; i++) {
            assertEquals(List.of(new NicAssignment.Choice("mlx5_" + i, PciDistance.PIX)), r.perGpu().get(i), "GPU " + i);
        }
        // What "each GPU takes its first nearest NIC" does on the same host: both GPUs of a switch pick the
        // same HCA, and only 4 of the 8 carry traffic (the field report this assignment exists for).
        Set<String> naive = new LinkedHashSet<>();
        for (PciLocation g : gpus(t)) {
            NicAssignment.Nic best = nics.stream().min((a, b) -> g.distanceTo(a.pci(), false).compareTo(g.distanceTo(b.pci(), false)))
                    .orElseThrow();
            naive.add(best.name());
        }
        assertEquals(4, naive.size());
    }

    @Test
    void fourHcasForEightGpusCarryTwoGpusEachAllOnTheirSwitch() {
        Topology t = Fixtures.discover("dgx8", dir);
        List<NicAssignment.Nic> nics = NicAssignment.candidates(t, DeviceList.parse("JCCL_IB_HCA", "mlx5_0,mlx5_2,mlx5_4,mlx5_6", true));
        NicAssignment.Result r = NicAssignment.assign(gpus(t), nics, false);
        Map<String, Integer> load = new HashMap<>();
        r.perGpu().forEach(l -> {
            assertEquals(1, l.size());
            assertEquals(PciDistance.PIX, l.getFirst().distance());
            load.merge(l.getFirst().nic(), 1, Integer::sum);
        });
        assertEquals(Map.of("mlx5_0", 2, "mlx5_2", 2, "mlx5_4", 2, "mlx5_6", 2), load);
    }

    @Test
    void fourGpusWithEightHcasTakeTwoNearHcasEach() {
        Topology t = Fixtures.discover("dgx8", dir);
        List<Gpu> visible = CudaVisibleDevices.resolve(t, "0,2,4,6").visible();
        NicAssignment.Result r = NicAssignment.assign(visible.stream().map(Gpu::pci).toList(), NicAssignment.candidates(t, DeviceList.parse("JCCL_IB_HCA", null, true)),
                false);
        assertEquals(8, r.used().size());
        for (int i = 0; i < 4; i++) {
            List<NicAssignment.Choice> c = r.perGpu().get(i);
            assertEquals(2, c.size(), "GPU " + i + ": " + c);
            assertTrue(c.stream().allMatch(x -> x.distance() == PciDistance.PIX), c.toString());
            assertEquals(Set.of("mlx5_" + 2 * i, "mlx5_" + (2 * i + 1)), Set.of(c.get(0).nic(), c.get(1).nic()));
        }
    }

    @Test
    void forLocalRankFollowsCudaVisibleDevicesAndRoundRobinsWithoutGpus() {
        Topology t = Fixtures.discover("dgx8", dir.resolve("a"));
        assertEquals("mlx5_3", NicAssignment.forLocalRank(t, 3, null, null).getFirst().nic());
        // Ranks see GPUs 4-7 only: local rank 0 is GPU 4, whose switch holds mlx5_4 and mlx5_5.
        List<NicAssignment.Choice> c = NicAssignment.forLocalRank(t, 0, "4,5,6,7", null);
        assertTrue(Set.of("mlx5_4", "mlx5_5").contains(c.getFirst().nic()), c.toString());
        assertEquals(PciDistance.PIX, c.getFirst().distance());
        Topology pod = Fixtures.discover("pod64", dir.resolve("b"));
        assertEquals("eth0", NicAssignment.forLocalRank(pod, 5, null, null).getFirst().nic());
    }

    @Test
    void oneGpuPerProcessStillSpreadsOverEveryHca() {
        // Eight processes, each with CUDA_VISIBLE_DEVICES=<its GPU> (Slurm/Kubernetes GPU binding): GPUs 6 and 7 share a
        // switch with mlx5_6 and mlx5_7; alone, each would take mlx5_6. Their primaries must be the eight distinct HCAs.
        Topology t = Fixtures.discover("dgx8", dir);
        Set<String> primaries = new java.util.HashSet<>();
        for (int gpu = 0; gpu < 8; gpu++) {
            List<NicAssignment.Choice> c = NicAssignment.forLocalRank(t, 0, Integer.toString(gpu), null);
            assertEquals(PciDistance.PIX, c.getFirst().distance(), c.toString());
            assertEquals(8, c.size(), "the other HCAs follow as spares: " + c);
            primaries.add(c.getFirst().nic());
        }
        assertEquals(8, primaries.size(), "every HCA is some process's primary: " + primaries);
        assertEquals("mlx5_7", NicAssignment.forLocalRank(t, 0, "7", null).getFirst().nic());
    }

    @Test
    void hungarianFindsTheMinimumOnRandomMatrices() {
        Random rnd = new Random(42);
        for (int trial = 0; trial < 200; trial++) {
            int rows = 1 + rnd.nextInt(5);
            int cols = rows + rnd.nextInt(3);
            long[][] a = new long[rows][cols];
            for (long[] row : a) {
                for (int j = 0; j < cols; j++) {
                    row[j] = rnd.nextInt(20);
                }
            }
            int[] got = NicAssignment.hungarian(a);
            long sum = 0;
            Set<Integer> cols2 = new LinkedHashSet<>();
            for (int i = 0; i < rows; i++) {
                sum += a[i][got[i]];
                cols2.add(got[i]);
            }
            assertEquals(rows, cols2.size(), "distinct columns");
            assertEquals(brute(a, 0, new boolean[cols]), sum, "trial " + trial);
        }
    }

    private static long brute(long[][] a, int row, boolean[] used) {
        if (row == a.length) {
            return 0;
        }
        long best = Long.MAX_VALUE;
        for (int j = 0; j < used.length; j++) {
            if (!used[j]) {
                used[j] = true;
                best = Math.min(best, a[row][j] + brute(a, row + 1, used));
                used[j] = false;
            }
        }
        return best;
    }

    @Test
    void cudaVisibleDevicesDuplicatesRangesGarbageAndUuids() {
        Topology t = Fixtures.discover("dgx8", dir);
        CudaVisibleDevices dup = CudaVisibleDevices.resolve(t, "0,1,1,3");
        assertEquals(3, dup.visible().size());
        assertTrue(dup.problems().getFirst().contains("listed twice ('1')"), dup.problems().toString());
        CudaVisibleDevices range = CudaVisibleDevices.resolve(t, "0,9,1");
        assertEquals(1, range.visible().size(), "CUDA stops at the first invalid entry");
        assertTrue(range.problems().getFirst().contains("entry '9' is not a GPU index: this host has 8 GPU(s), 0-7 (CUDA ignores it and"
                + " everything after it)"), range.problems().toString());
        assertTrue(CudaVisibleDevices.resolve(t, "0,gpu1").problems().getFirst().contains("neither an index"));
        assertTrue(CudaVisibleDevices.resolve(t, "").visible().isEmpty());
        assertEquals(8, CudaVisibleDevices.resolve(t, null).visible().size());
        CudaVisibleDevices uuid = CudaVisibleDevices.resolve(t, "GPU-8c9d");
        assertEquals(List.of("GPU-8c9d"), uuid.unresolved(), "UUIDs cannot be resolved without NVML");
        assertEquals("0000:93:00.0", CudaVisibleDevices.resolve(t, "4").visible().getFirst().pci().address());
    }

    @Test
    void ibHcaMatchesExactNamesUnlessAskedForAPrefix() {
        DeviceList s = hca("mlx5_1");
        assertTrue(s.accepts("mlx5_1", 1));
        assertFalse(s.accepts("mlx5_10", 1), "mlx5_1 never means mlx5_10");
        DeviceList p = hca("mlx5_1*");
        assertTrue(p.accepts("mlx5_10", 1));
        DeviceList ports = hca("=mlx5_0:1,mlx5_2");
        assertTrue(ports.accepts("mlx5_0", 1));
        assertFalse(ports.accepts("mlx5_0", 2));
        assertTrue(ports.accepts("mlx5_2", 2));
        DeviceList ex = hca("^mlx5_3");
        assertFalse(ex.accepts("mlx5_3", 1));
        assertTrue(ex.accepts("mlx5_4", 1));
        assertTrue(hca(null).accepts("anything", 1));
        ConfigException e = assertThrows(ConfigException.class, () -> hca("mlx5_0:one"));
        assertTrue(e.getMessage().contains("JCCL_IB_HCA='mlx5_0:one' is not allowed: entry 'mlx5_0:one' has port 'one'"), e.getMessage());
    }

    private static DeviceList hca(String value) {
        return DeviceList.parse("JCCL_IB_HCA", value, true);
    }

    @Test
    void busIdsNormaliseFromNvmlAndShortForms() {
        assertEquals("0000:1b:00.0", Topology.normaliseBusId("00000000:1B:00.0"));
        assertEquals("0000:1b:00.0", Topology.normaliseBusId("1b:00.0"));
        List<String> sorted = new ArrayList<>(List.of("mlx5_10", "mlx5_2", "mlx5_1"));
        sorted.sort(SysfsDiscovery::naturalOrder);
        assertEquals(List.of("mlx5_1", "mlx5_2", "mlx5_10"), sorted);
    }
}
