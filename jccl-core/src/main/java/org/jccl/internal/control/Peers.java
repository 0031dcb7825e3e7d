package org.jccl.internal.control;

import org.jccl.spi.PeerInfo;

/** The communicator's peer table as the control plane names and checks its ranks. Immutable; any thread. */
final class Peers {
    private final PeerInfo[] peers;
    private final int rank;

    Peers(PeerInfo[] peers, int rank) {
        this.peers = peers.clone();
        this.rank = rank;
    }

    PeerInfo get(int r) {
        return peers[r];
    }

    /** This rank's entry. */
    PeerInfo self() {
        return peers[rank];
    }

    /** The table itself, for {@link StallReport} (not to be changed). */
    PeerInfo[] table() {
        return peers;
    }

    /** "rank 3 (host b, pid 881)". */
    String describe(int r) {
        PeerInfo pi = peers[r];
        return "rank " + r + " (host " + pi.host() + ", pid " + pi.pid() + ")";
    }

    /** For a rank on this host: " (pid 881 is still running)" or " (pid 881 no longer exists)"; else "". */
    String pidNote(int r) {
        PeerInfo pi = peers[r];
        if (!pi.hostHash().equals(peers[rank].hostHash())) {
            return "";
        }
        return ProcessHandle.of(pi.pid()).map(h -> h.isAlive() ? " (pid " + pi.pid() + " is still running)" : "")
                .orElse(" (pid " + pi.pid() + " no longer exists)");
    }

    /** Whether rank {@code r} is on this host and its process is gone. */
    boolean knownDead(int r) {
        PeerInfo pi = peers[r];
        return pi.hostHash().equals(peers[rank].hostHash()) && ProcessHandle.of(pi.pid()).map(h -> !h.isAlive()).orElse(true);
    }
}
