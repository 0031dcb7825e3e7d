package org.jccl.cli.topo;

import java.nio.file.Path;
import java.util.Map;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.internal.topo.FsStats;
import org.jccl.internal.topo.GpuProbe;
import org.jccl.internal.topo.Nvml;
import org.jccl.internal.topo.SysfsDiscovery;
import org.jccl.internal.topo.Topologies;
import org.jccl.internal.topo.Topology;

/** The topology both commands look at: JCCL_TOPO_FILE, else discovery under {@code root} (/ by default). */
final class HostView {
    private HostView() {
    }

    /** NVML when the topology is this machine's own, else a probe saying why not. */
    static GpuProbe probe(Config config, Path root) {
        if (root != null) {
            return GpuProbe.absent("--root " + root + " describes another tree; NVML would describe this machine, so it is not used");
        }
        String file = Settings.TOPO_FILE.getString(config);
        if (file != null && !file.isBlank()) {
            return GpuProbe.absent("JCCL_TOPO_FILE=" + file + " describes a saved host; NVML would describe this machine, so it is not used");
        }
        return Nvml.probe();
    }

    static Topology topology(Config config, Map<String, String> env, Path root) {
        Path r = root == null ? Path.of("/") : root;
        GpuProbe probe = probe(config, root);
        return Topologies.obtain(config, () -> new SysfsDiscovery(r, env, FsStats.SYSTEM, probe, Settings.SHM_DIR.getString(config))
                .discover());
    }
}
