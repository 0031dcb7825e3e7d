package org.jccl.spi;

import java.io.IOException;
import java.lang.foreign.MemorySegment;

/**
 * A bidirectional, message-ordered link to one peer over one transport, owned by one communicator.
 *
 * <p>Messages are matched in order per direction: the k-th {@link #send} here is received by the
 * peer's k-th {@link #recv} on its connection to this rank. A receive of the wrong size is a
 * protocol error naming both sizes (collective arguments differing across ranks end up here, unless the
 * messages' guard words, compared first, already told the calls apart).
 *
 * <p><b>Threading contract:</b> {@code send}, {@code recv} and {@code progress} are called only by
 * the owning communicator's operation thread. The segments of posted requests must stay valid and,
 * for sends, unmodified until the request is done. Native memory only: heap memory is staged by
 * the runtime before it reaches a connection.
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
     * connections, where that costs less than holding it; over sockets it is held (docs/ARCHITECTURE.md).
     */
    default boolean inMemory() {
        return false;
    }

    /** Releases sockets and memory; pending requests are abandoned. Idempotent. */
    @Override
    void close();
}
