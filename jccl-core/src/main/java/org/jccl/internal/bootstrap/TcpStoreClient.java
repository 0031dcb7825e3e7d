package org.jccl.internal.bootstrap;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;

/**
 * A client of PyTorch's {@code TCPStore} (the key-value store torchrun's agent serves at
 * {@code MASTER_ADDR:MASTER_PORT}), written from its wire protocol: one byte of query type, then
 * the arguments; strings and values as a u64 length and the bytes; integers in the host's byte
 * order (little-endian on every platform torch ships for). Only what jccl needs: set, get, wait.
 *
 * <p>The protocol has two dialects that number the queries differently:
 * <ul>
 *   <li><b>legacy</b> (torch 1.x, tested with Debian's 1.13, and the early 2.x releases): SET 0,
 *       GET 2, ADD 3, CHECK 4, WAIT 5, GETNUMKEYS 6; no handshake;</li>
 *   <li><b>validated</b> (later 2.x releases, read from PyTorch's sources; the first release of
 *       each step is not verified here): VALIDATE 0 first on every connection with the magic number
 *       0x3C85F7CE, then SET 1, GET 3, ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7, and in later releases PING
 *       13 (echoes a u32). A server of this dialect closes (classic backend) or ignores (libuv
 *       backend) a connection whose first query is not VALIDATE.</li>
 * </ul>
 * {@link #connect} finds the dialect by probing, without ever stalling the store (a torch store
 * serves every client from one thread, so a probe must never leave it blocked in a read): first the
 * validated form, VALIDATE + PING + two GETNUMKEYS (12 bytes, answered with 20); a legacy server
 * reads that as SET with a key length of 2^63 or more, which fails at once
 * ({@code std::length_error}) and drops only this connection. Then, on a new connection, four
 * legacy GETNUMKEYS (4 bytes, answered with 32), which a validated server drops or ignores. Then
 * VALIDATE + three GETNUMKEYS for validated servers without PING. Every probe is a whole number of
 * 4-byte words, so a server of the short-lived development-era variant that expected a 4-byte magic
 * number before each query (not supported: it ends in the PROTOCOL error) discards them word by
 * word instead of waiting for more bytes.
 *
 * <p>Not thread-safe: one thread uses one client.
 */
public final class TcpStoreClient implements AutoCloseable {

    /** The magic number of the validated dialect's VALIDATE query. */
    static final int VALIDATION_MAGIC = 0x3C85F7CE;

    /** How the server numbers its queries. */
    public enum Dialect {
        /** torch 1.x and early 2.x: no handshake. */
        LEGACY(-1, 0, 2, 3, 4, 5, 6, -1),
        /** VALIDATE first, no PING. */
        VALIDATED(0, 1, 3, 4, 5, 6, 7, -1),
        /** VALIDATE first, with PING (current torch). */
        VALIDATED_PING(0, 1, 3, 4, 5, 6, 7, 13);

        final int validate;
        final int set;
        final int get;
        final int add;
        final int check;
        final int waitKeys;
        final int numKeys;
        final int ping;

        Dialect(int validate, int set, int get, int add, int check, int waitKeys, int numKeys, int ping) {
            this.validate = validate;
            this.set = set;
            this.get = get;
            this.add = add;
            this.check = check;
            this.waitKeys = waitKeys;
            this.numKeys = numKeys;
            this.ping = ping;
        }
    }

    /** Longest value accepted from the store (a root address list is a few hundred bytes). */
    static final int MAX_VALUE = 1 << 20;
    /** How long one probe waits for its answer (tests shorten it). */
    static volatile long probeMillis = 5_000;
    private static final long FIRST_BACKOFF_MS = 20;
    private static final long MAX_BACKOFF_MS = 1_000;

    private final InetSocketAddress address;
    private final String where;
    private final Dialect dialect;
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    private TcpStoreClient(InetSocketAddress address, String where, Dialect dialect, Socket socket) throws IOException {
        this.address = address;
        this.where = where;
        this.dialect = dialect;
        this.socket = socket;
        this.in = socket.getInputStream();
        this.out = socket.getOutputStream();
    }

    /**
     * Connects to the store at {@code address} and finds its dialect, retrying while nothing listens
     * there yet, until {@code deadlineNanos}.
     *
     * @param where the store in words for messages ("torchrun's TCPStore at MASTER_ADDR:MASTER_PORT=node0:29500")
     * @throws JcclTimeoutException when the store is not reachable before the deadline
     * @throws JcclException PROTOCOL when something answers there but speaks no known dialect
     */
    public static TcpStoreClient connect(InetSocketAddress address, String where, long deadlineNanos) {
        Objects.requireNonNull(address, "address");
        String lastProblem = "none";
        long backoff = FIRST_BACKOFF_MS;
        while (true) {
            try {
                return probe(address, where, deadlineNanos);
            } catch (IOException e) {
                // Refused, unreachable, reset before any probe got through: the store may still be starting.
                lastProblem = e.toString();
            }
            long left = deadlineNanos - System.nanoTime();
            if (left <= 0) {
                throw new JcclTimeoutException("cannot reach " + where + " (" + BootstrapWire.hostPort(address) + "): " + lastProblem
                        + "; torchrun's agent serves it for as long as the job runs: is the agent still running, and does this"
                        + " host reach MASTER_ADDR:MASTER_PORT?");
            }
            sleep(Math.min(backoff, TimeUnit.NANOSECONDS.toMillis(left) + 1));
            backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
        }
    }

    /** The three probes; IOException only when no connection could be made at all. */
    private static TcpStoreClient probe(InetSocketAddress address, String where, long deadlineNanos) throws IOException {
        StringBuilder seen = new StringBuilder();
        // 1. validated + PING (current torch): VALIDATE magic | PING nonce | GETNUMKEYS | GETNUMKEYS.
        int nonce = (int) (System.nanoTime() ^ ProcessHandle.current().pid()) | 0x0080_0000; // byte 2 >= 0x80: see the class comment
        ByteBuffer a = le(12).put((byte) 0).putInt(VALIDATION_MAGIC).put((byte) 13).putInt(nonce).put((byte) 7).put((byte) 7);
        Socket s = open(address, deadlineNanos);
        ByteBuffer reply = exchange(s, a.array(), 20, seen, "validated+ping");
        if (reply != null && reply.order(ByteOrder.LITTLE_ENDIAN).getInt(0) == nonce) {
            return new TcpStoreClient(address, where, Dialect.VALIDATED_PING, s);
        }
        close(s);
        // 2. legacy (torch 1.x, early 2.x): four GETNUMKEYS.
        s = open(address, deadlineNanos);
        reply = exchange(s, new byte[] {6, 6, 6, 6}, 32, seen, "legacy");
        if (reply != null) {
            return new TcpStoreClient(address, where, Dialect.LEGACY, s);
        }
        close(s);
        // 3. validated without PING: VALIDATE magic | GETNUMKEYS x3 (8 bytes: two words).
        s = open(address, deadlineNanos);
        ByteBuffer c = le(8).put((byte) 0).putInt(VALIDATION_MAGIC).put((byte) 7).put((byte) 7).put((byte) 7);
        reply = exchange(s, c.array(), 24, seen, "validated");
        if (reply != null) {
            return new TcpStoreClient(address, where, Dialect.VALIDATED, s);
        }
        close(s);
        throw new JcclException(ErrorCode.PROTOCOL, "the server at " + BootstrapWire.hostPort(address) + " (" + where + ") does not"
                + " answer as PyTorch's TCPStore in any dialect jccl speaks (legacy, validated, validated with ping): " + seen
                + "; if it is not torchrun's store, unset TORCHELASTIC_USE_AGENT_STORE, or set JCCL_COMM_ID=<rank 0's host>:<free port>"
                + " so jccl does not use it");
    }

    private static Socket open(InetSocketAddress address, long deadlineNanos) throws IOException {
        Socket s = new Socket();
        try {
            long ms = Math.max(1, Math.min(probeMillis, TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime())));
            s.connect(address, (int) ms);
            s.setTcpNoDelay(true);
            return s;
        } catch (IOException e) {
            close(s);
            throw e;
        }
    }

    /** Sends {@code probe}, reads {@code expect} bytes; null (noting why in {@code seen}) when the server closes, resets or stays silent. */
    private static ByteBuffer exchange(Socket s, byte[] probe, int expect, StringBuilder seen, String name) {
        try {
            s.setSoTimeout((int) probeMillis);
            s.getOutputStream().write(probe);
            s.getOutputStream().flush();
            byte[] b = s.getInputStream().readNBytes(expect);
            if (b.length == expect) {
                return ByteBuffer.wrap(b);
            }
            seen.append(seen.isEmpty() ? "" : ", ").append(name).append(": closed after ").append(b.length).append(" bytes");
        } catch (SocketTimeoutException e) {
            seen.append(seen.isEmpty() ? "" : ", ").append(name).append(": no answer within ").append(probeMillis).append(" ms");
        } catch (IOException e) {
            seen.append(seen.isEmpty() ? "" : ", ").append(name).append(": ").append(e.getMessage());
        }
        return null;
    }

    /** The dialect the server speaks. */
    public Dialect dialect() {
        return dialect;
    }

    /**
     * Sets {@code key} to {@code value} (the server sends no reply to SET).
     *
     * @throws IOException when the connection fails
     */
    public void set(String key, byte[] value) throws IOException {
        byte[] k = key.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = le(1 + 8 + k.length + 8 + value.length);
        b.put((byte) dialect.set).putLong(k.length).put(k).putLong(value.length).put(value);
        out.write(b.array());
        out.flush();
    }

    /**
     * Waits until {@code key} exists, then returns its value; null when {@code deadlineNanos} passes
     * first (the connection is then closed, which also withdraws the wait from the server).
     *
     * @throws IOException when the connection fails
     */
    public byte[] waitAndGet(String key, long deadlineNanos) throws IOException {
        byte[] k = key.getBytes(StandardCharsets.UTF_8);
        ByteBuffer w = le(1 + 8 + 8 + k.length).put((byte) dialect.waitKeys).putLong(1).putLong(k.length).put(k);
        out.write(w.array());
        out.flush();
        long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
        if (left <= 0) {
            close();
            return null;
        }
        socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, left));
        int r;
        try {
            r = in.read();
        } catch (SocketTimeoutException e) {
            close();
            return null;
        }
        if (r < 0) {
            throw new EOFException(where + " closed the connection while this rank waited for key " + key);
        }
        if (r != 0) {
            throw new JcclException(ErrorCode.PROTOCOL, where + " answered a wait with " + r + " instead of STOP_WAITING (0)");
        }
        socket.setSoTimeout((int) probeMillis);
        ByteBuffer g = le(1 + 8 + k.length).put((byte) dialect.get).putLong(k.length).put(k);
        out.write(g.array());
        out.flush();
        long n = ByteBuffer.wrap(readFully(8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
        if (n < 0 || n > MAX_VALUE) {
            throw new JcclException(ErrorCode.PROTOCOL, where + " returned a value of " + n + " bytes for key " + key);
        }
        return readFully((int) n);
    }

    private byte[] readFully(int n) throws IOException {
        byte[] b = in.readNBytes(n);
        if (b.length != n) {
            throw new EOFException(where + " closed the connection in the middle of a reply");
        }
        return b;
    }

    @Override
    public void close() {
        close(socket);
    }

    private static void close(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // Nothing to do: the descriptor is released either way.
        }
    }

    private static ByteBuffer le(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new JcclException(ErrorCode.ABORTED, "interrupted while connecting to torchrun's TCPStore", e);
        }
    }

    @Override
    public String toString() {
        return "TcpStoreClient[" + BootstrapWire.hostPort(address) + ", " + dialect + "]";
    }
}
