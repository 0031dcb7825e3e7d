package org.jccl.internal.transport.tcp;

import static org.jccl.internal.transport.tcp.TcpSockets.closeQuietly;

import org.jccl.internal.net.WireChannel;

/**
 * The sockets one lower rank has delivered so far to a higher rank's endpoint: {@link TcpAcceptor}
 * offers each authenticated socket, {@link TcpEndpoint#connect} waits on the monitor until all
 * have arrived and claims them. Guarded by its own monitor.
 */
final class TcpPeerSlot {
    final int peer;
    WireChannel[] sockets;
    /** The sockets handed to {@link TcpEndpoint#connect}, once claimed. */
    WireChannel[] taken;
    /** The hello flags of the first socket; every socket of the peer must announce the same. */
    int flags;
    int expected = -1;
    int arrived;
    boolean claimed;
    boolean closed;

    TcpPeerSlot(int peer) {
        this.peer = peer;
    }

    /** Adds an authenticated socket; returns null, or why it must be dropped. */
    synchronized String offer(int index, int n, int helloFlags, WireChannel ch) {
        if (closed) {
            return "the endpoint is closing";
        }
        if (claimed) {
            return "rank " + peer + " already has its connection: this is an extra socket (index " + index + ")";
        }
        if (expected < 0) {
            expected = n;
            flags = helloFlags;
            sockets = new WireChannel[n];
        } else if (n != expected) {
            return "it announces " + n + " sockets where its earlier sockets announced " + expected;
        } else if (helloFlags != flags) {
            return "it announces flags " + helloFlags + " where its earlier sockets announced " + flags;
        }
        if (sockets[index] != null) {
            return "socket index " + index + " of rank " + peer + " arrived twice";
        }
        sockets[index] = ch;
        arrived++;
        if (arrived == expected) {
            notifyAll();
        }
        return null;
    }

    synchronized void close() {
        closed = true;
        if (sockets != null) {
            for (WireChannel ch : sockets) {
                closeQuietly(ch);
            }
            sockets = null;
        }
        notifyAll();
    }
}
