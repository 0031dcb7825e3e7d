package org.jccl;

import java.lang.foreign.MemorySegment;

/**
 * A group of ranks that run collectives together, like an {@code ncclComm_t}.
 *
 * <p><b>Semantics.</b> Every collective must be called by every rank of the communicator, in the
 * same order, with matching counts, types, operators and roots (NCCL's rule). Operations on one
 * communicator run and complete in the order they are issued; the asynchronous forms ({@code
 * ...Async}) return a {@link Work} at once and the blocking forms wait. Counts are taken from the
 * buffers (see {@link Buffer#slice}); an operation is <em>in place</em> when its send buffer is the
 * receive buffer or, for allGather and reduceScatter, exactly this rank's slot of it, as in NCCL.
 *
 * <p><b>Threads.</b> A communicator may be used from several threads: calls are serialised in
 * the order they reach the communicator. Each rank of a job normally drives its communicator from
 * one thread, because the issue order must agree across ranks: two threads racing on one
 * communicator are serialised safely (never rejected, never interleaved inside an operation), but
 * may reach it in different orders on different ranks; with {@code JCCL_CHECK=1} such a mismatch is
 * reported (ErrorCode.MISMATCH, naming both ranks and both calls) instead of pairing unrelated
 * messages. Use {@link #dup()} to give each thread a communicator of its own.
 *
 * <p><b>Errors.</b> Bad arguments throw {@link IllegalArgumentException} before anything is sent and
 * leave the communicator usable. Failures of peers, the network or deadlines throw subclasses of
 * {@link JcclException} naming the rank, the operation and its sequence number; after such a
 * failure the communicator is aborted and later calls fail too. Ranks that call the same collective
 * with different counts, data types, reduction ops or roots fail with an {@link InvalidUsageException}
 * ({@code ErrorCode.MISMATCH}) naming the ranks and their calls, never with a wrong result: the
 * always-on mismatch guard compares a signature of every call carried by the messages themselves
 * ({@code JCCL_CHECK}). A rank whose own result of a call cannot depend on another rank (a broadcast's
 * or scatter's root, a reduce's or gather's leaf, a call of 0 elements) returns without waiting for
 * that comparison: when its call was mismatched, its next call that meets another rank's messages, or
 * {@link #close()}, throws the MISMATCH (and the communicator is aborted within a fraction of a second
 * even if it makes no further call).
 */
public interface Communicator extends AutoCloseable {

    /** Color for {@link #split} meaning "this rank joins no new communicator" (NCCL_SPLIT_NOCOLOR). */
    int SPLIT_NOCOLOR = -1;

    /** This rank, 0 &lt;= rank &lt; size. */
    int rank();

    /** Number of ranks. */
    int size();

    // ---------------------------------------------------------------- collectives, asynchronous

    /** recv[i] = op over all ranks of send[i], for i &lt; send.count(). recv must hold send.count() elements. */
    Work allReduceAsync(Buffer send, Buffer recv, ReduceOp op);

    /** Copies root's send into every rank's recv (recv.count() elements). send is read only on the root and may be null elsewhere. */
    Work broadcastAsync(Buffer send, Buffer recv, int root);

    /** Like allReduce, with the result only on {@code root}; recv is written only there and may be null elsewhere. */
    Work reduceAsync(Buffer send, Buffer recv, ReduceOp op, int root);

    /** recv[r*c .. (r+1)*c) = send of rank r, with c = send.count(); recv must hold size()*c elements. */
    Work allGatherAsync(Buffer send, Buffer recv);

    /** recv (c = recv.count() elements) = op over ranks of send[rank*c .. (rank+1)*c); send must hold size()*c elements. */
    Work reduceScatterAsync(Buffer send, Buffer recv, ReduceOp op);

    /**
     * Block j of send goes to rank j, and block i of recv comes from rank i; a block is
     * send.count()/size() elements (send.count() must be a multiple of size()).
     */
    Work allToAllAsync(Buffer send, Buffer recv);

    /**
     * All-to-all with per-rank counts and displacements (in elements, like MPI_Alltoallv): rank
     * j receives sendCounts[j] elements from send offset sendDispls[j]; this rank receives
     * recvCounts[i] elements from rank i at recv offset recvDispls[i]. Counts must agree pairwise.
     */
    Work allToAllvAsync(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls);

    /** root's recv[r*c .. (r+1)*c) = send of rank r, c = send.count(); recv is used only at root. */
    Work gatherAsync(Buffer send, Buffer recv, int root);

    /** recv of rank r = root's send[r*c .. (r+1)*c), c = recv.count(); send is used only at root. */
    Work scatterAsync(Buffer send, Buffer recv, int root);

    /** Completes once every rank has called it. */
    Work barrierAsync();

    /** Sends buf to {@code peer}, which must post a matching {@link #recvAsync} of the same count and type. */
    Work sendAsync(Buffer buf, int peer);

    /** Receives buf.count() elements from {@code peer}. */
    Work recvAsync(Buffer buf, int peer);

    // ---------------------------------------------------------------- grouping, sub-communicators, lifecycle

    /** Opens a group on the calling thread; see {@link Group}. */
    Group group();

    /**
     * Collective: splits this communicator. Ranks with the same {@code color} form a new
     * communicator, ordered by {@code key} and then by their rank here. A rank passing {@link
     * #SPLIT_NOCOLOR} gets {@code null}. Must be called by every rank.
     */
    Communicator split(int color, int key);

    /** Collective: a new communicator over the same ranks, with its own connections and order of operations. */
    Communicator dup();

    /**
     * Stops the communicator now, from any thread: every pending and later operation fails with an
     * {@code ABORTED} exception, and connections and threads are released. Idempotent.
     */
    void abort();

    /**
     * Waits for the operations already issued, then releases connections and threads. Idempotent;
     * safe after {@link #abort()}. It also waits for the mismatch guard's comparisons of calls that
     * returned before their peers' words arrived (as long as those calls would have waited themselves:
     * until the words arrive, or a peer fails or times out), and throws an {@link InvalidUsageException}
     * ({@code ErrorCode.MISMATCH}) when they, or another rank's report, show mismatched calls that no call
     * of this rank has thrown yet; after {@link #abort()} it throws nothing.
     */
    @Override
    void close();

    /**
     * A snapshot of this rank's counters for this communicator: operations, failures and bytes per
     * collective, bytes sent to and received from each peer and per transport (see {@link CommStats}
     * for what each counts). Cheap: the operations only increment counters, this call copies them.
     * Any thread, also after {@link #close()} or {@link #abort()}.
     */
    CommStats stats();

    // ---------------------------------------------------------------- blocking forms

    default void allReduce(Buffer send, Buffer recv, ReduceOp op) {
        allReduceAsync(send, recv, op).join();
    }

    default void allReduce(Buffer inOut, ReduceOp op) {
        allReduceAsync(inOut, inOut, op).join();
    }

    default void broadcast(Buffer send, Buffer recv, int root) {
        broadcastAsync(send, recv, root).join();
    }

    default void broadcast(Buffer inOut, int root) {
        broadcastAsync(inOut, inOut, root).join();
    }

    default void reduce(Buffer send, Buffer recv, ReduceOp op, int root) {
        reduceAsync(send, recv, op, root).join();
    }

    default void allGather(Buffer send, Buffer recv) {
        allGatherAsync(send, recv).join();
    }

    default void reduceScatter(Buffer send, Buffer recv, ReduceOp op) {
        reduceScatterAsync(send, recv, op).join();
    }

    default void allToAll(Buffer send, Buffer recv) {
        allToAllAsync(send, recv).join();
    }

    default void allToAllv(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls) {
        allToAllvAsync(send, sendCounts, sendDispls, recv, recvCounts, recvDispls).join();
    }

    default void gather(Buffer send, Buffer recv, int root) {
        gatherAsync(send, recv, root).join();
    }

    default void scatter(Buffer send, Buffer recv, int root) {
        scatterAsync(send, recv, root).join();
    }

    default void barrier() {
        barrierAsync().join();
    }

    default void send(Buffer buf, int peer) {
        sendAsync(buf, peer).join();
    }

    default void recv(Buffer buf, int peer) {
        recvAsync(buf, peer).join();
    }

    // ---------------------------------------------------------------- NCCL-style native-memory forms

    /** {@code ncclAllReduce(send, recv, count, type, op)} on native memory. */
    default Work allReduceAsync(MemorySegment send, MemorySegment recv, long count, DataType type, ReduceOp op) {
        return allReduceAsync(Buffer.of(send, count, type), Buffer.of(recv, count, type), op);
    }

    default void allReduce(MemorySegment send, MemorySegment recv, long count, DataType type, ReduceOp op) {
        allReduceAsync(send, recv, count, type, op).join();
    }

    // ---------------------------------------------------------------- heap-array conveniences (in place)

    default void allReduce(float[] data, ReduceOp op) {
        allReduce(Buffer.of(data), op);
    }

    default void allReduce(double[] data, ReduceOp op) {
        allReduce(Buffer.of(data), op);
    }

    default void allReduce(int[] data, ReduceOp op) {
        allReduce(Buffer.of(data), op);
    }

    default void allReduce(long[] data, ReduceOp op) {
        allReduce(Buffer.of(data), op);
    }

    default void allReduce(byte[] data, ReduceOp op) {
        allReduce(Buffer.of(data), op);
    }

    /** In-place all-reduce of float16 or bfloat16 bit patterns. */
    default void allReduce(short[] data, DataType type, ReduceOp op) {
        allReduce(Buffer.of(data, type), op);
    }

    default void broadcast(float[] data, int root) {
        broadcast(Buffer.of(data), root);
    }

    default void broadcast(double[] data, int root) {
        broadcast(Buffer.of(data), root);
    }

    default void broadcast(int[] data, int root) {
        broadcast(Buffer.of(data), root);
    }

    default void broadcast(long[] data, int root) {
        broadcast(Buffer.of(data), root);
    }

    default void broadcast(byte[] data, int root) {
        broadcast(Buffer.of(data), root);
    }

    /**
     * Builds a communicator of the ranks not in {@code excludedRanks} (like {@code ncclCommShrink}),
     * typically after those ranks failed. Called by every surviving rank with the same list; the
     * excluded ranks do not call it. New ranks are dense and ordered by old rank (old rank 3 of 4 is
     * rank 2 after excluding rank 1).
     *
     * <p>This communicator ends: it is aborted first (its pending operations fail with ABORTED), so
     * that its ports are free; the survivors then meet again, without the failed ranks, at a
     * bootstrap root that the lowest surviving rank opens on the port its TCP endpoint had in this
     * communicator (every survivor knows that address from the peer table; the job's secret
     * authenticates it), and the new communicator opens fresh connections. Bounded by
     * {@code JCCL_INIT_TIMEOUT}.
     *
     * @throws IllegalArgumentException when a rank is out of range, listed twice, or is this rank
     */
    Communicator shrink(int... excludedRanks);
}
