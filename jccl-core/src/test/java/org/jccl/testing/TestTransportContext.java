package org.jccl.testing;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.jccl.Config;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.TransportContext;

/**
 * The {@link TransportContext} of transport-level tests, which open endpoints without a
 * communicator: identity, secret and settings given at construction, peer infos filled in once
 * every endpoint is open (as bootstrap would), {@link #isStopping()} set by the test. The test
 * spins on progress itself, so {@link #wakeup()} does nothing. Also {@link #drive}, the spin loop
 * those tests wait with.
 */
public final class TestTransportContext implements TransportContext {
    private final byte[] commId;
    private final int rank;
    private final int size;
    private final byte[] secret;
    private final Config config;
    private final AtomicReferenceArray<PeerInfo> peers;
    private volatile boolean stopping;

    public TestTransportContext(byte[] commId, int rank, int size, byte[] secret, Config config) {
        this.commId = commId;
        this.rank = rank;
        this.size = size;
        this.secret = secret;
        this.config = config;
        this.peers = new AtomicReferenceArray<>(size);
    }

    /** Rank {@code r}'s info, as bootstrap would hand it over. */
    public void setPeer(int r, PeerInfo info) {
        peers.set(r, info);
    }

    /** What {@link #isStopping()} answers from now on (an abort of the communicator this context stands for). */
    public void setStopping(boolean stopping) {
        this.stopping = stopping;
    }

    @Override
    public byte[] commId() {
        return commId.clone();
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public byte[] secret() {
        return secret.clone();
    }

    @Override
    public Config config() {
        return config;
    }

    @Override
    public PeerInfo peer(int r) {
        PeerInfo p = peers.get(r);
        if (p == null) {
            throw new IllegalStateException("no peer info for rank " + r);
        }
        return p;
    }

    @Override
    public boolean isStopping() {
        return stopping;
    }

    @Override
    public void wakeup() {
        // transport-level tests spin on progress; nothing blocks
    }

    /**
     * Spins progress on every connection (null entries skipped) until all requests are done; fails
     * on a request's error or after {@code timeoutMillis}.
     *
     * @param who prefix of the failure messages ("rank 2: "), or ""
     * @throws IOException naming a failed request's error
     * @throws AssertionError naming how many requests are still pending at the deadline
     */
    public static void drive(String who, long timeoutMillis, List<? extends Connection> conns, List<P2pRequest> reqs)
            throws IOException {
        long deadline = System.nanoTime() + timeoutMillis * 1_000_000;
        while (true) {
            for (Connection c : conns) {
                if (c != null) {
                    c.progress();
                }
            }
            boolean all = true;
            for (P2pRequest r : reqs) {
                if (r.isDone()) {
                    if (r.error() != null) {
                        throw new IOException(who + "request failed: " + r.error(), r.error());
                    }
                } else {
                    all = false;
                }
            }
            if (all) {
                return;
            }
            if (System.nanoTime() > deadline) {
                int pending = 0;
                for (P2pRequest r : reqs) {
                    pending += r.isDone() ? 0 : 1;
                }
                throw new AssertionError(who + pending + " of " + reqs.size() + " requests still pending after " + timeoutMillis + " ms");
            }
            Thread.onSpinWait();
        }
    }
}
