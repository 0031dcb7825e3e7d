package org.jccl.internal.control;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.jccl.ErrorCode;
import org.jccl.JcclException;

/**
 * Frames of the control channel. Every frame is an 8-byte header and a bounded payload:
 * <pre>
 *  u8 version (1) | u8 type | u16 reserved (0) | i32 payload length (0..MAX_PAYLOAD) | payload
 *
 *  HEARTBEAT  (empty)                                   liveness, both directions
 *  BYE        i64 lastFinished                          the rank closed its communicator normally
 *  FAULT      i32 culprit | u8 kind | str message        a peer failed (kind 1) or timed out (kind 2), or an operation failed
 *                                                       because of mismatched collective calls (kind 3): every rank aborts;
 *                                                       kind 4: the culprit found mismatched calls and left, message = its
 *                                                       report (relayed by the hub; nobody is failed by this notice)
 *  GONE       str reason                                the rank aborted its communicator (abort()): it leaves, nobody is failed
 *  REQUEST    i64 id | u8 purpose                       rank -> hub: collect every rank's state (1 stall, 2 status)
 *  COLLECT    i64 id                                    hub -> rank: send your state
 *  STATE      i64 id | RankState                        rank -> hub
 *  REPORT     i64 id | u8 purpose | i32 n | n x (u8 how | RankState when how = 0)
 *                                                       hub -> ranks; how: 0 answered, 1 no answer, 2 closed, 3 aborted
 *  LEFT       i32 rank | u8 how | str reason            hub -> ranks: that rank closed (how 2) or aborted (how 3) its
 *                                                       communicator, relayed from its BYE or GONE
 *  GUARD_ASK    i64 index | i64 guard                   rank -> hub: this rank has waited a while in collective call
 *                                                       #index, whose mismatch guard word (OpGuard) is guard: compare
 *  GUARD_QUERY  i64 index                               hub -> rank: your guard word of collective call #index?
 *  GUARD_ANSWER i64 index | i64 answer                  rank -> hub: the word, or NOT_YET / UNKNOWN (see ControlPlane)
 *  str = u16 length | UTF-8 bytes (at most MAX_STRING)
 * </pre>
 * Hand-written binary, no Java serialization; a frame that breaks a bound ends that connection.
 */
public final class ControlWire {
    /** 2: the mismatch guard's GUARD_* frames. */
    public static final int VERSION = 2;
    public static final int HEADER = 8;
    public static final int MAX_PAYLOAD = 1 << 20;
    public static final int MAX_STRING = 2048;

    public static final int HEARTBEAT = 1;
    public static final int BYE = 2;
    public static final int FAULT = 3;
    public static final int GONE = 4;
    public static final int REQUEST = 5;
    public static final int COLLECT = 6;
    public static final int STATE = 7;
    public static final int REPORT = 8;
    public static final int LEFT = 9;
    public static final int GUARD_ASK = 10;
    public static final int GUARD_QUERY = 11;
    public static final int GUARD_ANSWER = 12;

    public static final int KIND_FAILED = 1;
    public static final int KIND_TIMEOUT = 2;
    public static final int KIND_MISMATCH = 3;
    public static final int KIND_MISMATCH_FOUND = 4;

    public static final int PURPOSE_STALL = 1;
    public static final int PURPOSE_STATUS = 2;

    public static final int HOW_ANSWERED = 0;
    public static final int HOW_SILENT = 1;
    public static final int HOW_CLOSED = 2;
    public static final int HOW_ABORTED = 3;

    private ControlWire() {
    }

    /** A frame of {@code type} with room for {@code payload} bytes, positioned after the header. */
    static ByteBuffer frame(int type, int payload) {
        ByteBuffer b = ByteBuffer.allocate(HEADER + payload);
        b.put((byte) VERSION).put((byte) type).putShort((short) 0).putInt(0);
        return b;
    }

    /** Fills in the length and flips {@code b} for writing. */
    static ByteBuffer seal(ByteBuffer b) {
        int len = b.position() - HEADER;
        if (len > MAX_PAYLOAD) {
            throw new JcclException(ErrorCode.INTERNAL, "control frame of " + len + " bytes exceeds " + MAX_PAYLOAD);
        }
        b.putInt(4, len);
        return b.flip();
    }

    /** A FAULT; {@code index}: for a mismatch found (kind 4), the collective call it was found in, else -1. */
    static ByteBuffer fault(int culprit, int kind, String message, long index) {
        ByteBuffer f = frame(FAULT, 4 + 1 + stringBytes(message) + 8);
        f.putInt(culprit).put((byte) kind);
        putString(f, message);
        f.putLong(index);
        return seal(f);
    }

    /** A LEFT, sent by the hub: rank {@code r} closed or aborted its communicator ({@code how}), with why. */
    static ByteBuffer left(int r, int how, String why) {
        ByteBuffer f = frame(LEFT, 4 + 1 + stringBytes(why));
        f.putInt(r).put((byte) how);
        putString(f, why);
        return seal(f);
    }

    /** A GONE: this rank leaves (aborted), with why. */
    static ByteBuffer gone(String reason) {
        ByteBuffer f = frame(GONE, stringBytes(reason));
        putString(f, reason);
        return seal(f);
    }

    /** A BYE: this rank closes normally, after its last finished operation. */
    static ByteBuffer bye(long lastFinished) {
        return seal(frame(BYE, 8).putLong(lastFinished));
    }

    /**
     * Checks a received header (8 bytes from position 0) and returns the payload length.
     *
     * @throws JcclException PROTOCOL naming what is wrong
     */
    static int payloadLength(ByteBuffer header, String from) {
        int version = header.get(0) & 0xFF;
        int type = header.get(1) & 0xFF;
        int len = header.getInt(4);
        if (version != VERSION) {
            throw new JcclException(ErrorCode.PROTOCOL, "control frame from " + from + " has version " + version + ", expected "
                    + VERSION + ": mixed jccl versions in one job");
        }
        if (type < HEARTBEAT || type > GUARD_ANSWER) {
            throw new JcclException(ErrorCode.PROTOCOL, "control frame from " + from + " has unknown type " + type);
        }
        if (len < 0 || len > MAX_PAYLOAD) {
            throw new JcclException(ErrorCode.PROTOCOL, "control frame from " + from + " announces " + len + " bytes (at most "
                    + MAX_PAYLOAD + ")");
        }
        return len;
    }

    static void putString(ByteBuffer b, String s) {
        byte[] u = (s == null ? "" : s).getBytes(StandardCharsets.UTF_8);
        int n = Math.min(u.length, MAX_STRING);
        b.putShort((short) n).put(u, 0, n);
    }

    static String getString(ByteBuffer b) {
        int n = b.getShort() & 0xFFFF;
        if (n > MAX_STRING || n > b.remaining()) {
            throw new JcclException(ErrorCode.PROTOCOL, "control string of " + n + " bytes (at most " + MAX_STRING + ", "
                    + b.remaining() + " left in the frame)");
        }
        byte[] u = new byte[n];
        b.get(u);
        return new String(u, StandardCharsets.UTF_8);
    }

    /** Bytes a string takes on the wire, at most. */
    static int stringBytes(String s) {
        return 2 + Math.min(MAX_STRING, (s == null ? 0 : s.length()) * 3);
    }

    /** Bytes a RankState takes on the wire, at most. */
    static int stateBytes(RankState s) {
        return 4 + 8 + stringBytes(s.lastName()) + 8 + 8 + stringBytes(s.curName()) + 8 + stringBytes(s.curType())
                + stringBytes(s.curRedop()) + 4 + 1 + 8 * 5;
    }

    /** The collective as NCCL names it in logs: allReduce -> all_reduce, allToAllv -> all_to_allv. */
    public static String collName(String name) {
        if (name == null || name.isEmpty()) {
            return "";
        }
        StringBuilder sb = new StringBuilder(name.length() + 4);
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (Character.isUpperCase(c)) {
                sb.append('_').append(Character.toLowerCase(c));
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }
}
