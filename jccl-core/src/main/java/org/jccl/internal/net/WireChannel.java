package org.jccl.internal.net;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.ScatteringByteChannel;
import java.nio.channels.SocketChannel;

/**
 * The byte stream of one jccl connection over a connected {@link SocketChannel}: the socket itself
 * ({@link #plain}), or TLS over it ({@link TlsChannel}, when {@code JCCL_TLS=1}). Everything that
 * reads or writes a jccl wire (handshake, bootstrap frames, TCP stripes) goes through this type, so
 * TLS is one switch and not a second copy of each protocol.
 *
 * <p>Works with the socket in either mode. Non-blocking: reads and writes return 0 when nothing
 * can move now; {@link #interestOps} says what readiness to wait for (a TLS handshake may need to
 * read while the caller wants to write). Blocking: {@link #blockingInput()} and {@link
 * #blockingOutput()} give streams that honour the socket's {@code SO_TIMEOUT}.
 */
public interface WireChannel extends ByteChannel, ScatteringByteChannel, GatheringByteChannel {

    /** The socket underneath (for selectors, options and addresses). */
    SocketChannel socket();

    /**
     * Writes bytes this channel has buffered for the peer (TLS records) as far as the socket takes
     * them now; true when none are left. A plain channel buffers nothing.
     */
    boolean flush() throws IOException;

    /** The readiness to wait for when the caller wants {@code wanted}: the same, or what a TLS handshake in progress needs. */
    default int interestOps(int wanted) {
        return wanted;
    }

    /** Whether this is TLS. */
    default boolean secure() {
        return false;
    }

    /** A stream for a socket in blocking mode that honours {@code SO_TIMEOUT}. */
    InputStream blockingInput() throws IOException;

    /** A stream for a socket in blocking mode. */
    OutputStream blockingOutput() throws IOException;

    @Override
    default long read(ByteBuffer[] dsts) throws IOException {
        return read(dsts, 0, dsts.length);
    }

    @Override
    default long write(ByteBuffer[] srcs) throws IOException {
        return write(srcs, 0, srcs.length);
    }

    /** The socket as it is. */
    static WireChannel plain(SocketChannel ch) {
        return new Plain(ch);
    }

    /** No layer: every call goes to the socket. */
    final class Plain implements WireChannel {
        private final SocketChannel ch;

        Plain(SocketChannel ch) {
            this.ch = ch;
        }

        @Override
        public SocketChannel socket() {
            return ch;
        }

        @Override
        public boolean flush() {
            return true;
        }

        @Override
        public InputStream blockingInput() throws IOException {
            return ch.socket().getInputStream();
        }

        @Override
        public OutputStream blockingOutput() throws IOException {
            return ch.socket().getOutputStream();
        }

        @Override
        public int read(ByteBuffer dst) throws IOException {
            return ch.read(dst);
        }

        @Override
        public long read(ByteBuffer[] dsts, int offset, int length) throws IOException {
            return ch.read(dsts, offset, length);
        }

        @Override
        public int write(ByteBuffer src) throws IOException {
            return ch.write(src);
        }

        @Override
        public long write(ByteBuffer[] srcs, int offset, int length) throws IOException {
            return ch.write(srcs, offset, length);
        }

        @Override
        public boolean isOpen() {
            return ch.isOpen();
        }

        @Override
        public void close() throws IOException {
            ch.close();
        }

        @Override
        public String toString() {
            return String.valueOf(ch);
        }
    }
}
