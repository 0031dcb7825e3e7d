package org.jccl;

/**
 * A peer rank closed its connections, exited or crashed while this rank depended on it. The message
 * names the peer's rank, host and pid and the operation that was in flight.
 */
public class PeerFailedException extends JcclException {
    private static final long serialVersionUID = 1L;

    private final int peerRank;

    public PeerFailedException(int peerRank, String message, Throwable cause) {
        super(ErrorCode.PEER_FAILED, message, cause);
        this.peerRank = peerRank;
        at(-1, peerRank, null, -1);
    }

    /** The rank that failed, or -1 when it is not known. */
    public int peerRank() {
        return peerRank;
    }
}
