/**
 * Networking shared by bootstrap and the TCP transport: the authenticated handshake every
 * connection runs ({@link org.jccl.internal.net.Handshake}) and the choice of interface and address
 * ({@link org.jccl.internal.net.Interfaces}, NCCL_SOCKET_IFNAME grammar).
 */
package org.jccl.internal.net;
