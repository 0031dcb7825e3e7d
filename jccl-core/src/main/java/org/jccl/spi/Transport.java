package org.jccl.spi;

import java.io.IOException;
import org.jccl.Config;

/**
 * A way to move bytes between two ranks: LOCAL, SHM and TCP today, UCX as a plugin next. The runtime opens
 * an {@link Endpoint} per communicator on every enabled transport, and for each peer uses the first
 * transport (lowest {@link #priority()}) whose {@link #canConnect} accepts the pair, logging the
 * choice ({@code rank 0 -> rank 1 via TCP}). Implementations are found with {@link java.util.ServiceLoader}
 * in addition to the built-in ones, so optional modules plug in without jccl-core knowing them.
 */
public interface Transport {

    /** Upper-case short name, used in logs and as the key of the endpoint address: "TCP", "SHM", "LOCAL". */
    String name();

    /** Lower is preferred: LOCAL 0, CUDA 10, SHM 20, UCX 30, TCP 100. */
    int priority();

    /** Whether settings allow this transport at all (e.g. {@code JCCL_SHM_DISABLE=1} turns SHM off). */
    boolean isEnabled(Config config);

    /** Opens this rank's endpoint for a new communicator. */
    Endpoint open(TransportContext context) throws IOException;

    /** Whether this transport can link {@code self} and {@code peer} (both endpoints are open). */
    boolean canConnect(PeerInfo self, PeerInfo peer);

    /**
     * What a message costs on this transport, for the tuner and the hierarchical collectives. Every
     * rank prices algorithms on its own, so this must give the same numbers on every rank of a job
     * (declared constants, or a measurement the ranks agreed on). Null: not declared; the runtime then
     * prices the transport as loopback TCP (every transport is at least that fast) and says so once
     * at INFO. The default is null.
     */
    default LinkCosts costs() {
        return null;
    }

    /**
     * What a message costs when this transport carries the same-host stage of a hierarchical
     * collective, where that stage shares the host's cores with the stages around it. The default is
     * {@link #costs()}; a transport whose cost there was measured apart declares it here.
     */
    default LinkCosts hostStageCosts() {
        return costs();
    }

    /**
     * This transport's own path for whole collectives on the communicator of {@code endpoint}, or null
     * (the default: collectives run as point-to-point algorithms over its connections). The runtime asks
     * only when every pair of ranks of the communicator uses this transport, once, after every endpoint's
     * {@link Endpoint#prepare}, and closes the provider before the endpoint. Every rank must decide alike
     * (a provider on every rank or on none; see {@link CollectiveProvider}).
     *
     * @param endpoint this transport's endpoint of the communicator, opened by {@link #open}
     * @throws IOException when the transport offers a provider but cannot set it up (the communicator fails
     *         to initialise, naming the cause)
     */
    default CollectiveProvider openCollectives(Endpoint endpoint) throws IOException {
        return null;
    }
}
