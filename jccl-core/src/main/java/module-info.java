/**
 * jccl's core: the API ({@code org.jccl}), the transport SPI ({@code org.jccl.spi}) and the host
 * runtime behind them (bootstrap, transports over shared memory and TCP, algorithms, control plane).
 *
 * <p>Only the API and the SPI are exported to everyone. Internal packages are exported only to
 * jccl's own modules, each for the reason given beside it; applications and transport plugins see
 * none of them. The layering of the packages is docs/ARCHITECTURE.md's, checked by LayeringTest.
 */
module org.jccl.core {
    // The reduction kernels (internal.reduce) use the Vector API.
    requires jdk.incubator.vector;
    // Collective operations are JFR events (internal.control.CollectiveEvent).
    requires jdk.jfr;

    exports org.jccl;
    exports org.jccl.spi;

    // jccl-cuda declares its GPU settings' grammar checks and reads settings; jccl-cli lists every
    // setting with its origin (`jccl env`); jccl-ucx reads the network settings it turns into UCX's (JCCL_NET,
    // JCCL_IB_*, JCCL_UCX_*).
    exports org.jccl.internal.config to org.jccl.cuda, org.jccl.cli, org.jccl.ucx;
    // jccl-cuda's kernels compare the same 64-bit mismatch-guard word as the host transports.
    exports org.jccl.internal.guard to org.jccl.cuda;
    // One logger (JCCL_DEBUG, JCCL_DEBUG_SUBSYS, JCCL_DEBUG_FILE) for every module.
    exports org.jccl.internal.log to org.jccl.cuda, org.jccl.cli, org.jccl.ucx;
    // jccl-cuda groups a communicator's ranks by host (HostPeers) to find GPUs sharing one.
    exports org.jccl.internal.runtime to org.jccl.cuda;
    // The GPU-to-rank rule (GpuMapping), NVML and the topology are shared by jccl-cuda, `jccl topo`,
    // `jccl doctor` and the launcher's CPU binding; jccl-ucx maps the rank's NICs to UCX devices and says
    // whether GPUDirect RDMA is possible (peermem, dma-buf) from the same topology.
    exports org.jccl.internal.topo to org.jccl.cuda, org.jccl.cli, org.jccl.ucx;
    // jccl-cuda's shared-memory mailbox reserves /dev/shm the way the SHM transport does.
    exports org.jccl.internal.transport.shm to org.jccl.cuda;
    // JSON for reports (jccl-cli's perf/doctor/status output) and resource limits (jccl-cuda).
    exports org.jccl.internal.util to org.jccl.cuda, org.jccl.cli;
    // `jccl status` speaks the control plane's status protocol.
    exports org.jccl.internal.control to org.jccl.cli;
    // `jccl doctor` runs the checks.
    exports org.jccl.internal.doctor to org.jccl.cli;
    // `jccl doctor` resolves JCCL_SOCKET_IFNAME as the transports do.
    exports org.jccl.internal.net to org.jccl.cli;

    // Transports beyond the built-in ones (jccl-ucx next) are found through ServiceLoader.
    uses org.jccl.spi.Transport;
}
