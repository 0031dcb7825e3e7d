package org.jccl.spi;

import org.jccl.Config;

/**
 * What a transport may know about the communicator it serves. Implemented by the runtime.
 */
public interface TransportContext {

    /** 16 random bytes naming the communicator; sent in every connection's hello. */
    byte[] commId();

    /** This rank. */
    int rank();

    /** Number of ranks. */
    int size();

    /** The communicator's 128-bit secret; every connection proves knowledge of it before anything is allocated. */
    byte[] secret();

    /** The communicator's settings. */
    Config config();

    /** A peer's bootstrap info; available once bootstrap completed (before any {@link Endpoint#connect}). */
    PeerInfo peer(int rank);

    /** True once the communicator is aborted or closing: blocking steps (connect retries) must stop. */
    boolean isStopping();

    /**
     * Wakes this rank's progress engine if it is blocked waiting for work; costs a volatile read when
     * it is not. Transports whose work arrives without a selectable channel (the in-JVM transport)
     * call it on the <em>receiving</em> rank's context after handing it a message. Any thread.
     */
    void wakeup();

    /**
     * Called now and then (every few tens of milliseconds) by a transport whose {@code connect} or
     * {@code prepare} blocks the operation thread waiting for a peer (a TCP acceptor waiting for the
     * lower rank's sockets): the runtime's mismatch guard asks for a comparison of every rank's call
     * when such a wait lasts, since ranks whose calls differ may never open the connection the other
     * waits for. Operation thread only; the default does nothing.
     */
    default void stillWaiting() {
    }
}
