package org.jccl.spi;

import java.io.IOException;

/**
 * One rank's presence on one transport for one communicator: for TCP a listening socket and its
 * acceptor. Opened before bootstrap so that its {@link #address()} can be published to every peer.
 */
public interface Endpoint extends AutoCloseable {

    /** The opaque address peers use to reach this endpoint (published in {@link PeerInfo#addresses()}). */
    byte[] address();

    /**
     * Returns the connection to {@code peerRank}, establishing it if needed. May block for a bounded
     * time (the connect timeout) while the link is set up and authenticated; called by the
     * communicator's operation thread the first time it needs that peer.
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
     * The runtime never reads or closes it: a watcher thread of its own polls it while the operation
     * thread waits idle, and wakes that thread when it becomes readable (before {@link #close()} the
     * watcher has stopped). -1, the default: none.
     */
    default int wakeFd() {
        return -1;
    }

    /**
     * Called by the operation thread just before it blocks with nothing to do, when {@link #wakeFd()}
     * is not -1: re-arms the descriptor so that the next event makes it readable (UCX's
     * {@code ucp_worker_arm}). Returns false when work arrived since the last progress (UCX's BUSY): the
     * runtime then progresses again instead of blocking. Operation thread only; the default returns true.
     */
    default boolean armWakeFd() {
        return true;
    }

    /** Closes the endpoint and every connection it made. Idempotent. */
    @Override
    void close();
}
