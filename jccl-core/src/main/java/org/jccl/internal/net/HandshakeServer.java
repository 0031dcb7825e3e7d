package org.jccl.internal.net;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Objects;
import org.jccl.ErrorCode;
import org.jccl.JcclException;

/**
 * The acceptor side of {@link Handshake} as a non-blocking state machine, so that one selector
 * thread can authenticate many connections at once without a thread (or any buffer sized by the
 * peer) per unauthenticated connection.
 *
 * <p>It sends and expects exactly the bytes of {@link Handshake#accept} (see {@link Handshake} for
 * the protocol), so the unchanged {@link Handshake#connect} interoperates, and it fails with the
 * same {@link ErrorCode}s and messages. Until the peer has proven the secret, the state is fixed in
 * size: the 23-byte challenge, the 24-byte fixed part of the peer's answer, and the hello plus its
 * MAC, at most {@link Handshake#MAX_HELLO} + 32 bytes, allocated only after the announced hello
 * length has been checked against that bound.
 *
 * <p>Use: put the channel in non-blocking mode, {@link #start} the handshake, then call {@link #step}
 * whenever the channel is ready for the {@link Result#interestOps() operations} the last result
 * asked for (the first call may be made at once), and {@link #expired} regularly, until the result
 * is {@link Status#DONE} ({@link #hello()} is then the peer's authenticated hello) or
 * {@link Status#FAILED}. The caller owns the channel and closes it on failure; after DONE it stays
 * open, non-blocking, and positioned right after the handshake. Not thread-safe: one thread (the
 * selector's) drives it.
 */
public final class HandshakeServer {

    /** Where a handshake stands after a {@link #step}. */
    public enum Status {
        /** Waiting for the channel to become ready for {@link Result#interestOps()}. */
        IN_PROGRESS,
        /** The peer proved the secret; its hello is {@link #hello()}. */
        DONE,
        /** The peer is not admitted; {@link Result#error()} says why. */
        FAILED
    }

    /**
     * The outcome of one {@link #step}.
     *
     * @param status where the handshake stands
     * @param interestOps for {@link Status#IN_PROGRESS}: {@link SelectionKey#OP_READ} or
     *        {@link SelectionKey#OP_WRITE}, what to wait for before the next step; 0 otherwise
     * @param error for {@link Status#FAILED}: why, with the message {@link Handshake#accept} gives; null otherwise
     */
    public record Result(Status status, int interestOps, JcclException error) {
        static final Result WANT_READ = new Result(Status.IN_PROGRESS, SelectionKey.OP_READ, null);
        static final Result WANT_WRITE = new Result(Status.IN_PROGRESS, SelectionKey.OP_WRITE, null);
        static final Result DONE = new Result(Status.DONE, 0, null);

        static Result failed(JcclException e) {
            return new Result(Status.FAILED, 0, e);
        }
    }

    /** magic u32 | version u16 | nonceC[16] | hello length u16: the fixed part of the connector's answer. */
    private static final int HEADER = 4 + 2 + Handshake.NONCE + 2;

    private enum Phase { CHALLENGE, HEADER, BODY, REPLY, DONE, FAILED }

    private final WireChannel ch;
    private final byte[] secret;
    private final Handshake.Kind kind;
    private final long deadlineNanos;
    private final long timeoutMillis;
    private final String who;
    private final byte[] nonceA;
    /** What is being sent: first the challenge, later the one-byte status (plus macA when accepted). */
    private ByteBuffer out;
    private final ByteBuffer header = ByteBuffer.allocate(HEADER);
    /** hello[n] | macC[32]; allocated only once n is known to be at most MAX_HELLO. */
    private ByteBuffer body;
    private byte[] nonceC;
    private byte[] hello;
    private Phase phase = Phase.CHALLENGE;
    /** Set while the rejection status byte is being sent; reported once it is out. */
    private JcclException rejection;
    /** Set by {@link #read} when the peer closed its side. */
    private boolean eof;
    /** What {@link #step} returns again once the handshake has finished. */
    private Result last;

    private HandshakeServer(WireChannel ch, byte[] secret, Handshake.Kind kind, Duration timeout) {
        this.ch = ch;
        this.secret = secret;
        this.kind = kind;
        this.timeoutMillis = timeout.toMillis();
        this.deadlineNanos = System.nanoTime() + timeout.toNanos();
        this.who = Handshake.remote(ch.socket());
        this.nonceA = Handshake.nonce();
        this.out = ByteBuffer.allocate(4 + 2 + 1 + Handshake.NONCE);
        out.putInt(Handshake.MAGIC).putShort(Handshake.VERSION).put((byte) kind.code).put(nonceA).flip();
    }

    /**
     * Begins the handshake on an accepted channel. Nothing is sent yet: the first {@link #step}
     * sends the challenge.
     *
     * @param ch an accepted, connected channel in non-blocking mode
     * @param secret the job's secret the peer must prove
     * @param kind what this listening port is for
     * @param timeout how long the peer has for the whole handshake, counted from now
     * @throws IllegalArgumentException when the channel is in blocking mode
     */
    public static HandshakeServer start(SocketChannel ch, byte[] secret, Handshake.Kind kind, Duration timeout) {
        return start(WireChannel.plain(Objects.requireNonNull(ch, "ch")), secret, kind, timeout);
    }

    /**
     * {@link #start(SocketChannel, byte[], Handshake.Kind, Duration)} over a {@link WireChannel}: with
     * TLS, the TLS handshake runs first, inside the same steps and the same deadline.
     */
    public static HandshakeServer start(WireChannel ch, byte[] secret, Handshake.Kind kind, Duration timeout) {
        Objects.requireNonNull(ch, "ch");
        Objects.requireNonNull(secret, "secret");
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(timeout, "timeout");
        if (ch.socket().isBlocking()) {
            throw new IllegalArgumentException("HandshakeServer needs a non-blocking channel");
        }
        return new HandshakeServer(ch, secret, kind, timeout);
    }

    /** The remote address as the failure messages name it. */
    public String remote() {
        return who;
    }

    /** The channel the handshake runs on (and the peer's bytes continue on once it is done). */
    public WireChannel channel() {
        return ch;
    }

    /** The connector's authenticated hello; only after {@link Status#DONE}. */
    public byte[] hello() {
        if (phase != Phase.DONE) {
            throw new IllegalStateException("the handshake with " + who + " is not done");
        }
        return hello.clone();
    }

    /**
     * Does all the I/O the channel allows now, without blocking.
     *
     * @throws IOException when the socket fails (reset, closed locally); the caller drops it
     */
    public Result step() throws IOException {
        if (phase == Phase.DONE || phase == Phase.FAILED) {
            return last;
        }
        Result r = expired(System.nanoTime());
        if (r != null) {
            return r;
        }
        try {
            Result next = advance();
            if (next.status() == Status.IN_PROGRESS) {
                // A TLS handshake underneath may need the other direction than the jccl handshake asks for.
                int ops = ch.interestOps(next.interestOps());
                if (ops != next.interestOps()) {
                    next = ops == SelectionKey.OP_READ ? Result.WANT_READ : Result.WANT_WRITE;
                }
            }
            return last = next;
        } catch (JcclException e) {
            // A TLS failure: the handshake fails with it, like any other refusal.
            return fail(e);
        } catch (IOException e) {
            // A later step() must not pretend the handshake is still going.
            fail(new JcclException(ErrorCode.PROTOCOL, "connection from " + who + " failed during the jccl handshake: " + e.getMessage(), e));
            throw e;
        }
    }

    /**
     * Fails the handshake when its deadline has passed, as {@link Handshake#accept} does when its
     * read times out; returns null while there is time left (or once the handshake has finished).
     */
    public Result expired(long nowNanos) {
        if (phase == Phase.DONE || phase == Phase.FAILED || nowNanos - deadlineNanos < 0) {
            return null;
        }
        return fail(new JcclException(ErrorCode.PROTOCOL, "connection from " + who
                + " did not complete the jccl handshake within " + timeoutMillis + " ms; dropped"));
    }

    private Result advance() throws IOException {
        while (true) {
            switch (phase) {
                case CHALLENGE -> {
                    ch.write(out);
                    if (out.hasRemaining()) {
                        return Result.WANT_WRITE;
                    }
                    out = null;
                    phase = Phase.HEADER;
                }
                case HEADER -> {
                    read(header);
                    // Magic and version are judged as soon as their bytes are in, even if the peer then closed,
                    // in the order the blocking reader sees them.
                    Result r = checkHeader();
                    if (r != null) {
                        return r;
                    }
                    if (phase == Phase.REPLY) {
                        continue; // version refused: send status 2 first
                    }
                    if (header.hasRemaining()) {
                        return waitOrClosed();
                    }
                    header.flip();
                    header.position(6);
                    nonceC = new byte[Handshake.NONCE];
                    header.get(nonceC);
                    int n = Short.toUnsignedInt(header.getShort());
                    if (n > Handshake.MAX_HELLO) {
                        return fail(new JcclException(ErrorCode.PROTOCOL, "connection from " + who + " sent a hello of " + n
                                + " bytes (at most " + Handshake.MAX_HELLO + "); dropped"));
                    }
                    // Bounded by MAX_HELLO + 32: the largest allocation an unauthenticated peer can cause.
                    body = ByteBuffer.allocate(n + Handshake.MAC_LEN);
                    phase = Phase.BODY;
                }
                case BODY -> {
                    read(body);
                    if (body.hasRemaining()) {
                        return waitOrClosed();
                    }
                    verify();
                }
                case REPLY -> {
                    try {
                        ch.write(out);
                    } catch (IOException e) {
                        if (rejection != null) {
                            // The peer left before reading why; the reason worth reporting is still the rejection.
                            return fail(rejection);
                        }
                        throw e;
                    }
                    if (out.hasRemaining()) {
                        return Result.WANT_WRITE;
                    }
                    out = null;
                    if (rejection != null) {
                        return fail(rejection);
                    }
                    phase = Phase.DONE;
                    return Result.DONE;
                }
                default -> throw new IllegalStateException("handshake phase " + phase);
            }
        }
    }

    /** Reads what is available now into {@code buf}, never more than it has room for. */
    private void read(ByteBuffer buf) throws IOException {
        while (buf.hasRemaining()) {
            int n = ch.read(buf);
            if (n < 0) {
                eof = true;
                return;
            }
            if (n == 0) {
                return;
            }
        }
    }

    /** A partial read: wait for more, or fail as the blocking reader's EOFException does when the peer closed. */
    private Result waitOrClosed() {
        if (eof) {
            return fail(new JcclException(ErrorCode.PROTOCOL, "connection from " + who + " closed during the jccl handshake; dropped"));
        }
        return Result.WANT_READ;
    }

    /**
     * Checks magic and version as soon as their bytes are in, like the blocking reader does. Returns a
     * failure for a bad magic; queues status 2 (phase REPLY) for a bad version; null otherwise.
     */
    private Result checkHeader() {
        if (header.position() >= 4) {
            int magic = header.getInt(0);
            if (magic != Handshake.MAGIC) {
                return fail(new JcclException(ErrorCode.PROTOCOL, "connection from " + who + " is not a jccl peer (bad magic 0x"
                        + Integer.toHexString(magic) + "); dropped"));
            }
        }
        if (header.position() >= 6) {
            int version = Short.toUnsignedInt(header.getShort(4));
            if (version != Handshake.VERSION) {
                reject(2, new JcclException(ErrorCode.AUTHENTICATION, "connection from " + who
                        + " speaks jccl protocol version " + version + ", this rank speaks " + Handshake.VERSION
                        + ": mixed jccl versions in one job; dropped"));
            }
        }
        return null;
    }

    /** The hello and MAC are in: check the proof and queue the reply. */
    private void verify() {
        body.flip();
        hello = new byte[body.remaining() - Handshake.MAC_LEN];
        body.get(hello);
        byte[] macC = new byte[Handshake.MAC_LEN];
        body.get(macC);
        body = null;
        byte[] expect = Handshake.mac(secret, "jccl-C", kind, nonceA, nonceC, hello);
        if (!MessageDigest.isEqual(expect, macC)) {
            hello = null;
            reject(1, new JcclException(ErrorCode.AUTHENTICATION, "connection from " + who
                    + " failed authentication (wrong secret: its JCCL_AUTH_TOKEN, secret file or JcclId differs from this job's); dropped"));
            return;
        }
        out = ByteBuffer.allocate(1 + Handshake.MAC_LEN);
        out.put((byte) 0).put(Handshake.mac(secret, "jccl-A", kind, nonceC, nonceA, hello)).flip();
        phase = Phase.REPLY;
    }

    /** Queues the one-byte refusal {@code status}; the handshake fails with {@code e} once it is sent. */
    private void reject(int status, JcclException e) {
        rejection = e;
        out = ByteBuffer.allocate(1);
        out.put((byte) status).flip();
        phase = Phase.REPLY;
    }

    private Result fail(JcclException e) {
        phase = Phase.FAILED;
        out = null;
        body = null;
        return last = Result.failed(e);
    }
}
