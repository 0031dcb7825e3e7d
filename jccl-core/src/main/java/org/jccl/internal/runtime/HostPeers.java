package org.jccl.internal.runtime;

import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.internal.log.Log;
import org.jccl.spi.PeerInfo;

/**
 * Where a communicator's rank sits among the ranks of its host, from the peer table its bootstrap
 * exchanged: the host identity ({@link PeerInfo#hostHash()}, which {@code JCCL_HOSTID} can
 * override), and the rank's position and count among the ranks of that identity. For jccl-cuda,
 * which must choose and check GPUs per host.
 */
public final class HostPeers {
    private HostPeers() {
    }

    /**
     * This rank's place on its host.
     *
     * @param hostHash the host identity (equal on ranks of one host)
     * @param host the host's name
     * @param localRank this rank's index among the communicator's ranks with its host identity (in rank order)
     * @param localSize how many ranks have its host identity
     */
    public record Layout(String hostHash, String host, int localRank, int localSize) {
    }

    /**
     * The layout of {@code comm}'s own rank. A communicator that jccl did not make (a wrapper) has
     * no peer table here: its host identity is this process's, local rank and size are -1.
     */
    public static Layout of(Communicator comm) {
        if (comm instanceof CommunicatorImpl c) {
            int rank = c.rank();
            PeerInfo self = c.peerInfo(rank);
            int local = 0;
            int count = 0;
            for (int r = 0; r < c.size(); r++) {
                if (c.peerInfo(r).hostHash().equals(self.hostHash())) {
                    if (r < rank) {
                        local++;
                    }
                    count++;
                }
            }
            return new Layout(self.hostHash(), self.host(), local, count);
        }
        return new Layout(CommunicatorFactory.hostHash(Config.fromEnvironment(), comm.rank(), comm.size()), Log.host(), -1, -1);
    }

    /**
     * Why {@code comm} has failed, or null while it has not: its abort cause, set by this rank's own
     * failure or abort, or by its control plane when a peer died (heartbeats, naming the rank, within
     * JCCL_PEER_TIMEOUT) or aborted, whether or not an operation is running. For jccl-cuda, whose
     * hierarchical GPU collectives wait for the GPU and must learn of a dead rank meanwhile. Null for a
     * communicator jccl did not make.
     */
    public static org.jccl.JcclException failure(Communicator comm) {
        return comm instanceof CommunicatorImpl c ? c.abortCause() : null;
    }
}
