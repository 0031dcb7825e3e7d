package org.jccl.spi;

import java.util.List;
import org.jccl.Config;

/**
 * What a transport may know about the communicator it serves. Implemented by the runtime.
 */
public interface TransportContext {

    /** 16 random bytes naming the communicator; sent in every connection's hello. */
    byte[] commId();

    /** This rank. */
    int rank();

    /** Number of ranks. */
    int size();

    /** The communicator's 128-bit secret; every connection proves knowledge of it before anything is allocated. */
    byte[] secret();

    /** The communicator's settings. */
    Config config();

    /** A peer's bootstrap info; available once bootstrap completed (before any {@link Endpoint#connect}). */
    PeerInfo peer(int rank);

    /** True once the communicator is aborted or closing: blocking steps (connect retries) must stop. */
    boolean isStopping();

    /**
     * Wakes this rank's progress engine if it is blocked waiting for work; costs a volatile read when
     * it is not. Transports whose work arrives without a selectable channel (the in-JVM transport)
     * call it on the <em>receiving</em> rank's context after handing it a message. Any thread.
     */
    void wakeup();

    /**
     * Called now and then (every few tens of milliseconds) by a transport whose {@code connect} or
     * {@code prepare} blocks the thread running an operation waiting for a peer (a TCP acceptor waiting for the
     * lower rank's sockets): the runtime's mismatch guard asks for a comparison of every rank's call
     * when such a wait lasts, since ranks whose calls differ may never open the connection the other
     * waits for. Called only by the thread running the operation; the default does nothing.
     */
    default void stillWaiting() {
    }

    /**
     * This rank's index among the ranks of its host (the same host identity), in rank order. Known in
     * {@link Transport#open} when the launcher says it (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
     * SLURM_LOCALID, ...), and always once bootstrap completed; -1 while unknown.
     */
    default int localRank() {
        return -1;
    }

    /** How many ranks share this rank's host, known when {@link #localRank()} is; -1 while unknown. */
    default int localSize() {
        return -1;
    }

    /**
     * The GPU this rank drives, by jccl's one rule (JCCL_CUDA_DEVICE, else CUDA_VISIBLE_DEVICES and the
     * local rank; the rule `jccl doctor` and jccl-cuda apply): its PCI address ("0000:1b:00.0"), or
     * null when the host has no GPU, the rank drives none, or the local rank is not known yet. The
     * host's topology is discovered on the first call.
     */
    default String gpu() {
        return null;
    }

    /**
     * The network devices this rank should use, primary first: the RDMA NICs nearest its GPU (the
     * assignment `jccl topo` prints, honouring JCCL_IB_HCA; on a host without GPUs, NIC local rank mod
     * NICs), by kernel device name ("mlx5_0"). Empty when the host has no RDMA NIC or the local rank
     * is not known yet. The host's topology is discovered on the first call.
     */
    default List<String> nics() {
        return List.of();
    }
}
