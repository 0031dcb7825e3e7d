package org.jccl.internal.runtime;

import org.jccl.Config;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.TransportContext;

/** The runtime's side of {@link TransportContext}. Peers are filled in once bootstrap returns. */
final class TransportContextImpl implements TransportContext {
    private final byte[] commId;
    private final int rank;
    private final int size;
    private final byte[] secret;
    private final Config config;
    private volatile PeerInfo[] peers;
    private volatile boolean stopping;
    private volatile Runnable waker;
    private volatile Runnable stillWaiting;

    TransportContextImpl(byte[] commId, int rank, int size, byte[] secret, Config config) {
        this.commId = commId.clone();
        this.rank = rank;
        this.size = size;
        this.secret = secret.clone();
        this.config = config;
    }

    void setPeers(PeerInfo[] peers) {
        this.peers = peers.clone();
    }

    void stop() {
        stopping = true;
        wakeup();
    }

    void setWaker(Runnable waker) {
        this.waker = waker;
    }

    void setStillWaiting(Runnable r) {
        this.stillWaiting = r;
    }

    @Override
    public void stillWaiting() {
        Runnable r = stillWaiting;
        if (r != null) {
            r.run();
        }
    }

    @Override
    public void wakeup() {
        Runnable w = waker;
        if (w != null) {
            w.run();
        }
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
        PeerInfo[] p = peers;
        if (p == null) {
            throw new IllegalStateException("peer infos are not known before bootstrap completes");
        }
        return p[r];
    }

    @Override
    public boolean isStopping() {
        return stopping;
    }
}
