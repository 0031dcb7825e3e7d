package org.jccl.internal.topo;

import java.util.ArrayList;
import java.util.List;

/**
 * A parsed {@code JCCL_IB_HCA} (alias {@code NCCL_IB_HCA}): which RDMA devices and ports jccl may use.
 *
 * <p>Grammar: a comma list of {@code name[:port]}; a leading {@code ^} excludes the listed devices
 * instead. Names match <b>exactly</b> ({@code mlx5_1} never means {@code mlx5_10}, where NCCL
 * matches prefixes unless the list starts with {@code =}); a leading {@code =} is accepted for
 * NCCL compatibility and changes nothing. A name ending in {@code *} asks for prefix matching
 * ({@code mlx5_*}).
 *
 * @param exclude leading {@code ^}
 * @param entries the listed devices
 */
public record HcaSpec(boolean exclude, List<Entry> entries) {

    /**
     * One listed device.
     *
     * @param name device name, or prefix when {@code prefix}
     * @param prefix whether it ended in {@code *}
     * @param port the port after {@code :}, or -1 for every port
     */
    public record Entry(String name, boolean prefix, int port) {
        /** Whether this entry names {@code device}. */
        public boolean matches(String device) {
            return prefix ? device.startsWith(name) : device.equals(name);
        }

        @Override
        public String toString() {
            return name + (prefix ? "*" : "") + (port >= 0 ? ":" + port : "");
        }
    }

    public HcaSpec {
        entries = List.copyOf(entries);
    }

    /** No restriction (unset). */
    public static final HcaSpec ALL = new HcaSpec(true, List.of());

    /**
     * Parses a value; null or blank means every device.
     *
     * @throws IllegalArgumentException for a port that is not a number
     */
    public static HcaSpec parse(String value) {
        if (value == null || value.isBlank()) {
            return ALL;
        }
        String s = value.trim();
        boolean exclude = s.startsWith("^");
        if (exclude) {
            s = s.substring(1);
        }
        if (s.startsWith("=")) {
            s = s.substring(1);
        }
        List<Entry> out = new ArrayList<>();
        for (String part : s.split(",")) {
            String t = part.trim();
            if (t.isEmpty()) {
                continue;
            }
            int port = -1;
            int colon = t.indexOf(':');
            if (colon >= 0) {
                String p = t.substring(colon + 1).trim();
                try {
                    port = Integer.parseInt(p);
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("JCCL_IB_HCA entry '" + t + "': the port after ':' must be a number, not '" + p + "'");
                }
                t = t.substring(0, colon).trim();
            }
            boolean prefix = t.endsWith("*");
            if (prefix) {
                t = t.substring(0, t.length() - 1);
            }
            out.add(new Entry(t, prefix, port));
        }
        return new HcaSpec(exclude, out);
    }

    /** Whether port {@code port} of {@code device} may be used. */
    public boolean allows(String device, int port) {
        for (Entry e : entries) {
            if (e.matches(device) && (e.port() < 0 || e.port() == port)) {
                return !exclude;
            }
        }
        return exclude;
    }
}
