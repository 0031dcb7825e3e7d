package org.jccl.internal.transport.tcp;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;

/**
 * Everything the TCP transport puts on a wire or into a published address, in one place: the
 * endpoint address, the hello each data socket carries through the {@link
 * org.jccl.internal.net.Handshake}, the stripe header, and the striping rule both sides compute.
 * All integers are big-endian.
 *
 * <h2>Endpoint address (published in {@code PeerInfo.addresses().get("TCP")})</h2>
 * <pre>
 *  +--------+--------------------+----------+
 *  | u8 fam | ip (4 or 16 bytes) | u16 port |     fam = 4 (IPv4, 7 bytes in all) or 6 (IPv6, 19 bytes)
 *  +--------+--------------------+----------+
 * </pre>
 *
 * <h2>Hello (inside the authenticated handshake, {@value #HELLO_BYTES} bytes)</h2>
 * <pre>
 *  +---------------+----------+-----------------+-----------+-----------+
 *  | commId[16]    | i32 rank | i32 socketIndex | i32 nsocks| i32 flags |
 *  +---------------+----------+-----------------+-----------+-----------+
 *  flags: bit 0 = {@link #FLAG_CHECKSUM} (stripes carry a CRC32C trailer); bit 1 = {@link #FLAG_SPLIT}
 *  (sockets 0..nsocks/2-1 carry the lower rank's messages, the others the higher rank's); other bits must be 0
 * </pre>
 * The lower rank of a pair opens {@code nsocks} sockets and numbers them {@code 0..nsocks-1};
 * the higher rank takes {@code nsocks} and the flags from the hellos, so both sides stripe (and
 * checksum) alike even if their settings differ.
 *
 * <h2>Stripe header ({@value #HEADER_BYTES} bytes, before every stripe of every message)</h2>
 * <pre>
 *  0          4          8                         16                       24
 *  +----------+----------+--------------------------+------------------------+----------------------+
 *  | "JCT2"   | i32      | u64 message length       | u64 guard: the call's  | stripe payload ...   |
 *  | magic    | stripe   | (whole message, bytes)   | signature (OpGuard)    |                      |
 *  +----------+----------+--------------------------+------------------------+----------------------+
 * </pre>
 * The header carries the length of the whole message rather than the stripe's, so a receiver
 * whose posted size differs can name both sizes; each side derives the stripe's extent from the
 * message length with {@link #stripeOffset}/{@link #stripeLength}. The guard word is the mismatch
 * guard's compact signature of the call that sent the message (collective, count, data type, op,
 * root; {@code org.jccl.internal.guard.OpGuard}); the receiver compares it with its own call's
 * before the length, on every stripe, so that ranks whose calls differ fail even where their
 * messages happen to have the same size (0 on either side: no guard, {@code JCCL_CHECK=none}).
 * Version 2 of the header (magic "JCT2"/"JCC2"); version 1 ("JCTS"/"JCTC", 16 bytes, no guard)
 * is refused as a mixed-version job.
 *
 * <h2>Checksummed stripes ({@code JCCL_CHECKSUM=1}, {@link #FLAG_CHECKSUM} in the hello)</h2>
 * <pre>
 *  +----------+----------+--------------------------+-----------+----------------------+-------------------+
 *  | "JCC2"   | i32      | u64 message length       | u64 guard | stripe payload ...   | u32 CRC32C of the |
 *  | magic    | stripe   |                          |           |                      | payload           |
 *  +----------+----------+--------------------------+-----------+----------------------+-------------------+
 * </pre>
 * The trailer covers the payload; the header needs none, since each of its fields has exactly one
 * value the receiver accepts (magic, the expected stripe index, the posted length, its own guard), so any flipped
 * header bit is refused too. A connection carries either kind of stripe, never both: the distinct
 * magic turns a disagreement into an error rather than a misread.
 *
 * <h2>Striping</h2>
 * Message {@code k} (counted per direction from 0) of {@code size} bytes on a connection of
 * {@code n} sockets: when {@link #isSplit}{@code (size, n)} is false it goes whole, as stripe 0,
 * on socket {@code k mod n}; otherwise it is cut into {@code n} contiguous stripes of nearly equal
 * length, stripe {@code i} on socket {@code i}. Per socket, stripes go in message order, so a
 * receiver only needs its own posted receives to know what comes next on every socket. With
 * {@link #FLAG_SPLIT} the rule runs over the {@code n = nsocks/2} sockets of the message's set: sockets
 * {@code n..2n-1} for the higher rank's messages of {@link #OWN_DIRECTION_BYTES} and more, {@code 0..n-1}
 * for every other message (both sides know sender and size, so both pick the same set).
 */
final class TcpWire {

    /** "JCT2": jccl TCP stripe, header version 2 (with the guard word). */
    static final int MAGIC = 0x4A435432;
    /** "JCC2": jccl TCP stripe with a CRC32C trailer, header version 2. */
    static final int MAGIC_CHECKSUM = 0x4A434332;
    /** The version 1 magics ("JCTS", "JCTC"): a peer running an older jccl. */
    static final int MAGIC_V1 = 0x4A435453;
    static final int MAGIC_CHECKSUM_V1 = 0x4A435443;
    /** Bytes of a stripe header. */
    static final int HEADER_BYTES = 24;
    /** Offset of the guard word in a stripe header. */
    static final int GUARD_OFFSET = 16;
    /** Bytes of the CRC32C trailer of a checksummed stripe. */
    static final int TRAILER_BYTES = 4;
    /** Bytes of a hello. */
    static final int HELLO_BYTES = 32;
    /** Hello flag: the connection's stripes carry a CRC32C trailer. */
    static final int FLAG_CHECKSUM = 1;
    /**
     * Hello flag: large messages have sockets of their own per direction ({@code JCCL_SOCKET_SPLIT}): of
     * the hello's {@code nsocks} (even), sockets {@code 0..nsocks/2-1} carry the lower rank's messages and
     * the higher rank's below {@link #OWN_DIRECTION_BYTES}, the others the higher rank's from that size
     * on; striping runs over the {@code nsocks/2} sockets of the message's set.
     */
    static final int FLAG_SPLIT = 2;
    /**
     * With {@link #FLAG_SPLIT}: the higher rank's messages of this size and more go on sockets
     * {@code nsocks/2..nsocks-1}; its smaller ones, and all of the lower rank's, on {@code 0..nsocks/2-1}.
     * Small messages so share sockets both ways, where each side's data carries the acknowledgement of
     * the other's (8 B all-reduce 5.1-6.2 us instead of 6.9-7.2 with every size split by direction).
     */
    static final long OWN_DIRECTION_BYTES = 64 * 1024;
    /** Every flag this version knows; a hello with another bit set is refused. */
    static final int KNOWN_FLAGS = FLAG_CHECKSUM | FLAG_SPLIT;
    /** Most sockets per peer connection (NCCL's limit too). */
    static final int MAX_SOCKETS = 64;
    /**
     * Messages from this size up are split over all sockets. Below it, one socket carries the whole
     * message: a syscall per socket costs more than the bandwidth extra sockets can add.
     */
    static final long SPLIT_THRESHOLD = 256 * 1024;
    /** Smallest stripe a split produces; with many sockets the split starts at {@code n} times this. */
    static final long MIN_STRIPE = 32 * 1024;

    private static final byte FAMILY_V4 = 4;
    private static final byte FAMILY_V6 = 6;

    private TcpWire() {
    }

    /** Whether a message of {@code size} bytes is split over all {@code nsocks} sockets. */
    static boolean isSplit(long size, int nsocks) {
        return nsocks > 1 && size >= Math.max(SPLIT_THRESHOLD, nsocks * MIN_STRIPE);
    }

    /** The socket that carries the unsplit message number {@code seq}. */
    static int socketOf(long seq, int nsocks) {
        return (int) Long.remainderUnsigned(seq, nsocks);
    }

    /** Offset of stripe {@code stripe} of a split message: the first {@code size % n} stripes are one byte longer. */
    static long stripeOffset(long size, int nsocks, int stripe) {
        long base = size / nsocks;
        long rem = size % nsocks;
        return stripe * base + Math.min(stripe, rem);
    }

    /** Length of stripe {@code stripe} of a split message. */
    static long stripeLength(long size, int nsocks, int stripe) {
        return size / nsocks + (stripe < size % nsocks ? 1 : 0);
    }

    /** Writes a stripe header at absolute positions 0..23 of {@code b}, leaving position and limit alone. */
    static void putHeader(ByteBuffer b, int stripe, long messageLength, boolean checksum, long guard) {
        putHeader(b, 0, stripe, messageLength, checksum, guard);
    }

    /** Writes a stripe header at absolute positions {@code at..at+23} of {@code b}, leaving position and limit alone. */
    static void putHeader(ByteBuffer b, int at, int stripe, long messageLength, boolean checksum, long guard) {
        b.putInt(at, checksum ? MAGIC_CHECKSUM : MAGIC);
        b.putInt(at + 4, stripe);
        b.putLong(at + 8, messageLength);
        b.putLong(at + GUARD_OFFSET, guard);
    }

    /** The connector's hello. */
    static byte[] hello(byte[] commId, int rank, int socketIndex, int nsocks, int flags) {
        if (commId.length != 16) {
            throw new IllegalArgumentException("commId must be 16 bytes, got " + commId.length);
        }
        return ByteBuffer.allocate(HELLO_BYTES).put(commId).putInt(rank).putInt(socketIndex).putInt(nsocks).putInt(flags).array();
    }

    /**
     * A parsed hello.
     *
     * @param commId the communicator the connector belongs to
     * @param rank the connector's rank
     * @param socketIndex which of its sockets this is
     * @param nsocks how many sockets it opens
     * @param flags {@link #FLAG_CHECKSUM} or 0
     */
    record Hello(byte[] commId, int rank, int socketIndex, int nsocks, int flags) {

        /** Parses a hello; null when it has the wrong length (the caller drops the connection). */
        static Hello parse(byte[] b) {
            if (b.length != HELLO_BYTES) {
                return null;
            }
            ByteBuffer buf = ByteBuffer.wrap(b);
            byte[] id = new byte[16];
            buf.get(id);
            return new Hello(id, buf.getInt(), buf.getInt(), buf.getInt(), buf.getInt());
        }
    }

    /** Encodes an endpoint address (see the class comment). */
    static byte[] encodeAddress(InetSocketAddress a) {
        byte[] ip = a.getAddress().getAddress();
        ByteBuffer b = ByteBuffer.allocate(1 + ip.length + 2);
        b.put(ip.length == 4 ? FAMILY_V4 : FAMILY_V6).put(ip).putShort((short) a.getPort());
        return b.array();
    }

    /**
     * Decodes an endpoint address.
     *
     * @throws IllegalArgumentException saying what is wrong with it
     */
    static InetSocketAddress decodeAddress(byte[] b) {
        if (b == null || b.length == 0) {
            throw new IllegalArgumentException("empty TCP address");
        }
        int ipLen = switch (b[0]) {
            case FAMILY_V4 -> 4;
            case FAMILY_V6 -> 16;
            default -> throw new IllegalArgumentException("unknown address family tag " + b[0]);
        };
        if (b.length != 1 + ipLen + 2) {
            throw new IllegalArgumentException("TCP address of " + b.length + " bytes, expected " + (1 + ipLen + 2));
        }
        byte[] ip = new byte[ipLen];
        System.arraycopy(b, 1, ip, 0, ipLen);
        int port = ((b[1 + ipLen] & 0xFF) << 8) | (b[2 + ipLen] & 0xFF);
        try {
            InetAddress addr = InetAddress.getByAddress(ip);
            if (!(addr instanceof Inet4Address || addr instanceof Inet6Address)) {
                throw new IllegalArgumentException("not an IP address");
            }
            return new InetSocketAddress(addr, port);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("bad IP address bytes", e);
        }
    }

    /** "10.0.0.2:41234" or "[fd00::2]:41234", for logs. */
    static String format(InetSocketAddress a) {
        InetAddress ip = a.getAddress();
        return (ip instanceof Inet6Address v6 ? "[" + compact(v6) + "]" : ip.getHostAddress()) + ":" + a.getPort();
    }

    /** RFC 5952 text of an IPv6 address ("::1", not Java's "0:0:0:0:0:0:0:1"), with its scope if any. */
    static String compact(Inet6Address a) {
        byte[] b = a.getAddress();
        int[] g = new int[8];
        for (int i = 0; i < 8; i++) {
            g[i] = ((b[2 * i] & 0xFF) << 8) | (b[2 * i + 1] & 0xFF);
        }
        // The longest run of two or more zero groups (the first one on a tie) becomes "::".
        int bestStart = -1;
        int bestLen = 1;
        for (int i = 0; i < 8; ) {
            if (g[i] != 0) {
                i++;
                continue;
            }
            int j = i;
            while (j < 8 && g[j] == 0) {
                j++;
            }
            if (j - i > bestLen) {
                bestStart = i;
                bestLen = j - i;
            }
            i = j;
        }
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            if (i == bestStart) {
                sb.append("::");
                i += bestLen - 1;
                continue;
            }
            if (sb.length() > 0 && sb.charAt(sb.length() - 1) != ':') {
                sb.append(':');
            }
            sb.append(Integer.toHexString(g[i]));
        }
        String host = a.getHostAddress();
        int pct = host.indexOf('%');
        return pct < 0 ? sb.toString() : sb + host.substring(pct);
    }
}
