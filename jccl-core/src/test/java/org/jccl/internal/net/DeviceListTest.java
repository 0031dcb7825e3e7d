package org.jccl.internal.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.ConfigException;
import org.jccl.internal.net.DeviceList.Entry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The JCCL_IB_HCA / JCCL_SOCKET_IFNAME grammar and matcher, on an 18-HCA node where mlx5_1 is a prefix of mlx5_10..17. */
@Timeout(10)
class DeviceListTest {

    /** mlx5_0 .. mlx5_17, two ports each: the layout where NCCL's prefix rule goes wrong. */
    private static final List<String> HCAS = hcas();

    private static List<String> hcas() {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < 18; i++) {
            out.add("mlx5_" + i);
        }
        return out;
    }

    private static DeviceList hca(String spec) {
        return DeviceList.parse("JCCL_IB_HCA", spec, true);
    }

    /** (device, port) pairs the list accepts, ports 1 and 2 of every HCA. */
    private static List<String> selectedPorts(DeviceList l) {
        List<String> out = new ArrayList<>();
        for (String d : HCAS) {
            for (int port = 1; port <= 2; port++) {
                if (l.accepts(d, port)) {
                    out.add(d + ":" + port);
                }
            }
        }
        return out;
    }

    @Test
    void mlx5_1NeverMeansMlx5_10() {
        DeviceList l = hca("mlx5_1");
        assertEquals(List.of("mlx5_1"), l.select(HCAS, s -> s));
        assertFalse(l.accepts("mlx5_10"));
        assertTrue(l.accepts("mlx5_1"));
        assertEquals(Map.of(), l.nearMisses(HCAS), "mlx5_1 exists, so it is no near miss");
    }

    @Test
    void portsSelectOnePortOrAll() {
        DeviceList l = hca("mlx5_0:1,mlx5_1");
        assertEquals(List.of(new Entry("mlx5_0", false, 1), new Entry("mlx5_1", false, DeviceList.ANY_PORT)), l.entries());
        assertEquals(List.of("mlx5_0:1", "mlx5_1:1", "mlx5_1:2"), selectedPorts(l));
        assertTrue(l.accepts("mlx5_0"), "a device as a whole is accepted when any of its ports is");
    }

    @Test
    void exclusionKeepsEverythingElse() {
        DeviceList l = hca("^mlx5_1,mlx5_2:2");
        List<String> ports = selectedPorts(l);
        assertFalse(ports.contains("mlx5_1:1"));
        assertFalse(ports.contains("mlx5_1:2"));
        assertTrue(ports.contains("mlx5_2:1"));
        assertFalse(ports.contains("mlx5_2:2"));
        assertTrue(ports.contains("mlx5_10:1"), "^mlx5_1 does not exclude mlx5_10");
        assertEquals(18 * 2 - 3, ports.size());
    }

    @Test
    void aTrailingStarAsksForAPrefix() {
        assertEquals(HCAS, hca("mlx5_*").select(HCAS, s -> s));
        assertEquals(List.of("mlx5_1", "mlx5_10", "mlx5_11", "mlx5_12", "mlx5_13", "mlx5_14", "mlx5_15", "mlx5_16", "mlx5_17"),
                hca("mlx5_1*").select(HCAS, s -> s));
        assertEquals(List.of("mlx5_0:1", "mlx5_1:1"), selectedPorts(hca("mlx5_0*:1,mlx5_1:1")));
        assertEquals(List.of(), hca("^mlx5_*").select(HCAS, s -> s));
    }

    @Test
    void ncclsExactMarkerIsAccepted() {
        DeviceList l = hca("=mlx5_1");
        assertEquals(List.of("mlx5_1"), l.select(HCAS, s -> s));
        DeviceList ex = hca("^=mlx5_1");
        assertTrue(ex.exclude());
        assertFalse(ex.accepts("mlx5_1"));
        assertTrue(ex.accepts("mlx5_10"));
    }

    @Test
    void selectionFollowsTheOrderWritten() {
        assertEquals(List.of("mlx5_3", "mlx5_0"), hca("mlx5_3,mlx5_0").select(HCAS, s -> s));
        assertEquals(HCAS, hca("").select(HCAS, s -> s), "unset selects everything");
        assertTrue(hca(null).isUnset());
        assertTrue(hca("   ").accepts("anything"));
    }

    @Test
    void nclPrefixesAreNearMissesWithAHint() {
        DeviceList l = hca("mlx5,mlx5_3");
        assertEquals(List.of(), l.select(List.of("mlx5_0", "mlx5_1"), s -> s));
        assertEquals(Map.of(new Entry("mlx5", false, DeviceList.ANY_PORT), List.of("mlx5_0", "mlx5_1")),
                l.nearMisses(List.of("mlx5_0", "mlx5_1")));
        assertEquals(List.of("JCCL_IB_HCA entry mlx5 matches no RDMA device exactly (names are exact in jccl, unlike NCCL's prefixes);"
                        + " mlx5_0, mlx5_1 start with it: write mlx5* to select by prefix, or name them exactly"),
                l.nearMissHints(List.of("mlx5_0", "mlx5_1"), "RDMA device"));
        assertEquals(List.of(new Entry("mlx5", false, DeviceList.ANY_PORT), new Entry("mlx5_3", false, DeviceList.ANY_PORT)),
                l.unmatched(List.of("mlx5_0", "mlx5_1")));
        assertEquals(List.of("JCCL_IB_HCA entry mlx5_1:1 matches no RDMA device exactly (names are exact in jccl, unlike NCCL's"
                + " prefixes); mlx5_10 starts with it: write ^mlx5_1*:1 to exclude by prefix, or name it exactly"),
                hca("^mlx5_1:1").nearMissHints(List.of("mlx5_0", "mlx5_10"), "RDMA device"));
    }

    @Test
    void badSpecsAreErrorsNamingTheVariableTheValueAndTheEntry() {
        ConfigException e = assertThrows(ConfigException.class, () -> hca("mlx5_0:x"));
        assertEquals("JCCL_IB_HCA='mlx5_0:x' is not allowed: entry 'mlx5_0:x' has port 'x', which is not a port number (1 to 255);"
                + " expected " + DeviceList.grammar(true), e.getMessage());
        e = assertThrows(ConfigException.class, () -> hca("mlx5_0:0"));
        assertTrue(e.getMessage().contains("has port '0', which is not a port number"), e.getMessage());
        e = assertThrows(ConfigException.class, () -> hca("mlx5_0,^mlx5_1"));
        assertTrue(e.getMessage().contains("entry '^mlx5_1' contains '^', which is only allowed at the start of the whole list"),
                e.getMessage());
        e = assertThrows(ConfigException.class, () -> hca("mlx5 0"));
        assertTrue(e.getMessage().contains("contains a blank; entries are separated by commas"), e.getMessage());
        e = assertThrows(ConfigException.class, () -> hca("^"));
        assertEquals("JCCL_IB_HCA='^' is not allowed: names no device; expected " + DeviceList.grammar(true), e.getMessage());
        e = assertThrows(ConfigException.class, () -> hca(":1"));
        assertTrue(e.getMessage().contains("entry ':1' has no device name"), e.getMessage());
    }

    @Test
    void withoutPortsAColonBelongsToTheName() {
        DeviceList l = DeviceList.parse("JCCL_SOCKET_IFNAME", "eth0:1", false);
        assertEquals(List.of(new Entry("eth0:1", false, DeviceList.ANY_PORT)), l.entries());
        assertTrue(l.accepts("eth0:1"));
        assertFalse(l.accepts("eth0"));
    }
}
