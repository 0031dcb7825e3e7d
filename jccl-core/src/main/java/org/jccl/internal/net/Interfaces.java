package org.jccl.internal.net;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;

/**
 * Chooses the local address that bootstrap and the TCP transport listen on, from
 * {@code JCCL_SOCKET_IFNAME} (alias {@code NCCL_SOCKET_IFNAME}) and {@code JCCL_SOCKET_FAMILY}
 * (alias {@code NCCL_SOCKET_FAMILY}).
 *
 * <h2>Interface spec grammar ({@link DeviceList}: NCCL's, but names are exact unless they end in {@code *})</h2>
 * <ul>
 *   <li>{@code eth0,ib0}: exactly these interfaces ({@code eth1} never means {@code eth10});</li>
 *   <li>{@code eth*,ib*}: interfaces whose name starts with {@code eth} or {@code ib};</li>
 *   <li>{@code ^docker*,lo}: every interface except {@code lo} and those starting with {@code docker};</li>
 *   <li>{@code =eth1}, {@code ^=eth1}: NCCL's exact-name marker, accepted (names are exact anyway).</li>
 * </ul>
 * NCCL treats entries without {@code =} as prefixes; a value written for NCCL ({@code eth}, {@code ^docker})
 * is therefore caught: an inclusion entry that matches nothing exactly but starts existing names is
 * an error saying "write eth*", an exclusion entry like that is a warning ({@link #warnings}).
 * Only interfaces that are up count. For an inclusion list, interfaces are tried in the order of
 * the first entry they match (so {@code ib*,eth*} prefers an {@code ib*} interface when both exist),
 * then in the system's order; for an exclusion list, in the system's order.
 *
 * <p>Unset: every interface that is up, except loopback and container/VM bridges (names starting
 * with {@code docker}, {@code virbr}, {@code veth}); if none is left, loopback.
 *
 * <p>Family: {@code AF_INET} or {@code AF_INET6} restricts the addresses (an interface without one
 * of that family is skipped). Unset prefers an IPv4 address of the chosen interface, else a
 * global IPv6 one, else a link-local IPv6 one.
 *
 * <p>The choice is a pure function ({@link #choose}) over plain {@link Nic} records, so it is
 * tested on synthetic interface lists; {@link #selectAddress} feeds it the machine's interfaces.
 */
public final class Interfaces {

    /** Name prefixes of virtual bridges that are not reachable from other hosts; skipped by default. */
    private static final List<String> DEFAULT_EXCLUDED = List.of("docker", "virbr", "veth");

    private Interfaces() {
    }

    /**
     * One network interface as far as address selection cares.
     *
     * @param name the interface name, e.g. {@code eth0}
     * @param up whether it is up
     * @param loopback whether it is a loopback interface
     * @param addresses its addresses, in the system's order
     */
    public record Nic(String name, boolean up, boolean loopback, List<InetAddress> addresses) {
        public Nic {
            Objects.requireNonNull(name, "name");
            addresses = List.copyOf(addresses);
        }

        /** "eth0 10.1.2.3 fd00::2" for messages; down interfaces say so. */
        String describe() {
            StringBuilder sb = new StringBuilder(name);
            if (addresses.isEmpty()) {
                sb.append(" (no address)");
            }
            for (InetAddress a : addresses) {
                sb.append(' ').append(a.getHostAddress());
            }
            if (!up) {
                sb.append(" (down)");
            }
            return sb.toString();
        }
    }

    /**
     * The outcome of a selection.
     *
     * @param interfaceName the interface the address belongs to
     * @param address the address to bind
     */
    public record Selection(String interfaceName, InetAddress address) {
    }

    /** Address family restriction parsed from {@code JCCL_SOCKET_FAMILY}. */
    public enum Family {
        /** No restriction: IPv4 preferred. */
        ANY,
        /** {@code AF_INET}: IPv4 only. */
        INET,
        /** {@code AF_INET6}: IPv6 only. */
        INET6;

        /**
         * Parses a {@code JCCL_SOCKET_FAMILY} value (null or blank: {@link #ANY}).
         *
         * @throws ConfigException naming the value and the allowed ones
         */
        public static Family parse(String value) {
            if (value == null || value.isBlank()) {
                return ANY;
            }
            return switch (value.trim().toUpperCase(Locale.ROOT)) {
                case "AF_INET" -> INET;
                case "AF_INET6" -> INET6;
                default -> throw new ConfigException(Settings.SOCKET_FAMILY.name() + "='" + value
                        + "' is not allowed: expected AF_INET or AF_INET6 (or leave it unset to prefer IPv4)");
            };
        }

        boolean accepts(InetAddress a) {
            return switch (this) {
                case ANY -> true;
                case INET -> a instanceof Inet4Address;
                case INET6 -> a instanceof Inet6Address;
            };
        }

        String label() {
            return switch (this) {
                case ANY -> "";
                case INET -> " with an IPv4 address";
                case INET6 -> " with an IPv6 address";
            };
        }
    }

    /**
     * The address this process should listen on, according to {@code config}.
     *
     * @throws ConfigException when the settings select no usable interface; the message lists the
     *         interfaces present with their addresses
     */
    public static InetAddress selectAddress(Config config) {
        return select(config).address();
    }

    /**
     * Like {@link #selectAddress} but also says which interface was chosen (for logs).
     *
     * @throws ConfigException when the settings select no usable interface
     */
    public static Selection select(Config config) {
        String spec = Settings.SOCKET_IFNAME.getString(config);
        Family family = Family.parse(Settings.SOCKET_FAMILY.getString(config));
        List<Nic> nics = systemInterfaces();
        Selection s = choose(spec, family, nics);
        for (String w : warnings(spec, nics)) {
            Log.warnOnce(Log.Subsys.NET, -1, w);
        }
        if (Log.enabled(Log.Level.TRACE, Log.Subsys.NET)) {
            Log.trace(Log.Subsys.NET, -1, "using interface " + s.interfaceName() + " address " + s.address().getHostAddress()
                    + " (" + Settings.SOCKET_IFNAME.name() + "=" + (spec == null ? "<unset>" : spec) + ")");
        }
        return s;
    }

    /** The machine's network interfaces, in the system's order. */
    public static List<Nic> systemInterfaces() {
        List<Nic> out = new ArrayList<>();
        try {
            for (NetworkInterface ni : Collections.list(NetworkInterface.getNetworkInterfaces())) {
                boolean up;
                boolean loopback;
                try {
                    up = ni.isUp();
                    loopback = ni.isLoopback();
                } catch (SocketException e) {
                    // The interface vanished between listing and query (container teardown): skip it.
                    continue;
                }
                out.add(new Nic(ni.getName(), up, loopback, Collections.list(ni.getInetAddresses())));
            }
        } catch (SocketException e) {
            throw new JcclException(ErrorCode.RESOURCE, "cannot list the network interfaces of this host: " + e.getMessage()
                    + "; jccl needs them to choose an address (is /proc or netlink unavailable in this container?)", e);
        }
        return out;
    }

    /**
     * Chooses an interface and address: the pure core of {@link #selectAddress}.
     *
     * @param spec the {@code JCCL_SOCKET_IFNAME} value, or null when unset
     * @param family the address family restriction
     * @param nics the interfaces present, in the system's order
     * @throws ConfigException when nothing matches; the message names the spec and lists {@code nics}
     */
    public static Selection choose(String spec, Family family, List<Nic> nics) {
        Objects.requireNonNull(family, "family");
        boolean unset = spec == null || spec.isBlank();
        DeviceList list = unset ? null : parse(spec);
        List<Nic> ordered = unset ? defaultCandidates(nics) : list.select(up(nics), Nic::name);
        for (Nic nic : ordered) {
            InetAddress a = pickAddress(nic, family);
            if (a != null) {
                return new Selection(nic.name(), a);
            }
        }
        if (unset) {
            // Nothing routable: fall back to loopback, which is enough for a single-host job.
            for (Nic nic : nics) {
                if (nic.up() && nic.loopback()) {
                    InetAddress a = pickAddress(nic, family);
                    if (a != null) {
                        return new Selection(nic.name(), a);
                    }
                }
            }
        }
        StringBuilder sb = new StringBuilder();
        String fam = family == Family.ANY ? "" : (family == Family.INET ? "AF_INET" : "AF_INET6");
        if (unset) {
            sb.append("no interface is up").append(family.label()).append(" (").append(Settings.SOCKET_IFNAME.name())
                    .append(" is unset: any interface that is up, loopback last");
            if (!fam.isEmpty()) {
                sb.append("; ").append(Settings.SOCKET_FAMILY.name()).append('=').append(fam);
            }
            sb.append(")");
        } else {
            sb.append(Settings.SOCKET_IFNAME.name()).append('=').append(spec.trim());
            if (!fam.isEmpty()) {
                sb.append(" with ").append(Settings.SOCKET_FAMILY.name()).append('=').append(fam);
            }
            sb.append(" matches no interface that is up").append(family.label());
            for (String hint : list.nearMissHints(names(nics), "interface")) {
                sb.append("; ").append(hint);
            }
        }
        sb.append("; interfaces: ");
        if (nics.isEmpty()) {
            sb.append("none");
        }
        for (int i = 0; i < nics.size(); i++) {
            sb.append(i == 0 ? "" : ", ").append(nics.get(i).describe());
        }
        sb.append(". Set ").append(Settings.SOCKET_IFNAME.name())
                .append(" to the interfaces to use: ").append(DeviceList.grammar(false));
        if (family != Family.ANY) {
            sb.append(" or unset ").append(Settings.SOCKET_FAMILY.name());
        }
        throw new ConfigException(sb.toString());
    }

    private static List<Nic> defaultCandidates(List<Nic> nics) {
        List<Nic> out = new ArrayList<>();
        for (Nic nic : nics) {
            if (nic.up() && !nic.loopback() && !startsWithAny(nic.name(), DEFAULT_EXCLUDED)) {
                out.add(nic);
            }
        }
        return out;
    }

    private static List<Nic> up(List<Nic> nics) {
        return nics.stream().filter(Nic::up).toList();
    }

    private static List<String> names(List<Nic> nics) {
        return nics.stream().map(Nic::name).toList();
    }

    /** Registers the grammars of the interface settings ({@code JCCL_SOCKET_IFNAME}, {@code JCCL_IB_HCA}, {@code JCCL_SOCKET_FAMILY}). */
    public static void registerGrammars() {
        Settings.SOCKET_IFNAME.grammar(() -> DeviceList.grammar(false), Interfaces::parse);
        Settings.IB_HCA.grammar(() -> DeviceList.grammar(true), v -> DeviceList.parse(Settings.IB_HCA.name(), v, true));
        Settings.SOCKET_FAMILY.grammar(() -> "AF_INET or AF_INET6", Family::parse);
    }

    /** Parses a {@code JCCL_SOCKET_IFNAME} value ({@link DeviceList} grammar, no ports). */
    public static DeviceList parse(String spec) {
        return DeviceList.parse(Settings.SOCKET_IFNAME.name(), spec, false);
    }

    /**
     * Warnings about a {@code JCCL_SOCKET_IFNAME} value on these interfaces that are not errors:
     * exclusion entries written as NCCL prefixes ({@code ^docker} beside {@code docker0}), which
     * in jccl exclude only an interface of exactly that name.
     */
    public static List<String> warnings(String spec, List<Nic> nics) {
        if (spec == null || spec.isBlank()) {
            return List.of();
        }
        DeviceList list = parse(spec);
        return list.exclude() ? list.nearMissHints(names(nics), "interface") : List.of();
    }

    /** IPv4 first (unless restricted), then global IPv6, then link-local IPv6; null if the family has none. */
    private static InetAddress pickAddress(Nic nic, Family family) {
        if (family != Family.INET6) {
            for (InetAddress a : nic.addresses()) {
                if (a instanceof Inet4Address) {
                    return a;
                }
            }
            if (family == Family.INET) {
                return null;
            }
        }
        InetAddress linkLocal = null;
        for (InetAddress a : nic.addresses()) {
            if (a instanceof Inet6Address) {
                if (!a.isLinkLocalAddress()) {
                    return a;
                }
                if (linkLocal == null) {
                    linkLocal = a;
                }
            }
        }
        return linkLocal;
    }

    private static boolean startsWithAny(String name, List<String> prefixes) {
        for (String p : prefixes) {
            if (name.startsWith(p)) {
                return true;
            }
        }
        return false;
    }
}
