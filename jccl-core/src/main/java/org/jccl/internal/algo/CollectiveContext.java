package org.jccl.internal.algo;

import java.lang.foreign.MemorySegment;
import java.util.List;
import org.jccl.internal.transport.shm.ShmCollArea;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.internal.tune.Tuner;
import org.jccl.spi.P2pRequest;

/**
 * What a collective algorithm needs from the rank that runs it: its place among the ranks, posting
 * and awaiting messages, scratch memory, the cost model and the shared collective segment. The
 * algorithms of this package are written against this interface only; the runtime implements it
 * (one per communicator, used on the operation thread only), so algorithms can be read and tested
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
     * The communicator's shared collective segment (every rank of the communicator on this host over
     * SHM), or null; the same on every rank.
     */
    ShmCollArea sharedArea();

    /**
     * Waits until every peer's {@code arrive} word (or {@code reduced} word) in the shared collective
     * segment has reached {@code round}, failing in bounded time when the communicator is aborted, a
     * peer closed its communicator or a peer's process is gone.
     */
    void awaitShared(ShmCollArea a, boolean reducedWord, long round);

    /** {@link #awaitShared} for one peer {@code q}. */
    void awaitSharedOne(ShmCollArea a, int q, boolean reducedWord, long round);

    /**
     * Counts an operation through the shared collective segment that moved {@code perPeer} bytes
     * each way between this rank and every peer. Once per operation, never per round.
     */
    void countShared(long perPeer);

    /**
     * Counts a two-step all-reduce of {@code count} elements of {@code elementBytes} through the
     * shared segment, in rounds of {@code perRound} elements cut into one slice per rank.
     */
    void countSharedSlices(long count, long perRound, int elementBytes);
}
