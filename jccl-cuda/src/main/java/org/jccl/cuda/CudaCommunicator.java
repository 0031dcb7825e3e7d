package org.jccl.cuda;

import java.util.List;
import org.jccl.Communicator;
import org.jccl.ReduceOp;

/** jccl's GPU communicator (implementation in progress). */
public final class CudaCommunicator implements DeviceCommunicator {
    private CudaCommunicator() {
    }

    /** Collective over {@code host}: one GPU per rank, ranks in separate processes (or threads), CUDA IPC between them. */
    public static CudaCommunicator create(Communicator host, CudaDevice device) {
        throw new UnsupportedOperationException("not yet");
    }

    /** One process driving several GPUs: rank i runs on devices.get(i) (like ncclCommInitAll). */
    public static List<CudaCommunicator> createAll(List<CudaDevice> devices) {
        throw new UnsupportedOperationException("not yet");
    }

    @Override public int rank() { throw new UnsupportedOperationException(); }
    @Override public int size() { throw new UnsupportedOperationException(); }
    @Override public CudaDevice device() { throw new UnsupportedOperationException(); }
    @Override public String backend() { return "jccl"; }
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
