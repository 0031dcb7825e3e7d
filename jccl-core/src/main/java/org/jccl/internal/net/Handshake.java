package org.jccl.internal.net;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.SocketTimeoutException;
import java.nio.channels.SocketChannel;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.jccl.ErrorCode;
import org.jccl.JcclException;

/**
 * Mutual HMAC-SHA256 challenge-response that every jccl connection (bootstrap and data) runs before
 * anything is allocated for it. Both sides prove knowledge of the communicator's secret without
 * sending it; the connector's hello (who it is) is covered by its MAC.
 *
 * <pre>
 *  acceptor -> connector   "JCCL" | u16 version | u8 kind | nonceA[16]                      (23 bytes)
 *  connector -> acceptor   "JCCL" | u16 version | nonceC[16] | u16 n | hello[n] | macC[32]
 *                          macC = HMAC(secret, "jccl-C" | kind | nonceA | nonceC | hello)
 *  acceptor -> connector   u8 status (0 OK, 1 bad MAC, 2 bad version, 3 bad kind) | macA[32] when OK
 *                          macA = HMAC(secret, "jccl-A" | kind | nonceC | nonceA | hello)
 * </pre>
 * Sizes are bounded ({@link #MAX_HELLO}); anything else drops the connection with a one-line reason.
 * The exchange is blocking on a channel in blocking mode, with a read timeout; callers switch the
 * channel to non-blocking afterwards if they want. Servers that must not spend a thread per
 * unauthenticated connection use {@link HandshakeServer}, the same acceptor side as a non-blocking
 * state machine driven by a selector.
 */
public final class Handshake {

    /** Wire protocol version; bumped on any incompatible change of handshake or frames. */
    public static final short VERSION = 2;
    /** Largest hello accepted. */
    public static final int MAX_HELLO = 4096;

    // Package-visible so HandshakeServer speaks exactly these bytes without a second copy of them.
    static final int MAGIC = 0x4A43434C; // "JCCL"
    static final int NONCE = 16;
    static final int MAC_LEN = 32;
    private static final SecureRandom RANDOM = new SecureRandom();

    /** What the connection is for; a data connection cannot be replayed against a bootstrap port. */
    public enum Kind {
        BOOTSTRAP(1), DATA(2),
        /** The communicator's control channel (heartbeats, failure notices, stall reports: org.jccl.internal.control). */
        CONTROL(3);

        final int code;

        Kind(int code) {
            this.code = code;
        }
    }

    private Handshake() {
    }

    /**
     * The peer and this side have different secrets (as opposed to a version mismatch or a peer
     * that is not jccl): the one failure where the fix is to give every rank the same secret.
     */
    public static final class SecretMismatch extends JcclException {
        private static final long serialVersionUID = 1L;

        SecretMismatch(String message) {
            super(ErrorCode.AUTHENTICATION, message);
        }
    }

    /**
     * Acceptor side. Returns the connector's authenticated hello.
     *
     * @throws JcclException AUTHENTICATION (wrong secret or version) or PROTOCOL (not a jccl peer)
     * @throws IOException when the socket fails or times out
     */
    public static byte[] accept(SocketChannel ch, byte[] secret, Kind kind, Duration timeout) throws IOException {
        return accept(WireChannel.plain(ch), secret, kind, timeout);
    }

    /** {@link #accept(SocketChannel, byte[], Kind, Duration)} over a {@link WireChannel} (plain or TLS). */
    public static byte[] accept(WireChannel w, byte[] secret, Kind kind, Duration timeout) throws IOException {
        SocketChannel ch = w.socket();
        ch.configureBlocking(true);
        ch.socket().setSoTimeout(timeoutMillis(timeout));
        String who = remote(ch);
        DataInputStream in = new DataInputStream(w.blockingInput());
        DataOutputStream out = new DataOutputStream(new java.io.BufferedOutputStream(w.blockingOutput()));
        byte[] nonceA = nonce();
        out.writeInt(MAGIC);
        out.writeShort(VERSION);
        out.writeByte(kind.code);
        out.write(nonceA);
        out.flush();
        try {
            int magic = in.readInt();
            if (magic != MAGIC) {
                throw new JcclException(ErrorCode.PROTOCOL, "connection from " + who + " is not a jccl peer (bad magic 0x"
                        + Integer.toHexString(magic) + "); dropped");
            }
            int version = in.readUnsignedShort();
            if (version != VERSION) {
                out.writeByte(2);
                out.flush();
                throw new JcclException(ErrorCode.AUTHENTICATION, "connection from " + who + " speaks jccl protocol version "
                        + version + ", this rank speaks " + VERSION + ": mixed jccl versions in one job; dropped");
            }
            byte[] nonceC = new byte[NONCE];
            in.readFully(nonceC);
            int n = in.readUnsignedShort();
            if (n > MAX_HELLO) {
                throw new JcclException(ErrorCode.PROTOCOL, "connection from " + who + " sent a hello of " + n
                        + " bytes (at most " + MAX_HELLO + "); dropped");
            }
            byte[] hello = new byte[n];
            in.readFully(hello);
            byte[] macC = new byte[MAC_LEN];
            in.readFully(macC);
            byte[] expect = mac(secret, "jccl-C", kind, nonceA, nonceC, hello);
            if (!MessageDigest.isEqual(expect, macC)) {
                out.writeByte(1);
                out.flush();
                throw new JcclException(ErrorCode.AUTHENTICATION, "connection from " + who
                        + " failed authentication (wrong secret: its JCCL_AUTH_TOKEN, secret file or JcclId differs from this job's); dropped");
            }
            out.writeByte(0);
            out.write(mac(secret, "jccl-A", kind, nonceC, nonceA, hello));
            out.flush();
            return hello;
        } catch (SocketTimeoutException e) {
            throw new JcclException(ErrorCode.PROTOCOL, "connection from " + who + " did not complete the jccl handshake within "
                    + timeout.toMillis() + " ms; dropped", e);
        } catch (EOFException e) {
            throw new JcclException(ErrorCode.PROTOCOL, "connection from " + who + " closed during the jccl handshake; dropped", e);
        }
    }

    /**
     * Connector side: proves the secret, sends {@code hello}, and checks that the acceptor knows the secret too.
     *
     * @throws JcclException AUTHENTICATION when either side's proof fails, PROTOCOL when the peer is not jccl
     */
    public static void connect(SocketChannel ch, byte[] secret, Kind kind, byte[] hello, Duration timeout) throws IOException {
        connect(WireChannel.plain(ch), secret, kind, hello, timeout);
    }

    /** {@link #connect(SocketChannel, byte[], Kind, byte[], Duration)} over a {@link WireChannel} (plain or TLS). */
    public static void connect(WireChannel w, byte[] secret, Kind kind, byte[] hello, Duration timeout) throws IOException {
        SocketChannel ch = w.socket();
        if (hello.length > MAX_HELLO) {
            throw new IllegalArgumentException("hello too long: " + hello.length);
        }
        ch.configureBlocking(true);
        ch.socket().setSoTimeout(timeoutMillis(timeout));
        String who = remote(ch);
        InputStream rawIn = w.blockingInput();
        OutputStream rawOut = new java.io.BufferedOutputStream(w.blockingOutput());
        DataInputStream in = new DataInputStream(rawIn);
        DataOutputStream out = new DataOutputStream(rawOut);
        try {
            int magic = in.readInt();
            if (magic != MAGIC) {
                throw new JcclException(ErrorCode.PROTOCOL, who + " is not a jccl endpoint (bad magic 0x" + Integer.toHexString(magic) + ")");
            }
            int version = in.readUnsignedShort();
            int k = in.readUnsignedByte();
            byte[] nonceA = new byte[NONCE];
            in.readFully(nonceA);
            if (version != VERSION) {
                throw new JcclException(ErrorCode.AUTHENTICATION, who + " speaks jccl protocol version " + version
                        + ", this rank speaks " + VERSION + ": mixed jccl versions in one job");
            }
            if (k != kind.code) {
                throw new JcclException(ErrorCode.PROTOCOL, who + " is a jccl " + kindName(k) + " port, not a " + kind
                        + " port (addresses mixed up?)");
            }
            byte[] nonceC = nonce();
            out.writeInt(MAGIC);
            out.writeShort(VERSION);
            out.write(nonceC);
            out.writeShort(hello.length);
            out.write(hello);
            out.write(mac(secret, "jccl-C", kind, nonceA, nonceC, hello));
            out.flush();
            int status = in.readUnsignedByte();
            switch (status) {
                case 0 -> { }
                case 1 -> throw new SecretMismatch(who + " rejected this rank's proof of the job secret: the secrets differ (the"
                        + " ranks were given different JCCL_AUTH_TOKEN values, secret files or JcclIds)");
                case 2 -> throw new JcclException(ErrorCode.AUTHENTICATION, who + " rejected protocol version " + VERSION
                        + ": mixed jccl versions in one job");
                default -> throw new JcclException(ErrorCode.PROTOCOL, who + " rejected the handshake (status " + status + ")");
            }
            byte[] macA = new byte[MAC_LEN];
            in.readFully(macA);
            if (!MessageDigest.isEqual(macA, mac(secret, "jccl-A", kind, nonceC, nonceA, hello))) {
                throw new SecretMismatch(who + " does not know the job secret: the secrets differ (it is not part of this job, has"
                        + " another secret, or impersonates a rank); connection dropped");
            }
        } catch (SocketTimeoutException e) {
            throw new JcclException(ErrorCode.TIMEOUT, who + " did not answer the jccl handshake within " + timeout.toMillis() + " ms", e);
        } catch (EOFException e) {
            // The peer's process exited, or it dropped us (its log says why): an I/O failure of that peer.
            EOFException eof = new EOFException(who + " closed the connection during the jccl handshake"
                    + " (the peer exited, or it rejected this connection: its log says why)");
            eof.initCause(e);
            throw eof;
        }
    }

    private static String kindName(int k) {
        for (Kind kind : Kind.values()) {
            if (kind.code == k) {
                return kind.name();
            }
        }
        return "unknown(" + k + ")";
    }

    static int timeoutMillis(Duration timeout) {
        long ms = Math.max(1, timeout.toMillis());
        return (int) Math.min(Integer.MAX_VALUE, ms);
    }

    static String remote(SocketChannel ch) {
        try {
            if (ch.getRemoteAddress() instanceof java.net.InetSocketAddress a && a.getAddress() != null) {
                String h = a.getAddress().getHostAddress();
                return (h.indexOf(':') >= 0 ? "[" + h + "]" : h) + ":" + a.getPort();
            }
            return String.valueOf(ch.getRemoteAddress());
        } catch (IOException e) {
            return "?";
        }
    }

    static byte[] nonce() {
        byte[] b = new byte[NONCE];
        RANDOM.nextBytes(b);
        return b;
    }

    static byte[] mac(byte[] secret, String label, Kind kind, byte[] first, byte[] second, byte[] hello) {
        try {
            Mac m = Mac.getInstance("HmacSHA256");
            m.init(new SecretKeySpec(secret, "HmacSHA256"));
            m.update(label.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            m.update((byte) kind.code);
            m.update(first);
            m.update(second);
            m.update(hello);
            return m.doFinal();
        } catch (GeneralSecurityException e) {
            throw new JcclException(ErrorCode.INTERNAL, "HmacSHA256 unavailable in this JDK", e);
        }
    }
}
