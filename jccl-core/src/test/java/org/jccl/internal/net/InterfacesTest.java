package org.jccl.internal.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.net.Interfaces.Family;
import org.jccl.internal.net.Interfaces.Nic;
import org.jccl.internal.net.Interfaces.Selection;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Interface selection on synthetic interface lists, plus one run on this machine's interfaces. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class InterfacesTest {

    private static InetAddress ip(String literal) {
        try {
            return InetAddress.getByName(literal);
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    private static Nic nic(String name, boolean up, boolean loopback, String... addresses) {
        return new Nic(name, up, loopback, Arrays.stream(addresses).map(InterfacesTest::ip).toList());
    }

    /** A typical GPU node: loopback, a docker bridge, two Ethernet ports (one down), an IPoIB port, a veth. */
    private static final List<Nic> NODE = List.of(
            nic("lo", true, true, "127.0.0.1", "::1"),
            nic("docker0", true, false, "172.17.0.1"),
            nic("eth10", true, false, "10.0.10.5"),
            nic("eth1", true, false, "fe80::1", "fd00::5", "10.0.1.5"),
            nic("eth2", false, false, "10.0.2.5"),
            nic("ib0", true, false, "192.168.50.5"),
            nic("veth1234", true, false, "169.254.3.3"),
            nic("v6only", true, false, "fe80::7", "2001:db8::7"),
            nic("llonly", true, false, "fe80::9"));

    private static Selection choose(String spec, Family family) {
        return Interfaces.choose(spec, family, NODE);
    }

    @Test
    void unsetSkipsLoopbackAndBridgesAndTakesFirstUp() {
        Selection s = choose(null, Family.ANY);
        assertEquals("eth10", s.interfaceName());
        assertEquals(ip("10.0.10.5"), s.address());
        assertEquals("eth10", choose("  ", Family.ANY).interfaceName(), "blank counts as unset");
    }

    @Test
    void unsetFallsBackToLoopbackWhenNothingElseIsUp() {
        List<Nic> nics = List.of(nic("lo", true, true, "127.0.0.1", "::1"), nic("docker0", true, false, "172.17.0.1"),
                nic("eth0", false, false, "10.0.0.1"));
        assertEquals(ip("127.0.0.1"), Interfaces.choose(null, Family.ANY, nics).address());
        assertEquals(ip("::1"), Interfaces.choose(null, Family.INET6, nics).address());
    }

    @Test
    void namesAreExactAndAStarAsksForAPrefix() {
        assertEquals("ib0", choose("ib0", Family.ANY).interfaceName());
        assertEquals("ib0", choose("ib*", Family.ANY).interfaceName());
        // "eth*" matches eth10 and eth1 (eth2 is down): system order decides between them.
        assertEquals("eth10", choose("eth*", Family.ANY).interfaceName());
        assertEquals("docker0", choose("docker0", Family.ANY).interfaceName(), "an explicit spec may pick a bridge");
        assertEquals(ip("127.0.0.1"), choose("lo", Family.ANY).address(), "an explicit spec may pick loopback");
    }

    @Test
    void exactNamesNeverMatchLongerNames() {
        // eth10 comes first in system order, yet eth1 means eth1 (NCCL would take eth10 here).
        Selection s = choose("eth1", Family.ANY);
        assertEquals("eth1", s.interfaceName());
        assertEquals(ip("10.0.1.5"), s.address(), "IPv4 preferred even when IPv6 addresses are listed first");
        // NCCL's "=" marker is accepted and means the same.
        assertEquals("eth1", choose("=eth1", Family.ANY).interfaceName());
        // Only with a star does eth1 reach eth10.
        assertEquals("eth10", choose("eth1*", Family.ANY).interfaceName());
    }

    @Test
    void anNcclStylePrefixIsAnErrorThatSaysWhatToWrite() {
        ConfigException e = assertThrows(ConfigException.class, () -> choose("eth", Family.ANY));
        String m = e.getMessage();
        assertTrue(m.startsWith("JCCL_SOCKET_IFNAME=eth matches no interface that is up; JCCL_SOCKET_IFNAME entry eth matches no"
                + " interface exactly (names are exact in jccl, unlike NCCL's prefixes); eth10, eth1, eth2 start with it: write eth*"
                + " to select by prefix, or name them exactly; interfaces: lo"), m);
        e = assertThrows(ConfigException.class, () -> choose("=eth", Family.ANY));
        assertTrue(e.getMessage().startsWith("JCCL_SOCKET_IFNAME==eth matches no interface that is up;"), e.getMessage());
    }

    @Test
    void listIsTriedInTheOrderWritten() {
        assertEquals("ib0", choose("ib*,eth*", Family.ANY).interfaceName());
        assertEquals("eth10", choose("eth*,ib*", Family.ANY).interfaceName());
        assertEquals("ib0", choose(" nosuch , ib0 ", Family.ANY).interfaceName(), "blanks around entries are ignored");
    }

    @Test
    void exclusion() {
        // Everything that is up except lo and docker*, in system order: eth10.
        assertEquals("eth10", choose("^docker*,lo", Family.ANY).interfaceName());
        assertEquals("eth1", choose("^docker*,lo,eth10", Family.ANY).interfaceName());
        // ^eth* excludes eth1 and eth10 by prefix; "lo" comes first in system order and is not excluded.
        assertEquals("lo", choose("^eth*", Family.ANY).interfaceName());
        assertEquals("ib0", choose("^lo,docker*,eth*", Family.ANY).interfaceName());
        // Exact exclusion: ^lo,docker0,eth10 drops exactly those, so eth1 is the first one left.
        assertEquals("eth1", choose("^lo,docker0,eth10", Family.ANY).interfaceName());
        assertEquals("eth1", choose("^=lo,docker0,eth10", Family.ANY).interfaceName());
    }

    @Test
    void anNcclStyleExclusionPrefixExcludesOnlyTheExactNameAndIsWarnedAbout() {
        // ^docker,lo written for NCCL: jccl excludes an interface named exactly "docker" (there is none), so docker0 stays.
        assertEquals("docker0", choose("^docker,lo", Family.ANY).interfaceName());
        assertEquals(List.of("JCCL_SOCKET_IFNAME entry docker matches no interface exactly (names are exact in jccl, unlike NCCL's"
                        + " prefixes); docker0 starts with it: write ^docker* to exclude by prefix, or name it exactly"),
                Interfaces.warnings("^docker,lo", NODE));
        assertEquals(List.of(), Interfaces.warnings("^docker*,lo", NODE));
        assertEquals(List.of(), Interfaces.warnings("eth1", NODE), "eth1 exists: no hint although eth10 starts with it");
        assertEquals(List.of(), Interfaces.warnings(null, NODE));
    }

    @Test
    void aMalformedSpecIsAnErrorNamingTheEntry() {
        ConfigException e = assertThrows(ConfigException.class, () -> choose("eth*0", Family.ANY));
        assertEquals("JCCL_SOCKET_IFNAME='eth*0' is not allowed: entry 'eth*0' has a '*' inside the name; '*' is only allowed at the end"
                + " (prefix match); expected " + DeviceList.grammar(false), e.getMessage());
        assertThrows(ConfigException.class, () -> choose("^", Family.ANY));
    }

    @Test
    void familySelection() {
        Selection v6 = choose("=eth1", Family.INET6);
        assertEquals(ip("fd00::5"), v6.address(), "global IPv6 preferred over link-local");
        assertTrue(choose("=eth1", Family.INET).address() instanceof Inet4Address);
        // An interface without an address of the family is skipped: eth10 has no IPv6, eth1 has.
        assertEquals("eth1", choose("eth*", Family.INET6).interfaceName());
        // Only IPv6: the unrestricted choice takes the global address, not the link-local one listed first.
        assertEquals(ip("2001:db8::7"), choose("v6only", Family.ANY).address());
        // Link-local only when nothing else exists.
        InetAddress ll = choose("llonly", Family.ANY).address();
        assertTrue(ll instanceof Inet6Address && ll.isLinkLocalAddress(), ll.toString());
        assertEquals(ip("::1"), choose("lo", Family.INET6).address());
    }

    @Test
    void familyMismatchErrorNamesTheFamily() {
        ConfigException e = assertThrows(ConfigException.class, () -> choose("ib0", Family.INET6));
        assertTrue(e.getMessage().startsWith("JCCL_SOCKET_IFNAME=ib0 with JCCL_SOCKET_FAMILY=AF_INET6 matches no interface that is up"
                + " with an IPv6 address; interfaces: lo 127.0.0.1 0:0:0:0:0:0:0:1, docker0 172.17.0.1"), e.getMessage());
        assertTrue(e.getMessage().contains("unset JCCL_SOCKET_FAMILY"), e.getMessage());
    }

    @Test
    void familyParsing() {
        assertEquals(Family.ANY, Family.parse(null));
        assertEquals(Family.ANY, Family.parse(""));
        assertEquals(Family.INET, Family.parse("AF_INET"));
        assertEquals(Family.INET6, Family.parse(" af_inet6 "));
        ConfigException e = assertThrows(ConfigException.class, () -> Family.parse("ipv6"));
        assertEquals("JCCL_SOCKET_FAMILY='ipv6' is not allowed: expected AF_INET or AF_INET6 (or leave it unset to prefer IPv4)",
                e.getMessage());
    }

    @Test
    void noMatchListsInterfacesWithAddresses() {
        List<Nic> nics = List.of(nic("lo", true, true, "127.0.0.1"), nic("eth0", true, false, "10.1.2.3"),
                nic("eth1", false, false, "10.1.2.4"), nic("ib0", true, false));
        ConfigException e = assertThrows(ConfigException.class, () -> Interfaces.choose("ib0", Family.ANY, nics));
        assertTrue(e.getMessage().startsWith("JCCL_SOCKET_IFNAME=ib0 matches no interface that is up; interfaces: lo 127.0.0.1,"
                + " eth0 10.1.2.3, eth1 10.1.2.4 (down), ib0 (no address). Set JCCL_SOCKET_IFNAME to the interfaces to use: a comma"
                + " list of interface names (eth0,ib0); a trailing * matches by prefix (eth*)"), e.getMessage());
        // A down interface never matches, even when named exactly.
        assertThrows(ConfigException.class, () -> Interfaces.choose("eth1", Family.ANY, nics));
    }

    @Test
    void unsetWithNothingUsableIsAnError() {
        List<Nic> nics = List.of(nic("lo", false, true, "127.0.0.1"), nic("eth0", false, false, "10.1.2.3"));
        ConfigException e = assertThrows(ConfigException.class, () -> Interfaces.choose(null, Family.ANY, nics));
        assertTrue(e.getMessage().startsWith("no interface is up (JCCL_SOCKET_IFNAME is unset"), e.getMessage());
        assertTrue(e.getMessage().contains("eth0 10.1.2.3 (down)"), e.getMessage());
    }

    @Test
    void selectAddressOnThisMachine() {
        InetAddress v4 = Interfaces.selectAddress(Config.defaults().with("JCCL_SOCKET_IFNAME", "lo"));
        assertEquals(ip("127.0.0.1"), v4);
        assertFalse(Interfaces.systemInterfaces().isEmpty());
        // The NCCL name is accepted as an alias.
        assertEquals(v4, Interfaces.selectAddress(Config.defaults().with("NCCL_SOCKET_IFNAME", "=lo")));
        ConfigException e = assertThrows(ConfigException.class,
                () -> Interfaces.selectAddress(Config.defaults().with("JCCL_SOCKET_IFNAME", "=no-such-interface")));
        assertTrue(e.getMessage().contains("interfaces: "), e.getMessage());
        assertThrows(ConfigException.class,
                () -> Interfaces.selectAddress(Config.defaults().with("JCCL_SOCKET_FAMILY", "AF_UNIX")));
    }
}
