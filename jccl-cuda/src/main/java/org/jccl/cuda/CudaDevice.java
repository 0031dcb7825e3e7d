package org.jccl.cuda;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.cuda.internal.CudaDriver;

/**
 * One GPU, through its primary context (the context the CUDA runtime and PyTorch use too, so
 * memory and streams can be shared with them). Obtain with {@link Cuda#device(int)}.
 */
public final class CudaDevice {
    private final int ordinal;
    private final int handle;
    private final String name;
    private final String pciBusId;
    private final String uuid;
    private final int smCount;
    private final int ccMajor;
    private final int ccMinor;
    private volatile MemorySegment context;
    /**
     * Why jccl's rule chose this GPU for local rank {@code chosenFor.localRank} ({@link Cuda#deviceFor}), for the INIT line and
     * the claims table; null until the rule chose it. Keyed by local rank because one device object serves every thread of
     * the process: a rank that was handed this GPU by the program must not report another rank's reason.
     */
    private volatile Choice chosenFor;

    private record Choice(int localRank, String why) {
    }

    CudaDevice(int ordinal) {
        this.ordinal = ordinal;
        this.handle = CudaDriver.deviceGet(ordinal);
        this.name = CudaDriver.deviceName(handle);
        this.pciBusId = CudaDriver.pciBusId(handle);
        this.uuid = CudaDriver.uuid(handle);
        this.smCount = CudaDriver.deviceAttribute(handle, CudaDriver.ATTR_MULTIPROCESSOR_COUNT);
        this.ccMajor = CudaDriver.deviceAttribute(handle, CudaDriver.ATTR_COMPUTE_CAPABILITY_MAJOR);
        this.ccMinor = CudaDriver.deviceAttribute(handle, CudaDriver.ATTR_COMPUTE_CAPABILITY_MINOR);
    }

    /** Records why jccl's rule chose this GPU for {@code localRank} ({@link Cuda#deviceFor}). */
    void chosenBecause(int localRank, String why) {
        chosenFor = new Choice(localRank, why);
    }

    /**
     * Why jccl's rule chose this GPU for {@code localRank}, or "given by the program" when the rule chose it for no rank or
     * for another local rank (the program passed it in).
     */
    String chosenBecause(int localRank) {
        Choice c = chosenFor;
        return c == null || c.localRank() != localRank ? "given by the program" : c.why();
    }

    /** This GPU as {@link org.jccl.internal.topo.GpuMapping} sees it. */
    org.jccl.internal.topo.GpuMapping.Device mappingDevice() {
        return new org.jccl.internal.topo.GpuMapping.Device(ordinal, pciBusId, uuid);
    }

    /** This GPU as the internal layer takes it (its primary context retained). */
    org.jccl.cuda.internal.Gpu gpu() {
        return new org.jccl.cuda.internal.Gpu(ordinal, context(), toString(), uuid, pciBusId, smCount, computeCapability());
    }

    /** CUDA ordinal (among visible GPUs). */
    public int ordinal() {
        return ordinal;
    }

    /** Product name, e.g. "NVIDIA H200". */
    public String name() {
        return name;
    }

    /** PCI bus id, e.g. 0000:18:00.0. */
    public String pciBusId() {
        return pciBusId;
    }

    /** The GPU's UUID as nvidia-smi -L prints it: {@code GPU-...}, or {@code MIG-...} for a MIG instance. */
    public String uuid() {
        return uuid;
    }

    /** Number of streaming multiprocessors. */
    public int multiprocessorCount() {
        return smCount;
    }

    /** Compute capability, e.g. "9.0". */
    public String computeCapability() {
        return ccMajor + "." + ccMinor;
    }

    public int computeCapabilityMajor() {
        return ccMajor;
    }

    /** Total device memory in bytes. */
    public long totalMemory() {
        return CudaDriver.totalMem(handle);
    }

    /** The driver's CUdevice handle. */
    public int handle() {
        return handle;
    }

    /** Makes this GPU's primary context current on the calling thread (retaining it the first time). */
    public void makeCurrent() {
        CudaDriver.ctxSetCurrent(context());
    }

    /** The primary context (CUcontext). */
    public MemorySegment context() {
        MemorySegment c = context;
        if (c == null) {
            synchronized (this) {
                c = context;
                if (c == null) {
                    c = CudaDriver.primaryCtxRetain(handle);
                    context = c;
                }
            }
        }
        return c;
    }

    /** Whether this GPU can map {@code other}'s memory (NVLink or PCIe peer-to-peer). */
    public boolean canAccessPeer(CudaDevice other) {
        return other == this || CudaDriver.canAccessPeer(handle, other.handle);
    }

    /** Allocates {@code count} elements of {@code type} of device memory (cuMemAlloc, 256-byte aligned), not initialised. */
    public DeviceBuffer allocate(long count, DataType type) {
        if (count < 0) {
            throw new IllegalArgumentException("count must be >= 0, got " + count);
        }
        long bytes = Math.max(type.bytes(count), 1);
        makeCurrent();
        long p = CudaDriver.memAlloc(bytes);
        return new DeviceBuffer(this, p, count, type, true);
    }

    /** A new non-blocking stream on this GPU. */
    public CudaStream createStream() {
        makeCurrent();
        return new CudaStream(this, CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING), true);
    }

    /** Waits until every stream of this GPU's primary context is idle. */
    public void synchronize() {
        makeCurrent();
        CudaDriver.ctxSynchronize();
    }

    @Override
    public String toString() {
        return "GPU " + ordinal + " (" + name + ", " + pciBusId + ")";
    }
}
