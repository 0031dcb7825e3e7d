package org.jccl.internal.topo;

import java.util.List;

/**
 * What the GPU driver can tell beyond sysfs: UUIDs, NVLink peers, peer-to-peer access. {@link Nvml}
 * answers from libnvidia-ml.so.1; {@link #absent} answers nothing and says why, so that callers
 * never need to know whether the library exists. Tests supply their own.
 */
public interface GpuProbe {

    /** Whether the answers below are real. */
    boolean available();

    /** "ok" when available, else one sentence saying why not (e.g. libnvidia-ml.so.1 not found). */
    String status();

    /** The GPU's UUID ({@code GPU-...}), or empty when unknown. */
    String uuid(String busId);

    /** PCI addresses at the other end of the GPU's active NVLinks (peer GPUs or NVSwitches). */
    List<String> nvlinkPeers(String busId);

    /**
     * Whether GPU {@code busA} can read GPU {@code busB}'s memory directly (NVML's P2P read status).
     *
     * @return "OK", or the driver's reason (e.g. "not supported by the chipset"), or null when unknown
     */
    String p2pRead(String busA, String busB);

    /** A probe that knows nothing, because {@code why}. */
    static GpuProbe absent(String why) {
        return new GpuProbe() {
            @Override
            public boolean available() {
                return false;
            }

            @Override
            public String status() {
                return why;
            }

            @Override
            public String uuid(String busId) {
                return "";
            }

            @Override
            public List<String> nvlinkPeers(String busId) {
                return List.of();
            }

            @Override
            public String p2pRead(String busA, String busB) {
                return null;
            }
        };
    }
}
