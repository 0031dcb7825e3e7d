/**
 * The transport SPI: how the runtime moves messages between ranks. A {@link org.jccl.spi.Transport}
 * opens an {@link org.jccl.spi.Endpoint} per communicator, which makes one {@link
 * org.jccl.spi.Connection} per peer that uses it; connections carry ordered, exactly-sized messages
 * posted as {@link org.jccl.spi.P2pRequest}s and advanced by non-blocking {@code progress()} calls
 * from whichever thread runs the communicator's operations (one at a time: the caller's own thread or
 * the communicator's operation thread). Algorithms are written against this layer only, so a new
 * transport inherits every collective. A transport declares what a message costs ({@link
 * org.jccl.spi.LinkCosts}) for the tuner, and learns its rank's place on the host, GPU and NICs from
 * the {@link org.jccl.spi.TransportContext}.
 *
 * <p>Optionally a transport registers memory ({@link org.jccl.spi.RegisteredRegion}, with a remote key
 * packed to bytes; {@link org.jccl.spi.RegistrationCache} for transports whose registration is costly)
 * and puts into peers' regions ({@link org.jccl.spi.RemoteRegion}, {@code Connection.put} and
 * {@code flush}); {@link org.jccl.spi.MemoryType} says which memory (host, CUDA device) it takes.
 * A transport may also run whole collectives itself ({@link org.jccl.spi.CollectiveProvider}, with the
 * runtime's side of each call in {@link org.jccl.spi.CollectiveCall}), chosen by its declared cost.
 */
package org.jccl.spi;
