package org.jccl.internal.launch;

/** A PMIx call that failed or could not be made; the message names the call and the cause. */
public final class PmixException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int status;

    PmixException(String message, int status) {
        super(message);
        this.status = status;
    }

    /** The PMIx status code (negative), or 0 when the failure was not a status from the library. */
    public int status() {
        return status;
    }
}
