/**
 * Networking shared by bootstrap, the control channel and the TCP transport: the authenticated
 * handshake every connection runs ({@link org.jccl.internal.net.Handshake}, and its non-blocking
 * acceptor side {@link org.jccl.internal.net.HandshakeServer}), the channel layer under every wire
 * ({@link org.jccl.internal.net.WireChannel}: plain, or mutual TLS with {@code JCCL_TLS=1}), and the
 * choice of interface and address ({@link org.jccl.internal.net.Interfaces}, with the device-list
 * grammar of {@code JCCL_SOCKET_IFNAME} and {@code JCCL_IB_HCA} in {@link org.jccl.internal.net.DeviceList}).
 */
package org.jccl.internal.net;
