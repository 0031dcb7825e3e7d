package org.jccl.ucx.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.topo.NicAssignment;
import org.jccl.internal.topo.Topology;
import org.jccl.ucx.UcxTests;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * jccl's and NCCL's network settings as UCX configuration, each checked against what UCX itself holds after
 * ucp_config_modify (ucp_config_print), on jccl-core's fixture hosts: dgx8 (8 GPUs, 8 HCAs, nvidia-peermem) and
 * nopeermem (the same without peer memory).
 */
class UcxSettingsTest {

    @TempDir
    Path dir;

    static Topology fixture(String name, Path dir) throws Exception {
        Class<?> f = Class.forName("org.jccl.internal.topo.Fixtures");
        Method m = f.getDeclaredMethod("discover", String.class, Path.class);
        m.setAccessible(true);
        return (Topology) m.invoke(null, name, dir);
    }

    /** What UCX prints of a configuration with {@code settings} applied. */
    static Map<String, String> ucxHolds(Map<String, String> settings) {
        Ucp ucp = UcxLibrary.get().ucp();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment config = ucp.configRead(a);
            try {
                settings.forEach((k, v) -> assertEquals(Status.OK, ucp.configModify(config, UcxSettings.modifyKey(k, ucp.major, ucp.minor), v), k));
                return ucp.configPrint(config);
            } finally {
                ucp.configRelease(config);
            }
        }
    }

    @Test
    void ncclNamesBecomeUcxSettingsThatUcxHolds() {
        UcxTests.assumeUcx();
        Config c = Config.defaults().with("NCCL_IB_GID_INDEX", "3").with("NCCL_IB_TIMEOUT", "20").with("NCCL_IB_RETRY_CNT", "7")
                .with("NCCL_IB_TC", "106").with("JCCL_UCX_TLS", "rc,ud,sm,self");
        Map<String, String> m = UcxSettings.translate(c, List.of(), null, Map.of());
        assertEquals(Map.of("TLS", "rc,ud,sm,self", "IB_GID_INDEX", "3", "RC_TIMEOUT", "4294967us", "RC_RETRY_COUNT", "7",
                "IB_TRAFFIC_CLASS", "106", "MM_ERROR_HANDLING", "y"), m);
        Map<String, String> held = ucxHolds(m);
        assertEquals("rc,ud,sm,self", held.get("UCX_TLS"), held.toString());
        assertEquals("3", held.get("IB_GID_INDEX"), held.toString());
        assertEquals("4294967us", held.get("RC_TIMEOUT"), held.toString());
        assertEquals("7", held.get("RC_RETRY_COUNT"), held.toString());
        assertEquals("106", held.get("IB_TRAFFIC_CLASS"), held.toString());
        assertEquals("y", held.get("MM_ERROR_HANDLING"), held.toString());
    }

    @Test
    void theTcpOnlyRendezvousThresholdAndReceiveSegmentAreOnesUcxHolds() {
        UcxTests.assumeUcx();
        Map<String, String> held = ucxHolds(UcxSettings.translate(Config.defaults().with("JCCL_UCX_TLS", "tcp"), List.of(), null, Map.of()));
        // ucp_config_print writes memory units its own way: 512K (1.13), not UCX's "auto"
        assertEquals("512K", held.get("UCX_RNDV_THRESH"), held.toString());
        // a transport's setting is held as given (under the name this UCX matches) until UCX opens that transport:
        // UcxHazardsTest checks that the tcp transport takes it
        Ucp ucp = UcxLibrary.get().ucp();
        assertEquals("262144", held.get(UcxSettings.modifyKey("TCP_RX_SEG_SIZE", ucp.major, ucp.minor)), held.toString());
    }

    @Test
    void transportSettingsGoByTheirBareNamesUpTo116AndByTheirPrefixedNamesFrom117() {
        assertEquals("RX_SEG_SIZE", UcxSettings.modifyKey("TCP_RX_SEG_SIZE", 1, 13));
        assertEquals("RX_SEG_SIZE", UcxSettings.modifyKey("TCP_RX_SEG_SIZE", 1, 16));
        assertEquals("TCP_RX_SEG_SIZE", UcxSettings.modifyKey("TCP_RX_SEG_SIZE", 1, 17));
        assertEquals("TCP_RX_SEG_SIZE", UcxSettings.modifyKey("TCP_RX_SEG_SIZE", 2, 0));
        assertEquals("RNDV_THRESH", UcxSettings.modifyKey("RNDV_THRESH", 1, 13));
        assertEquals("MM_ERROR_HANDLING", UcxSettings.modifyKey("MM_ERROR_HANDLING", 1, 13));
    }

    @Test
    void tcpOnlyLeavesSharedMemorySettingsOutAndTheUsersUcxVariablesWin() {
        Map<String, String> tcp = UcxSettings.translate(Config.defaults().with("JCCL_UCX_TLS", "tcp"), List.of(), null, Map.of());
        assertEquals(Map.of("TLS", "tcp", "RNDV_THRESH", "524288", "TCP_RX_SEG_SIZE", "262144"), tcp);
        assertEquals(Map.of("TLS", "tcp,self"), UcxSettings.translate(Config.defaults().with("JCCL_UCX_TLS", "tcp,self"), List.of(), null,
                Map.of("UCX_RNDV_THRESH", "16K", "UCX_TCP_RX_SEG_SIZE", "64K")), "the user's UCX_RNDV_THRESH and UCX_TCP_RX_SEG_SIZE win");
        assertEquals(Map.of("RNDV_THRESH", "524288", "TCP_RX_SEG_SIZE", "262144"),
                UcxSettings.translate(Config.defaults(), List.of(), null, Map.of("UCX_TLS", "tcp")));
        Map<String, String> rdma = UcxSettings.translate(Config.defaults().with("JCCL_UCX_TLS", "rc,tcp"), List.of(), null, Map.of());
        assertFalse(rdma.containsKey("RNDV_THRESH") || rdma.containsKey("TCP_RX_SEG_SIZE"), "RDMA in the list: UCX's own settings: " + rdma);
        Map<String, String> own = UcxSettings.translate(Config.defaults(), List.of(), null, Map.of("UCX_POSIX_ERROR_HANDLING", "n"));
        assertFalse(own.containsKey("MM_ERROR_HANDLING"), own.toString());
        assertEquals(Map.of("MM_ERROR_HANDLING", "y"), UcxSettings.translate(Config.defaults(), List.of(), null, Map.of()));
    }

    @Test
    void eightGpusAndEightHcasGiveEightRanksEightDistinctUcxDevices() throws Exception {
        UcxTests.assumeUcx();
        Topology t = fixture("dgx8", dir);
        Set<String> devices = new HashSet<>();
        for (int lr = 0; lr < 8; lr++) {
            List<String> nics = NicAssignment.forLocalRank(t, lr, 8, null, null, null).stream().map(NicAssignment.Choice::nic).toList();
            Map<String, String> m = UcxSettings.translate(Config.defaults(), nics, t, Map.of());
            String d = m.get("NET_DEVICES");
            assertTrue(d != null && d.matches("mlx5_[0-7]:1"), "local rank " + lr + ": " + m);
            assertEquals(d, ucxHolds(m).get("UCX_NET_DEVICES"));
            devices.add(d);
        }
        assertEquals(8, devices.size(), "every HCA carries one rank's traffic: " + devices);
        // JCCL_IB_HCA with a port: that port; a prefix: only matching devices.
        Config one = Config.defaults().with("JCCL_IB_HCA", "mlx5_3:1");
        List<String> nics = NicAssignment.forLocalRank(t, 0, 8, null, null, "mlx5_3:1").stream().map(NicAssignment.Choice::nic).toList();
        assertEquals("mlx5_3:1", UcxSettings.translate(one, nics, t, Map.of()).get("NET_DEVICES"));
        List<String> prefixed = NicAssignment.forLocalRank(t, 5, 8, null, null, "mlx5_*").stream().map(NicAssignment.Choice::nic).toList();
        assertTrue(UcxSettings.translate(Config.defaults(), prefixed, t, Map.of()).get("NET_DEVICES").matches("mlx5_[0-7]:1"));
    }

    @Test
    void gpuDirectIsOnWithPeerMemoryOffWithoutAndOffWithAUcxWithoutCuda() throws Exception {
        Topology dgx = fixture("dgx8", dir.resolve("dgx"));
        Topology nopeer = fixture("nopeermem", dir.resolve("nopeer"));
        String gpu = "0000:13:00.0";
        assertTrue(UcxTransport.gpuDirect(true, dgx, gpu).startsWith("GPUDirect RDMA on (peer memory: nvidia-peermem)"),
                UcxTransport.gpuDirect(true, dgx, gpu));
        String off = UcxTransport.gpuDirect(true, nopeer, gpu);
        assertTrue(off.startsWith("GPUDirect RDMA off: neither nvidia-peermem") && off.contains("fix: modprobe nvidia-peermem"), off);
        String noCuda = UcxTransport.gpuDirect(false, dgx, gpu);
        assertTrue(noCuda.startsWith("GPUDirect RDMA off: this UCX has no CUDA support"), noCuda);
    }

    @Test
    void jcclNetTakesUcxSocketAndAutoAndRefusesTheRest() {
        assertEquals(UcxSettings.Net.UCX, UcxSettings.net(Config.defaults().with("NCCL_NET", "IB")));
        assertEquals(UcxSettings.Net.SOCKET, UcxSettings.net(Config.defaults().with("JCCL_NET", "Socket")));
        assertEquals(UcxSettings.Net.AUTO, UcxSettings.net(Config.defaults()));
        ConfigException e = assertThrows(ConfigException.class, () -> Config.defaults().with("JCCL_NET", "verbs").validate());
        assertTrue(e.getMessage().contains("UCX (or IB), Socket or auto"), e.getMessage());
    }
}
