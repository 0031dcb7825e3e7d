package org.jccl.internal.bootstrap;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.spi.PeerInfo;

/**
 * The binary encoding of {@link PeerInfo}, used by the bootstrap (registration and peer table) and
 * by the runtime when it all-gathers peer infos to split a communicator. Hand-written, big-endian,
 * versioned and bounded; never Java serialization.
 *
 * <pre>
 *  one peer info                              a table (encodeAll)
 *  +--------+---------+                       +--------+---------+---------+
 *  | u16 'PI' magic   | u16 version |         | u16 'PT' magic   | u16 version | i32 n |
 *  | i32 rank         | i64 pid     |         | n x ( i32 len | peer info[len] )       |
 *  | str host | str hostHash | str processId  +----------------------------------------+
 *  | u8 count (&lt;= 64)                    |
 *  | count x ( str transport | u16 len | address[len] )
 *  str = u16 n | UTF-8[n]
 * </pre>
 *
 * Every length is checked against what is left of the input before anything is allocated for it,
 * so a truncated or hostile buffer fails with a {@link ErrorCode#PROTOCOL} error and never with an
 * out-of-memory or index error. Decoding is exact: trailing bytes are an error too.
 *
 * <p>Stateless and thread-safe.
 */
public final class PeerInfoCodec {

    /** Version of both layouts; a reader accepts only its own (mixed jccl versions cannot form a job). */
    public static final int VERSION = 1;
    /** Longest string field (host, host hash, process id, transport name), in UTF-8 bytes. */
    public static final int MAX_STRING_BYTES = 0xFFFF;
    /** Most transport addresses one peer may publish. */
    public static final int MAX_ADDRESSES = 64;
    /** Longest single transport address, in bytes. */
    public static final int MAX_ADDRESS_BYTES = 0xFFFF;
    /** Most peers in one table (the decoder refuses larger counts before allocating). */
    public static final int MAX_PEERS = 1 << 24;

    private static final int MAGIC_PEER = 0x5049;  // "PI"
    private static final int MAGIC_TABLE = 0x5054; // "PT"

    private PeerInfoCodec() {
    }

    /**
     * Encodes one peer info.
     *
     * @throws JcclException INVALID_ARGUMENT when a field exceeds the bounds above or an address is null
     */
    public static byte[] encode(PeerInfo info) {
        byte[] host = utf8(info.host(), "host");
        byte[] hostHash = utf8(info.hostHash(), "hostHash");
        byte[] processId = utf8(info.processId(), "processId");
        Map<String, byte[]> addresses = info.addresses();
        if (addresses.size() > MAX_ADDRESSES) {
            throw invalid("peer info of rank " + info.rank() + " has " + addresses.size() + " transport addresses, at most "
                    + MAX_ADDRESSES + " can be encoded");
        }
        int length = 2 + 2 + 4 + 8 + 2 + host.length + 2 + hostHash.length + 2 + processId.length + 1;
        byte[][] names = new byte[addresses.size()][];
        int i = 0;
        for (Map.Entry<String, byte[]> e : addresses.entrySet()) {
            if (e.getKey() == null || e.getValue() == null) {
                throw invalid("peer info of rank " + info.rank() + " has a null transport name or address (" + e.getKey() + ")");
            }
            names[i] = utf8(e.getKey(), "transport name");
            if (e.getValue().length > MAX_ADDRESS_BYTES) {
                throw invalid("transport " + e.getKey() + " of rank " + info.rank() + " published an address of "
                        + e.getValue().length + " bytes, at most " + MAX_ADDRESS_BYTES + " can be encoded");
            }
            length += 2 + names[i].length + 2 + e.getValue().length;
            i++;
        }
        ByteBuffer b = ByteBuffer.allocate(length);
        b.putShort((short) MAGIC_PEER).putShort((short) VERSION).putInt(info.rank()).putLong(info.pid());
        putString(b, host);
        putString(b, hostHash);
        putString(b, processId);
        b.put((byte) addresses.size());
        i = 0;
        for (byte[] address : addresses.values()) {
            putString(b, names[i++]);
            b.putShort((short) address.length).put(address);
        }
        return b.array();
    }

    /**
     * Decodes exactly one peer info from {@code bytes}.
     *
     * @throws JcclException PROTOCOL when the bytes are truncated, too long, of another version or not a peer info
     */
    public static PeerInfo decode(byte[] bytes) {
        return decode(ByteBuffer.wrap(bytes));
    }

    /**
     * Decodes exactly one peer info from the buffer's remaining bytes and advances its position to
     * its limit (the buffer's byte order is ignored: the encoding is big-endian).
     *
     * @throws JcclException PROTOCOL when the bytes are truncated, too long, of another version or not a peer info
     */
    public static PeerInfo decode(ByteBuffer buffer) {
        ByteBuffer b = buffer.slice().order(java.nio.ByteOrder.BIG_ENDIAN);
        PeerInfo info = read(b, "peer info");
        requireEnd(b, "peer info");
        buffer.position(buffer.limit());
        return info;
    }

    /**
     * Encodes a table of peer infos, in the order given (by rank, for the bootstrap).
     *
     * @throws JcclException INVALID_ARGUMENT when an entry exceeds the bounds, is null, or the table is too large
     */
    public static byte[] encodeAll(PeerInfo[] infos) {
        if (infos.length > MAX_PEERS) {
            throw invalid("a peer table of " + infos.length + " entries exceeds the limit of " + MAX_PEERS);
        }
        byte[][] parts = new byte[infos.length][];
        long length = 2 + 2 + 4;
        for (int i = 0; i < infos.length; i++) {
            if (infos[i] == null) {
                throw invalid("peer table entry " + i + " is null");
            }
            parts[i] = encode(infos[i]);
            length += 4 + parts[i].length;
        }
        if (length > Integer.MAX_VALUE - 16) {
            throw invalid("a peer table of " + infos.length + " entries would take " + length
                    + " bytes; publish fewer or smaller transport addresses");
        }
        ByteBuffer b = ByteBuffer.allocate((int) length);
        b.putShort((short) MAGIC_TABLE).putShort((short) VERSION).putInt(infos.length);
        for (byte[] part : parts) {
            b.putInt(part.length).put(part);
        }
        return b.array();
    }

    /**
     * Decodes a table made by {@link #encodeAll}.
     *
     * @throws JcclException PROTOCOL when the bytes are truncated, too long, of another version or not a table
     */
    public static PeerInfo[] decodeAll(byte[] bytes) {
        return decodeAll(ByteBuffer.wrap(bytes));
    }

    /**
     * Decodes a table made by {@link #encodeAll} from the buffer's remaining bytes and advances its
     * position to its limit.
     *
     * @throws JcclException PROTOCOL when the bytes are truncated, too long, of another version or not a table
     */
    public static PeerInfo[] decodeAll(ByteBuffer buffer) {
        ByteBuffer b = buffer.slice().order(java.nio.ByteOrder.BIG_ENDIAN);
        try {
            checkHeader(b, MAGIC_TABLE, "peer table");
            int n = b.getInt();
            // Each entry takes at least 4 + 23 bytes: refuse a count the input cannot hold before allocating for it.
            if (n < 0 || n > MAX_PEERS || (long) n * 27 > b.remaining()) {
                throw protocol("peer table claims " + n + " entries but holds only " + b.remaining() + " more bytes");
            }
            PeerInfo[] infos = new PeerInfo[n];
            for (int i = 0; i < n; i++) {
                int len = b.getInt();
                if (len < 0 || len > b.remaining()) {
                    throw protocol("peer table entry " + i + " claims " + len + " bytes but only " + b.remaining() + " remain");
                }
                ByteBuffer entry = b.slice(b.position(), len);
                b.position(b.position() + len);
                infos[i] = read(entry, "peer table entry " + i);
                requireEnd(entry, "peer table entry " + i);
            }
            requireEnd(b, "peer table");
            buffer.position(buffer.limit());
            return infos;
        } catch (BufferUnderflowException e) {
            throw protocol("peer table is truncated at byte " + b.position() + " of " + b.limit(), e);
        }
    }

    private static PeerInfo read(ByteBuffer b, String what) {
        try {
            checkHeader(b, MAGIC_PEER, what);
            int rank = b.getInt();
            long pid = b.getLong();
            String host = getString(b, what, "host");
            String hostHash = getString(b, what, "hostHash");
            String processId = getString(b, what, "processId");
            int count = Byte.toUnsignedInt(b.get());
            if (count > MAX_ADDRESSES) {
                throw protocol(what + " claims " + count + " transport addresses, at most " + MAX_ADDRESSES + " are allowed");
            }
            Map<String, byte[]> addresses = new LinkedHashMap<>();
            for (int i = 0; i < count; i++) {
                String transport = getString(b, what, "transport name");
                int len = Short.toUnsignedInt(b.getShort());
                if (len > b.remaining()) {
                    throw protocol(what + ": address of transport " + transport + " claims " + len + " bytes but only "
                            + b.remaining() + " remain");
                }
                byte[] address = new byte[len];
                b.get(address);
                if (addresses.put(transport, address) != null) {
                    throw protocol(what + " lists transport " + transport + " twice");
                }
            }
            return new PeerInfo(rank, host, pid, hostHash, processId, addresses);
        } catch (BufferUnderflowException e) {
            throw protocol(what + " is truncated at byte " + b.position() + " of " + b.limit(), e);
        }
    }

    private static void checkHeader(ByteBuffer b, int magic, String what) {
        int m = Short.toUnsignedInt(b.getShort());
        if (m != magic) {
            throw protocol(what + " starts with 0x" + Integer.toHexString(m) + ", not the expected magic 0x"
                    + Integer.toHexString(magic) + ": the bytes are not a jccl " + (magic == MAGIC_PEER ? "peer info" : "peer table"));
        }
        int version = Short.toUnsignedInt(b.getShort());
        if (version != VERSION) {
            throw new JcclException(ErrorCode.PROTOCOL, what + " has encoding version " + version + ", this jccl reads version "
                    + VERSION + ": every rank of a job must run the same jccl version");
        }
    }

    private static void requireEnd(ByteBuffer b, String what) {
        if (b.hasRemaining()) {
            throw protocol(what + " has " + b.remaining() + " unexpected bytes after its end");
        }
    }

    private static String getString(ByteBuffer b, String what, String field) {
        int len = Short.toUnsignedInt(b.getShort());
        if (len > b.remaining()) {
            throw protocol(what + ": field " + field + " claims " + len + " bytes but only " + b.remaining() + " remain");
        }
        ByteBuffer slice = b.slice(b.position(), len);
        b.position(b.position() + len);
        try {
            // A fresh decoder reports malformed input instead of replacing it, so garbage is caught here.
            CharBuffer chars = StandardCharsets.UTF_8.newDecoder().decode(slice);
            return chars.toString();
        } catch (CharacterCodingException e) {
            throw protocol(what + ": field " + field + " is not valid UTF-8", e);
        }
    }

    private static void putString(ByteBuffer b, byte[] s) {
        b.putShort((short) s.length).put(s);
    }

    private static byte[] utf8(String s, String field) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_STRING_BYTES) {
            throw invalid("peer info field " + field + " is " + bytes.length + " bytes of UTF-8, at most " + MAX_STRING_BYTES
                    + " can be encoded");
        }
        return bytes;
    }

    private static JcclException invalid(String message) {
        return new JcclException(ErrorCode.INVALID_ARGUMENT, message);
    }

    private static JcclException protocol(String message) {
        return new JcclException(ErrorCode.PROTOCOL, message + " (corrupted stream, or ranks running different jccl versions)");
    }

    private static JcclException protocol(String message, Throwable cause) {
        return new JcclException(ErrorCode.PROTOCOL, message + " (corrupted stream, or ranks running different jccl versions)", cause);
    }
}
