package org.jccl.cuda.testing;

import java.util.List;
import org.jccl.Communicator;
import org.jccl.cuda.CudaCommunicator;
import org.jccl.cuda.CudaDevice;
import org.jccl.cuda.DeviceCommunicator;
import org.jccl.cuda.NcclCommunicator;

/** The two {@link DeviceCommunicator} implementations: jccl's kernels, and NCCL as a check of the test itself. */
public enum Backend {
    JCCL("jccl"),
    NCCL("nccl");

    private final String label;

    Backend(String label) {
        this.label = label;
    }

    /** Whether this backend can run here (NCCL needs libnccl.so.2). */
    public boolean available() {
        return this == JCCL || NcclCommunicator.isAvailable();
    }

    /** Why not, or null. */
    public String unavailableReason() {
        return this == JCCL ? null : NcclCommunicator.unavailableReason();
    }

    /** One communicator per device, rank i on devices.get(i) (ncclCommInitAll). */
    public List<DeviceCommunicator> createAll(List<CudaDevice> devices) {
        return switch (this) {
            case JCCL -> List.copyOf(CudaCommunicator.createAll(devices));
            case NCCL -> List.copyOf(NcclCommunicator.createAll(devices));
        };
    }

    /** This rank's communicator over a host communicator (one rank per process or thread). */
    public DeviceCommunicator create(Communicator host, CudaDevice device) {
        return switch (this) {
            case JCCL -> CudaCommunicator.create(host, device);
            case NCCL -> NcclCommunicator.create(host, device);
        };
    }

    /** Parses "jccl" or "nccl". */
    public static Backend parse(String s) {
        for (Backend b : values()) {
            if (b.label.equalsIgnoreCase(s.trim())) {
                return b;
            }
        }
        throw new IllegalArgumentException("unknown backend '" + s + "': use jccl or nccl");
    }

    @Override
    public String toString() {
        return label;
    }
}
