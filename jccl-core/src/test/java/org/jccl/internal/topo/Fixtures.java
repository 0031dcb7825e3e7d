package org.jccl.internal.topo;

import java.nio.file.Path;
import java.util.Map;

/** The fixture hosts, discovered through the real readers. */
final class Fixtures {
    private Fixtures() {
    }

    static final long MIB = 1L << 20;
    static final long GIB = 1L << 30;

    /** Discovers fixture {@code name} expanded under {@code dir}, with {@code /dev/shm} of the given size and free space. */
    static Topology discover(String name, Path dir, Map<String, String> env, long shmTotal, long shmFree) {
        Path root = FixtureTree.expand(name, dir);
        return new SysfsDiscovery(root, env, FsStats.fixed(shmTotal, shmFree), GpuProbe.absent("no NVML in tests"), "/dev/shm").discover();
    }

    /** The same with a roomy /dev/shm and no environment. */
    static Topology discover(String name, Path dir) {
        return discover(name, dir, Map.of(), 256 * GIB, 256 * GIB);
    }
}
