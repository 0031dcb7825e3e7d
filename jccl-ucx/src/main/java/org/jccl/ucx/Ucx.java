package org.jccl.ucx;

import java.util.List;
import org.jccl.ucx.internal.UcxProbe;

/**
 * Whether UCX is usable by this process and what it offers, as {@code jccl doctor} and {@code jccl topo}
 * report it. Asking loads UCX (once per process) through the transport's own gate, so the answer is the one
 * the transport gets.
 */
public final class Ucx {
    private Ucx() {
    }

    /**
     * What was found.
     *
     * @param available whether the transport can use UCX here
     * @param version "1.13.1", or null when UCX could not be loaded
     * @param library the libucp loaded, or null
     * @param reason why UCX is unavailable (null when available)
     * @param transports UCX's transports and devices as a context sees them with the environment's UCX_* settings
     *        ("tcp/eth0", "posix/memory", "rc_mlx5/mlx5_0:1"); empty when unavailable or a context could not be made
     * @param cudaMemory whether this UCX takes CUDA memory (built with CUDA): GPUDirect RDMA needs it
     * @param notes what loading did about UCX's signal handlers and the numeric locale
     */
    public record Status(boolean available, String version, String library, String reason, List<String> transports, boolean cudaMemory,
                         List<String> notes) {
        public Status {
            transports = List.copyOf(transports);
            notes = List.copyOf(notes);
        }

        /** One line: "UCX 1.13.1 (/usr/lib/.../libucp.so.0): tcp/lo, tcp/eth0, ...; CUDA memory: no" or "UCX unavailable: why". */
        public String describe() {
            if (!available) {
                return "UCX unavailable: " + reason;
            }
            return "UCX " + version + " (" + library + "): transports " + (transports.isEmpty() ? "(none listed)" : String.join(", ", transports))
                    + "; CUDA memory: " + (cudaMemory ? "yes" : "no (GPUDirect RDMA impossible with this UCX)");
        }
    }

    /** Loads UCX if needed and reports. Never throws. */
    public static Status status() {
        return UcxProbe.status();
    }
}
