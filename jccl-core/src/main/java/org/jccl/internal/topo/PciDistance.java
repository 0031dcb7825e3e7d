package org.jccl.internal.topo;

/**
 * How far apart two PCI devices are, NCCL's path types from nearest to farthest (nvidia-smi topo
 * -m prints the same names).
 */
public enum PciDistance {
    /** Same PCIe switch (or the same parent bridge): traffic crosses one switch, never the CPU. */
    PIX("same PCIe switch"),
    /** Several PCIe switches below one root port: still never through the CPU. */
    PXB("same root port, through several PCIe switches"),
    /** Through the CPU's PCIe host bridge, on one NUMA node. */
    PHB("same NUMA node, through the CPU"),
    /** Across the inter-socket link (UPI/xGMI) or unknown: the slowest path. */
    SYS("across sockets");

    private final String meaning;

    PciDistance(String meaning) {
        this.meaning = meaning;
    }

    /** One phrase for messages, e.g. "same PCIe switch". */
    public String meaning() {
        return meaning;
    }
}
