package org.jccl.internal.algo;

import java.lang.foreign.MemorySegment;
import java.util.List;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.internal.tune.Tuner;
import org.jccl.spi.CollectiveCall;
import org.jccl.spi.CollectiveProvider;
import org.jccl.spi.P2pRequest;

/**
 * What a collective algorithm needs from the rank that runs it: its place among the ranks, posting
 * and awaiting messages, scratch memory, the cost model and the transport's collective provider. The
 * algorithms of this package are written against this interface only; the runtime implements it
 * (one per communicator, used by the thread running the communicator's operation, the caller's or
 * the operation thread, one at a time), so algorithms can be read and tested
 * without the runtime, and the runtime depends on them, never the other way round.
 */
public interface CollectiveContext {

    /**
     * This rank as the running collective sees it: its rank in the communicator, or its index in the
     * group of a stage of a hierarchical collective ({@link #inGroup}).
     */
    int rank();

    /** Ranks of the running collective: the communicator's, or the group's of a hierarchical stage. */
    int size();

    /** Posts a send of {@code src} to {@code groupPeer}; src must stay unchanged until the request is done. */
    P2pRequest send(int groupPeer, MemorySegment src);

    /** Posts a receive of exactly {@code dst.byteSize()} bytes from {@code groupPeer}. */
    P2pRequest recv(int groupPeer, MemorySegment dst);

    /** Waits for one request, driving progress on every connection; fails with the request's error. */
    void await(P2pRequest r);

    /** Waits for all requests (nulls are skipped). */
    void awaitAll(P2pRequest... rs);

    /** Waits for all requests in the list, then clears it. */
    void awaitAll(List<P2pRequest> rs);

    /**
     * Runs {@code body} with this context narrowed to a group of the communicator's ranks: inside,
     * {@link #rank()} and {@link #size()} are the group's, peers of {@link #send}/{@link #recv} are
     * group ranks, {@link #tuner()} is {@code tuner} (the stage's cost model) and there is neither a
     * shared collective segment nor a hierarchy, so every algorithm of {@link Collectives} runs on
     * the group unchanged. Every member calls it with the same {@code members}, in the same order
     * relative to its other operations with those peers (connections match messages in FIFO order).
     *
     * @param members communicator ranks of the group, this rank among them
     */
    void inGroup(int[] members, Tuner tuner, Runnable body);

    /**
     * Scratch memory of at least {@code bytes} for slot {@code slot} (0..5), reused across operations
     * and grown on demand; contents are undefined. Slots never alias each other.
     */
    MemorySegment scratch(int slot, long bytes);

    /** The communicator's host layout, when its ranks span hosts and a hierarchical collective may run; null in a stage. */
    Hierarchy hierarchy();

    /** The cost-model tuner that picks algorithms (honouring {@code JCCL_ALGO}). */
    Tuner tuner();

    /** Pipelining granularity of ring algorithms, in bytes ({@code JCCL_CHUNK_SIZE}). */
    long chunkBytes();

    /** All-reduce messages up to this many bytes use recursive doubling ({@code JCCL_RD_THRESHOLD}); -1 when unset (the tuner decides). */
    long rdThreshold();

    /**
     * The communicator's collective provider (a transport's own path for whole collectives, e.g. SHM's
     * shared segment), or null, also inside a stage of a hierarchical collective; the same on every rank.
     * Whether a call takes it is the tuner's choice ({@code Algo.SHARED}).
     */
    CollectiveProvider provider();

    /**
     * The runtime's side of a call through {@link #provider()} of this type and operator (null for
     * all-gather and barrier), to pass to the provider at once; it first waits for what earlier calls
     * still owe (their ring confirmations), so that a mismatch they show fails this call naming them.
     */
    CollectiveCall providerCall(DataType type, ReduceOp op);
}
