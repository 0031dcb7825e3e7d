package org.jccl.internal.topo;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jccl.internal.topo.Topology.Gpu;
import org.jccl.internal.topo.Topology.NumaNode;

/**
 * Where {@code jccl run} (and {@code jccl perf -np}) lets each local rank run: the CPU sets behind
 * {@code --bind-to}. A pure function of the host ({@link Topology}), the ranks' environment, the rank
 * count and the CPUs the launcher itself may use, so each rule is tested on the fixture hosts.
 *
 * <ul>
 *   <li>{@code auto} (the default): a <b>GPU rank</b> gets every CPU of its GPU's NUMA node (NCCL places
 *       its own threads the same way): a JVM's operation, control, JIT and GC threads need more than one
 *       core, and the GPU's node is the one whose memory its copies cross least. A rank is a GPU rank
 *       when the host has NVIDIA GPUs (sysfs) and {@link GpuMapping}, given the ranks' environment, its
 *       local rank and the rank count, gives it a GPU; it is bound to that GPU's node. (A CPU-only job
 *       on such a host gets NUMA nodes too: harmless.) A GPU whose {@code numa_node} is -1 (firmware that
 *       does not say) gets no binding. Every other rank is a <b>CPU rank</b>: see {@link #CPU_RANK_ONE_CORE}.</li>
 *   <li>{@code numa}: GPU ranks as auto; CPU ranks spread over the NUMA nodes in blocks (ranks 0..k-1 on
 *       the first node, ...).</li>
 *   <li>{@code core}: rank r on the r-th allowed CPU, wrapping around (Open MPI's default).</li>
 *   <li>{@code none}: the scheduler places ranks.</li>
 * </ul>
 * Every set is intersected with the launcher's allowed CPUs (its own affinity, e.g. a Slurm or
 * container cpuset); an empty intersection binds nothing, and says so.
 */
public final class CpuBinding {

    /**
     * What {@code auto} does with CPU ranks when every rank can have a core of its own: one core each
     * (true) or no binding (false). Chosen by measurement, docs/PERFORMANCE.md "CPU binding of local
     * ranks": two ranks that spin while waiting for each other must not share a core.
     */
    static final boolean CPU_RANK_ONE_CORE = true;

    /** The {@code --bind-to} values. */
    public enum Mode { AUTO, CORE, NUMA, NONE }

    /**
     * One rank's binding.
     *
     * @param cpus the CPUs it may run on, ascending; empty: not bound
     * @param why what was decided and why, in words
     */
    public record Plan(List<Integer> cpus, String why) {
        public Plan {
            cpus = List.copyOf(cpus);
        }

        public boolean bound() {
            return !cpus.isEmpty();
        }

        /** The set in list syntax ({@code 0-55,112-167}), as taskset -c and sysfs write it. */
        public String cpuList() {
            return format(cpus);
        }

        static Plan none(String why) {
            return new Plan(List.of(), why);
        }
    }

    private CpuBinding() {
    }

    /**
     * The binding of each of {@code np} local ranks.
     *
     * @param mode the {@code --bind-to} value
     * @param topo this host, or null when it could not be read (then auto and numa bind as for CPU ranks on one node)
     * @param env the ranks' environment (CUDA_VISIBLE_DEVICES, JCCL_CUDA_DEVICE), the same for every rank
     * @param np local ranks, rank r being local rank r
     * @param allowed the CPUs the launcher may use, ascending
     */
    public static List<Plan> plan(Mode mode, Topology topo, Map<String, String> env, int np, List<Integer> allowed) {
        List<Plan> out = new ArrayList<>(np);
        for (int r = 0; r < np; r++) {
            out.add(switch (mode) {
                case NONE -> Plan.none("--bind-to none");
                case CORE -> core(r, allowed, "--bind-to core");
                case AUTO, NUMA -> gpuOrCpu(mode, topo, env, r, np, allowed);
            });
        }
        return out;
    }

    private static Plan core(int r, List<Integer> allowed, String why) {
        int cpu = allowed.get(r % allowed.size());
        return new Plan(List.of(cpu), why + ": rank " + r + " on the " + ordinal(r % allowed.size() + 1) + " allowed CPU"
                + (r >= allowed.size() ? " (more ranks than the " + allowed.size() + " allowed CPUs: ranks share)" : ""));
    }

    private static Plan gpuOrCpu(Mode mode, Topology topo, Map<String, String> env, int r, int np, List<Integer> allowed) {
        if (topo != null && !topo.gpus().isEmpty()) {
            String cvdText = env.get("CUDA_VISIBLE_DEVICES");
            CudaVisibleDevices cvd = CudaVisibleDevices.resolve(topo, cvdText);
            GpuMapping.Result res = GpuMapping.choose(GpuMapping.devices(cvd), env.get(GpuMapping.SETTING), r, np, cvdText);
            if (res.ok()) {
                Gpu gpu = cvd.entries().get(res.choice().device().ordinal()).gpu();
                if (gpu == null) {
                    return Plan.none("GPU rank: its GPU " + res.choice().device().identity() + " (" + res.choice().why() + ") cannot be"
                            + " placed in sysfs (a UUID without NVML, or a MIG instance), so its NUMA node is unknown");
                }
                String label = "GPU " + topo.gpus().indexOf(gpu) + " (" + gpu.pci().address() + ", " + res.choice().why() + ")";
                return node(topo, gpu.pci().numaNode(), allowed, "GPU rank: NUMA node %d of its " + label,
                        "GPU rank: its " + label);
            }
            // No GPU for this environment: a CPU job on a GPU host (or one whose ranks will fail and say why).
        }
        List<NumaNode> nodes = topo == null ? List.of() : usableNodes(topo, allowed);
        if (mode == Mode.NUMA && nodes.size() > 1) {
            NumaNode n = nodes.get((int) ((long) r * nodes.size() / np));
            return node(topo, n.id(), allowed, "CPU rank, --bind-to numa: NUMA node %d (ranks in blocks over " + nodes.size() + " nodes)",
                    "CPU rank, --bind-to numa");
        }
        if (mode == Mode.NUMA) {
            return Plan.none("CPU rank, --bind-to numa: this host has one NUMA node" + (topo == null ? " (or its topology could not be"
                    + " read)" : "") + ", so nothing to choose");
        }
        if (!CPU_RANK_ONE_CORE) {
            return Plan.none("CPU rank: not bound (measured faster than one core each, docs/PERFORMANCE.md)");
        }
        if (np > allowed.size()) {
            return Plan.none("CPU rank: " + np + " ranks but " + allowed.size() + " allowed CPUs, so no core of its own; the scheduler"
                    + " places them");
        }
        return core(r, allowed, "CPU rank, one core each (two ranks that spin waiting for each other must not share a core)");
    }

    /** The node's CPUs that the launcher may use, or no binding and why. {@code format} gets the node id. */
    private static Plan node(Topology topo, int nodeId, List<Integer> allowed, String format, String unboundPrefix) {
        if (nodeId < 0) {
            return Plan.none(unboundPrefix + " has numa_node -1 (the firmware does not say), so it is not bound");
        }
        NumaNode n = topo.numaNodes().stream().filter(x -> x.id() == nodeId).findFirst().orElse(null);
        if (n == null) {
            return Plan.none(unboundPrefix + " is on NUMA node " + nodeId + ", which /sys/devices/system/node does not list; not bound");
        }
        List<Integer> cpus = new ArrayList<>(parse(n.cpuList()));
        cpus.retainAll(new LinkedHashSet<>(allowed));
        if (cpus.isEmpty()) {
            return Plan.none(unboundPrefix + " is on NUMA node " + nodeId + " (CPUs " + n.cpuList() + "), none of which this launcher may"
                    + " use (allowed: " + format(allowed) + "); not bound");
        }
        return new Plan(cpus, String.format(format, nodeId));
    }

    /** NUMA nodes with at least one allowed CPU, by id. */
    private static List<NumaNode> usableNodes(Topology topo, List<Integer> allowed) {
        Set<Integer> ok = new LinkedHashSet<>(allowed);
        return topo.numaNodes().stream().filter(n -> parse(n.cpuList()).stream().anyMatch(ok::contains)).toList();
    }

    private static String ordinal(int k) {
        return k + (k % 100 >= 11 && k % 100 <= 13 ? "th" : switch (k % 10) {
            case 1 -> "st";
            case 2 -> "nd";
            case 3 -> "rd";
            default -> "th";
        });
    }

    /** {@code 0-3,8,10-11} -> [0, 1, 2, 3, 8, 10, 11]; blank -> []. */
    public static List<Integer> parse(String list) {
        List<Integer> out = new ArrayList<>();
        if (list == null || list.isBlank()) {
            return out;
        }
        for (String part : list.trim().split(",")) {
            String[] range = part.trim().split("-");
            int lo = Integer.parseInt(range[0].trim());
            int hi = range.length > 1 ? Integer.parseInt(range[1].trim()) : lo;
            for (int c = lo; c <= hi; c++) {
                out.add(c);
            }
        }
        return out;
    }

    /** [0, 1, 2, 3, 8, 10, 11] -> {@code 0-3,8,10-11} (input ascending). */
    public static String format(List<Integer> cpus) {
        StringBuilder sb = new StringBuilder();
        int i = 0;
        while (i < cpus.size()) {
            int j = i;
            while (j + 1 < cpus.size() && cpus.get(j + 1) == cpus.get(j) + 1) {
                j++;
            }
            sb.append(sb.isEmpty() ? "" : ",").append(cpus.get(i));
            if (j > i) {
                sb.append('-').append(cpus.get(j));
            }
            i = j + 1;
        }
        return sb.toString();
    }
}
