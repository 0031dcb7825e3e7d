package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.channels.Channel;
import java.nio.channels.SocketChannel;

/** What every data socket of the TCP transport gets, on either side of a pair: its options, and a quiet close. */
final class TcpSockets {

    private TcpSockets() {
    }

    /** TCP_NODELAY, and SO_SNDBUF/SO_RCVBUF when {@code socketBuffer} ({@code JCCL_SOCKET_BUFFER}) is not 0. */
    static void configure(SocketChannel ch, int socketBuffer) throws IOException {
        ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
        if (socketBuffer > 0) {
            ch.setOption(StandardSocketOptions.SO_SNDBUF, socketBuffer);
            ch.setOption(StandardSocketOptions.SO_RCVBUF, socketBuffer);
        }
    }

    static String remoteOf(SocketChannel ch) {
        try {
            return String.valueOf(ch.getRemoteAddress());
        } catch (IOException e) {
            return "?";
        }
    }

    static void closeQuietly(Channel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // Already broken: nothing more to release.
            }
        }
    }
}
