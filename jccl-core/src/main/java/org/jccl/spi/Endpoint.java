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

    /** Closes the endpoint and every connection it made. Idempotent. */
    @Override
    void close();
}
