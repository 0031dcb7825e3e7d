package org.jccl.cuda;

import java.util.List;
import org.jccl.Communicator;
import org.jccl.ReduceOp;

/** NCCL (libnccl.so.2 through FFM) behind the {@link DeviceCommunicator} interface (implementation in progress). */
public final class NcclCommunicator implements DeviceCommunicator {
    private NcclCommunicator() {
    }

    /** Whether libnccl.so.2 can be loaded. */
    public static boolean isAvailable() { return false; }

    /** Why not, or null. */
    public static String unavailableReason() { return "not yet"; }

    /** Collective over {@code host}: rank 0 makes the ncclUniqueId and broadcasts it over the host communicator. */
    public static NcclCommunicator create(Communicator host, CudaDevice device) { throw new UnsupportedOperationException(); }

    /** One process, several GPUs (ncclCommInitAll). */
    public static List<NcclCommunicator> createAll(List<CudaDevice> devices) { throw new UnsupportedOperationException(); }

    @Override public int rank() { throw new UnsupportedOperationException(); }
    @Override public int size() { throw new UnsupportedOperationException(); }
    @Override public CudaDevice device() { throw new UnsupportedOperationException(); }
    @Override public String backend() { return "nccl"; }
    @Override public void allReduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) { throw new UnsupportedOperationException(); }
    @Override public void broadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream) { throw new UnsupportedOperationException(); }
    @Override public void reduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream stream) { throw new UnsupportedOperationException(); }
    @Override public void allGather(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) { throw new UnsupportedOperationException(); }
    @Override public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) { throw new UnsupportedOperationException(); }
    @Override public void allToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) { throw new UnsupportedOperationException(); }
    @Override public void send(DeviceBuffer buf, int peer, CudaStream stream) { throw new UnsupportedOperationException(); }
    @Override public void recv(DeviceBuffer buf, int peer, CudaStream stream) { throw new UnsupportedOperationException(); }
    @Override public void groupStart() { throw new UnsupportedOperationException(); }
    @Override public void groupEnd() { throw new UnsupportedOperationException(); }
    @Override public void abort() { }
    @Override public void close() { }
}
