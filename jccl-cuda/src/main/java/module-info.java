/**
 * jccl's GPU collectives: {@link org.jccl.cuda.CudaCommunicator} (jccl's own kernels over CUDA IPC
 * and NVLink) and {@link org.jccl.cuda.NcclCommunicator} (NCCL through FFM) behind one interface,
 * {@link org.jccl.cuda.DeviceCommunicator}. The CUDA driver, the kernels and the exchanges stay
 * inside the module ({@code org.jccl.cuda.internal} is not exported).
 */
module org.jccl.cuda {
    // The API types (Communicator, DataType, ReduceOp, the exceptions) appear in this module's API.
    requires transitive org.jccl.core;

    exports org.jccl.cuda;
}
