package org.jccl.internal.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.jccl.internal.topo.CpuBinding.Mode;
import org.jccl.internal.topo.CpuBinding.Plan;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --bind-to} on the fixture hosts: dgx8 has 8 GPUs on 2 NUMA nodes (GPUs 0-3 at 0000:13, 14,
 * 33, 34 on node 0 with CPUs 0-55; GPUs 4-7 at 0000:93, 94, b3, b4 on node 1 with CPUs 56-111); pod64
 * has no GPU.
 */
@Timeout(30)
class CpuBindingTest {

    @TempDir
    Path dir;

    private static final List<Integer> ALL = CpuBinding.parse("0-111");

    private static void assertHas(String text, String... parts) {
        for (String p : parts) {
            assertTrue(text.contains(p), "missing '" + p + "' in: " + text);
        }
    }

    @Test
    void gpuRanksGetEveryCpuOfTheirGpusNumaNode() {
        Topology t = Fixtures.discover("dgx8", dir);
        List<Plan> plans = CpuBinding.plan(Mode.AUTO, t, Map.of(), 8, ALL);
        for (int r = 0; r < 8; r++) {
            assertEquals(r < 4 ? "0-55" : "56-111", plans.get(r).cpuList(), plans.get(r).why());
        }
        assertHas(plans.get(0).why(), "GPU rank: NUMA node 0 of its GPU 0 (0000:13:00.0, by local rank 0 of 8");
        assertHas(plans.get(5).why(), "GPU rank: NUMA node 1 of its GPU 5 (0000:94:00.0, by local rank 5 of 8");
        // Ranks that see GPUs 4-7 only are all on node 1; numa gives GPU ranks the same.
        for (Mode m : List.of(Mode.AUTO, Mode.NUMA)) {
            List<Plan> upper = CpuBinding.plan(m, t, Map.of("CUDA_VISIBLE_DEVICES", "4,5,6,7"), 4, ALL);
            upper.forEach(p -> assertEquals("56-111", p.cpuList(), p.why()));
        }
        // A reordered list: local rank 0 drives GPU 7 (node 1), local rank 3 GPU 0 (node 0).
        List<Plan> reordered = CpuBinding.plan(Mode.AUTO, t, Map.of("CUDA_VISIBLE_DEVICES", "7,6,1,0"), 4, ALL);
        assertEquals(List.of("56-111", "56-111", "0-55", "0-55"), reordered.stream().map(Plan::cpuList).toList());
        // JCCL_CUDA_DEVICE names the GPU: every rank follows it.
        assertEquals("56-111", CpuBinding.plan(Mode.AUTO, t, Map.of("JCCL_CUDA_DEVICE", "6"), 2, ALL).get(0).cpuList());
    }

    @Test
    void theLaunchersLightDiscoverySeesTheSameNodesAndGpus() {
        Path root = FixtureTree.expand("dgx8", dir);
        SysfsDiscovery d = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuProbe.absent("-"), "/dev/shm");
        Topology full = d.discover();
        Topology light = d.placement();
        assertEquals(full.numaNodes(), light.numaNodes());
        assertEquals(full.gpus(), light.gpus());
        assertEquals(CpuBinding.plan(Mode.AUTO, full, Map.of(), 8, ALL), CpuBinding.plan(Mode.AUTO, light, Map.of(), 8, ALL));
    }

    @Test
    void theLaunchersOwnCpusetLimitsEveryNode() {
        Topology t = Fixtures.discover("dgx8", dir);
        List<Plan> plans = CpuBinding.plan(Mode.AUTO, t, Map.of(), 8, CpuBinding.parse("0-7,60-63"));
        assertEquals("0-7", plans.get(0).cpuList());
        assertEquals("60-63", plans.get(7).cpuList());
        List<Plan> narrow = CpuBinding.plan(Mode.AUTO, t, Map.of(), 8, CpuBinding.parse("0-7"));
        assertFalse(narrow.get(4).bound());
        assertHas(narrow.get(4).why(), "is on NUMA node 1 (CPUs 56-111), none of which this launcher may use (allowed: 0-7); not bound");
    }

    @Test
    void aGpuWithoutANumaNodeIsNotBound() {
        Path root = FixtureTree.expand("dgx8", dir);
        FixtureTree.write(root.resolve("sys/bus/pci/devices/0000:13:00.0/numa_node"), "-1\n");
        Topology t = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuProbe.absent("-"), "/dev/shm").discover();
        List<Plan> plans = CpuBinding.plan(Mode.AUTO, t, Map.of(), 8, ALL);
        assertFalse(plans.get(0).bound());
        assertHas(plans.get(0).why(), "GPU rank: its GPU 0 (0000:13:00.0", "has numa_node -1 (the firmware does not say), so it is not bound");
        assertEquals("0-55", plans.get(1).cpuList());
        // A UUID that sysfs cannot place without NVML: its node is unknown.
        Plan uuid = CpuBinding.plan(Mode.AUTO, t, Map.of("CUDA_VISIBLE_DEVICES", "GPU-93a1"), 2, ALL).get(1);
        assertFalse(uuid.bound());
        assertHas(uuid.why(), "cannot be placed in sysfs");
        // With NVML's UUIDs it is placed.
        Path nvmlRoot = FixtureTree.expand("dgx8", dir.resolve("nvml"));
        Topology nvml = new SysfsDiscovery(nvmlRoot, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuMappingTest.uuids(), "/dev/shm").discover();
        assertEquals("56-111", CpuBinding.plan(Mode.AUTO, nvml, Map.of("CUDA_VISIBLE_DEVICES", "GPU-93a1"), 2, ALL).get(1).cpuList());
    }

    @Test
    void cpuRanksGetACoreEachOrNothingAndNumaSpreadsThem() {
        Topology pod = Fixtures.discover("pod64", dir);
        List<Integer> four = CpuBinding.parse("4-7");
        List<Plan> cores = CpuBinding.plan(Mode.AUTO, pod, Map.of(), 4, four);
        assertEquals(List.of("4", "5", "6", "7"), cores.stream().map(Plan::cpuList).toList());
        assertHas(cores.get(1).why(), "CPU rank, one core each", "must not share a core");
        List<Plan> crowded = CpuBinding.plan(Mode.AUTO, pod, Map.of(), 5, four);
        assertTrue(crowded.stream().noneMatch(Plan::bound));
        assertHas(crowded.get(0).why(), "5 ranks but 4 allowed CPUs");
        // A CPU job on a GPU host (its environment gives no rank a GPU of its own): CPU ranks.
        Topology dgx = Fixtures.discover("dgx8", dir.resolve("dgx"));
        List<Plan> cpuJob = CpuBinding.plan(Mode.AUTO, dgx, Map.of("CUDA_VISIBLE_DEVICES", "0,1"), 4, ALL);
        assertEquals(List.of("0", "1", "2", "3"), cpuJob.stream().map(Plan::cpuList).toList());
        // numa: blocks over the two nodes (ranks 0-1 on node 0, 2-3 on node 1).
        List<Plan> numa = CpuBinding.plan(Mode.NUMA, dgx, Map.of("CUDA_VISIBLE_DEVICES", ""), 4, ALL);
        assertEquals(List.of("0-55", "0-55", "56-111", "56-111"), numa.stream().map(Plan::cpuList).toList());
        assertHas(numa.get(2).why(), "CPU rank, --bind-to numa: NUMA node 1 (ranks in blocks over 2 nodes)");
        assertFalse(CpuBinding.plan(Mode.NUMA, pod, Map.of(), 2, four).get(0).bound(), "one node: nothing to choose");
        // No topology (unreadable): CPU ranks.
        assertEquals("4", CpuBinding.plan(Mode.AUTO, null, Map.of(), 2, four).get(0).cpuList());
    }

    @Test
    void coreAndNoneKeepTheirMeaning() {
        Topology dgx = Fixtures.discover("dgx8", dir);
        List<Plan> core = CpuBinding.plan(Mode.CORE, dgx, Map.of(), 3, List.of(4, 5));
        assertEquals(List.of("4", "5", "4"), core.stream().map(Plan::cpuList).toList(), "core ignores GPUs and wraps around");
        assertHas(core.get(2).why(), "ranks share");
        assertTrue(CpuBinding.plan(Mode.NONE, dgx, Map.of(), 8, ALL).stream().noneMatch(Plan::bound));
    }

    @Test
    void cpuListsParseAndFormat() {
        assertEquals(List.of(0, 1, 2, 3, 8, 10, 11), CpuBinding.parse(" 0-3,8,10-11\n"));
        assertEquals("0-3,8,10-11", CpuBinding.format(List.of(0, 1, 2, 3, 8, 10, 11)));
        assertEquals("", CpuBinding.format(List.of()));
        assertEquals(List.of(), CpuBinding.parse(""));
        assertEquals("5", CpuBinding.format(List.of(5)));
    }
}
