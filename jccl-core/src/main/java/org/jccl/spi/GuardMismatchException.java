package org.jccl.spi;

import java.io.IOException;

/**
 * Thrown by a {@link Connection} (from {@code progress()}, and set as the failed receive's error)
 * when a message arrives whose guard word, the compact signature of the call that sent it, differs
 * from the one the receive was posted with: the two ranks called the same collective with different
 * arguments (or different operations). Checked when the message's header arrives, before the
 * receive completes or any of its data is used. The runtime turns it into an error naming both ranks and both calls.
 */
public final class GuardMismatchException extends IOException {
    private static final long serialVersionUID = 1L;

    private final int peer;
    private final long expected;
    private final long received;

    /**
     * @param peer the rank that sent the message
     * @param expected the guard word the receive was posted with (this rank's call)
     * @param received the guard word the message carried (the peer's call)
     */
    public GuardMismatchException(int peer, long expected, long received) {
        super("rank " + peer + " sent a message of a different call (guard 0x" + Long.toHexString(received) + " where this rank's call has 0x"
                + Long.toHexString(expected) + ")");
        this.peer = peer;
        this.expected = expected;
        this.received = received;
    }

    public int peer() {
        return peer;
    }

    public long expected() {
        return expected;
    }

    public long received() {
        return received;
    }

    /** Whether a message carrying {@code received} may be taken by a receive posted with {@code expected} (0 on either side: no guard). */
    public static boolean matches(long expected, long received) {
        return expected == received || expected == 0 || received == 0;
    }
}
