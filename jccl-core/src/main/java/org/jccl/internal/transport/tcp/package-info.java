/**
 * The TCP transport: {@link org.jccl.internal.transport.tcp.TcpTransport} opens one listening
 * endpoint per communicator; connections to peers are made lazily (the lower rank of a pair
 * connects), authenticated with the communicator's secret, and carry ordered messages striped
 * over one or more non-blocking sockets, progressed by whichever thread runs the communicator's
 * operations, without any helper thread (the endpoint's acceptor thread only accepts and
 * authenticates sockets). {@code TcpWire} documents every byte on the wire.
 */
package org.jccl.internal.transport.tcp;
