package org.jccl.internal.runtime;

import java.util.List;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.internal.topo.NicAssignment;
import org.jccl.internal.topo.Topologies;
import org.jccl.internal.topo.Topology;
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
    /** The launcher's local rank (-1: not given); the peer table's wins once bootstrap completed. */
    private final int launcherLocalRank;
    /** This host's topology, discovered on first use (gpu(), nics()). */
    private volatile Topology topology;

    TransportContextImpl(byte[] commId, int rank, int size, byte[] secret, Config config) {
        this.commId = commId.clone();
        this.rank = rank;
        this.size = size;
        this.secret = secret.clone();
        this.config = config;
        int lr = -1;
        try {
            Config.Launch l = config.launch().orElse(null);
            // The launcher's local rank describes the job's world communicator, not a split one.
            if (l != null && l.size() == size && l.rank() == rank) {
                lr = l.localRank();
            }
        } catch (RuntimeException e) {
            // A broken launcher convention is reported where the identity is used; here the peer table will do.
        }
        this.launcherLocalRank = lr;
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

    @Override
    public int localRank() {
        PeerInfo[] p = peers;
        return p != null ? CommunicatorFactory.localRank(p, rank) : launcherLocalRank;
    }

    @Override
    public int localSize() {
        PeerInfo[] p = peers;
        return p != null ? CommunicatorFactory.localSize(p, rank) : -1; // launchers give the local rank, not the count
    }

    @Override
    public String gpu() {
        int lr = localRank();
        if (lr < 0) {
            return null;
        }
        Topology.Gpu g = NicAssignment.gpuOfLocalRank(topology(), lr, localSize(), System.getenv("CUDA_VISIBLE_DEVICES"),
                Settings.CUDA_DEVICE.raw(config));
        return g == null ? null : g.pci().address();
    }

    @Override
    public List<String> nics() {
        int lr = localRank();
        if (lr < 0) {
            return List.of();
        }
        return NicAssignment.forLocalRank(topology(), lr, localSize(), System.getenv("CUDA_VISIBLE_DEVICES"), Settings.CUDA_DEVICE.raw(config),
                Settings.IB_HCA.raw(config)).stream().map(NicAssignment.Choice::nic).toList();
    }

    private Topology topology() {
        Topology t = topology;
        if (t == null) {
            t = Topologies.forHost(config);
            topology = t;
        }
        return t;
    }
}
