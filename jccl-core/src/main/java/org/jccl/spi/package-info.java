/**
 * The transport SPI: how the runtime moves messages between ranks. A {@link org.jccl.spi.Transport}
 * opens an {@link org.jccl.spi.Endpoint} per communicator, which makes one {@link
 * org.jccl.spi.Connection} per peer that uses it; connections carry ordered, exactly-sized messages
 * posted as {@link org.jccl.spi.P2pRequest}s and advanced by non-blocking {@code progress()} calls
 * from the communicator's operation thread. Algorithms are written against this layer only, so a
 * new transport inherits every collective.
 */
package org.jccl.spi;
