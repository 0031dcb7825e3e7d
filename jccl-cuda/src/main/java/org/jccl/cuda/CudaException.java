package org.jccl.cuda;

import org.jccl.ErrorCode;
import org.jccl.JcclException;

/**
 * A CUDA driver or NCCL call failed, or a jccl kernel gave up waiting for a peer. The message names
 * the call, its arguments, the library's name and text for the error code, and the fix where one is
 * known.
 */
public class CudaException extends JcclException {
    private static final long serialVersionUID = 1L;
    private final int result;

    public CudaException(String message) {
        this(message, -1);
    }

    /** {@code result} is the library's error code (CUresult, ncclResult_t), or -1 when there is none. */
    public CudaException(String message, int result) {
        super(ErrorCode.DEVICE, message);
        this.result = result;
    }

    /** The library's error code, or -1. */
    public int result() {
        return result;
    }
}
