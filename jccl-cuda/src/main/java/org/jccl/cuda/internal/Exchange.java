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

    /** Publishes this rank's (in, out) device pointers for collective {@code epoch} (0 where absent). */
    void publishCollective(int rank, long epoch, long in, long out);

    /**
     * Every rank's (in, out) for {@code epoch}, mapped here: {@code result[2q]} in, {@code
     * result[2q+1]} out. Waits for the peers to publish.
     */
    long[] resolveCollective(int rank, long epoch);

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
