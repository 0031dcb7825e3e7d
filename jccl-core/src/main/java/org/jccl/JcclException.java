package org.jccl;

import java.util.Objects;

/**
 * The root of every exception jccl throws at its users. Unchecked, like NCCL's result codes turned
 * into exceptions: a collective that fails cannot usually be retried locally, so forcing every
 * call site to catch would only hide the real handling, which happens at the job level.
 *
 * <p>Each instance carries an {@link ErrorCode} and, where known, the rank that saw the error, the
 * peer it concerns, the operation and its sequence number on the communicator, as fields ({@link
 * #rank()}, {@link #peer()}, {@link #operation()}, {@link #sequence()}) as well as in the message,
 * so that a job's error handling can act on them without parsing text. Messages name the cause and
 * the fix; subclasses exist for the cases a caller acts on:
 * {@link PeerFailedException}, {@link JcclTimeoutException}, {@link InvalidUsageException},
 * {@link ConfigException}, {@link ResourceException}.
 */
public class JcclException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;
    private int rank = -1;
    private int peer = -1;
    private String operation;
    private long sequence = -1;

    public JcclException(ErrorCode code, String message) {
        super(message);
        this.code = Objects.requireNonNull(code, "code");
    }

    public JcclException(ErrorCode code, String message, Throwable cause) {
        super(message, cause);
        this.code = Objects.requireNonNull(code, "code");
    }

    /** The category of this failure. */
    public ErrorCode code() {
        return code;
    }

    /** The rank that saw this failure, -1 when not known (e.g. before a communicator exists). */
    public int rank() {
        return rank;
    }

    /**
     * The peer rank this failure concerns (the rank that failed, or whose message or call differed),
     * -1 when it concerns none or it is not known.
     */
    public int peer() {
        return peer;
    }

    /** The operation that failed ("allReduce", "send", ...), null when the failure is not one operation's. */
    public String operation() {
        return operation;
    }

    /**
     * The failed operation's sequence number on its communicator (the {@code #n} messages print:
     * "allReduce #17"), -1 when not known.
     */
    public long sequence() {
        return sequence;
    }

    /**
     * Records where this failure happened, keeping the fields already known (-1 and null are
     * "unknown"). jccl calls it where it attributes a failure, before the exception reaches any other
     * thread; it is public only because that code lives in other packages.
     *
     * @return this exception
     */
    public final JcclException at(int rank, int peer, String operation, long sequence) {
        if (this.rank < 0) {
            this.rank = rank;
        }
        if (this.peer < 0) {
            this.peer = peer;
        }
        if (this.operation == null) {
            this.operation = operation;
        }
        if (this.sequence < 0) {
            this.sequence = sequence;
        }
        return this;
    }

    @Override
    public String toString() {
        return getClass().getName() + " [" + code + "]: " + getMessage();
    }
}
