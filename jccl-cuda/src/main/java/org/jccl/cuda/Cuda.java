package org.jccl.cuda;

import java.util.ArrayList;
import java.util.List;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.cuda.internal.CudaDriver;
import org.jccl.internal.config.Settings;
import org.jccl.internal.runtime.HostPeers;
import org.jccl.internal.topo.GpuMapping;

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
     * {@code localRank}, by jccl's rule ({@link GpuMapping}) with the number of ranks on the host
     * unknown: {@code JCCL_CUDA_DEVICE} when set, else the only visible GPU, else GPU {@code localRank}
     * of those CUDA_VISIBLE_DEVICES leaves visible. A local rank without a GPU of its own is an error
     * that names the rank, the GPUs and the fixes, never a silent sharing of one GPU.
     */
    public static CudaDevice deviceForLocalRank(int localRank) {
        return deviceFor(localRank, -1, Config.fromEnvironment());
    }

    /**
     * The GPU of local rank {@code localRank} of {@code localSize} (-1: unknown) by jccl's rule
     * ({@link GpuMapping}): {@code JCCL_CUDA_DEVICE} of {@code config} when set; else the only GPU this
     * process sees; else, when it sees at least {@code localSize} GPUs, GPU {@code localRank} of them.
     *
     * @throws org.jccl.InvalidUsageException when the rule gives none, naming local rank, local size,
     *         the visible GPUs, CUDA_VISIBLE_DEVICES and the fixes
     */
    public static CudaDevice deviceFor(int localRank, int localSize, Config config) {
        GpuMapping.Choice c = select(localRank, localSize, config).orThrow();
        CudaDevice d = device(c.device().ordinal());
        d.chosenBecause(localRank, c.why());
        return d;
    }

    /**
     * The GPU this rank of {@code host} drives, by jccl's rule ({@link GpuMapping}), with its local
     * rank from the launcher (JCCL_LOCAL_RANK, LOCAL_RANK, ...; else its place among the ranks of
     * its host in {@code host}) and the number of ranks of its host from {@code host}'s peer table
     * (host identities, so JCCL_HOSTID counts). This is what {@code jccl perf --device cuda} uses.
     */
    public static CudaDevice deviceFor(Communicator host) {
        return deviceFor(host, Config.fromEnvironment());
    }

    /** {@link #deviceFor(Communicator)} with {@code JCCL_CUDA_DEVICE} and the launcher's local rank from {@code config}. */
    public static CudaDevice deviceFor(Communicator host, Config config) {
        int[] place = localPlace(host, config);
        return deviceFor(place[0], place[1], config);
    }

    /** The rule's answer for this process, without throwing: the choice, or the error with its fixes. */
    public static GpuMapping.Result select(int localRank, int localSize, Config config) {
        List<GpuMapping.Device> visible = new ArrayList<>();
        for (CudaDevice d : devices()) {
            visible.add(d.mappingDevice());
        }
        return GpuMapping.choose(visible, Settings.CUDA_DEVICE.getString(config), localRank, localSize,
                System.getenv("CUDA_VISIBLE_DEVICES"));
    }

    /** {@link #select(int, int, Config)} for the rank of {@code host}, placed as {@link #deviceFor(Communicator, Config)} places it. */
    public static GpuMapping.Result select(Communicator host, Config config) {
        int[] place = localPlace(host, config);
        return select(place[0], place[1], config);
    }

    /**
     * {local rank, local size} of {@code host}'s rank: the launcher's local rank when it gave one,
     * else the rank's place among the ranks of its host identity; the size from the peer table (-1
     * when the launcher's local rank does not fit it, as when JCCL_HOSTID splits one machine).
     */
    static int[] localPlace(Communicator host, Config config) {
        HostPeers.Layout l = HostPeers.of(host);
        int launcher = config.launch().map(Config.Launch::localRank).orElse(-1);
        int local = launcher >= 0 ? launcher : l.localRank();
        int size = l.localSize();
        if (size > 0 && local >= size) {
            size = -1;
        }
        return new int[] {local, size};
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
