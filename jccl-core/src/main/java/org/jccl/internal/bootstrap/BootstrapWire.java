package org.jccl.internal.bootstrap;

import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.spi.PeerInfo;

/**
 * The frames the bootstrap exchanges after the {@link org.jccl.internal.net.Handshake} (whose hello
 * is {@code i32 rank | i32 size}). One descriptor for the whole layout, so client and root cannot drift.
 *
 * <pre>
 *  frame    = u32 length (of type + body, 1 .. max) | u8 type | body
 *  REGISTER = u16 version | i32 rank | i32 size | peer info (PeerInfoCodec, rest of the body)   rank -> root
 *  TABLE    = peer table (PeerInfoCodec.encodeAll, index = rank)                               root -> rank
 *  ERROR    = u16 n | ErrorCode name[n] (ASCII) | u32 m | message[m] (UTF-8)                   root -> rank
 * </pre>
 * Big-endian. Each direction has its own bound on the length ({@link #MAX_REGISTRATION_FRAME} is
 * what the root accepts from a rank), checked before the body is allocated.
 */
final class BootstrapWire {

    /** Version of the REGISTER body. */
    static final int VERSION = 1;
    static final int REGISTER = 1;
    static final int TABLE = 2;
    static final int ERROR = 3;

    /** Largest registration the root reads (a peer info is at most about 8.5 MiB by PeerInfoCodec's bounds). */
    static final int MAX_REGISTRATION_FRAME = 16 << 20;
    /** Largest reply a rank reads: the root is authenticated, but a corrupt length must not allocate gigabytes. */
    static final int MAX_REPLY_FRAME = 1 << 30;
    /** Error messages are cut to this many characters. */
    static final int MAX_ERROR_CHARS = 16_384;

    static final int HELLO_BYTES = 8;

    /** A decoded registration. */
    record Registration(int rank, int size, PeerInfo info) {
    }

    /** One frame as read: its type and body. */
    record Frame(int type, byte[] body) {
    }

    private BootstrapWire() {
    }

    static byte[] hello(int rank, int size) {
        return ByteBuffer.allocate(HELLO_BYTES).putInt(rank).putInt(size).array();
    }

    /** Returns {rank, size}. */
    static int[] parseHello(byte[] hello, String from) {
        if (hello.length != HELLO_BYTES) {
            throw new JcclException(ErrorCode.PROTOCOL, "bootstrap hello from " + from + " is " + hello.length + " bytes, expected "
                    + HELLO_BYTES + " (a jccl data connection sent to the bootstrap port, or another jccl version)");
        }
        ByteBuffer b = ByteBuffer.wrap(hello);
        return new int[] {b.getInt(), b.getInt()};
    }

    static byte[] registerFrame(int rank, int size, byte[] peerInfo) {
        ByteBuffer b = ByteBuffer.allocate(4 + 1 + 2 + 4 + 4 + peerInfo.length);
        b.putInt(1 + 2 + 4 + 4 + peerInfo.length).put((byte) REGISTER).putShort((short) VERSION).putInt(rank).putInt(size).put(peerInfo);
        return b.array();
    }

    static Registration parseRegistration(byte[] body, String from) {
        ByteBuffer b = ByteBuffer.wrap(body);
        try {
            int version = Short.toUnsignedInt(b.getShort());
            if (version != VERSION) {
                throw new JcclException(ErrorCode.PROTOCOL, "registration from " + from + " has version " + version
                        + ", this root reads version " + VERSION + ": every rank of a job must run the same jccl version");
            }
            int rank = b.getInt();
            int size = b.getInt();
            return new Registration(rank, size, PeerInfoCodec.decode(b));
        } catch (BufferUnderflowException e) {
            throw new JcclException(ErrorCode.PROTOCOL, "registration from " + from + " is truncated (" + body.length + " bytes)", e);
        }
    }

    static byte[] tableFrame(byte[] table) {
        ByteBuffer b = ByteBuffer.allocate(4 + 1 + table.length);
        b.putInt(1 + table.length).put((byte) TABLE).put(table);
        return b.array();
    }

    static byte[] errorFrame(ErrorCode code, String message) {
        String text = message.length() > MAX_ERROR_CHARS ? message.substring(0, MAX_ERROR_CHARS) + " ..." : message;
        byte[] name = code.name().getBytes(StandardCharsets.US_ASCII);
        byte[] msg = text.getBytes(StandardCharsets.UTF_8);
        int length = 1 + 2 + name.length + 4 + msg.length;
        ByteBuffer b = ByteBuffer.allocate(4 + length);
        b.putInt(length).put((byte) ERROR).putShort((short) name.length).put(name).putInt(msg.length).put(msg);
        return b.array();
    }

    /** Turns an ERROR body into the exception the rank throws: the root's text, typed by its code. */
    static JcclException parseError(byte[] body, String from) {
        ByteBuffer b = ByteBuffer.wrap(body);
        try {
            byte[] name = new byte[Short.toUnsignedInt(b.getShort())];
            b.get(name);
            int m = b.getInt();
            if (m < 0 || m > b.remaining()) {
                throw new BufferUnderflowException();
            }
            byte[] msg = new byte[m];
            b.get(msg);
            ErrorCode code;
            try {
                code = ErrorCode.valueOf(new String(name, StandardCharsets.US_ASCII));
            } catch (IllegalArgumentException e) {
                code = ErrorCode.INTERNAL;
            }
            String text = new String(msg, StandardCharsets.UTF_8);
            return code == ErrorCode.TIMEOUT ? new JcclTimeoutException(text) : new JcclException(code, text);
        } catch (BufferUnderflowException e) {
            return new JcclException(ErrorCode.PROTOCOL, "the bootstrap root at " + from + " sent a truncated error frame"
                    + " (corrupted stream, or the root runs another jccl version)", e);
        }
    }

    /**
     * Reads one frame, refusing a length above {@code max} before allocating the body.
     *
     * @throws JcclException PROTOCOL for a length out of bounds
     * @throws IOException from the stream (EOF, timeout, reset)
     */
    static Frame readFrame(DataInputStream in, int max, String from) throws IOException {
        int length = in.readInt();
        checkFrameLength(length, max, from);
        int type = in.readUnsignedByte();
        byte[] body = new byte[length - 1];
        in.readFully(body);
        return new Frame(type, body);
    }

    /**
     * Refuses a frame length outside 1..{@code max} before anything is allocated for the body; shared
     * by the blocking reader and the root's non-blocking one so both say the same.
     *
     * @throws JcclException PROTOCOL for a length out of bounds
     */
    static void checkFrameLength(int length, int max, String from) {
        if (length < 1 || length > max) {
            throw new JcclException(ErrorCode.PROTOCOL, "bootstrap frame from " + from + " claims " + Integer.toUnsignedString(length)
                    + " bytes (allowed 1.." + max + "): not a jccl bootstrap peer, or another jccl version");
        }
    }

    /** "10.0.0.1:29500", "[fe80::1]:29500". */
    static String hostPort(InetSocketAddress a) {
        String host = a.getAddress() != null ? a.getAddress().getHostAddress() : a.getHostString();
        return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + a.getPort();
    }

    /** "120 s", "2.5 s": how deadlines appear in messages. */
    static String seconds(Duration d) {
        long ms = d.toMillis();
        return ms % 1000 == 0 ? (ms / 1000) + " s" : (ms / 1000.0) + " s";
    }

    /**
     * The ranks in {@code [0, size)} that are not in {@code present} (sorted ascending), as
     * "[1, 3, 7-12]": runs of three or more are shortened so a large job's list stays readable, and
     * after 64 items the rest is counted rather than listed.
     */
    static String missing(Collection<Integer> present, int size) {
        List<String> items = new ArrayList<>();
        int next = 0;
        long more = 0;
        List<Integer> sorted = new ArrayList<>(present);
        sorted.sort(null);
        sorted.add(size);
        for (int p : sorted) {
            if (p > next) {
                int last = p - 1;
                if (items.size() >= 64) {
                    more += last - next + 1L;
                } else if (last == next) {
                    items.add(Integer.toString(next));
                } else if (last == next + 1) {
                    items.add(next + ", " + last);
                } else {
                    items.add(next + "-" + last);
                }
            }
            next = Math.max(next, p + 1);
        }
        return "[" + String.join(", ", items) + (more > 0 ? ", ... " + more + " more" : "") + "]";
    }

    /** Number of ranks of {@code [0, size)} missing from {@code present}. */
    static long missingCount(Collection<Integer> present, int size) {
        return (long) size - present.size();
    }
}
