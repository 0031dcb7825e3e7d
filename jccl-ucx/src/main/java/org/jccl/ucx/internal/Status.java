package org.jccl.ucx.internal;

import java.lang.foreign.MemorySegment;

/**
 * {@code ucs_status_t}: a one-byte packed enum ({@code UCS_S_PACKED}), so every downcall returning it
 * is declared {@code JAVA_BYTE} (an int read of the return register has undefined upper bits: -5 came
 * back as 251 in the research probe). And {@code ucs_status_ptr_t}: NULL (done now), an error code cast
 * to a pointer (at or above {@code (uintptr_t) UCS_ERR_LAST}), or a request to poll and free.
 */
final class Status {
    private Status() {
    }

    static final int OK = 0;
    static final int INPROGRESS = 1;
    static final int ERR_NO_MESSAGE = -1;
    static final int ERR_NO_RESOURCE = -2;
    static final int ERR_IO_ERROR = -3;
    static final int ERR_NO_MEMORY = -4;
    static final int ERR_INVALID_PARAM = -5;
    static final int ERR_UNREACHABLE = -6;
    static final int ERR_INVALID_ADDR = -7;
    static final int ERR_NOT_IMPLEMENTED = -8;
    static final int ERR_MESSAGE_TRUNCATED = -9;
    static final int ERR_NO_PROGRESS = -10;
    static final int ERR_BUFFER_TOO_SMALL = -11;
    static final int ERR_NO_ELEM = -12;
    static final int ERR_SOME_CONNECTS_FAILED = -13;
    static final int ERR_NO_DEVICE = -14;
    static final int ERR_BUSY = -15;
    static final int ERR_CANCELED = -16;
    static final int ERR_SHMEM_SEGMENT = -17;
    static final int ERR_ALREADY_EXISTS = -18;
    static final int ERR_OUT_OF_RANGE = -19;
    static final int ERR_TIMED_OUT = -20;
    static final int ERR_EXCEEDS_LIMIT = -21;
    static final int ERR_UNSUPPORTED = -22;
    static final int ERR_REJECTED = -23;
    static final int ERR_NOT_CONNECTED = -24;
    static final int ERR_CONNECTION_RESET = -25;
    static final int ERR_ENDPOINT_TIMEOUT = -80;
    static final int ERR_LAST = -100;

    /** A {@code ucs_status_ptr_t} that is an error: {@code (uintptr_t) p >= (uintptr_t) UCS_ERR_LAST}. */
    static boolean isError(long statusPtr) {
        return Long.compareUnsigned(statusPtr, (long) ERR_LAST) >= 0;
    }

    /** A {@code ucs_status_ptr_t} that is a request to poll: neither NULL nor an error. */
    static boolean isRequest(long statusPtr) {
        return statusPtr != 0 && !isError(statusPtr);
    }

    /** The status code an error {@code ucs_status_ptr_t} carries. */
    static int fromPtr(long statusPtr) {
        return (int) statusPtr;
    }

    static boolean isRequest(MemorySegment p) {
        return isRequest(p.address());
    }

    /** The name UCX gives a status (ucs_status_string's words), for messages. */
    static String name(int status) {
        return switch (status) {
            case OK -> "UCS_OK (success)";
            case INPROGRESS -> "UCS_INPROGRESS (operation in progress)";
            case ERR_NO_MESSAGE -> "UCS_ERR_NO_MESSAGE (no pending message)";
            case ERR_NO_RESOURCE -> "UCS_ERR_NO_RESOURCE (no resources are available to initiate the operation)";
            case ERR_IO_ERROR -> "UCS_ERR_IO_ERROR (input/output error)";
            case ERR_NO_MEMORY -> "UCS_ERR_NO_MEMORY (out of memory)";
            case ERR_INVALID_PARAM -> "UCS_ERR_INVALID_PARAM (invalid parameter)";
            case ERR_UNREACHABLE -> "UCS_ERR_UNREACHABLE (destination is unreachable)";
            case ERR_INVALID_ADDR -> "UCS_ERR_INVALID_ADDR (address not valid)";
            case ERR_NOT_IMPLEMENTED -> "UCS_ERR_NOT_IMPLEMENTED (function not implemented)";
            case ERR_MESSAGE_TRUNCATED -> "UCS_ERR_MESSAGE_TRUNCATED (message truncated)";
            case ERR_NO_PROGRESS -> "UCS_ERR_NO_PROGRESS (no progress)";
            case ERR_BUFFER_TOO_SMALL -> "UCS_ERR_BUFFER_TOO_SMALL (provided buffer is too small)";
            case ERR_NO_ELEM -> "UCS_ERR_NO_ELEM (no such element)";
            case ERR_SOME_CONNECTS_FAILED -> "UCS_ERR_SOME_CONNECTS_FAILED (failed to connect some of the requested endpoints)";
            case ERR_NO_DEVICE -> "UCS_ERR_NO_DEVICE (no such device)";
            case ERR_BUSY -> "UCS_ERR_BUSY (device is busy)";
            case ERR_CANCELED -> "UCS_ERR_CANCELED (request canceled)";
            case ERR_SHMEM_SEGMENT -> "UCS_ERR_SHMEM_SEGMENT (shared memory error)";
            case ERR_ALREADY_EXISTS -> "UCS_ERR_ALREADY_EXISTS (element already exists)";
            case ERR_OUT_OF_RANGE -> "UCS_ERR_OUT_OF_RANGE (index out of range)";
            case ERR_TIMED_OUT -> "UCS_ERR_TIMED_OUT (operation timed out)";
            case ERR_EXCEEDS_LIMIT -> "UCS_ERR_EXCEEDS_LIMIT (user-defined limit was reached)";
            case ERR_UNSUPPORTED -> "UCS_ERR_UNSUPPORTED (unsupported operation)";
            case ERR_REJECTED -> "UCS_ERR_REJECTED (operation rejected by remote peer)";
            case ERR_NOT_CONNECTED -> "UCS_ERR_NOT_CONNECTED (endpoint is not connected)";
            case ERR_CONNECTION_RESET -> "UCS_ERR_CONNECTION_RESET (connection reset by remote peer)";
            case ERR_ENDPOINT_TIMEOUT -> "UCS_ERR_ENDPOINT_TIMEOUT (endpoint timeout)";
            default -> "UCX status " + status;
        };
    }

    /** Whether a failed request means the peer or the link is gone (as opposed to a local protocol error). */
    static boolean isPeerFailure(int status) {
        return status == ERR_CONNECTION_RESET || status == ERR_ENDPOINT_TIMEOUT || status == ERR_UNREACHABLE || status == ERR_IO_ERROR
                || status == ERR_NOT_CONNECTED || status == ERR_TIMED_OUT || status == ERR_REJECTED || status == ERR_CANCELED
                || (status <= -40 && status > ERR_LAST); // UCS_ERR_FIRST_LINK_FAILURE .. UCS_ERR_LAST_ENDPOINT_FAILURE
    }
}
