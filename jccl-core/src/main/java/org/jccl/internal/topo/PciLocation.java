package org.jccl.internal.topo;

import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Where a device sits in the PCI tree, read from its sysfs path, e.g.
 * {@code /sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:00.0/0000:1b:00.0}: the chain is
 * {@code [pci0000:17, 0000:17:01.0, 0000:18:00.0, 0000:19:00.0, 0000:1b:00.0]}, host bridge first,
 * then each bridge (root port, switch upstream port, switch downstream port, ...), the device last.
 *
 * @param address the device's own PCI address ({@code 0000:1b:00.0}), or null for a virtual device
 * @param chain host bridge, bridges and the device, in that order (empty for a virtual device)
 * @param numaNode the NUMA node sysfs reports for the device, -1 when unknown
 */
public record PciLocation(String address, List<String> chain, int numaNode) {

    /** A PCI address (domain:bus:device.function), lower case. */
    static final Pattern BDF = Pattern.compile("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
    /** A PCI host bridge directory under /sys/devices. */
    static final Pattern HOST_BRIDGE = Pattern.compile("pci[0-9a-f]{4}:[0-9a-f]{2}");

    /** A device that is not on PCI (loopback, a bridge made by software). */
    public static final PciLocation VIRTUAL = new PciLocation(null, List.of(), -1);

    public PciLocation {
        chain = List.copyOf(chain);
    }

    /** Whether the device is on PCI at all. */
    public boolean onPci() {
        return address != null && chain.size() >= 2;
    }

    /**
     * The location whose sysfs path is {@code devicePath} (relative to {@code /sys/devices}, or
     * absolute: everything up to the host bridge is ignored). The device is the deepest PCI address
     * on the path: for a network interface {@code .../0000:00:03.0/virtio2/net/eth0} it is
     * {@code 0000:00:03.0}.
     */
    public static PciLocation fromSysfsPath(String devicePath, int numaNode) {
        String[] parts = devicePath.replace('\\', '/').split("/");
        java.util.ArrayList<String> chain = new java.util.ArrayList<>();
        for (String p : parts) {
            String q = p.toLowerCase(java.util.Locale.ROOT);
            if (HOST_BRIDGE.matcher(q).matches()) {
                chain.clear();
                chain.add(q);
            } else if (!chain.isEmpty() && BDF.matcher(q).matches()) {
                chain.add(q);
            }
        }
        if (chain.size() < 2) {
            return new PciLocation(null, List.of(), numaNode);
        }
        return new PciLocation(chain.getLast(), chain, numaNode);
    }

    /** The device's parent bridge, or null. */
    String parent() {
        return chain.size() >= 2 ? chain.get(chain.size() - 2) : null;
    }

    /**
     * NCCL's path type between this device and {@code other} (see {@link PciDistance}).
     *
     * @param singleNumaNode whether the host has one NUMA node (then an unknown node means the same one)
     */
    public PciDistance distanceTo(PciLocation other, boolean singleNumaNode) {
        Objects.requireNonNull(other, "other");
        if (onPci() && other.onPci() && chain.getFirst().equals(other.chain.getFirst())) {
            int a = chain.size();
            int b = other.chain.size();
            // Same parent bridge (two functions of one card, or two ports of a switch below one bridge).
            if (parent().equals(other.parent()) && a > 2) {
                return PciDistance.PIX;
            }
            // Same switch: the downstream ports share their upstream port (a bridge, not the host bridge).
            if (a >= 4 && b >= 4 && chain.get(a - 3).equals(other.chain.get(b - 3))) {
                return PciDistance.PIX;
            }
            int common = 0;
            while (common < Math.min(a, b) - 1 && chain.get(common).equals(other.chain.get(common))) {
                common++;
            }
            // Common prefix beyond the host bridge: a shared root port, so the CPU is not crossed.
            return common >= 2 ? PciDistance.PXB : PciDistance.PHB;
        }
        if (numaNode >= 0 && numaNode == other.numaNode) {
            return PciDistance.PHB;
        }
        if ((numaNode < 0 || other.numaNode < 0) && singleNumaNode) {
            return PciDistance.PHB;
        }
        return PciDistance.SYS;
    }
}
