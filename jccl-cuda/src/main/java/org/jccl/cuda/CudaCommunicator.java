package org.jccl.cuda;

import java.util.List;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.JcclException;

/**
 * jccl's GPU communicator: collectives between GPUs of one host through peer-mapped memory
 * (NVLink or PCIe peer-to-peer) with jccl's own kernels, enqueued on the caller's stream.
 *
 * <p>Algorithms (each one kernel, see jccl_kernels.cu): all-reduce one-shot for small messages (every
 * GPU pushes its input into every peer's inbox and reduces its own; in place or not, no record
 * exchanged, no end barrier), push above it (stores only, through scratch), two-shot when forced (GPU r
 * reduces slice r from every peer and writes the result into every peer's output), and for large
 * messages a ring (every GPU stores only to its successor: reduce-scatter, then all-gather); reduce-scatter and reduce by the same slice scheme;
 * all-gather, broadcast and all-to-all as pushes (stores into the peers' outputs); send/recv as
 * pushes after the receiver's kernel says its buffer is free. Which variant runs is the GPU tuner's
 * table (org.jccl.cuda.internal.GpuTuner); the plans that launch them live beside it.
 *
 * <p>Layouts: {@link #createAll} (one process, several GPUs: peers' pointers are used as they
 * are) and {@link #create} (one process per GPU: buffers are mapped with CUDA IPC, handles travel
 * over the host communicator, and mappings are cached). Where GPUs cannot map each other's memory,
 * collectives are staged through pinned host memory and the CPU transports ({@link #stagedBecause()}
 * says why).
 *
 * <p>Every kernel that waits for a peer polls an abort word and a deadline
 * ({@code JCCL_CUDA_WAIT_TIMEOUT}); a kernel that gives up records why in host-mapped memory, and
 * the next call on the communicator throws a {@link CudaException} naming the operation, its
 * sequence number and the peer.
 *
 * <p>Thread safety: one thread per communicator at a time (calls are synchronized); a group
 * ({@link #groupStart()}) belongs to the thread that opened it.
 *
 * <p>Two implementations, chosen at creation ({@code CommunicatorFactory}): the peer-to-peer one
 * ({@code PeerCommunicator}) and the host-staged one ({@code StagedCommunicator}); the group of
 * either is {@code DeviceGroup}.
 */
public abstract sealed class CudaCommunicator implements DeviceCommunicator permits PeerCommunicator, StagedCommunicator, HierCommunicator {
    final int rank;
    final int size;
    final CudaDevice device;
    final String name;

    CudaCommunicator(int rank, int size, CudaDevice device, String name) {
        this.rank = rank;
        this.size = size;
        this.device = device;
        this.name = name;
    }

    // ================================================================== creation

    /**
     * One process driving several GPUs (like ncclCommInitAll): rank i runs on {@code devices.get(i)}.
     * Every pair must be able to map each other's memory; a device listed twice is an error.
     */
    public static List<CudaCommunicator> createAll(List<CudaDevice> devices) {
        return createAll(devices, Config.fromEnvironment());
    }

    public static List<CudaCommunicator> createAll(List<CudaDevice> devices, Config config) {
        return CommunicatorFactory.createAll(devices, config);
    }

    /**
     * Collective over {@code host}: each rank of the host communicator brings one GPU; ranks are
     * usually separate processes (jccl run, torchrun, mpirun); {@link Cuda#deviceFor(Communicator)}
     * picks each rank's GPU by jccl's rule. First, before any memory is exchanged, every rank
     * publishes its GPU and host identity in one all-gather: two ranks of one host on one GPU fail on
     * every rank, naming both ranks, the GPU and each rank's CUDA_VISIBLE_DEVICES.
     */
    public static CudaCommunicator create(Communicator host, CudaDevice device) {
        return create(host, device, Config.fromEnvironment());
    }

    public static CudaCommunicator create(Communicator host, CudaDevice device, Config config) {
        return CommunicatorFactory.create(host, device, config);
    }

    /** Whether collectives go through host memory, and why (null when they use peer-to-peer). */
    public abstract String stagedBecause();

    /**
     * The communicator's failure, or null; does not throw and does not wait (ncclCommGetAsyncError's
     * analogue). GPU calls return before their kernels run, so a failure found by a kernel shows here
     * once the kernel has recorded it: a {@link CudaException} when a kernel gave up waiting for a peer
     * (JCCL_CUDA_WAIT_TIMEOUT), an {@link org.jccl.InvalidUsageException} with {@link org.jccl.ErrorCode#MISMATCH}
     * when the mismatch guard found that ranks called different collectives (in the one-shot all-reduce
     * kernel, or on the host). Null after {@link #abort()} without another failure.
     */
    public abstract JcclException asyncError();

    // ================================================================== identity

    @Override
    public final int rank() {
        return rank;
    }

    @Override
    public final int size() {
        return size;
    }

    @Override
    public final CudaDevice device() {
        return device;
    }

    @Override
    public final String backend() {
        return "jccl";
    }

    @Override
    public final String toString() {
        return name + " rank " + rank + "/" + size + " on " + device;
    }

    // ================================================================== send / recv and groups

    @Override
    public final void send(DeviceBuffer buf, int peer, CudaStream stream) {
        checkUsable("send");
        DeviceArgs.checkPointToPoint(this, "send", buf, peer, stream);
        DeviceGroup.addP2p(this, new DeviceGroup.P2p(true, buf, peer, stream));
    }

    @Override
    public final void recv(DeviceBuffer buf, int peer, CudaStream stream) {
        checkUsable("recv");
        DeviceArgs.checkPointToPoint(this, "recv", buf, peer, stream);
        DeviceGroup.addP2p(this, new DeviceGroup.P2p(false, buf, peer, stream));
    }

    @Override
    public final void groupStart() {
        DeviceGroup.start();
    }

    @Override
    public final void groupEnd() {
        DeviceGroup.end();
    }

    // ================================================================== what the group asks of each implementation

    /** Throws when the communicator cannot take {@code what}: closed, aborted, or failed. */
    abstract void checkUsable(String what);

    /**
     * Phase 1 of a group, for this communicator's sends and receives {@code ops}: publishes the receive
     * buffers and returns their sequence numbers (in the order of the receives in {@code ops}); null
     * where nothing is published (staged).
     */
    abstract long[] publishRecvs(List<DeviceGroup.P2p> ops);

    /** The end of phase 1: the exchange's host messages go out (nothing where staged). */
    abstract void flushExchange();

    /** Phase 2: runs this communicator's sends and receives of the group; {@code recvSeqs} from {@link #publishRecvs}. */
    abstract void runP2p(List<DeviceGroup.P2p> ops, long[] recvSeqs);
}
