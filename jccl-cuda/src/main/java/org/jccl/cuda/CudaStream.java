package org.jccl.cuda;

import java.lang.foreign.MemorySegment;
import org.jccl.cuda.internal.CudaDriver;

/**
 * A CUDA stream of one GPU. jccl's device collectives are enqueued on the caller's stream and
 * return without waiting for the GPU, as NCCL's do; {@link #synchronize()} waits.
 */
public final class CudaStream implements AutoCloseable {
    private final CudaDevice device;
    private final MemorySegment handle;
    private final boolean owned;
    private volatile boolean closed;

    CudaStream(CudaDevice device, MemorySegment handle, boolean owned) {
        this.device = device;
        this.handle = handle;
        this.owned = owned;
    }

    /**
     * Wraps a stream created elsewhere (the CUDA runtime, PyTorch's {@code cuda_stream}), by its
     * CUstream address; jccl never destroys it.
     */
    public static CudaStream wrap(CudaDevice device, long cuStream) {
        return new CudaStream(device, MemorySegment.ofAddress(cuStream), false);
    }

    public CudaDevice device() {
        return device;
    }

    /** The CUstream handle. */
    public MemorySegment handle() {
        return handle;
    }

    /** Waits for everything enqueued so far. */
    public void synchronize() {
        device.makeCurrent();
        CudaDriver.streamSynchronize(handle);
    }

    /** Whether everything enqueued so far has finished. */
    public boolean isIdle() {
        device.makeCurrent();
        return CudaDriver.streamQuery(handle);
    }

    /** Destroys the stream if jccl created it. */
    @Override
    public void close() {
        if (owned && !closed) {
            closed = true;
            device.makeCurrent();
            CudaDriver.streamDestroy(handle);
        }
    }

    @Override
    public String toString() {
        return "stream " + handle + " on " + device;
    }
}
