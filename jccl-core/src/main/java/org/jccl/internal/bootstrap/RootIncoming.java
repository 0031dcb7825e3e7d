package org.jccl.internal.bootstrap;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.internal.net.HandshakeServer;
import org.jccl.internal.net.WireChannel;

/**
 * A connection to a {@link BootstrapRoot} not yet registered: first its handshake, then (authenticated) its registration
 * frame. Before authentication only the handshake's fixed-size state exists; the frame buffers are
 * allocated once the peer has proven the secret and announced a length within the limit.
 */
final class RootIncoming {
    final HandshakeServer handshake;
    final String from;
    boolean authenticated;
    int[] rankSize;
    /** u32 length of the registration frame. */
    final ByteBuffer length = ByteBuffer.allocate(4);
    ByteBuffer type;
    ByteBuffer body;
    /** Once authenticated: the registration is dropped when no byte arrives before this nanoTime. */
    long idleDeadline;

    RootIncoming(HandshakeServer handshake) {
        this.handshake = handshake;
        this.from = handshake.remote();
    }

    /**
     * Reads what has arrived of the registration frame; returns the checked registration once it is
     * whole, null while more is to come. The body buffer is allocated only here, after the handshake,
     * and only for a length within {@link BootstrapWire#MAX_REGISTRATION_FRAME}.
     */
    BootstrapWire.Registration readRegistration() throws IOException {
        WireChannel ch = handshake.channel();
        boolean progressed = false;
        boolean eof = false;
        if (body == null) {
            int before = length.position();
            eof = readAvailable(ch, length);
            progressed = length.position() > before;
            if (!length.hasRemaining()) {
                int frameLength = length.getInt(0);
                BootstrapWire.checkFrameLength(frameLength, BootstrapWire.MAX_REGISTRATION_FRAME, from);
                type = ByteBuffer.allocate(1);
                body = ByteBuffer.allocate(frameLength - 1);
            }
        }
        if (body != null && !eof) {
            long before = type.position() + (long) body.position();
            eof = readAvailable(ch, type, body);
            progressed |= type.position() + (long) body.position() > before;
        }
        if (body != null && !type.hasRemaining() && !body.hasRemaining()) {
            return checkRegistration(this, Byte.toUnsignedInt(type.get(0)), body.array());
        }
        if (eof) {
            throw new EOFException("the peer closed its connection before its registration was complete");
        }
        if (progressed) {
            idleDeadline = System.nanoTime() + BootstrapRoot.HANDSHAKE_TIMEOUT.toNanos();
        }
        return null;
    }

    /** Reads what is available into {@code bufs} without blocking; returns true at end of stream. */
    private static boolean readAvailable(WireChannel ch, ByteBuffer... bufs) throws IOException {
        while (bufs[bufs.length - 1].hasRemaining()) {
            long n = ch.read(bufs);
            if (n < 0) {
                return true;
            }
            if (n == 0) {
                return false;
            }
        }
        return false;
    }

    private static BootstrapWire.Registration checkRegistration(RootIncoming in, int type, byte[] body) {
        String from = in.from;
        if (type != BootstrapWire.REGISTER) {
            throw new JcclException(ErrorCode.PROTOCOL, "connection from " + from + " sent bootstrap frame type " + type
                    + " instead of a registration");
        }
        BootstrapWire.Registration reg = BootstrapWire.parseRegistration(body, from);
        int[] rankSize = in.rankSize;
        if (reg.rank() != rankSize[0] || reg.size() != rankSize[1] || reg.info().rank() != reg.rank()) {
            throw new JcclException(ErrorCode.PROTOCOL, "connection from " + from + " authenticated as rank " + rankSize[0] + " of "
                    + rankSize[1] + " but registered rank " + reg.rank() + " of " + reg.size() + " with the peer info of rank "
                    + reg.info().rank() + "; a jccl bug, please report it");
        }
        return reg;
    }
}
