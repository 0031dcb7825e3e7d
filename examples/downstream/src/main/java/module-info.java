/**
 * A user's program on jccl: {@code requires org.jccl.core} names jccl-core's module, which exports
 * the API ({@code org.jccl}) and the transport SPI, and nothing of its internals.
 */
module com.example.average {
    requires org.jccl.core;
}
