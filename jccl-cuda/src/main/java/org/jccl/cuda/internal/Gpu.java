package org.jccl.cuda.internal;

import java.lang.foreign.MemorySegment;

/**
 * What this package needs to know of a GPU, handed down by the public {@code CudaDevice} (so that
 * the internal layer does not depend on the public one).
 *
 * @param ordinal the CUDA ordinal among the visible GPUs
 * @param context its primary context (retained)
 * @param label how messages name it ("GPU 0 (NVIDIA H200, 0000:18:00.0)")
 * @param multiprocessors its SM count
 * @param computeCapability "9.0"
 */
public record Gpu(int ordinal, MemorySegment context, String label, String uuid, String pciBusId, int multiprocessors,
                  String computeCapability) {

    /** Makes the GPU's primary context current on the calling thread. */
    public void makeCurrent() {
        CudaDriver.ctxSetCurrent(context);
    }

    @Override
    public String toString() {
        return label;
    }
}
