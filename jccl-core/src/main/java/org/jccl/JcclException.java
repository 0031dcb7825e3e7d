package org.jccl;

import java.util.Objects;

/**
 * The root of every exception jccl throws at its users. Unchecked, like NCCL's result codes turned
 * into exceptions: a collective that fails cannot usually be retried locally, so forcing every
 * call site to catch would only hide the real handling, which happens at the job level.
 *
 * <p>Each instance carries an {@link ErrorCode} and, where known, the rank that saw the error.
 * Messages name the cause and the fix; subclasses exist for the cases a caller acts on:
 * {@link PeerFailedException}, {@link JcclTimeoutException}, {@link InvalidUsageException},
 * {@link ConfigException}, {@link ResourceException}.
 */
public class JcclException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;

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

    @Override
    public String toString() {
        return getClass().getName() + " [" + code + "]: " + getMessage();
    }
}
