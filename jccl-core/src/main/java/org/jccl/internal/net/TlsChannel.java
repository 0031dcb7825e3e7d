package org.jccl.internal.net;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import javax.net.ssl.SSLException;
import org.jccl.ErrorCode;
import org.jccl.JcclException;

/**
 * TLS over a connected {@link SocketChannel} with the JDK's {@link SSLEngine}, as a {@link
 * WireChannel}: the TLS handshake runs inside the first reads and writes, so callers (the jccl
 * handshake, bootstrap frames, TCP stripes) are unchanged. Works in blocking mode (raw reads go
 * through the socket's stream, so {@code SO_TIMEOUT} applies) and non-blocking mode.
 *
 * <p>Buffers: {@code netIn} (ciphertext received, write mode), {@code appIn} (plaintext decrypted
 * and not yet taken, read mode), {@code netOut} (ciphertext to send, read mode). A read never
 * returns more than the caller's buffers hold; what is decrypted beyond that waits in {@code appIn}.
 *
 * <p>A TLS failure (untrusted certificate, protocol error) is a {@link JcclException} with
 * {@link ErrorCode#AUTHENTICATION} that names TLS, the peer and the likely cause; it is not retried.
 *
 * <p>Not thread-safe: one thread drives a channel at a time (as for the socket it wraps).
 */
public final class TlsChannel implements WireChannel {

    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

    private final SocketChannel ch;
    private final SSLEngine engine;
    private final String peer;
    private ByteBuffer netIn;
    private ByteBuffer appIn;
    private final ByteBuffer netOut;
    private boolean handshaken;
    private boolean eof;
    private InputStream rawIn;
    private OutputStream rawOut;

    TlsChannel(SocketChannel ch, SSLEngine engine, String peer) {
        this.ch = ch;
        this.engine = engine;
        this.peer = peer;
        int packet = engine.getSession().getPacketBufferSize();
        this.netIn = ByteBuffer.allocate(packet);
        this.appIn = ByteBuffer.allocate(engine.getSession().getApplicationBufferSize()).flip();
        this.netOut = ByteBuffer.allocate(packet).flip();
        try {
            // Without this the engine reports NOT_HANDSHAKING until the first wrap/unwrap.
            engine.beginHandshake();
        } catch (SSLException e) {
            throw tlsFailure(e, null);
        }
    }

    @Override
    public SocketChannel socket() {
        return ch;
    }

    @Override
    public boolean secure() {
        return true;
    }

    /** The negotiated protocol and cipher suite, once the handshake is done ("TLSv1.3 TLS_AES_256_GCM_SHA384"). */
    public String describeSession() {
        return engine.getSession().getProtocol() + " " + engine.getSession().getCipherSuite();
    }

    @Override
    public int interestOps(int wanted) {
        if (netOut.hasRemaining()) {
            return SelectionKey.OP_WRITE;
        }
        if (!handshaken) {
            HandshakeStatus hs = engine.getHandshakeStatus();
            if (hs == HandshakeStatus.NEED_UNWRAP || hs == HandshakeStatus.NEED_UNWRAP_AGAIN) {
                return SelectionKey.OP_READ;
            }
        }
        return wanted;
    }

    // ------------------------------------------------------------------ raw socket I/O

    private int rawRead(ByteBuffer dst) throws IOException {
        if (ch.isBlocking()) {
            if (rawIn == null) {
                rawIn = ch.socket().getInputStream();
            }
            int n = rawIn.read(dst.array(), dst.arrayOffset() + dst.position(), dst.remaining());
            if (n > 0) {
                dst.position(dst.position() + n);
            }
            return n;
        }
        return ch.read(dst);
    }

    @Override
    public boolean flush() throws IOException {
        while (netOut.hasRemaining()) {
            if (ch.isBlocking()) {
                if (rawOut == null) {
                    rawOut = ch.socket().getOutputStream();
                }
                rawOut.write(netOut.array(), netOut.arrayOffset() + netOut.position(), netOut.remaining());
                netOut.position(netOut.limit());
            } else if (ch.write(netOut) == 0) {
                return false;
            }
        }
        return true;
    }

    // ------------------------------------------------------------------ the engine

    /** Drives the TLS handshake as far as the socket allows; true once it is complete. */
    private boolean handshake() throws IOException {
        while (!handshaken) {
            HandshakeStatus hs = engine.getHandshakeStatus();
            switch (hs) {
                case NOT_HANDSHAKING, FINISHED -> {
                    handshaken = true;
                }
                case NEED_TASK -> {
                    Runnable task;
                    while ((task = engine.getDelegatedTask()) != null) {
                        task.run();
                    }
                }
                case NEED_WRAP -> {
                    if (!flush()) {
                        return false;
                    }
                    wrap(new ByteBuffer[] {EMPTY}, 0, 1);
                    if (!flush()) {
                        return false;
                    }
                }
                case NEED_UNWRAP, NEED_UNWRAP_AGAIN -> {
                    int u = unwrap();
                    if (u < 0) {
                        eof = true;
                        throw tlsFailure(null, "the peer closed the connection during the TLS handshake (it refused this"
                                + " rank's certificate, or it does not use TLS: set JCCL_TLS alike on every rank)");
                    }
                    if (u == 0) {
                        return false;
                    }
                }
            }
        }
        return flush();
    }

    /** One wrap into netOut (which must be empty); returns the plaintext consumed. */
    private long wrap(ByteBuffer[] srcs, int offset, int length) throws IOException {
        netOut.clear();
        SSLEngineResult r;
        try {
            r = engine.wrap(srcs, offset, length, netOut);
        } catch (SSLException e) {
            // A failure found while checking the peer's certificate (a delegated task) surfaces here.
            netOut.flip();
            sendAlert();
            throw tlsFailure(e, null);
        }
        netOut.flip();
        if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
            throw new IOException("the TLS session with " + peer + " is closed");
        }
        return r.bytesConsumed();
    }

    /**
     * Decrypts what netIn holds into appIn, reading from the socket when a record is incomplete.
     * Returns 1 when something happened (bytes read, consumed or produced), 0 when nothing can
     * happen now, -1 at end of stream or when the peer closed TLS.
     */
    private int unwrap() throws IOException {
        while (true) {
            netIn.flip();
            appIn.compact();
            SSLEngineResult r;
            try {
                r = engine.unwrap(netIn, appIn);
            } catch (SSLException e) {
                netIn.compact();
                appIn.flip();
                sendAlert();
                throw tlsFailure(e, null);
            }
            netIn.compact();
            appIn.flip();
            switch (r.getStatus()) {
                case OK -> {
                    if (r.bytesConsumed() > 0 || r.bytesProduced() > 0) {
                        return 1;
                    }
                    // Nothing consumed: read more below.
                }
                case BUFFER_OVERFLOW -> {
                    if (appIn.hasRemaining()) {
                        return 1; // the caller takes plaintext first
                    }
                    appIn = ByteBuffer.allocate(Math.max(appIn.capacity() * 2, engine.getSession().getApplicationBufferSize())).flip();
                    continue;
                }
                case BUFFER_UNDERFLOW -> {
                    if (!netIn.hasRemaining()) {
                        ByteBuffer bigger = ByteBuffer.allocate(Math.max(netIn.capacity() * 2, engine.getSession().getPacketBufferSize()));
                        netIn.flip();
                        bigger.put(netIn);
                        netIn = bigger;
                    }
                }
                case CLOSED -> {
                    return -1;
                }
            }
            int n = rawRead(netIn);
            if (n < 0) {
                return -1;
            }
            if (n == 0) {
                return 0;
            }
        }
    }

    /**
     * Sends the alert the engine made for a failure it found in the peer's records (an untrusted
     * certificate, say), best effort, so the peer learns why instead of seeing its connection close:
     * in TLS 1.3 a client finishes its handshake before the server has checked its certificate.
     */
    private void sendAlert() {
        try {
            engine.closeOutbound();
            for (int i = 0; i < 4 && !engine.isOutboundDone(); i++) {
                if (!flush()) {
                    return;
                }
                netOut.clear();
                SSLEngineResult r;
                try {
                    r = engine.wrap(EMPTY, netOut);
                } finally {
                    netOut.flip();
                }
                if (r.bytesProduced() == 0) {
                    break;
                }
            }
            flush();
        } catch (IOException | RuntimeException e) {
            // The connection is dropped either way.
        }
    }

    private JcclException tlsFailure(SSLException e, String what) {
        String reason = what != null ? what : e.getMessage();
        String m = reason == null ? "" : reason;
        String hint = "";
        if (m.contains("PKIX") || m.contains("certification path") || m.contains("unknown_ca") || m.contains("certificate_unknown")
                || m.contains("bad_certificate") || m.contains("Empty client certificate chain") || m.contains("certificate_required")) {
            hint = ": the certificates do not chain to a CA in the trust store. Give every rank a key and certificate"
                    + " (JCCL_TLS_KEYSTORE) signed by a CA that JCCL_TLS_TRUSTSTORE of every rank holds";
        } else if (m.contains("Unsupported or unrecognized SSL message") || m.contains("plaintext")) {
            hint = ": the peer does not speak TLS; set JCCL_TLS alike on every rank";
        }
        return new JcclException(ErrorCode.AUTHENTICATION, "TLS with " + peer + " failed: " + reason + hint, e);
    }

    // ------------------------------------------------------------------ WireChannel

    @Override
    public int read(ByteBuffer dst) throws IOException {
        return (int) read(new ByteBuffer[] {dst}, 0, 1);
    }

    @Override
    public long read(ByteBuffer[] dsts, int offset, int length) throws IOException {
        while (true) {
            if (!handshaken && !handshake()) {
                if (ch.isBlocking()) {
                    continue;
                }
                return 0;
            }
            flush();
            if (appIn.hasRemaining()) {
                return take(dsts, offset, length);
            }
            if (eof) {
                return -1;
            }
            int u = unwrap();
            if (engine.getHandshakeStatus() != HandshakeStatus.NOT_HANDSHAKING && engine.getHandshakeStatus() != HandshakeStatus.FINISHED) {
                handshaken = false; // post-handshake messages (key update): drive them, then go on
            }
            if (appIn.hasRemaining()) {
                return take(dsts, offset, length);
            }
            if (u < 0) {
                eof = true;
                return -1;
            }
            if (u == 0 && !ch.isBlocking()) {
                return 0;
            }
        }
    }

    private long take(ByteBuffer[] dsts, int offset, int length) {
        long n = 0;
        for (int i = offset; i < offset + length && appIn.hasRemaining(); i++) {
            ByteBuffer d = dsts[i];
            int k = Math.min(d.remaining(), appIn.remaining());
            if (k > 0) {
                d.put(d.position(), appIn, appIn.position(), k);
                d.position(d.position() + k);
                appIn.position(appIn.position() + k);
                n += k;
            }
        }
        return n;
    }

    @Override
    public int write(ByteBuffer src) throws IOException {
        return (int) write(new ByteBuffer[] {src}, 0, 1);
    }

    @Override
    public long write(ByteBuffer[] srcs, int offset, int length) throws IOException {
        if (!handshaken && !handshake()) {
            if (!ch.isBlocking()) {
                return 0;
            }
            while (!handshake()) {
                // blocking: each call blocks on the socket until the handshake moves
            }
        }
        if (!flush()) {
            return 0;
        }
        long consumed = 0;
        while (remaining(srcs, offset, length) > 0) {
            long n = wrap(srcs, offset, length);
            consumed += n;
            if (!flush()) {
                break;
            }
            if (n == 0) {
                // The engine wants handshake messages first (a key update): drive them on the next call.
                HandshakeStatus hs = engine.getHandshakeStatus();
                if (hs != HandshakeStatus.NOT_HANDSHAKING && hs != HandshakeStatus.FINISHED) {
                    handshaken = false;
                }
                break;
            }
        }
        return consumed;
    }

    private static long remaining(ByteBuffer[] b, int offset, int length) {
        long n = 0;
        for (int i = offset; i < offset + length; i++) {
            n += b[i].remaining();
        }
        return n;
    }

    @Override
    public InputStream blockingInput() {
        return new InputStream() {
            @Override
            public int read() throws IOException {
                byte[] one = new byte[1];
                int n = read(one, 0, 1);
                return n < 0 ? -1 : one[0] & 0xFF;
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                if (len == 0) {
                    return 0;
                }
                long n = TlsChannel.this.read(new ByteBuffer[] {ByteBuffer.wrap(b, off, len)}, 0, 1);
                return (int) n;
            }
        };
    }

    @Override
    public OutputStream blockingOutput() {
        return new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                ByteBuffer buf = ByteBuffer.wrap(b, off, len);
                while (buf.hasRemaining()) {
                    TlsChannel.this.write(new ByteBuffer[] {buf}, 0, 1);
                }
            }
        };
    }

    @Override
    public boolean isOpen() {
        return ch.isOpen();
    }

    /** Sends close_notify if the socket takes it at once, then closes the socket. */
    @Override
    public void close() throws IOException {
        try {
            if (ch.isOpen() && handshaken) {
                engine.closeOutbound();
                if (!netOut.hasRemaining()) {
                    wrap(new ByteBuffer[] {EMPTY}, 0, 1);
                }
                if (!ch.isBlocking()) {
                    flush();
                }
            }
        } catch (IOException | RuntimeException e) {
            // Best effort: the socket closes either way.
        } finally {
            ch.close();
        }
    }

    @Override
    public String toString() {
        return "TLS " + ch;
    }
}
