package org.jccl.spi;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;

/**
 * A bidirectional, message-ordered link to one peer over one transport, owned by one communicator.
 *
 * <p>Messages are matched in order per direction: the k-th {@link #send} here is received by the
 * peer's k-th {@link #recv} on its connection to this rank. A receive of the wrong size is a
 * protocol error naming both sizes (collective arguments differing across ranks end up here, unless the
 * messages' guard words, compared first, already told the calls apart).
 *
 * <p><b>Threading contract:</b> {@code send}, {@code recv} and {@code progress} are called by the
 * thread that runs the owning communicator's operations: the caller's thread (a blocking call, a
 * thread joining a {@code Work}) or the communicator's operation thread, one at a time, in the
 * order of the executor's execution lock. So a connection is never used by two threads at once,
 * but not always by the same thread: it must not depend on thread affinity (UCX: a worker in
 * {@code UCS_THREAD_MODE_SERIALIZED}, not {@code SINGLE}). The segments of posted requests must stay valid and,
 * for sends, unmodified until the request is done. Native memory only: heap memory is staged by
 * the runtime before it reaches a connection. The one-sided methods ({@code unpack}, {@code put},
 * {@code flush}) follow the same contract.
 *
 * <p><b>One-sided puts</b> (optional; see {@link Endpoint} for registration). The peer registers a
 * region and sends its {@link RegisteredRegion#packedKey() key}; this rank {@link #unpack}s it and
 * {@link #put}s bytes at offsets of it, without the peer posting anything. A put's request completes
 * when its source may be reused; the bytes are visible at the target only after a later {@link
 * #flush()} of this connection completed. Notification is a pattern, not a call: <em>flush, wait for
 * the flush request to complete, then {@link #send} a message</em> (say the offsets written) on this
 * connection; the peer's matching {@link #recv} completes after every byte of the earlier puts is in
 * its memory, on every transport (RDMA moves puts and messages on different paths, so the send must
 * not be posted before the flush completed). Puts are not ordered with each other or with messages
 * otherwise; two puts to overlapping bytes before a flush leave either's bytes.
 */
public interface Connection extends AutoCloseable {

    /** The peer's rank in the communicator. */
    int peer();

    /** For logs: "TCP 10.0.0.2:41234 (2 sockets)". */
    String describe();

    /** Posts a send of the whole segment. */
    P2pRequest send(MemorySegment src);

    /** Posts a receive that must be filled by exactly {@code dst.byteSize()} bytes. */
    P2pRequest recv(MemorySegment dst);

    /**
     * Posts a send that carries {@code guard}, the mismatch guard's word of the call it belongs to
     * (0: none). Transports that carry guards deliver it with the message; the receiver compares it
     * with the guard of its receive before it copies a byte, and fails with a {@link
     * GuardMismatchException} when both are non-zero and differ. The default drops the guard.
     */
    default P2pRequest send(MemorySegment src, long guard) {
        return send(src);
    }

    /** Posts a receive whose message must carry {@code guard} (see {@link #send(MemorySegment, long)}). The default drops the guard. */
    default P2pRequest recv(MemorySegment dst, long guard) {
        return recv(dst);
    }

    /**
     * Moves bytes without blocking and completes requests.
     *
     * @return how much work was done (0: nothing could be done now), used to pick an idle strategy
     * @throws IOException when the link failed (peer closed, reset, protocol violation); the
     *         runtime turns it into a {@code PeerFailedException} naming the peer and the operation
     */
    int progress() throws IOException;

    /**
     * Channels whose readability means this connection has work. While idle, the runtime blocks in a
     * selector over them (no polling, no CPU) instead of sleeping blind; the channels must be in
     * non-blocking mode. Transports without channels return none and use {@link TransportContext#wakeup()}.
     */
    default java.nio.channels.SelectableChannel[] channels() {
        return new java.nio.channels.SelectableChannel[0];
    }

    /**
     * Whether messages to this peer move through memory both ranks map (shared memory, one JVM), not through
     * a socket. The mismatch guard's ring confirmation is awaited at the end of its call over such
     * connections, where that costs less than holding it; over sockets it is held (docs/CONTRACTS.md, "The mismatch guard").
     */
    default boolean inMemory() {
        return false;
    }

    /**
     * The memory types this connection's operations take as local memory (send and receive buffers, put
     * sources). Default: host memory only.
     */
    default Set<MemoryType> memoryTypes() {
        return EnumSet.of(MemoryType.HOST);
    }

    /** Whether {@link #unpack}, {@link #put} and {@link #flush} are offered. Default: false. */
    default boolean supportsPut() {
        return false;
    }

    /**
     * Turns a packed key the peer made ({@link RegisteredRegion#packedKey()}) into a handle for puts on
     * this connection. Unpacking the same key twice may return handles that share one mapping.
     *
     * @param packedKey the bytes of the peer's {@link RegisteredRegion#packedKey()}
     * @return a handle for {@link #put}s on this connection
     *
     * @throws OneSidedUnsupportedException when {@link #supportsPut()} is false (the default)
     * @throws IllegalArgumentException for a key this connection cannot use, saying why: malformed, of
     *         another transport, made in another process or on another host, or registered by a rank other
     *         than this connection's peer
     * @throws IllegalStateException when the key names a region its owner has already deregistered
     *         (where the transport can tell)
     * @throws IOException when the region cannot be reached (mapping it failed)
     */
    default RemoteRegion unpack(byte[] packedKey) throws IOException {
        throw new OneSidedUnsupportedException(describe(), "one-sided put (unpacking a remote key)", null);
    }

    /**
     * Posts a put of all of {@code src} (native host memory) into the peer's region at {@code dstOffset}.
     * Checked before any byte moves: the region was unpacked on this connection and is open, and the
     * bytes {@code [dstOffset, dstOffset + src.byteSize())} lie inside it ({@link
     * RemoteRegion#checkBounds}). The request completes (in {@link #progress()}, or at once where the
     * transport copies right away) when {@code src} may be reused; see {@link #flush()} for visibility.
     *
     * @param src the bytes to put, native host memory, valid and unmodified until the request is done
     * @param dst the peer's region, unpacked on this connection
     * @param dstOffset where in the peer's region the first byte goes
     * @return the request, done when {@code src} may be reused
     *
     * @throws OneSidedUnsupportedException when {@link #supportsPut()} is false (the default)
     * @throws IndexOutOfBoundsException when the bytes fall outside the region, naming both ranges
     * @throws IllegalArgumentException for heap memory or a region unpacked on another connection
     * @throws IllegalStateException when the region handle is closed, or its owner deregistered it
     *         (where the transport can tell)
     */
    default P2pRequest put(MemorySegment src, RemoteRegion dst, long dstOffset) {
        throw new OneSidedUnsupportedException(describe(), "one-sided put", null);
    }

    /**
     * Posts a put of {@code length} bytes at {@code srcOffset} of a region this rank registered (the
     * form for device memory, and for transports that want the source registered too). The default
     * puts the host region's segment slice with {@link #put(MemorySegment, RemoteRegion, long)}.
     *
     * @param src a region this rank registered or allocated
     * @param srcOffset the first byte of {@code src} to put
     * @param length how many bytes
     * @param dst the peer's region, unpacked on this connection
     * @param dstOffset where in the peer's region the first byte goes
     * @return the request, done when the source bytes may be reused
     *
     * @throws IndexOutOfBoundsException when the source bytes fall outside {@code src} or the target bytes
     *         outside {@code dst}
     * @throws IllegalStateException when {@code src} is closed
     * @throws OneSidedUnsupportedException when puts, or puts from {@code src}'s memory type, are not offered
     */
    default P2pRequest put(RegisteredRegion src, long srcOffset, long length, RemoteRegion dst, long dstOffset) {
        if (!supportsPut()) {
            throw new OneSidedUnsupportedException(describe(), "one-sided put", null);
        }
        if (src.type() != MemoryType.HOST) {
            throw new OneSidedUnsupportedException(describe(), "one-sided put from " + src.type() + " memory",
                    "this connection takes " + memoryTypes() + " memory; stage the bytes through host memory");
        }
        if (srcOffset < 0 || length < 0 || srcOffset > src.length() - length) {
            throw new IndexOutOfBoundsException("a put of " + length + " bytes from bytes [" + srcOffset + ", "
                    + Long.toUnsignedString(srcOffset + length) + ") of " + src.describe() + ", whose bytes are [0, " + src.length()
                    + "): nothing was written");
        }
        return put(src.segment().asSlice(srcOffset, length), dst, dstOffset);
    }

    /**
     * Posts a flush: its request completes when every put posted earlier on this connection is visible in
     * the peer's memory (UCX: {@code ucp_ep_flush_nbx}). It is not ordered with sends by itself: to tell
     * the peer, send after it completed (see the class comment).
     *
     * @return the request, done when the earlier puts are visible at the peer
     *
     * @throws OneSidedUnsupportedException when {@link #supportsPut()} is false (the default)
     */
    default P2pRequest flush() {
        throw new OneSidedUnsupportedException(describe(), "one-sided flush", null);
    }

    /** Releases sockets and memory; pending requests are abandoned. Idempotent. */
    @Override
    void close();
}
