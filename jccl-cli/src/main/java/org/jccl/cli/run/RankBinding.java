package org.jccl.cli.run;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.cli.run.LocalLauncher.Binding;
import org.jccl.internal.log.Log;
import org.jccl.internal.topo.CpuBinding;
import org.jccl.internal.topo.FsStats;
import org.jccl.internal.topo.GpuMapping;
import org.jccl.internal.topo.GpuProbe;
import org.jccl.internal.topo.Nvml;
import org.jccl.internal.topo.SysfsDiscovery;
import org.jccl.internal.topo.Topologies;
import org.jccl.internal.topo.Topology;

/**
 * Where each rank of a local job may run: the CPUs this process may use, each rank's plan for a
 * {@link Binding} ({@link CpuBinding} has the rules), and the {@code taskset} prefix that applies it.
 */
final class RankBinding {

    private RankBinding() {
    }

    /** The CPUs this process may run on (Linux: Cpus_allowed_list), else 0..availableProcessors-1. */
    static List<Integer> allowedCpus() {
        List<Integer> cpus = new ArrayList<>();
        try {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
                if (line.startsWith("Cpus_allowed_list:")) {
                    cpus.addAll(CpuBinding.parse(line.substring(line.indexOf(':') + 1)));
                }
            }
        } catch (IOException | RuntimeException e) {
            cpus.clear();
        }
        if (cpus.isEmpty()) {
            for (int c = 0; c < Runtime.getRuntime().availableProcessors(); c++) {
                cpus.add(c);
            }
        }
        return cpus;
    }

    /** The taskset program on PATH, or null. */
    static String taskset() {
        for (String dir : String.valueOf(System.getenv("PATH")).split(java.io.File.pathSeparator)) {
            java.nio.file.Path p = java.nio.file.Path.of(dir.isEmpty() ? "." : dir, "taskset");
            if (java.nio.file.Files.isExecutable(p)) {
                return p.toString();
            }
        }
        return null;
    }

    private static boolean resolvable(String program) {
        if (program.contains(java.io.File.separator)) {
            return java.nio.file.Files.isExecutable(java.nio.file.Path.of(program));
        }
        for (String dir : String.valueOf(System.getenv("PATH")).split(java.io.File.pathSeparator)) {
            if (java.nio.file.Files.isExecutable(java.nio.file.Path.of(dir.isEmpty() ? "." : dir, program))) {
                return true;
            }
        }
        return false;
    }

    /** {@code command} prefixed with {@code taskset -c LIST} when {@code plan} binds and taskset exists. */
    static List<String> bound(List<String> command, CpuBinding.Plan plan, String taskset) {
        // A program that cannot be found is reported by the launcher itself, not by taskset.
        if (!plan.bound() || taskset == null || !resolvable(command.getFirst())) {
            return command;
        }
        List<String> c = new ArrayList<>(command.size() + 3);
        c.add(taskset);
        c.add("-c");
        c.add(plan.cpuList());
        c.addAll(command);
        return c;
    }

    /**
     * Each rank's binding on this host for {@code binding}, given the ranks' environment
     * ({@code rankEnv}: CUDA_VISIBLE_DEVICES, JCCL_CUDA_DEVICE). The host is read only for auto and
     * numa: from {@code JCCL_TOPO_FILE} when the ranks have it (the host as jccl's other readers see
     * it), else from sysfs, with NVML only when CUDA_VISIBLE_DEVICES or JCCL_CUDA_DEVICE names a UUID.
     */
    static List<CpuBinding.Plan> plans(Binding binding, int np, Map<String, String> rankEnv, List<Integer> cpus) {
        Topology topo = null;
        if (binding == Binding.AUTO || binding == Binding.NUMA) {
            try {
                String file = rankEnv.get("JCCL_TOPO_FILE");
                if (file != null && !file.isBlank()) {
                    return CpuBinding.plan(binding.mode(), Topologies.read(Path.of(file.trim())), rankEnv, np, cpus);
                }
                String cvd = rankEnv.getOrDefault("CUDA_VISIBLE_DEVICES", "");
                GpuProbe probe = cvd.contains("GPU-") || cvd.contains("MIG-") || rankEnv.getOrDefault(GpuMapping.SETTING, "").contains("-")
                        ? Nvml.probe() : GpuProbe.absent("not needed: no UUID in CUDA_VISIBLE_DEVICES or JCCL_CUDA_DEVICE");
                topo = new SysfsDiscovery(Path.of("/"), rankEnv, FsStats.SYSTEM, probe, "/dev/shm").placement();
            } catch (RuntimeException e) {
                topo = null; // bound as CPU ranks on one node; the plan says so
            }
        }
        return CpuBinding.plan(binding.mode(), topo, rankEnv, np, cpus);
    }

    /** Whether JCCL_DEBUG in the ranks' environment asks for INFO lines (the launcher then says how it bound them). */
    static boolean infoWanted(Map<String, String> rankEnv) {
        try {
            return Log.parseLevel(rankEnv.get("JCCL_DEBUG")).compareTo(Log.Level.INFO) >= 0;
        } catch (RuntimeException e) {
            return false;
        }
    }
}
