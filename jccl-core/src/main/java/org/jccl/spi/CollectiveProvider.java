package org.jccl.spi;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * A transport's own path for whole collectives: what it offers when it can run some collectives for
 * every rank of the communicator at once, better than point-to-point messages between pairs can (SHM's
 * shared collective segment, where every rank reads the others' areas; a network's in-switch or hardware
 * all-reduce). Optional: {@link Transport#openCollectives} returns one or null.
 *
 * <p><b>When the runtime uses it.</b> At creation, when every pair of ranks of the communicator uses
 * the same transport T (each rank derives that from the same peer table), the runtime asks T for a
 * provider, once per communicator, after every endpoint's {@link Endpoint#prepare}; a communicator of
 * one rank, or whose pairs use several transports, has none. Then, per call, a collective is a candidate
 * for the provider when {@link #supports} takes its kind, data type and operator, and the tuner prices it
 * at {@link #cost} beside the point-to-point algorithms ({@code JCCL_ALGO} names the provider's path
 * {@code shared}); the cheapest wins. A declined call (not supported, or an infinite cost) runs the
 * point-to-point algorithms over the same connections, so a provider may take only what it does well.
 *
 * <p><b>Every rank decides alike.</b> Ranks that disagreed about whether a call goes through the
 * provider would deadlock (one waits in the provider, the other for a message). So {@link
 * Transport#openCollectives} must return a provider on every rank or on none, and {@link #supports} and
 * {@link #cost} must give the same answer on every rank for the same arguments: decide from what every
 * rank sees alike (the peer table, what rank 0 published, declared constants), never from a local
 * measurement.
 *
 * <p><b>Running a call.</b> Each method runs one collective on the calling thread, the thread that
 * runs the communicator's operations (one at a time, in the same order on every rank), and returns
 * when this rank's part is done; inputs and outputs are native segments of exactly the call's sizes,
 * and the output may be the same memory as the input (in place). The {@link CollectiveCall} passed in
 * is the runtime's side of the call, valid until the method returns: waits go through its {@link
 * CollectiveCall#idle} (the communicator's idle strategy) and {@link CollectiveCall#checkAborted},
 * reductions through {@link CollectiveCall#reduce}, and when the provider's own wire can carry them,
 * the call's guard word and signature are published and compared through it, so that mismatched calls
 * fail with the runtime's messages. A peer that is gone is reported with {@link
 * CollectiveCall#peerFailed}; a provider never waits without bound.
 *
 * <p><b>Lifecycle.</b> {@link #close()} comes once, when the communicator closes or aborts, possibly
 * from another thread while a call runs (which must then fail soon, not hang); closing the endpoint
 * after it may release what the provider used.
 */
public interface CollectiveProvider extends AutoCloseable {

    /** The collectives a provider may run. */
    enum Collective {
        /** {@link #allReduce}. */
        ALL_REDUCE,
        /** {@link #allGather}. */
        ALL_GATHER,
        /** {@link #reduceScatter}. */
        REDUCE_SCATTER,
        /** {@link #barrier}. */
        BARRIER
    }

    /** What this provider is, for log lines ("SHM shared segment"). */
    String describe();

    /**
     * Whether this provider takes calls of {@code kind} with this data type and operator ({@code type}
     * and {@code op} are null for {@link Collective#ALL_GATHER} and {@link Collective#BARRIER}). The same
     * answer on every rank. A barrier the provider supports always goes through it (when {@code
     * JCCL_ALGO} allows {@code shared}); the other kinds are priced by {@link #cost}.
     */
    boolean supports(Collective kind, DataType type, ReduceOp op);

    /**
     * The model time in seconds of one call of {@code kind} moving {@code bytes}, as the tuner compares it
     * with the point-to-point algorithms' alpha-beta-gamma costs ({@link LinkCosts}): {@code bytes} is the
     * vector of an all-reduce, the whole output (every rank's block) of an all-gather, the whole input of
     * a reduce-scatter, 0 for a barrier. {@link Double#POSITIVE_INFINITY} declines the size. The same
     * answer on every rank.
     */
    double cost(Collective kind, long bytes);

    /**
     * All-reduce of {@code count} elements from {@code src} into {@code dst} (may be the same memory),
     * combining with {@link CollectiveCall#reduce}. For {@link ReduceOp#AVG} the provider leaves the sum
     * (what {@code reduce} computes); the runtime divides once after it returns.
     */
    void allReduce(CollectiveCall call, MemorySegment src, MemorySegment dst, long count, DataType type, ReduceOp op);

    /**
     * All-gather of {@code bytesPerRank} bytes from every rank into {@code dst} (rank r's block at
     * {@code r * bytesPerRank}); this rank's own block is already in place in {@code dst}.
     */
    void allGather(CollectiveCall call, MemorySegment dst, long bytesPerRank);

    /**
     * Reduce-scatter: {@code src} holds one block of {@code count} elements per rank; this rank's
     * block of the reduction lands in {@code dst} (which may be that block of {@code src}); {@code src}
     * is otherwise left as it was. {@link ReduceOp#AVG}: as for {@link #allReduce}.
     */
    void reduceScatter(CollectiveCall call, MemorySegment src, MemorySegment dst, long count, DataType type, ReduceOp op);

    /** Returns once every rank of the communicator has entered the barrier. */
    void barrier(CollectiveCall call);

    /**
     * Releases the provider: peers waiting for this rank in it fail soon (as when its process is gone).
     * Idempotent; any thread.
     */
    @Override
    void close();
}
