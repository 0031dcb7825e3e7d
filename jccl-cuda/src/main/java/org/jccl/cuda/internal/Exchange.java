package org.jccl.cuda.internal;

/**
 * How a rank learns the addresses, as mapped in its own process, of the buffers its peers pass to
 * the same operation. In one process (several GPUs, {@link InProcessExchange}) the peers' device
 * pointers are valid as they are; between processes ({@link IpcExchange}) they travel as CUDA IPC
 * handles over the host communicator and are mapped here (and cached).
 *
 * <p>Two phases, so that one thread can issue the calls of several ranks inside a group: every
 * call of a group is published first, then resolved.
 */
public interface Exchange {

    /** Number of ranks. */
    int size();

    /**
     * Publishes this rank's (in, out) device pointers for collective {@code epoch} (0 where absent)
     * with {@code guard}, the mismatch guard's word of its call (org.jccl.internal.guard.OpGuard; 0: none).
     */
    void publishCollective(int rank, long epoch, long in, long out, long guard);

    /**
     * Every rank's (in, out) for {@code epoch}, mapped here: {@code result[2q]} in, {@code
     * result[2q+1]} out. Waits for the peers to publish. Before anything is mapped or launched,
     * compares every peer's guard word with this rank's: calls that differ (count, data type, op,
     * root) fail here with a MISMATCH naming both, on every rank (each reads every record).
     */
    long[] resolveCollective(int rank, long epoch);

    /**
     * The error for {@code rank}'s GPU collective {@code epoch} whose guard {@code mine} met rank
     * {@code q}'s {@code theirs}; null when they agree.
     */
    static org.jccl.InvalidUsageException mismatch(int rank, long epoch, int q, long theirs, long mine) {
        if (!org.jccl.internal.guard.OpGuard.mismatch(theirs, mine)) {
            return null;
        }
        return mismatch(rank, epoch, q, theirs, mine, "found by the mismatch guard, before any kernel ran");
    }

    /** The MISMATCH error of two different calls, {@code how} saying where the guard found it. */
    static org.jccl.InvalidUsageException mismatch(int rank, long epoch, int q, long theirs, long mine, String how) {
        return new org.jccl.InvalidUsageException(org.jccl.ErrorCode.MISMATCH, "rank " + rank + ": GPU collective #" + epoch
                + " failed: mismatched collective calls: rank " + q + " called " + org.jccl.internal.guard.OpGuard.describe(theirs)
                + " but rank " + rank + " called " + org.jccl.internal.guard.OpGuard.describe(mine) + "; they differ in "
                + String.join(", ", org.jccl.internal.guard.OpGuard.differences(theirs, mine)) + " (" + how + "). " + FIX);
    }

    /** What every mismatch message ends with. */
    String FIX = "Every rank must call the same collectives in the same order, with the same count, data type, op and root";

    /** The one-shot all-reduce's words in the settings' words, for messages. */
    String ONESHOT = "the one-shot all-reduce (JCCL_CUDA_ONESHOT_MAX)";

    /**
     * The error of {@code rank}, whose GPU collective {@code epoch} ({@code mine}) exchanges records,
     * when rank {@code q} ran its collective of that number as a one-shot all-reduce ({@code theirs}:
     * its guard word, or 0 when its note of that call was overwritten by later ones), which exchanges
     * none: the calls differ, or (same word) the ranks' settings choose different algorithms.
     */
    static OneShotPeer oneShotPeer(int rank, long epoch, int q, long theirs, long mine) {
        String how = "found by the mismatch guard: rank " + q + " ran its call as " + ONESHOT + ", which exchanges no record, and"
                + " this rank's call exchanges one";
        String m;
        if (theirs == 0) {
            m = "rank " + rank + ": GPU collective #" + epoch + " failed: mismatched collective calls: rank " + q + " called an"
                    + " all-reduce of at most JCCL_CUDA_ONESHOT_MAX bytes (run as " + ONESHOT + "; the exact call is no longer"
                    + " recorded) but rank " + rank + " called " + org.jccl.internal.guard.OpGuard.describe(mine) + " (" + how + "). "
                    + FIX;
        } else if (theirs == mine) {
            m = sameCallOtherAlgorithm(rank, epoch, q, mine, "rank " + q + " ran it as " + ONESHOT + " and this rank did not")
                    .getMessage();
        } else {
            m = mismatch(rank, epoch, q, theirs, mine, how).getMessage();
        }
        return new OneShotPeer(m);
    }

    /**
     * The MISMATCH of a rank whose call exchanges records while a peer ran that operation as a one-shot
     * all-reduce: that peer's kernel waits for this rank's flag, which the communicator then stores
     * with its word (jccl_oneshot_release), so that the peer's kernel records the mismatch too.
     */
    final class OneShotPeer extends org.jccl.InvalidUsageException {
        private static final long serialVersionUID = 1L;

        OneShotPeer(String message) {
            super(org.jccl.ErrorCode.MISMATCH, message);
        }
    }

    /** Both ranks called {@code call}, but their settings made them run different algorithms, which cannot meet. */
    static org.jccl.InvalidUsageException sameCallOtherAlgorithm(int rank, long epoch, int q, long call, String which) {
        return new org.jccl.InvalidUsageException(org.jccl.ErrorCode.MISMATCH, "rank " + rank + ": GPU collective #" + epoch
                + " failed: rank " + q + " and rank " + rank + " both called " + org.jccl.internal.guard.OpGuard.describe(call)
                + ", but " + which + " (found by the mismatch guard): the ranks' settings differ; set JCCL_CUDA_ONESHOT_MAX and"
                + " JCCL_CUDA_ALLREDUCE alike on every rank");
    }

    /**
     * Notes that {@code rank} ran its collective {@code epoch}, of guard word {@code guard}, as a
     * one-shot all-reduce, which publishes no record: a peer waiting for this rank's record of that
     * operation finds the note and fails with a MISMATCH instead of waiting for a record that never
     * comes. Written in the publish phase (before any launch of a group). No-op where the exchange
     * has no place for notes (the host all-gather fallback).
     */
    default void noteOneShot(int rank, long epoch, long guard) {
    }

    /**
     * Registers the check that waits of {@code rank} ask when they last (every few milliseconds
     * after the first spins): a non-null exception ends the wait with it. The communicator passes
     * the failure its kernels recorded, so a rank whose one-shot kernel found a mismatch does not
     * wait for a peer that failed at that operation.
     */
    default void watch(int rank, java.util.function.Supplier<RuntimeException> check) {
    }

    /** Publishes the receive buffer of this rank's {@code seq}-th receive from {@code src}. */
    void publishRecv(int rank, int src, long seq, long address, long bytes);

    /** The receive buffer (mapped here) of {@code dst}'s {@code seq}-th receive from this rank, and its byte size. */
    long[] resolveSend(int rank, int dst, long seq);

    /**
     * Called once per group and rank before {@link #resolveSend}, with every send of the group
     * ({@code peers[i]}, {@code seqs[i]}): the IPC exchange posts its host messages (the receive
     * buffers it published, the records it needs) together, so ranks that all send first cannot
     * deadlock on the host communicator.
     */
    default void prepareSends(int rank, int[] peers, long[] seqs) {
    }

    /** Completes the phase: for the IPC exchange, the point where the host messages of a group go out. */
    default void flush(int rank) {
    }

    /** Stops waits in progress (they throw). */
    void abort();

    void close();
}
