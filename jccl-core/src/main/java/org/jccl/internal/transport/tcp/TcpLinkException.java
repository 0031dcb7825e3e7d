package org.jccl.internal.transport.tcp;

import java.io.IOException;

/**
 * A failure whose message already names the peer, the socket and the cause (peer closed, size
 * mismatch, corrupt stream), so {@link TcpConnection#progress()} passes it on unchanged. The words
 * are {@link TcpErrors}'.
 */
final class TcpLinkException extends IOException {
    private static final long serialVersionUID = 1L;

    TcpLinkException(String message) {
        super(message);
    }
}
