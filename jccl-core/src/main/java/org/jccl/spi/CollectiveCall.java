package org.jccl.spi;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import org.jccl.PeerFailedException;

/**
 * The runtime's side of one call to a {@link CollectiveProvider}: what a provider outside jccl-core
 * needs to wait, fail, check and reduce the way every other path of the communicator does. Implemented
 * by the runtime; valid only during the provider method it is passed to, and on that thread.
 *
 * <p><b>Waiting.</b> A provider polls its own progress (a word in shared memory, a network's
 * completion queue) and, each time it found nothing, calls {@link #checkAborted()} (cheap, fine on
 * every poll) and, at least every few microseconds of polling, {@link #idle}. {@code idle} does the work
 * a waiting rank owes the rest of the communicator (earlier calls' confirmations and signatures, the
 * backstop comparison of a long wait, other communicators' late operations, the flight recorder's
 * times) and then idles by the communicator's strategy ({@code JCCL_IDLE_SPIN_US}, {@code
 * JCCL_IDLE_YIELD_US}, then timed parks of up to 1 ms): a rank whose peer is a few microseconds
 * behind reacts at once, one waiting for a straggler uses no CPU.
 *
 * <p><b>The mismatch guard.</b> Every collective call has a 64-bit guard word ({@link #guard()}, 0 when
 * the guard is off) and, with {@code JCCL_CHECK=1}, a {@link #signature()}. A provider whose wire can
 * carry them publishes this rank's with its data and hands each peer's to {@link #checkGuard} and
 * {@link #checkSignature} before using that peer's data, which throw the runtime's mismatch error
 * (the same message as on any other path). A provider that cannot carry them relies on the runtime's
 * backstop (a long wait asks the control plane to compare every rank's word).
 */
public interface CollectiveCall {

    /** Bytes of a call's {@link #signature()}. */
    int SIGNATURE_BYTES = 32;

    /** This rank in the communicator. */
    int rank();

    /** Ranks of the communicator. */
    int size();

    /**
     * Throws what the runtime throws when the communicator was aborted (by the user, by a peer's failure
     * the control plane reported, by a mismatch another rank found); returns at once otherwise.
     */
    void checkAborted();

    /**
     * One idle step of a wait that found nothing to do (see the class comment); may throw a mismatch the
     * runtime found meanwhile. {@code start}: the first step of a new wait (its clock starts here).
     *
     * @return how long the current wait has lasted, in nanoseconds (0 at its first step)
     */
    long idle(boolean start);

    /**
     * The error to throw when {@code peer} can no longer take part (its process is gone, it closed its
     * communicator): names the call, this rank and the peer, with {@code cause}'s message as the reason.
     */
    PeerFailedException peerFailed(int peer, IOException cause);

    /** The running call's guard word, to publish with this rank's data; 0: the guard is off (publish nothing). */
    long guard();

    /** Compares {@code peer}'s guard word of this call with this rank's; throws the mismatch error when they differ (0 matches anything). */
    void checkGuard(int peer, long theirs);

    /**
     * The running call's signature ({@code JCCL_CHECK=1}; {@link #SIGNATURE_BYTES} bytes, read only), to publish with this
     * rank's data; null when not checked.
     */
    MemorySegment signature();

    /** Compares the signature {@code peer} published for this call with this rank's; throws the mismatch error when they differ. */
    void checkSignature(int peer, MemorySegment theirs);

    /**
     * {@code dst[i] = a[i] op b[i]} for {@code i < count}, with the call's data type and operator
     * ({@link org.jccl.ReduceOp#AVG} sums). {@code dst} may be exactly {@code a} or {@code b}, not
     * partly overlap them. Every rank that combines the same inputs in the same order gets the same bits.
     */
    void reduce(MemorySegment dst, MemorySegment a, MemorySegment b, long count);

    /** Counts {@code perPeer} bytes moved each way between this rank and every peer ({@code jccl status}, CommStats). Once per call. */
    void moved(long perPeer);

    /** Counts {@code bytes} moved each way between this rank and {@code peer}. */
    void movedWith(int peer, long bytes);
}
