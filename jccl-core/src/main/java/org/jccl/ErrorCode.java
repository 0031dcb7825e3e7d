package org.jccl;

/**
 * What went wrong, as a stable code a caller can switch on. Every {@link JcclException} carries one;
 * the message says the same thing in words, with the rank, peer, operation and transport involved.
 */
public enum ErrorCode {
    /** The caller passed something jccl cannot use: a null or too-small buffer, a bad count, root or peer. */
    INVALID_ARGUMENT,
    /** The call is not allowed in the communicator's current state (closed, aborted, wrong thread in a group). */
    INVALID_USAGE,
    /** A setting (environment variable, config file, {@link Config}) has a value that is not allowed. */
    CONFIG,
    /** A peer closed its connections, exited or crashed. */
    PEER_FAILED,
    /** An operation or the initialisation did not finish before its deadline. */
    TIMEOUT,
    /** A connection did not prove knowledge of the communicator's secret, or used another protocol version. */
    AUTHENTICATION,
    /** Bytes on a wire were not what the protocol allows: bad magic, bad length, truncated frame. */
    PROTOCOL,
    /** Ranks disagree about the job: world size, duplicate ranks, mismatched collective arguments. */
    MISMATCH,
    /** The operating system refused a resource: sockets, ports, file descriptors, memory, /dev/shm. */
    RESOURCE,
    /** A GPU or its driver (CUDA, NCCL) reported an error, or a device kernel gave up waiting for a peer. */
    DEVICE,
    /** The communicator was aborted by {@code abort()} or by a failure on another operation. */
    ABORTED,
    /** A bug or an unexpected condition inside jccl. */
    INTERNAL
}
