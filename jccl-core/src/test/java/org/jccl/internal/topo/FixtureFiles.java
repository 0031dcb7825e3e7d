package org.jccl.internal.topo;

import java.nio.file.Path;

/** Fixture hosts as JCCL_TOPO_FILE files, for tests outside this package. */
public final class FixtureFiles {
    private FixtureFiles() {
    }

    /** Fixture {@code name} ("dgx8": 8 GPUs, 8 HCAs, two per PCIe switch pair) discovered under {@code dir}, written to a topology file there. */
    public static Path topologyFile(String name, Path dir) {
        Topology t = Fixtures.discover(name, dir.resolve("tree"));
        Path file = dir.resolve(name + ".topo.json");
        Topologies.write(t, file);
        return file;
    }
}
