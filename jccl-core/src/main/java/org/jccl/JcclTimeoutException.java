package org.jccl;

/**
 * An operation, a connection or the initialisation did not finish before its deadline. The message
 * says which deadline (and which setting controls it) and, where known, which ranks were missing.
 */
public class JcclTimeoutException extends JcclException {
    private static final long serialVersionUID = 1L;

    public JcclTimeoutException(String message) {
        super(ErrorCode.TIMEOUT, message);
    }

    public JcclTimeoutException(String message, Throwable cause) {
        super(ErrorCode.TIMEOUT, message, cause);
    }
}
