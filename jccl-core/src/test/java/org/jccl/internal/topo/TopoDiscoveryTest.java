package org.jccl.internal.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.topo.Topology.Gid;
import org.jccl.internal.topo.Topology.Gpu;
import org.jccl.internal.topo.Topology.Limits;
import org.jccl.internal.topo.Topology.NetDevice;
import org.jccl.internal.topo.Topology.RdmaDevice;
import org.jccl.internal.util.Json;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The sysfs/procfs readers on the synthetic hosts, the JSON round trip and JCCL_TOPO_FILE / JCCL_TOPO_DUMP_FILE. */
@Timeout(30)
class TopoDiscoveryTest {

    @TempDir
    Path dir;

    @Test
    void dgx8FindsEightGpusEightHcasTwoSocketsAndSkipsTheNvSwitchFunction() {
        Topology t = Fixtures.discover("dgx8", dir);
        assertEquals("dgx01", t.hostname());
        assertEquals(112, t.cpus());
        assertEquals(2, t.numaNodes().size());
        assertEquals("56-111", t.numaNodes().get(1).cpuList());
        assertEquals(1056962040L, t.numaNodes().get(1).memTotalKib());
        assertEquals(8, t.gpus().size(), "the class 0x0680 NVIDIA function is not a GPU");
        Gpu g0 = t.gpus().getFirst();
        assertEquals("0000:13:00.0", g0.pci().address());
        assertEquals(List.of("pci0000:10", "0000:10:01.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0"), g0.pci().chain());
        assertEquals(0, g0.pci().numaNode());
        assertEquals("0x2330", g0.deviceId());
        assertEquals(1, t.gpus().get(7).pci().numaNode());
        assertEquals(List.of("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"),
                t.rdmaDevices().stream().map(RdmaDevice::name).toList());
        RdmaDevice m0 = t.rdmaDevices().getFirst();
        assertEquals("0000:15:00.0", m0.pci().address());
        assertEquals(List.of("ib0"), m0.netDevices());
        assertEquals("4: ACTIVE", m0.ports().getFirst().state());
        assertEquals("InfiniBand", m0.ports().getFirst().linkLayer());
        assertEquals(400.0, m0.ports().getFirst().gbps());
        assertEquals(1, m0.ports().getFirst().gids().size(), "the all-zero GID entry is skipped");
        NetDevice eno1 = t.netDevices().stream().filter(n -> n.name().equals("eno1")).findFirst().orElseThrow();
        assertEquals(1000, eno1.speedMbps());
        assertEquals("0000:01:00.0", eno1.pci().address());
        NetDevice ib5 = t.netDevices().stream().filter(n -> n.name().equals("ib5")).findFirst().orElseThrow();
        assertEquals(t.rdma("mlx5_5").orElseThrow().pci().address(), ib5.pci().address());
        assertFalse(t.netDevices().stream().filter(n -> n.name().equals("lo")).findFirst().orElseThrow().pci().onPci());
        assertTrue(t.gpuDirect().peerMemory());
        assertTrue(t.gpuDirect().nvidiaPeermem());
        assertEquals("1.3-0", t.gpuDirect().nvMemVersion());
        assertEquals(Limits.UNLIMITED, t.limits().memlockSoft());
        assertEquals(1048576, t.limits().nofileSoft());
        assertEquals(4096, t.limits().somaxconn());
        assertEquals(Limits.UNLIMITED, t.limits().pidsMax());
        assertEquals("none", t.container().kind());
        assertEquals("no NVML in tests", t.nvml());
    }

    @Test
    void pciDistancesFollowTheSwitchesRootPortsAndSockets() {
        Topology t = Fixtures.discover("dgx8", dir);
        Gpu g0 = t.gpus().getFirst();
        assertEquals(PciDistance.PIX, t.distance(g0.pci(), t.rdma("mlx5_0").orElseThrow().pci()));
        assertEquals(PciDistance.PIX, t.distance(g0.pci(), t.rdma("mlx5_1").orElseThrow().pci()));
        assertEquals(PciDistance.PHB, t.distance(g0.pci(), t.rdma("mlx5_2").orElseThrow().pci()), "other switch, same socket");
        assertEquals(PciDistance.SYS, t.distance(g0.pci(), t.rdma("mlx5_4").orElseThrow().pci()), "other socket");
        assertEquals(PciDistance.PIX, t.distance(g0.pci(), t.gpus().get(1).pci()));
        // Two switch levels below one root port: PXB.
        PciLocation a = PciLocation.fromSysfsPath("/sys/devices/pci0000:20/0000:20:01.0/0000:21:00.0/0000:22:00.0/0000:23:00.0/0000:24:00.0/0000:25:00.0", 0);
        PciLocation b = PciLocation.fromSysfsPath("/sys/devices/pci0000:20/0000:20:01.0/0000:21:00.0/0000:22:04.0/0000:26:00.0", 0);
        assertEquals(PciDistance.PXB, a.distanceTo(b, false));
        // Two functions of one card: PIX; a device behind a virtio node is located by its PCI function.
        PciLocation f0 = PciLocation.fromSysfsPath("pci0000:40/0000:40:03.0/0000:44:00.0", 0);
        PciLocation f1 = PciLocation.fromSysfsPath("pci0000:40/0000:40:03.0/0000:44:00.1", 0);
        assertEquals(PciDistance.PIX, f0.distanceTo(f1, true));
        assertEquals("0000:00:03.0", PciLocation.fromSysfsPath("/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0", -1).address());
        // Unknown NUMA nodes: local on a one-node host, far otherwise.
        PciLocation x = PciLocation.fromSysfsPath("pci0000:00/0000:00:01.0/0000:01:00.0", -1);
        PciLocation y = PciLocation.fromSysfsPath("pci0000:80/0000:80:01.0/0000:81:00.0", -1);
        assertEquals(PciDistance.PHB, x.distanceTo(y, true));
        assertEquals(PciDistance.SYS, x.distanceTo(y, false));
    }

    @Test
    void roceNodeReadsGidTypesAndTheDownPortAndSeesDmaBuf() {
        Topology t = Fixtures.discover("roce", dir);
        RdmaDevice m0 = t.rdma("mlx5_0").orElseThrow();
        assertEquals("Ethernet", m0.ports().getFirst().linkLayer());
        assertEquals(List.of("ens1f0"), m0.netDevices());
        List<Gid> gids = m0.ports().getFirst().gids();
        assertEquals(4, gids.size());
        assertEquals("RoCE v2", gids.get(3).type());
        assertTrue(gids.get(3).ipv4() && gids.get(3).roceV2());
        assertTrue(gids.get(0).linkLocal());
        assertEquals("ens1f0", gids.get(3).netDevice());
        assertEquals(2, t.rdma("mlx5_1").orElseThrow().ports().getFirst().gids().size());
        assertFalse(t.rdma("mlx5_2").orElseThrow().active());
        assertEquals(PciDistance.PIX, t.distance(m0.pci(), t.rdma("mlx5_1").orElseThrow().pci()), "two functions of one NIC");
        assertEquals(PciDistance.PHB, t.distance(t.gpus().getFirst().pci(), m0.pci()));
        assertFalse(t.gpuDirect().peerMemory());
        assertTrue(t.gpuDirect().openKernelModule());
        assertTrue(t.gpuDirect().dmaBuf(), "Linux 6.5 + open module 550");
        assertEquals(65536, t.limits().memlockSoft());
        assertEquals(128, t.limits().somaxconn());
    }

    @Test
    void nopeermemHasNoPeerMemoryAndNoDmaBuf() {
        Topology t = Fixtures.discover("nopeermem", dir);
        assertEquals(8, t.gpus().size());
        assertFalse(t.gpuDirect().peerMemory());
        assertFalse(t.gpuDirect().dmaBuf());
        assertEquals("5.4.0-150-generic", t.gpuDirect().kernelRelease());
    }

    @Test
    void podIsKubernetesWithItsShmSizeAndPidsLimit() {
        Topology t = Fixtures.discover("pod64", dir, Map.of(), 64 * Fixtures.MIB, 64 * Fixtures.MIB);
        assertEquals("kubernetes", t.container().kind());
        assertTrue(t.container().evidence().contains("kubepods"));
        assertEquals(64 * Fixtures.MIB, t.shm().totalBytes());
        assertEquals(1024, t.limits().pidsMax());
        assertEquals(Limits.UNLIMITED, t.limits().nprocSoft());
        assertTrue(t.gpus().isEmpty());
        NetDevice eth0 = t.netDevices().stream().filter(n -> n.name().equals("eth0")).findFirst().orElseThrow();
        assertEquals("0000:00:03.0", eth0.pci().address());
        assertEquals(-1, eth0.speedMbps());
        assertFalse(t.netDevices().stream().filter(n -> n.name().equals("lo")).findFirst().orElseThrow().pci().onPci());
    }

    @Test
    void containerDetectionFromDockerenvAndTheKubernetesVariable() {
        Path root = FixtureTree.expand("pod64", dir);
        FixtureTree.write(root.resolve("proc/1/cgroup"), "0::/\n");
        SysfsDiscovery bare = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1, 1), GpuProbe.absent("-"), "/dev/shm");
        assertEquals("none", bare.container().kind());
        FixtureTree.write(root.resolve(".dockerenv"), "");
        assertEquals("docker", bare.container().kind());
        SysfsDiscovery k8s = new SysfsDiscovery(root, Map.of("KUBERNETES_SERVICE_HOST", "10.96.0.1"), FsStats.fixed(1, 1),
                GpuProbe.absent("-"), "/dev/shm");
        assertEquals("kubernetes", k8s.container().kind());
        assertTrue(k8s.container().evidence().contains("KUBERNETES_SERVICE_HOST"));
    }

    @Test
    void aMissingShmDirectoryIsUnknownNotAnError() {
        Path root = FixtureTree.expand("pod64", dir);
        Topology.Shm shm = new SysfsDiscovery(root, Map.of(), FsStats.SYSTEM, GpuProbe.absent("-"), "/no/such/dir").shm();
        assertEquals(-1, shm.totalBytes());
        assertEquals("/no/such/dir", shm.dir());
    }

    @Test
    void jsonRoundTripGivesTheSameTopology() {
        for (String f : List.of("dgx8", "roce", "pod64")) {
            Topology t = Fixtures.discover(f, dir.resolve(f));
            String text = Json.write(t.toJson());
            assertEquals(t, Topology.fromJson(Json.parse(text)), f);
        }
    }

    @Test
    void topoFileIsReadAndDumpFileIsWritten() throws Exception {
        Topology t = Fixtures.discover("dgx8", dir.resolve("t"));
        Path saved = dir.resolve("saved.json");
        Topologies.write(t, saved);
        Config cfg = Config.defaults().with("JCCL_TOPO_FILE", saved.toString());
        Topology loaded = Topologies.obtain(cfg, () -> {
            throw new AssertionError("JCCL_TOPO_FILE is set: nothing may be discovered");
        });
        assertEquals(t, loaded);
        Path dump = dir.resolve("out/topo-%h.json");
        Topologies.obtain(Config.defaults().with("JCCL_TOPO_DUMP_FILE", dump.toString()), () -> t);
        assertEquals(t, Topologies.read(dir.resolve("out/topo-dgx01.json")));
    }

    @Test
    void aBadTopoFileNamesTheFileAndTheProblem() throws Exception {
        Path bad = dir.resolve("bad.json");
        Files.writeString(bad, "{\"format\": \"something-else\"}");
        Config cfg = Config.defaults().with("JCCL_TOPO_FILE", bad.toString());
        ConfigException e = assertThrows(ConfigException.class, () -> Topologies.obtain(cfg, () -> null));
        assertTrue(e.getMessage().contains(bad.toString()) && e.getMessage().contains("not a jccl topology"), e.getMessage());
        Files.writeString(bad, "{\"format\": \"jccl-topology\", \"version\": 1, \"gpus\": [");
        e = assertThrows(ConfigException.class, () -> Topologies.obtain(cfg, () -> null));
        assertTrue(e.getMessage().contains("invalid JSON at offset"), e.getMessage());
        Config missing = Config.defaults().with("JCCL_TOPO_FILE", dir.resolve("nope.json").toString());
        e = assertThrows(ConfigException.class, () -> Topologies.obtain(missing, () -> null));
        assertTrue(e.getMessage().contains("cannot be read") && e.getMessage().contains("jccl topo --json"), e.getMessage());
    }

    @Test
    void nvmlAbsenceIsReportedNotThrown() {
        GpuProbe p = Nvml.load("libjccl-no-such-nvml.so.1");
        assertFalse(p.available());
        assertTrue(p.status().contains("was not found"), p.status());
        assertEquals("", p.uuid("0000:13:00.0"));
        assertTrue(p.nvlinkPeers("0000:13:00.0").isEmpty());
        assertNull(p.p2pRead("0000:13:00.0", "0000:14:00.0"));
    }

    @Test
    void theTextTreeShowsDevicesUnderTheirSwitchesAndTheDistanceMatrix() {
        Topology t = Fixtures.discover("dgx8", dir);
        String text = TopoText.render(t, null, null);
        assertTrue(text.contains("NUMA node 0: CPUs 0-55"), text);
        assertTrue(text.contains("0000:11:00.0 (bridge)"), text);
        assertTrue(text.contains("0000:13:00.0  GPU 0 0x2330"), text);
        assertTrue(text.contains("0000:15:00.0  mlx5_0 port 1 ACTIVE InfiniBand 400 Gb/sec (4X NDR) (ib0)"), text);
        assertTrue(text.lines().anyMatch(l -> l.matches("GPU0\\s+PIX\\s+PIX\\s+PHB\\s+PHB\\s+SYS\\s+SYS\\s+SYS\\s+SYS\\s*")), text);
        assertTrue(text.contains("rank 7 GPU 7 -> mlx5_7 (PIX)"), text);
        assertTrue(text.contains("eno1 up 1000 Mb/s"), text);
    }

    @Test
    void jsonParserRejectsGarbageWithTheOffset() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\": tru}"));
        assertTrue(e.getMessage().contains("offset 6"), e.getMessage());
        assertEquals(Map.of("a", List.of(1L, 2.5, "x\"y", true)), Json.parse("{\"a\": [1, 2.5, \"x\\\"y\", true]}"));
        assertEquals("{\n  \"s\": \"a\\nb\"\n}", Json.write(Map.of("s", "a\nb")));
    }
}
