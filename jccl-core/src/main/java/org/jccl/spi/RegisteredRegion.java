package org.jccl.spi;

import java.lang.foreign.MemorySegment;

/**
 * Memory of this rank that peers may write with one-sided {@link Connection#put puts}: made by
 * {@link Endpoint#register(MemorySegment)}, {@link Endpoint#register(long, long, MemoryType)} or
 * {@link Endpoint#allocate(long)}, and valid until {@link #close()} or until its endpoint closes.
 * UCX's counterpart is a {@code ucp_mem_h} from {@code ucp_mem_map}.
 *
 * <p>Its {@link #packedKey() remote key} is a byte string opaque to everyone but the transport that
 * made it; the runtime or the algorithm carries it to a peer (in a message of its own), where the
 * peer's connection to this rank turns it into a {@link RemoteRegion} with {@link Connection#unpack}.
 * Offsets in a {@link RemoteRegion} count from this region's {@link #address()}.
 *
 * <p><b>Threading contract:</b> created and used by the owning communicator's operation thread, like
 * {@link Connection#send}; {@link #close()} may also be called by any thread (an abort), idempotently.
 * Closing a region while a peer still puts into it is the caller's protocol error: transports that can
 * tell (LOCAL, SHM) fail later puts and unpacks with a message naming the region; others (RDMA) may
 * report a remote access error or nothing at all.
 */
public interface RegisteredRegion extends AutoCloseable {

    /** The first byte's address: a native address for {@link MemoryType#HOST}, a device pointer for {@link MemoryType#CUDA}. */
    long address();

    /** Length in bytes. */
    long length();

    /** Where the memory lives. */
    MemoryType type();

    /**
     * The memory itself, {@link #length()} bytes, for this rank to read what peers put or to fill a
     * put's source; a slice of the caller's segment for {@link Endpoint#register(MemorySegment)}.
     *
     * @throws IllegalStateException for device memory (the JVM cannot address it) or after {@link #close()}
     */
    MemorySegment segment();

    /**
     * The remote key: what a peer needs to put into this region, packed to bytes (a fresh copy). Its
     * layout is the transport's own; it may name this host, this process, this communicator and this
     * rank, and a connection refuses a key that is not for it with a message saying why.
     *
     * @throws IllegalStateException after {@link #close()}
     */
    byte[] packedKey();

    /** False once the region is deregistered (closed itself, or its endpoint closed). */
    boolean isOpen();

    /** For messages: "SHM region #3 of rank 1 (65536 B, /dev/shm/jccl-shm-...)". */
    String describe();

    /** Deregisters the region (an allocated one is freed). Idempotent; any thread. */
    @Override
    void close();
}
