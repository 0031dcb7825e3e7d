package org.jccl.internal.net;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.jccl.ConfigException;

/**
 * A list of device names as users write them in {@code JCCL_SOCKET_IFNAME} (network interfaces)
 * and {@code JCCL_IB_HCA} (RDMA devices), parsed once and matched against the devices present.
 *
 * <h2>Grammar (NCCL's, with one difference: names are exact unless they end in {@code *})</h2>
 * <pre>
 *   list   := ['^'] ['='] entry (',' entry)*
 *   entry  := name ['*'] [':' port]          (':' port only where ports are allowed, i.e. RDMA devices)
 * </pre>
 * <ul>
 *   <li>{@code mlx5_0:1,mlx5_1}: port 1 of {@code mlx5_0} and every port of {@code mlx5_1};</li>
 *   <li>{@code ^mlx5_3}: every device except {@code mlx5_3};</li>
 *   <li>{@code mlx5_*} or {@code eth*}: every device whose name starts with {@code mlx5_} or
 *       {@code eth} — prefix matching is asked for, per entry, with a trailing {@code *};</li>
 *   <li>{@code =mlx5_1}: NCCL's "exact names" marker; accepted (and redundant: every entry without
 *       {@code *} is exact in jccl).</li>
 * </ul>
 *
 * <p><b>Why exact by default.</b> In NCCL an entry is a prefix unless the list starts with
 * {@code =}, so {@code NCCL_IB_HCA=mlx5_1} also selects {@code mlx5_10} to {@code mlx5_17} on a
 * node with 18 HCAs, and {@code NCCL_SOCKET_IFNAME=eth1} also {@code eth10}: a silent
 * mis-selection that only shows up as low bandwidth. In jccl {@code mlx5_1} means exactly
 * {@code mlx5_1}. The cost is that NCCL-style prefixes ({@code eth}, {@code ib}, {@code mlx5})
 * match nothing; {@link #nearMisses} finds such entries so that callers fail (inclusion lists) or
 * warn (exclusion lists) with the fix ("write eth*") instead of silently selecting nothing.
 *
 * <p>Immutable and stateless; callers pass the devices present (tests pass synthetic lists).
 */
public final class DeviceList {

    /** Port value of an entry that names no port (every port of the device matches). */
    public static final int ANY_PORT = -1;

    /**
     * One entry of the list.
     *
     * @param name the device name, or the prefix when {@code prefix}
     * @param prefix whether the entry ended in {@code *}
     * @param port the port number, or {@link #ANY_PORT}
     */
    public record Entry(String name, boolean prefix, int port) {
        public Entry {
            Objects.requireNonNull(name, "name");
        }

        /** Whether this entry selects {@code device} (any port). */
        public boolean matchesName(String device) {
            return prefix ? device.startsWith(name) : device.equals(name);
        }

        /** Whether this entry selects port {@code port} of {@code device} ({@link #ANY_PORT}: the device as a whole). */
        public boolean matches(String device, int devicePort) {
            return matchesName(device) && (port == ANY_PORT || devicePort == ANY_PORT || port == devicePort);
        }

        @Override
        public String toString() {
            return name + (prefix ? "*" : "") + (port == ANY_PORT ? "" : ":" + port);
        }
    }

    private final String variable;
    private final String text;
    private final boolean exclude;
    private final List<Entry> entries;

    private DeviceList(String variable, String text, boolean exclude, List<Entry> entries) {
        this.variable = variable;
        this.text = text;
        this.exclude = exclude;
        this.entries = List.copyOf(entries);
    }

    /**
     * Parses a device list.
     *
     * @param variable the setting's name, for messages (e.g. {@code JCCL_IB_HCA})
     * @param spec the value; null or blank gives the empty list, which {@link #isUnset() means unset}
     * @param portsAllowed whether entries may carry {@code :port} (RDMA devices); when false a
     *        {@code ':'} is part of the name (interface aliases such as {@code eth0:1})
     * @throws ConfigException naming the variable, the value, the bad entry and the grammar
     */
    public static DeviceList parse(String variable, String spec, boolean portsAllowed) {
        Objects.requireNonNull(variable, "variable");
        if (spec == null || spec.isBlank()) {
            return new DeviceList(variable, "", false, List.of());
        }
        String s = spec.trim();
        boolean exclude = s.startsWith("^");
        if (exclude) {
            s = s.substring(1).trim();
        }
        if (s.startsWith("=")) {
            s = s.substring(1).trim();
        }
        List<Entry> entries = new ArrayList<>();
        for (String part : s.split(",", -1)) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            entries.add(entry(variable, spec, p, portsAllowed));
        }
        if (entries.isEmpty()) {
            throw error(variable, spec, "names no device", portsAllowed);
        }
        return new DeviceList(variable, spec.trim(), exclude, entries);
    }

    private static Entry entry(String variable, String spec, String p, boolean portsAllowed) {
        String name = p;
        int port = ANY_PORT;
        if (portsAllowed) {
            int colon = p.indexOf(':');
            if (colon >= 0) {
                name = p.substring(0, colon).trim();
                String portText = p.substring(colon + 1).trim();
                try {
                    port = Integer.parseInt(portText);
                } catch (NumberFormatException e) {
                    port = 0;
                }
                if (port < 1 || port > 255) {
                    throw error(variable, spec, "entry '" + p + "' has port '" + portText + "', which is not a port number (1 to 255)",
                            true);
                }
            }
        }
        boolean prefix = name.endsWith("*");
        if (prefix) {
            name = name.substring(0, name.length() - 1);
        }
        if (name.isEmpty() && !prefix) {
            throw error(variable, spec, "entry '" + p + "' has no device name", portsAllowed);
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (c == '*') {
                throw error(variable, spec, "entry '" + p + "' has a '*' inside the name; '*' is only allowed at the end (prefix match)",
                        portsAllowed);
            }
            if (c == '^' || c == '=') {
                throw error(variable, spec, "entry '" + p + "' contains '" + c + "', which is only allowed at the start of the whole list",
                        portsAllowed);
            }
            if (Character.isWhitespace(c) || Character.isISOControl(c)) {
                throw error(variable, spec, "entry '" + p + "' contains a blank; entries are separated by commas", portsAllowed);
            }
        }
        return new Entry(name, prefix, port);
    }

    private static ConfigException error(String variable, String spec, String what, boolean ports) {
        return new ConfigException(variable + "='" + spec + "' is not allowed: " + what + "; expected " + grammar(ports));
    }

    /** One line describing the grammar, for messages and docs. */
    public static String grammar(boolean ports) {
        return ports
                ? "a comma list of device names, each optionally :port (mlx5_0:1,mlx5_1); a trailing * matches by prefix (mlx5_*);"
                        + " ^ in front excludes the devices listed (^mlx5_2)"
                : "a comma list of interface names (eth0,ib0); a trailing * matches by prefix (eth*); ^ in front excludes the"
                        + " interfaces listed (^docker*,lo)";
    }

    /** The setting this list came from. */
    public String variable() {
        return variable;
    }

    /** Whether the setting is unset (no entries): callers apply their own default. */
    public boolean isUnset() {
        return entries.isEmpty();
    }

    /** Whether the list started with {@code ^}: the entries are excluded, everything else selected. */
    public boolean exclude() {
        return exclude;
    }

    public List<Entry> entries() {
        return entries;
    }

    /** The index of the first entry that selects port {@code port} of {@code device}, or -1. */
    public int indexOf(String device, int port) {
        for (int i = 0; i < entries.size(); i++) {
            if (entries.get(i).matches(device, port)) {
                return i;
            }
        }
        return -1;
    }

    /**
     * Whether the list accepts port {@code port} of {@code device} ({@link #ANY_PORT} for devices
     * without ports): an unset list accepts everything, an inclusion list what an entry matches,
     * an exclusion list what no entry matches.
     */
    public boolean accepts(String device, int port) {
        if (isUnset()) {
            return true;
        }
        return exclude != (indexOf(device, port) >= 0);
    }

    /** {@link #accepts(String, int)} for a device as a whole. */
    public boolean accepts(String device) {
        return accepts(device, ANY_PORT);
    }

    /**
     * The devices the list selects, in the order to try them: for an inclusion list by the first
     * entry each matches (so {@code ib*,eth*} prefers {@code ib0}), then in the order given; for an
     * exclusion list (and an unset one) in the order given.
     *
     * @param devices the devices present, in the system's order
     * @param name how to get a device's name
     */
    public <T> List<T> select(List<T> devices, Function<T, String> name) {
        List<T> out = new ArrayList<>();
        if (isUnset() || exclude) {
            for (T d : devices) {
                if (accepts(name.apply(d))) {
                    out.add(d);
                }
            }
            return out;
        }
        for (int entry = 0; entry < entries.size(); entry++) {
            for (T d : devices) {
                if (indexOf(name.apply(d), ANY_PORT) == entry) {
                    out.add(d);
                }
            }
        }
        return out;
    }

    /** The entries that match none of {@code present}, in list order (e.g. a misspelt or absent HCA). */
    public List<Entry> unmatched(Collection<String> present) {
        List<Entry> out = new ArrayList<>();
        for (Entry e : entries) {
            if (present.stream().noneMatch(e::matchesName)) {
                out.add(e);
            }
        }
        return out;
    }

    /**
     * Exact entries that match none of {@code present} but are a prefix of some of them, with
     * those names: the entries a user who learnt NCCL's prefix rule probably meant as prefixes
     * ({@code eth} beside {@code eth0, eth1}). Callers turn them into "write eth*" hints.
     */
    public Map<Entry, List<String>> nearMisses(Collection<String> present) {
        Map<Entry, List<String>> out = new LinkedHashMap<>();
        for (Entry e : entries) {
            if (e.prefix() || present.contains(e.name())) {
                continue;
            }
            List<String> longer = present.stream().filter(n -> n.startsWith(e.name())).toList();
            if (!longer.isEmpty()) {
                out.put(e, longer);
            }
        }
        return out;
    }

    /**
     * One sentence per {@link #nearMisses near miss}, e.g. "JCCL_IB_HCA entry mlx5 matches no
     * device exactly (names are exact in jccl); mlx5_0, mlx5_1 start with it: write mlx5* to
     * select them by prefix".
     */
    public List<String> nearMissHints(Collection<String> present, String what) {
        List<String> out = new ArrayList<>();
        for (Map.Entry<Entry, List<String>> m : nearMisses(present).entrySet()) {
            Entry e = m.getKey();
            String star = e.name() + "*" + (e.port() == ANY_PORT ? "" : ":" + e.port());
            out.add(variable + " entry " + e + " matches no " + what + " exactly (names are exact in jccl, unlike NCCL's prefixes); "
                    + String.join(", ", m.getValue()) + (m.getValue().size() == 1 ? " starts" : " start") + " with it: write "
                    + (exclude ? "^" : "") + star + " to " + (exclude ? "exclude" : "select") + " by prefix, or name "
                    + (m.getValue().size() == 1 ? "it" : "them") + " exactly");
        }
        return out;
    }

    /** The value as written (trimmed); empty when unset. */
    @Override
    public String toString() {
        return text;
    }
}
