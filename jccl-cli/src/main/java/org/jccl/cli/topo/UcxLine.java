package org.jccl.cli.topo;

import org.jccl.internal.doctor.Doctor;
import org.jccl.internal.topo.Topology;
import org.jccl.ucx.Ucx;

/** The UCX lines of {@code jccl topo} and {@code jccl doctor}: found or not (and why), version, transports and devices. */
final class UcxLine {
    private UcxLine() {
    }

    /**
     * Whether the command describes this host (no {@code --root}, no saved topology in JCCL_TOPO_FILE): only then is
     * the UCX this process can load the one to report.
     */
    static boolean thisHost(java.util.Map<String, String> env) {
        String f = env.get("JCCL_TOPO_FILE");
        return f == null || f.isBlank();
    }

    /** "UCX: UCX 1.13.1 (...): transports tcp/lo, ...; CUDA memory: no" or "UCX: unavailable: why". */
    static String topoLine() {
        return "UCX: " + Ucx.status().describe();
    }

    /**
     * The doctor's {@code ucx} finding: PASS when UCX is usable; WARN when it is not although the host has an
     * active RDMA port (traffic between hosts then goes over TCP); SKIP when neither is there.
     */
    static Doctor.Finding finding(Topology t) {
        Ucx.Status s = Ucx.status();
        if (s.available()) {
            return new Doctor.Finding("ucx", Doctor.Status.PASS, s.describe(), "");
        }
        boolean rdma = t.rdmaDevices().stream().anyMatch(Topology.RdmaDevice::active);
        if (rdma) {
            return new Doctor.Finding("ucx", Doctor.Status.WARN, "this host has active RDMA ports, but " + s.describe()
                    + "; jccl's TCP carries the traffic between hosts", "install UCX 1.13+ (apt-get install libucx0, or HPC-X with JCCL_UCX_HOME)");
        }
        return new Doctor.Finding("ucx", Doctor.Status.SKIP, s.describe() + " (no active RDMA port here: TCP carries the traffic between hosts)", "");
    }
}
