package org.jccl.cuda.internal;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * A collective planned for launch: the pointers this rank publishes for its peers to map ({@code in},
 * {@code out}; both 0: nothing is exchanged, as in the one-shot all-reduce), the number of epochs it
 * uses (one per kernel whose blocks meet in per-block flags), and the launch, which the communicator
 * runs once every peer's pointers are known. The per-collective plan classes ({@link AllReducePlans},
 * {@link BroadcastPlans}, {@link ReducePlans}, {@link CopyPlans}, {@link CopyEngine}) make them from
 * the variant the {@link GpuTuner} chose.
 */
public record Plan(long in, long out, int epochs, Launch launch) {

    /** The launch of a planned collective. */
    @FunctionalInterface
    public interface Launch {
        /**
         * Enqueues the kernels (and copies) on the call's stream, under the communicator's lock, its device current.
         *
         * @param peers every rank's published pointers, mapped here: {@code peers[2q]} in, {@code peers[2q+1]} out; null
         *              when the plan exchanges nothing
         * @param epoch the first of the plan's epochs
         */
        void launch(long[] peers, long epoch);
    }

    /**
     * One collective call, as the plans see it.
     *
     * @param send device address of the send buffer (0 where absent: broadcast off the root)
     * @param recv device address of the receive buffer (0 where absent: reduce off the root)
     * @param recvBytes bytes of the receive buffer (it may be larger than the call needs)
     * @param count elements: all-reduce, reduce, broadcast the buffer's; all-gather and reduce-scatter each rank's block;
     *              all-to-all the send buffer's
     * @param op null where the collective has none
     * @param root -1 where the collective has none
     * @param stream the caller's CUstream
     */
    public record Call(long send, long recv, long recvBytes, long count, DataType type, ReduceOp op, int root,
                       MemorySegment stream) {
    }

    /** Rank {@code q}'s published input, mapped here. */
    static long in(long[] peers, int q) {
        return peers[2 * q];
    }

    /** Rank {@code q}'s published output, mapped here. */
    static long out(long[] peers, int q) {
        return peers[2 * q + 1];
    }
}
