package org.jccl.spi;

/**
 * Where the bytes of a buffer live, as a transport needs to know it: the JVM can read host memory
 * through a {@link java.lang.foreign.MemorySegment}, but device memory only through a driver or a
 * network card that can reach it (GPUDirect RDMA). UCX's {@code ucs_memory_type_t} makes the same
 * distinction ({@code UCS_MEMORY_TYPE_HOST}, {@code UCS_MEMORY_TYPE_CUDA}).
 *
 * <p>A transport states which types it takes with {@link Endpoint#memoryTypes()},
 * {@link Connection#memoryTypes()} and {@link Endpoint#canRegister(MemoryType)}; every transport
 * takes {@link #HOST}.
 */
public enum MemoryType {
    /** Ordinary (native, off-heap) memory of the process, given to the SPI as a {@code MemorySegment}. */
    HOST,
    /**
     * Memory of a CUDA device (a {@code CUdeviceptr} from {@code cuMemAlloc}), given to the SPI as an
     * address and a length; the JVM never reads or writes it.
     */
    CUDA
}
