package org.jccl.cuda;

import java.util.ArrayList;
import java.util.List;
import org.jccl.cuda.internal.CudaDriver;

/**
 * Entry point to the GPUs of this process, through the CUDA driver ({@code libcuda.so.1}, loaded
 * the first time this class is used). On a machine without an NVIDIA driver or GPU, {@link
 * #isAvailable()} is false and {@link #unavailableReason()} says why; nothing else is affected.
 *
 * <p>Device ordinals are CUDA's: they count the GPUs that {@code CUDA_VISIBLE_DEVICES} leaves
 * visible, in its order.
 */
public final class Cuda {
    private static volatile CudaDevice[] devices;

    private Cuda() {
    }

    /** Whether the CUDA driver loaded, initialised, and sees at least one GPU. */
    public static boolean isAvailable() {
        return CudaDriver.available() && CudaDriver.deviceCount() > 0;
    }

    /** Why {@link #isAvailable()} is false, or null when it is true. */
    public static String unavailableReason() {
        if (!CudaDriver.available()) {
            return CudaDriver.problem();
        }
        if (CudaDriver.deviceCount() == 0) {
            return "the CUDA driver sees no GPU (CUDA_VISIBLE_DEVICES=" + System.getenv("CUDA_VISIBLE_DEVICES") + ")";
        }
        return null;
    }

    /** The driver's version as CUDA encodes it (1000 * major + 10 * minor), e.g. 13000. */
    public static int driverVersion() {
        return CudaDriver.driverVersion();
    }

    /** Number of visible GPUs. */
    public static int deviceCount() {
        return devices().length;
    }

    /** The GPU with CUDA ordinal {@code ordinal}. */
    public static CudaDevice device(int ordinal) {
        CudaDevice[] all = devices();
        if (ordinal < 0 || ordinal >= all.length) {
            throw new IllegalArgumentException("GPU " + ordinal + " does not exist: " + all.length + " GPU(s) are visible"
                    + visibleNote());
        }
        return all[ordinal];
    }

    /** Every visible GPU, in ordinal order. */
    public static List<CudaDevice> devicesList() {
        return List.of(devices());
    }

    /**
     * The GPU of a process whose local rank (its index among the job's processes on this host) is
     * {@code localRank}: GPU {@code localRank} of those CUDA_VISIBLE_DEVICES leaves visible. The
     * choice is logged; more local ranks than visible GPUs is an error that names both numbers,
     * never a silent sharing of one GPU.
     */
    public static CudaDevice deviceForLocalRank(int localRank) {
        int n = deviceCount();
        if (localRank < 0 || localRank >= n) {
            throw new org.jccl.InvalidUsageException("local rank " + localRank + " has no GPU of its own: " + n
                    + " GPU(s) are visible" + visibleNote() + "; start at most " + n + " ranks per host, or give each process"
                    + " its own CUDA_VISIBLE_DEVICES");
        }
        CudaDevice d = device(localRank);
        org.jccl.internal.log.Log.info(org.jccl.internal.log.Log.Subsys.INIT, localRank, "local rank " + localRank + " -> " + d
                + " " + d.uuid() + visibleNote());
        return d;
    }

    static String visibleNote() {
        String cvd = System.getenv("CUDA_VISIBLE_DEVICES");
        return cvd == null ? "" : " (CUDA_VISIBLE_DEVICES=" + cvd + ")";
    }

    private static CudaDevice[] devices() {
        CudaDevice[] d = devices;
        if (d == null) {
            synchronized (Cuda.class) {
                d = devices;
                if (d == null) {
                    if (!CudaDriver.available()) {
                        throw new CudaException("CUDA is not available: " + CudaDriver.problem());
                    }
                    int n = CudaDriver.deviceCount();
                    List<CudaDevice> list = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        list.add(new CudaDevice(i));
                    }
                    d = list.toArray(new CudaDevice[0]);
                    devices = d;
                }
            }
        }
        return d;
    }
}
