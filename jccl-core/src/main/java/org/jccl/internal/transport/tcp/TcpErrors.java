package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.nio.channels.ClosedChannelException;
import org.jccl.internal.config.Settings;
import org.jccl.spi.GuardMismatchException;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;

/**
 * The words of one {@link TcpConnection}'s failures: each message names the peer, this rank, the
 * socket and what the cause means for the user. Built only when something fails, never on the
 * path of a byte that arrives intact.
 */
final class TcpErrors {

    private final PeerInfo peer;
    private final int selfRank;
    private final int nsocks;
    private final boolean checksum;

    TcpErrors(PeerInfo peer, int selfRank, int nsocks, boolean checksum) {
        this.peer = peer;
        this.selfRank = selfRank;
        this.nsocks = nsocks;
        this.checksum = checksum;
    }

    /**
     * Turns a socket-level exception into one naming the peer, the socket ({@code socket} &lt; 0:
     * none) and what the cause means; {@code closed}: the connection was closed locally.
     */
    IOException explain(IOException e, int socket, boolean closed) {
        if (e instanceof TcpLinkException || e instanceof GuardMismatchException) {
            return e;
        }
        if (closed || e instanceof ClosedChannelException) {
            return closedLocally(e);
        }
        String where = socket < 0 ? "" : " (socket " + socket + " of " + nsocks + ")";
        return new IOException("TCP connection from rank " + selfRank + " to " + peer.describe() + " failed" + where + ": "
                + e.getMessage() + ". The peer exited or crashed, or the network between the hosts dropped the connection", e);
    }

    IOException closedLocally(Throwable cause) {
        return new IOException("TCP connection from rank " + selfRank + " to " + peer.describe()
                + " was closed by this rank (its communicator was closed or aborted)", cause);
    }

    TcpLinkException peerClosed(int socket, P2pRequest r, long received, long expected) {
        String what = received == 0 ? "before the next message (" + r.size() + " bytes) arrived"
                : "after " + received + " of " + expected + " bytes of a " + r.size() + "-byte message";
        return new TcpLinkException("TCP connection to " + peer.describe() + " closed by the peer " + what + " (socket " + socket
                + " of " + nsocks + ", rank " + selfRank + " receiving): it exited or crashed, or closed its communicator after an"
                + " error of its own (see its log)");
    }

    /** The CRC32C the peer sent for stripe {@code stripe} (bytes off..off+len of {@code r}) is not the one the bytes give. */
    TcpLinkException crcMismatch(int socket, int stripe, P2pRequest r, long off, long len, int sent, int got) {
        return new TcpLinkException("TCP data from " + peer.describe() + " failed its CRC32C check (" + Settings.CHECKSUM.name()
                + "=1): stripe " + stripe + " of a " + r.size() + "-byte message (bytes " + off + ".." + (off + len)
                + "), socket " + socket + " of " + nsocks + ", rank " + selfRank + " receiving; the peer sent CRC 0x"
                + Integer.toHexString(sent) + ", the bytes received give 0x" + Integer.toHexString(got) + ". The data was"
                + " corrupted between the two processes (NIC, cable, switch, driver or memory); the operation fails instead"
                + " of returning it");
    }

    /** A stripe header whose magic is not {@code expect}. */
    TcpLinkException badMagic(int socket, int magic, int expect) {
        boolean old = magic == TcpWire.MAGIC_V1 || magic == TcpWire.MAGIC_CHECKSUM_V1;
        return new TcpLinkException("TCP stream from " + peer.describe() + " is corrupt: stripe header magic 0x"
                + Integer.toHexString(magic) + " where 0x" + Integer.toHexString(expect) + " was expected (socket "
                + socket + " of " + nsocks + ", rank " + selfRank + " receiving); "
                + (old ? "the peer runs an older jccl (stripe header version 1): every rank of a job must run the same jccl"
                : "mixed jccl versions in one job, or a bug: please report it with both ranks' logs") + transitHint());
    }

    /** A stripe header announcing a message of {@code length} bytes where {@code r} was posted. */
    TcpLinkException sizeMismatch(long length, P2pRequest r) {
        return new TcpLinkException(peer.describe() + " sent " + length + " bytes where rank " + selfRank + " expected "
                + r.size() + ": ranks called collectives with different counts/types (or send/recv sizes differ)" + transitHint());
    }

    /** Stripe {@code stripe} arrived on {@code socket} where {@code expected} was due. */
    TcpLinkException outOfStep(int socket, int stripe, int expected, long length) {
        return new TcpLinkException("TCP stream from " + peer.describe() + " is out of step: stripe " + stripe
                + " arrived on socket " + socket + " of " + nsocks + " where stripe " + expected + " was expected (a "
                + length + "-byte message, rank " + selfRank + " receiving); this is a bug: please report it with both"
                + " ranks' logs" + transitHint());
    }

    /** With checksums on, a header that does not match may also have been corrupted in transit: say so. */
    private String transitHint() {
        return checksum ? " (or the stripe header was corrupted in transit: with " + Settings.CHECKSUM.name() + "=1 every header"
                + " field is checked exactly)" : "";
    }
}
