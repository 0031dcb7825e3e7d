package org.jccl.ucx.internal;

/** A UCX call that returned an error status; the message names the call and the status in UCX's words. */
final class UcxException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int status;

    UcxException(String message, int status) {
        super(message);
        this.status = status;
    }

    /** The {@code ucs_status_t} (negative). */
    int status() {
        return status;
    }
}
