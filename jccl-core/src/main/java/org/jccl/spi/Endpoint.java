package org.jccl.spi;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;

/**
 * One rank's presence on one transport for one communicator: for TCP a listening socket and its
 * acceptor. Opened before bootstrap so that its {@link #address()} can be published to every peer.
 *
 * <p><b>Registration and one-sided puts</b> (optional; all defaults say "not supported"). A transport
 * that offers them registers memory here ({@link #register(MemorySegment)}, {@link #register(long, long,
 * MemoryType)}) or allocates memory peers can write ({@link #allocate(long)}); the returned {@link
 * RegisteredRegion}'s packed key travels to a peer by any message, the peer's {@link Connection#unpack}
 * makes a {@link RemoteRegion} of it, and {@link Connection#put} / {@link Connection#flush} write into it.
 * Capabilities are asked first ({@link #canRegister}, {@link #canAllocate}, {@link Connection#supportsPut});
 * a call to an unsupported one throws {@link OneSidedUnsupportedException} naming the transport.
 * Registration is expensive on RDMA hardware: a transport may keep a {@link RegistrationCache}.
 *
 * <p><b>Threading contract:</b> {@code connect}, {@code register}, {@code allocate} and
 * {@code armWakeFd} are called by the thread that runs the owning communicator's operations (the
 * caller's thread or the communicator's operation thread, one at a time, as for {@link Connection});
 * {@code prepare} by the thread creating the communicator. {@link #close()} may come from any
 * thread (an abort) and releases every region registered here.
 */
public interface Endpoint extends AutoCloseable {

    /** The opaque address peers use to reach this endpoint (published in {@link PeerInfo#addresses()}). */
    byte[] address();

    /**
     * Returns the connection to {@code peerRank}, establishing it if needed. May block for a bounded
     * time (the connect timeout) while the link is set up and authenticated; called by the thread
     * running the communicator's operations the first time it needs that peer.
     *
     * @throws IOException when the peer cannot be reached or does not authenticate in time
     */
    Connection connect(int peerRank) throws IOException;

    /**
     * Called once at communicator creation, after bootstrap, with the peers the runtime routes over
     * this transport (possibly none), before any {@link #connect}. Transports that need per-peer
     * resources (shared-memory rings) reserve them here, so that a shortage fails creation with a
     * clear error instead of a later operation. May block for a bounded time (the connect timeout)
     * waiting for the peers' own preparation. Default: nothing.
     *
     * @throws IOException when the resources cannot be set up; {@link org.jccl.JcclException}s
     *         (e.g. a {@link org.jccl.ResourceException} for a full file system) pass through unchanged
     */
    default void prepare(int[] peers) throws IOException {
    }

    /**
     * A file descriptor that becomes readable when this endpoint has work, for a transport whose work
     * is not signalled through a Java channel ({@link Connection#channels()}): UCX's worker event fd.
     * The runtime never reads or closes it: a watcher thread of its own polls it while the thread
     * running the communicator's operations waits idle, and wakes that thread when it becomes readable
     * (before {@link #close()} the watcher has stopped). -1, the default: none.
     */
    default int wakeFd() {
        return -1;
    }

    /**
     * Called by the thread running the communicator's operations just before it blocks with nothing
     * to do, when {@link #wakeFd()} is not -1: re-arms the descriptor so that the next event makes it
     * readable (UCX's {@code ucp_worker_arm}). Returns false when work arrived since the last progress
     * (UCX's BUSY): the runtime then progresses again instead of blocking. Never concurrently with the
     * connections' progress; the default returns true.
     */
    default boolean armWakeFd() {
        return true;
    }

    /**
     * For messages: the transport's name ("TCP", "SHM"). The default is the class's simple name;
     * transports override it.
     */
    default String transportName() {
        return getClass().getSimpleName();
    }

    /**
     * The memory types this endpoint's connections take as the local memory of their operations (send
     * and receive buffers, put sources) and, where {@link #canRegister} says so, register. Default: host
     * memory only. jccl-cuda asks it whether device memory can move without staging (GPUDirect RDMA).
     */
    default Set<MemoryType> memoryTypes() {
        return EnumSet.of(MemoryType.HOST);
    }

    /**
     * Whether {@link #register(MemorySegment)} (for {@link MemoryType#HOST}) or {@link #register(long, long,
     * MemoryType)} (for device memory) accepts memory of {@code type}. Default: false.
     */
    default boolean canRegister(MemoryType type) {
        return false;
    }

    /** Whether {@link #allocate(long)} is offered. Default: false. */
    default boolean canAllocate() {
        return false;
    }

    /**
     * Registers host memory of this process for peers to put into. The segment must be native (not a heap
     * array) and accessible from any thread (not of a confined arena: operations run on the caller's
     * thread or the operation thread); it must stay valid until the region is closed. A transport may
     * hand out a region of a larger registration it already holds (a {@link RegistrationCache} hit);
     * the returned region still describes exactly {@code memory}.
     *
     * @throws OneSidedUnsupportedException when {@link #canRegister canRegister(HOST)} is false (the
     *         default), with the transport's name and what to do instead
     * @throws IllegalArgumentException for heap or confined memory
     * @throws IOException when the registration fails (RDMA: locked-memory limit)
     */
    default RegisteredRegion register(MemorySegment memory) throws IOException {
        throw new OneSidedUnsupportedException(transportName(), "memory registration", null);
    }

    /**
     * Registers memory the JVM does not address, by address and length: device memory ({@link
     * MemoryType#CUDA}). Host memory is always registered as a segment, with {@link #register(MemorySegment)}.
     *
     * @throws OneSidedUnsupportedException when {@link #canRegister canRegister(type)} is false (the default)
     * @throws IllegalArgumentException for {@link MemoryType#HOST} (use the segment form) or a bad range
     * @throws IOException when the registration fails
     */
    default RegisteredRegion register(long address, long length, MemoryType type) throws IOException {
        if (type == MemoryType.HOST && canRegister(MemoryType.HOST)) {
            throw new IllegalArgumentException(transportName() + ": host memory is registered as a MemorySegment, with register(MemorySegment)");
        }
        throw new OneSidedUnsupportedException(transportName(), "registration of " + type + " memory", null);
    }

    /**
     * Allocates {@code length} bytes of host memory that peers can write, registered (UCX's {@code
     * ucp_mem_map} with its ALLOCATE flag). The memory is zeroed and is freed by the region's close. A
     * transport that can only give peers memory it made itself (shared memory between processes) offers
     * this and not {@link #register(MemorySegment)}.
     *
     * @throws OneSidedUnsupportedException when {@link #canAllocate()} is false (the default)
     * @throws IllegalArgumentException when {@code length} is negative
     * @throws IOException when the memory cannot be had; a full file system or memory limit is an
     *         {@link org.jccl.ResourceException} naming the sizes and the fix
     */
    default RegisteredRegion allocate(long length) throws IOException {
        throw new OneSidedUnsupportedException(transportName(), "allocation of registered memory", null);
    }

    /** Closes the endpoint and every connection it made, and deregisters every region registered or allocated here. Idempotent. */
    @Override
    void close();
}
