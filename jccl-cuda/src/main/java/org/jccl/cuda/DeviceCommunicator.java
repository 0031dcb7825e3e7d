package org.jccl.cuda;

import org.jccl.ReduceOp;

/**
 * Collectives on GPU memory, NCCL's model: every call enqueues the operation on the caller's
 * {@link CudaStream} and returns without waiting for the GPU; work issued on that stream
 * afterwards sees the result. Every rank must call the same collectives in the same order with
 * matching counts, types, operators and roots.
 *
 * <p>Two implementations: {@link CudaCommunicator} (jccl's own kernels over peer-to-peer GPU
 * memory) and {@link NcclCommunicator} (NCCL through FFM, for side-by-side measurements).
 *
 * <p>Counts come from the buffers, with the same rules as the host {@link org.jccl.Communicator}:
 * allGather's recv holds size() x send.count() elements, reduceScatter's send size() x
 * recv.count(), allToAll's send and recv the same count, a multiple of size(). An operation is in
 * place when send and recv have the same address (for allGather and reduceScatter: when the small
 * buffer is exactly this rank's slot of the large one).
 *
 * <p><b>Groups.</b> {@link #groupStart()}/{@link #groupEnd()} bracket calls that must be issued
 * together, like ncclGroupStart/End: a send and a recv between ranks that both send first, or one
 * thread driving several GPUs (each GPU's call would otherwise wait for the others). A group is
 * per thread and spans every communicator of the same implementation.
 */
public interface DeviceCommunicator extends AutoCloseable {

    /** This rank. */
    int rank();

    /** Number of ranks. */
    int size();

    /** The GPU this rank runs on. */
    CudaDevice device();

    /** "jccl" or "nccl". */
    String backend();

    void allReduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream);

    /** recv (recv.count() elements) = root's send on every rank; send is used only on the root and may be null elsewhere. */
    void broadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream);

    /** Like allReduce with the result only on root; recv may be null elsewhere. */
    void reduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream stream);

    void allGather(DeviceBuffer send, DeviceBuffer recv, CudaStream stream);

    void reduceScatter(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream);

    void allToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream);

    /** Sends buf to peer, which posts a matching {@link #recv}; pair them in a group when both sides also receive. */
    void send(DeviceBuffer buf, int peer, CudaStream stream);

    void recv(DeviceBuffer buf, int peer, CudaStream stream);

    /** Opens a group on this thread (nestable). */
    void groupStart();

    /** Closes the group; at the outermost close every call made inside it is issued. */
    void groupEnd();

    /**
     * Stops the communicator from any thread: kernels waiting on peers give up, later calls fail.
     * Idempotent.
     */
    void abort();

    /** Waits for nothing: releases the communicator's resources once its enqueued work has finished. */
    @Override
    void close();
}
