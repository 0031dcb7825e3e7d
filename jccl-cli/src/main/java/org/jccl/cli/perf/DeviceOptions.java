package org.jccl.cli.perf;

import java.util.List;
import java.util.Locale;
import org.jccl.Communicator;
import org.jccl.cuda.CudaDevice;
import org.jccl.cuda.CudaCommunicator;
import org.jccl.cuda.DeviceCommunicator;
import org.jccl.cuda.NcclCommunicator;

/**
 * Where {@code jccl perf} runs the collectives: host memory (the default), or GPU memory through
 * jccl's kernels or NCCL.
 *
 * @param gpu true for GPU memory (--device cuda, or implied by -g or --backend nccl)
 * @param ngpus GPUs this process drives (-g), or 0 when -g was not given (one GPU per process)
 * @param backend which device communicator to measure
 */
record DeviceOptions(boolean gpu, int ngpus, Backend backend) {

    /** Host memory: the CPU benchmark. */
    static final DeviceOptions CPU = new DeviceOptions(false, 0, Backend.JCCL);

    /** The device communicators {@code --backend} picks from. */
    enum Backend {
        /** jccl's own kernels ({@link CudaCommunicator}). */
        JCCL,
        /** NCCL through FFM ({@link NcclCommunicator}). */
        NCCL;

        /** The flag's spelling. */
        String flag() {
            return name().toLowerCase(Locale.ROOT);
        }

        /** Why this backend cannot run here (its library is missing), or null. */
        String unavailableReason() {
            if (this == NCCL && !NcclCommunicator.isAvailable()) {
                String why = NcclCommunicator.unavailableReason();
                return "--backend nccl needs NCCL: " + (why != null ? why : "libnccl.so.2 cannot be loaded");
            }
            return null;
        }

        /** One communicator per device, rank i on devices.get(i) (ncclCommInitAll). */
        List<? extends DeviceCommunicator> createAll(List<CudaDevice> devices) {
            return this == JCCL ? CudaCommunicator.createAll(devices) : NcclCommunicator.createAll(devices);
        }

        /** This process's rank of a job over {@code host}, on {@code device}; collective over the host communicator. */
        DeviceCommunicator create(Communicator host, CudaDevice device) {
            return this == JCCL ? CudaCommunicator.create(host, device) : NcclCommunicator.create(host, device);
        }
    }

    /**
     * Validates the GPU flags as typed (null when not given).
     *
     * @throws IllegalArgumentException naming the flag, for values or combinations that make no sense
     */
    static DeviceOptions parse(String device, Integer ngpus, String backend) {
        Boolean cuda = null;
        if (device != null) {
            cuda = switch (device.trim().toLowerCase(Locale.ROOT)) {
                case "cpu" -> false;
                case "cuda" -> true;
                default -> throw new IllegalArgumentException("--device '" + device + "' is not cpu or cuda");
            };
        }
        Backend b = Backend.JCCL;
        if (backend != null) {
            b = switch (backend.trim().toLowerCase(Locale.ROOT)) {
                case "jccl" -> Backend.JCCL;
                case "nccl" -> Backend.NCCL;
                default -> throw new IllegalArgumentException("--backend '" + backend + "' is not jccl or nccl");
            };
        }
        if (ngpus != null && ngpus < 1) {
            throw new IllegalArgumentException("-g/--ngpus must be at least 1, got " + ngpus);
        }
        if (Boolean.FALSE.equals(cuda)) {
            if (ngpus != null) {
                throw new IllegalArgumentException("-g/--ngpus " + ngpus + " drives GPUs: it cannot be combined with --device cpu");
            }
            if (b == Backend.NCCL) {
                throw new IllegalArgumentException("--backend nccl runs on GPUs: it cannot be combined with --device cpu");
            }
        }
        boolean gpu = Boolean.TRUE.equals(cuda) || ngpus != null || b == Backend.NCCL;
        return gpu ? new DeviceOptions(true, ngpus == null ? 0 : ngpus, b) : CPU;
    }

    /** GPUs per process: -g, or 1. */
    int gpusPerProcess() {
        return ngpus > 0 ? ngpus : 1;
    }
}
