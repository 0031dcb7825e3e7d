package org.jccl;

/**
 * The caller used the API in a way jccl cannot honour: a call on a closed communicator, a
 * datatype/operation pair that makes no sense, mismatched arguments across ranks. Thrown before
 * any byte is sent; the communicator remains usable unless the message says otherwise.
 * Plain argument errors (null, negative count, root out of range) are {@link IllegalArgumentException}s.
 */
public class InvalidUsageException extends JcclException {
    private static final long serialVersionUID = 1L;

    public InvalidUsageException(String message) {
        super(ErrorCode.INVALID_USAGE, message);
    }

    public InvalidUsageException(ErrorCode code, String message) {
        super(code, message);
    }

    public InvalidUsageException(ErrorCode code, String message, Throwable cause) {
        super(code, message, cause);
    }
}
