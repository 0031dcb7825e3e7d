/**
 * jccl's UCX transport: libucp (UCX 1.13 or newer) bound through FFM, no JNI and no C, found by
 * jccl-core through {@link java.util.ServiceLoader} at the priority the SPI reserves for UCX (30,
 * between SHM and TCP). Where UCX is absent or too old the transport reports itself disabled with
 * the reason; nothing crashes. {@code org.jccl.ucx} says whether UCX was found and what it offers
 * (for {@code jccl doctor} and {@code jccl topo}); the binding and the transport stay inside.
 */
module org.jccl.ucx {
    requires org.jccl.core;

    exports org.jccl.ucx;

    provides org.jccl.spi.Transport with org.jccl.ucx.internal.UcxTransport;
}
