package org.jccl.internal.config;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Variables that are not jccl settings but that jccl recognises, so it can warn precisely instead
 * of staying silent: NCCL variables that do not exist (yet circulate in blog posts), real NCCL
 * variables jccl does not honour, and {@code JCCL_*} variables read by jccl's scripts rather than
 * by the library. Used by {@link ConfigLoader#warnings}.
 */
public final class KnownVariables {

    private KnownVariables() {
    }

    /**
     * Names that NCCL has never read, with what actually controls the thing they pretend to set.
     * They have no effect on NCCL or jccl.
     */
    static final Map<String, String> NCCL_NONEXISTENT = Map.of(
            "NCCL_IB_MTU", "the IB MTU is the port's active MTU, set by the subnet manager or the NIC (ibv_devinfo -v shows active_mtu)",
            "NCCL_RX_RING_SIZE", "NIC ring sizes are set with ethtool -G",
            "NCCL_IB_DISABLE_ECN", "ECN is configured on the NICs and switches (and NCCL_IB_TC selects the traffic class)");

    /**
     * Real NCCL variables without a jccl equivalent, with the nearest jccl setting or the reason
     * (empty when there is nothing to add). A name that a jccl setting takes as its NCCL alias is
     * never reported (it is honoured), so entries here stay correct when jccl later adds one.
     */
    static final Map<String, String> NCCL_IGNORED = ncclIgnored();

    private static Map<String, String> ncclIgnored() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("NCCL_NTHREADS", "jccl's GPU kernels size their blocks by themselves (JCCL_CUDA_NBLOCKS sets the block count)");
        m.put("NCCL_BUFFSIZE", "nearest: JCCL_CHUNK_SIZE (ring pipelining), JCCL_SHM_CHUNK and JCCL_SHM_SLOTS (shared-memory rings),"
                + " JCCL_CUDA_PUSH_SLOT (GPU scratch)");
        m.put("NCCL_MAX_NCHANNELS", "jccl has no channels; JCCL_CUDA_NBLOCKS sets the GPU kernels' block count");
        m.put("NCCL_MIN_NCHANNELS", "jccl has no channels; JCCL_CUDA_NBLOCKS sets the GPU kernels' block count");
        m.put("NCCL_MAX_CTAS", "JCCL_CUDA_NBLOCKS sets the GPU kernels' block count");
        m.put("NCCL_MIN_CTAS", "JCCL_CUDA_NBLOCKS sets the GPU kernels' block count");
        m.put("NCCL_PROTO", "jccl has no LL/LL128/Simple protocols");
        m.put("NCCL_P2P_LEVEL", "JCCL_CUDA_P2P_DISABLE=1 turns GPU peer access off");
        m.put("NCCL_NET_GDR_LEVEL", "jccl has no RDMA transport yet");
        m.put("NCCL_NET_GDR_READ", "jccl has no RDMA transport yet");
        m.put("NCCL_IB_DISABLE", "JCCL_NET=Socket (NCCL_NET=Socket) keeps UCX off and uses TCP between hosts");
        m.put("NCCL_IB_SL", "jccl has no RDMA transport yet");
        m.put("NCCL_IB_QPS_PER_CONNECTION", "jccl has no RDMA transport yet");
        m.put("NCCL_IB_PCI_RELAXED_ORDERING", "jccl has no RDMA transport yet");
        m.put("NCCL_IB_ADAPTIVE_ROUTING", "jccl has no RDMA transport yet");
        m.put("NCCL_NET_PLUGIN", "jccl loads transports with ServiceLoader, not NCCL net plugins");
        m.put("NCCL_CROSS_NIC", "");
        m.put("NCCL_LAUNCH_MODE", "");
        m.put("NCCL_CUMEM_ENABLE", "");
        m.put("NCCL_NVLS_ENABLE", "jccl has no NVLink SHARP path");
        m.put("NCCL_COLLNET_ENABLE", "jccl has no CollNet path");
        m.put("NCCL_TREE_THRESHOLD", "JCCL_ALGO restricts algorithms; JCCL_RD_THRESHOLD fixes the all-reduce split");
        m.put("NCCL_LL_THRESHOLD", "jccl has no LL protocol");
        m.put("NCCL_IGNORE_CPU_AFFINITY", "jccl run binds ranks with --bind-to");
        m.put("NCCL_P2P_NET_CHUNKSIZE", "nearest: JCCL_CHUNK_SIZE");
        m.put("NCCL_P2P_NVL_CHUNKSIZE", "nearest: JCCL_CHUNK_SIZE");
        m.put("NCCL_SHM_USE_CUDA_MEMCPY", "");
        m.put("NCCL_GRAPH_FILE", "");
        m.put("NCCL_GRAPH_DUMP_FILE", "");
        m.put("NCCL_TOPO_FILE", "");
        m.put("NCCL_TOPO_DUMP_FILE", "");
        m.put("NCCL_DEBUG_TIMESTAMP_FORMAT", "");
        m.put("NCCL_WORK_FIFO_DEPTH", "");
        m.put("NCCL_CHECK_POINTERS", "");
        m.put("NCCL_CONF_FILE", "jccl reads JCCL_CONF_FILE, ~/.jccl.conf or /etc/jccl.conf (NCCL names of jccl settings work there)");
        m.put("NCCL_COMM_BLOCKING", "jccl's host collectives block unless called as xxxAsync");
        return Map.copyOf(m);
    }

    /**
     * {@code JCCL_*} variables that are not library settings but are read by jccl's scripts
     * ({@code bin/jdk25.sh}) and must not be reported as unknown.
     */
    static final Set<String> JCCL_SCRIPT_VARIABLES = Set.of("JCCL_JVM_DIR", "JCCL_TOOLCHAINS", "JCCL_MIN_JAVA");

    /** Whether {@code name} starts with {@code JCCL_}, ignoring case (so {@code jccl_debug} is caught as a typo). */
    public static boolean isJcclName(String name) {
        return name.length() > 5 && name.substring(0, 5).toUpperCase(Locale.ROOT).equals("JCCL_");
    }

    /** Whether {@code name} starts with {@code NCCL_}, ignoring case. */
    public static boolean isNcclName(String name) {
        return name.length() > 5 && name.substring(0, 5).toUpperCase(Locale.ROOT).equals("NCCL_");
    }

    /** Every NCCL name jccl knows: the aliases of its settings and the two lists above. */
    static List<String> ncclNames() {
        List<String> out = new ArrayList<>();
        for (Setting s : Setting.all().values()) {
            if (s.ncclAlias() != null) {
                out.add(s.ncclAlias());
            }
        }
        out.addAll(NCCL_IGNORED.keySet());
        out.addAll(NCCL_NONEXISTENT.keySet());
        return out;
    }
}
