package org.jccl.ucx.internal;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.topo.Topology;

/**
 * jccl's (and NCCL's) network settings translated into UCX configuration, applied with
 * {@code ucp_config_modify} before the context is made (names without the {@code UCX_} prefix; UCX_*
 * variables of the environment are read first by {@code ucp_config_read}, and these override them):
 *
 * <ul>
 *   <li>the rank's NICs ({@code TransportContext.nics()}: the nearest RDMA devices, balanced, honouring
 *       {@code JCCL_IB_HCA}) -> {@code NET_DEVICES=mlx5_0:1,...} with each device's active port (the port
 *       {@code JCCL_IB_HCA} names, if it names one); no RDMA device: UCX's default (every device);</li>
 *   <li>{@code JCCL_IB_GID_INDEX} -> {@code IB_GID_INDEX};</li>
 *   <li>{@code JCCL_IB_TIMEOUT} t (NCCL's exponent: 4.096 us x 2^t) -> {@code RC_TIMEOUT} in whole
 *       microseconds (no decimal point: nothing for a locale to misread);</li>
 *   <li>{@code JCCL_IB_RETRY_CNT} -> {@code RC_RETRY_COUNT}; {@code JCCL_IB_TC} -> {@code IB_TRAFFIC_CLASS};</li>
 *   <li>{@code JCCL_UCX_TLS} -> {@code TLS}, as written;</li>
 *   <li>{@code MM_ERROR_HANDLING=y} when UCX may use posix or sysv, unless the environment sets it: every
 *       endpoint uses the peer-failure error mode, which UCX 1.13 grants its shared-memory transports only
 *       with these (without them a pair of ranks on one machine has no shared-memory path, and with
 *       {@code UCX_TLS=posix,self} no path at all: ucp_ep_create fails with UCS_ERR_UNREACHABLE);</li>
 *   <li>{@code RNDV_THRESH=524288} when UCX may use only tcp (and self), unless the environment sets
 *       {@code UCX_RNDV_THRESH} ({@link #TCP_RNDV_THRESH});</li>
 *   <li>{@code TCP_RX_SEG_SIZE=262144} then too, unless the environment sets {@code UCX_TCP_RX_SEG_SIZE}
 *       ({@link #TCP_RX_SEG_SIZE}).</li>
 * </ul>
 */
final class UcxSettings {
    private UcxSettings() {
    }

    /** JCCL_NET's values. */
    enum Net { UCX, SOCKET, AUTO }

    /** JCCL_NET: UCX (NCCL's IB too), Socket or auto (the default). */
    static Net net(Config config) {
        String v = Settings.NET.raw(config);
        return parseNet(v == null ? "auto" : v);
    }

    static Net parseNet(String v) {
        return switch (v.trim().toUpperCase(Locale.ROOT)) {
            case "UCX", "IB" -> Net.UCX;
            case "SOCKET", "TCP" -> Net.SOCKET;
            case "AUTO", "" -> Net.AUTO;
            default -> throw new ConfigException("JCCL_NET=" + v + " is not allowed: UCX (or IB), Socket or auto");
        };
    }

    /** Whether UCX may carry pairs of ranks with the same host identity (JCCL_UCX_SAME_HOST=1; tests). */
    static boolean sameHost(Config config) {
        String v = Settings.UCX_SAME_HOST.raw(config);
        return v != null && (v.equals("1") || v.equalsIgnoreCase("true") || v.equalsIgnoreCase("yes") || v.equalsIgnoreCase("on"));
    }

    /**
     * The UCX configuration for a rank whose NICs are {@code nics} on {@code topo} (null: unknown), in the
     * order it is applied.
     *
     * @param env the process environment (for UCX_* variables the user set, which jccl's defaults leave alone)
     */
    static Map<String, String> translate(Config config, List<String> nics, Topology topo, Map<String, String> env) {
        Map<String, String> m = new LinkedHashMap<>();
        String tls = Settings.UCX_TLS.raw(config);
        if (tls != null && !tls.isBlank()) {
            m.put("TLS", tls.trim());
        }
        List<String> devices = netDevices(nics, topo, Settings.IB_HCA.raw(config));
        if (!devices.isEmpty()) {
            m.put("NET_DEVICES", String.join(",", devices));
        }
        String gid = Settings.IB_GID_INDEX.raw(config);
        if (gid != null) {
            m.put("IB_GID_INDEX", gid.trim());
        }
        String timeout = Settings.IB_TIMEOUT.raw(config);
        if (timeout != null) {
            int t = Integer.parseInt(timeout.trim());
            // 4.096 us x 2^t, in whole microseconds
            long us = Math.round(4.096 * (1L << t));
            m.put("RC_TIMEOUT", us + "us");
        }
        String retry = Settings.IB_RETRY_CNT.raw(config);
        if (retry != null) {
            m.put("RC_RETRY_COUNT", retry.trim());
        }
        String tc = Settings.IB_TC.raw(config);
        if (tc != null) {
            m.put("IB_TRAFFIC_CLASS", tc.trim());
        }
        String effectiveTls = tls != null && !tls.isBlank() ? tls : env.getOrDefault("UCX_TLS", "all");
        if (tcpOnly(effectiveTls) && !env.containsKey("UCX_RNDV_THRESH")) {
            m.put("RNDV_THRESH", Long.toString(TCP_RNDV_THRESH));
        }
        if (tcpOnly(effectiveTls) && !env.containsKey("UCX_TCP_RX_SEG_SIZE")) {
            m.put("TCP_RX_SEG_SIZE", Long.toString(TCP_RX_SEG_SIZE));
        }
        if (usesSharedMemory(effectiveTls) && !env.containsKey("UCX_MM_ERROR_HANDLING") && !env.containsKey("UCX_POSIX_ERROR_HANDLING")
                && !env.containsKey("UCX_SYSV_ERROR_HANDLING")) {
            // MM_ (the table posix and sysv inherit from): ucp_config_modify("POSIX_ERROR_HANDLING") is ignored by 1.13
            // ("invalid configuration"), although the environment variable UCX_POSIX_ERROR_HANDLING works
            m.put("MM_ERROR_HANDLING", "y");
        }
        return m;
    }

    /**
     * Rendezvous threshold when UCX may use only tcp (and self): messages below it go eagerly. With UCX's own
     * ("auto"), messages of about 8 KiB and more went by rendezvous, three exchanges over the same sockets; on
     * loopback (2026-11-28, docs/PERFORMANCE.md "UCX and TCP on a quiet 2-core VM") 512 KiB took a 32 KB
     * all-reduce from 25-35 to 15-20 us, 512 KB from 169-275 to 140-202, and a stream of 64 KiB sends from
     * 1.2-2.1 to 2.3-2.5 GB/s, three rounds alternated.
     */
    static final long TCP_RNDV_THRESH = 512 << 10;

    /**
     * UCX tcp's receive segment when UCX may use only tcp (and self): how much one read from a socket takes in.
     * UCX's 64 KiB meant a read per 64 KiB of every large message; on loopback (2026-11-28, docs/PERFORMANCE.md "UCX:
     * the progress pass, tcp's receive segment, declared costs"; 128 KiB-1 MiB tried) 256 KiB took a 2 MB all-reduce
     * from 661-715 to 511-561 us and 256 KB from 73-76 to 55-57 us, three rounds alternated.
     */
    static final long TCP_RX_SEG_SIZE = 256 << 10;

    /**
     * The name {@code ucp_config_modify} takes for setting {@code key} of this library: UCX up to 1.16 matches a
     * transport's setting by its field's bare name ({@code RX_SEG_SIZE}), 1.17 and later by the transport's prefixed
     * name ({@code TCP_RX_SEG_SIZE}: its uct_config_modify passes the table's prefix since). A name UCX does not match
     * is dropped with "invalid configuration" at worker creation. Settings of UCP's own table, and {@code MM_}
     * settings (a sub-table's prefix, matched by both), keep their names.
     */
    static String modifyKey(String key, int major, int minor) {
        if (key.startsWith("TCP_") && major == 1 && minor < 17) {
            return key.substring("TCP_".length());
        }
        return key;
    }

    /** Whether a UCX_TLS value names tcp and nothing else but self (no RDMA, no shared memory). */
    static boolean tcpOnly(String tls) {
        boolean tcp = false;
        for (String t : tls.trim().toLowerCase(Locale.ROOT).split(",")) {
            String x = t.trim();
            if (x.equals("tcp")) {
                tcp = true;
            } else if (!x.equals("self")) {
                return false;
            }
        }
        return tcp;
    }

    /** Whether a UCX_TLS value may select UCX's posix or sysv transports (UCX warns about settings no transport reads). */
    static boolean usesSharedMemory(String tls) {
        String t = tls.trim().toLowerCase(Locale.ROOT);
        if (t.startsWith("^")) {
            return true; // an exclusion list keeps the rest, shared memory included unless excluded (then UCX ignores the setting)
        }
        for (String part : t.split(",")) {
            String p = part.trim();
            if (p.equals("all") || p.equals("sm") || p.equals("shm") || p.equals("mm") || p.equals("posix") || p.equals("sysv")) {
                return true;
            }
        }
        return false;
    }

    /** "mlx5_0:1" for each RDMA NIC of the rank, with its port; interfaces that are not RDMA devices are skipped. */
    static List<String> netDevices(List<String> nics, Topology topo, String ibHca) {
        List<String> out = new ArrayList<>();
        if (nics == null || topo == null) {
            return out;
        }
        for (String nic : nics) {
            Topology.RdmaDevice d = topo.rdma(nic).orElse(null);
            if (d == null) {
                continue;
            }
            int port = portNamed(ibHca, nic);
            if (port < 0) {
                port = d.ports().stream().filter(Topology.RdmaPort::active).mapToInt(Topology.RdmaPort::number).findFirst()
                        .orElse(d.ports().isEmpty() ? 1 : d.ports().get(0).number());
            }
            out.add(nic + ":" + port);
        }
        return out;
    }

    /** The port JCCL_IB_HCA names for {@code device} ("mlx5_0:2" -> 2), or -1. */
    static int portNamed(String ibHca, String device) {
        if (ibHca == null || ibHca.startsWith("^")) {
            return -1;
        }
        for (String e : ibHca.split(",")) {
            String s = e.trim();
            if (s.startsWith("=")) {
                s = s.substring(1);
            }
            int colon = s.indexOf(':');
            if (colon > 0 && s.substring(0, colon).equals(device)) {
                try {
                    return Integer.parseInt(s.substring(colon + 1).trim());
                } catch (NumberFormatException ex) {
                    return -1;
                }
            }
        }
        return -1;
    }
}
