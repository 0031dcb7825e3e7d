package org.jccl.internal.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.spi.PeerInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The peer info encoding: round trips, and every kind of bad input failing as PROTOCOL, never as an index or memory error. */
class PeerInfoCodecTest {

    private static PeerInfo sample(int rank) {
        Map<String, byte[]> a = new LinkedHashMap<>();
        a.put("TCP", new byte[] {10, 0, 0, (byte) rank, 0x75, 0x30});
        a.put("SHM", "/dev/shm/jccl-ä-€".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        a.put("EMPTY", new byte[0]);
        return new PeerInfo(rank, "nöde-" + rank + ".cluster", 4_000_000_000L + rank, "boot-id#host", "jvm-" + rank, a);
    }

    private static void assertSame(PeerInfo expected, PeerInfo got) {
        assertEquals(expected.rank(), got.rank());
        assertEquals(expected.host(), got.host());
        assertEquals(expected.pid(), got.pid());
        assertEquals(expected.hostHash(), got.hostHash());
        assertEquals(expected.processId(), got.processId());
        assertEquals(List.copyOf(expected.addresses().keySet()), List.copyOf(got.addresses().keySet()), "transport order kept");
        for (String t : expected.addresses().keySet()) {
            assertArrayEquals(expected.addresses().get(t), got.addresses().get(t), t);
        }
    }

    private static void assertProtocol(Runnable r) {
        JcclException e = assertThrows(JcclException.class, r::run);
        assertEquals(ErrorCode.PROTOCOL, e.code(), e.toString());
    }

    @Test
    @Timeout(10)
    void roundTripsOnePeer() {
        PeerInfo p = sample(7);
        byte[] bytes = PeerInfoCodec.encode(p);
        assertSame(p, PeerInfoCodec.decode(bytes));
        ByteBuffer b = ByteBuffer.allocate(bytes.length + 8);
        b.position(3);
        b.put(bytes);
        b.flip().position(3);
        assertSame(p, PeerInfoCodec.decode(b));
        assertEquals(b.limit(), b.position(), "decode consumes the buffer");
    }

    @Test
    @Timeout(10)
    void roundTripsExtremes() {
        PeerInfo empty = new PeerInfo(-1, "", -5, "", "", Map.of());
        assertSame(empty, PeerInfoCodec.decode(PeerInfoCodec.encode(empty)));
        Map<String, byte[]> many = new LinkedHashMap<>();
        for (int i = 0; i < PeerInfoCodec.MAX_ADDRESSES; i++) {
            many.put("T" + i, new byte[i == 0 ? PeerInfoCodec.MAX_ADDRESS_BYTES : i]);
        }
        PeerInfo big = new PeerInfo(Integer.MAX_VALUE, "h".repeat(PeerInfoCodec.MAX_STRING_BYTES), Long.MAX_VALUE, "x", "y", many);
        assertSame(big, PeerInfoCodec.decode(PeerInfoCodec.encode(big)));
    }

    @Test
    @Timeout(10)
    void roundTripsTables() {
        for (int n : new int[] {0, 1, 3, 64}) {
            PeerInfo[] t = new PeerInfo[n];
            for (int i = 0; i < n; i++) {
                t[i] = sample(i);
            }
            PeerInfo[] back = PeerInfoCodec.decodeAll(PeerInfoCodec.encodeAll(t));
            assertEquals(n, back.length);
            for (int i = 0; i < n; i++) {
                assertSame(t[i], back[i]);
            }
        }
    }

    @Test
    @Timeout(10)
    void everyTruncationIsAProtocolError() {
        byte[] one = PeerInfoCodec.encode(sample(1));
        for (int len = 0; len < one.length; len++) {
            byte[] cut = Arrays.copyOf(one, len);
            assertProtocol(() -> PeerInfoCodec.decode(cut));
        }
        byte[] table = PeerInfoCodec.encodeAll(new PeerInfo[] {sample(0), sample(1)});
        for (int len = 0; len < table.length; len++) {
            byte[] cut = Arrays.copyOf(table, len);
            assertProtocol(() -> PeerInfoCodec.decodeAll(cut));
        }
    }

    @Test
    @Timeout(10)
    void trailingBytesAreAProtocolError() {
        byte[] one = PeerInfoCodec.encode(sample(1));
        assertProtocol(() -> PeerInfoCodec.decode(Arrays.copyOf(one, one.length + 1)));
        byte[] table = PeerInfoCodec.encodeAll(new PeerInfo[] {sample(0)});
        assertProtocol(() -> PeerInfoCodec.decodeAll(Arrays.copyOf(table, table.length + 1)));
    }

    @Test
    @Timeout(10)
    void garbageIsAProtocolError() {
        Random random = new Random(42);
        for (int i = 0; i < 2000; i++) {
            byte[] junk = new byte[random.nextInt(200)];
            random.nextBytes(junk);
            assertProtocol(() -> PeerInfoCodec.decode(junk));
            assertProtocol(() -> PeerInfoCodec.decodeAll(junk));
        }
        // Random corruption of valid encodings: each either still decodes or fails as PROTOCOL.
        byte[] good = PeerInfoCodec.encodeAll(new PeerInfo[] {sample(0), sample(1)});
        for (int i = 0; i < 2000; i++) {
            byte[] bad = good.clone();
            bad[random.nextInt(bad.length)] = (byte) random.nextInt(256);
            try {
                PeerInfoCodec.decodeAll(bad);
            } catch (JcclException e) {
                assertEquals(ErrorCode.PROTOCOL, e.code(), e.toString());
            }
        }
    }

    @Test
    @Timeout(10)
    void headerErrorsNameTheCause() {
        byte[] one = PeerInfoCodec.encode(sample(1));
        byte[] otherVersion = one.clone();
        otherVersion[3] = 9;
        JcclException e = assertThrows(JcclException.class, () -> PeerInfoCodec.decode(otherVersion));
        assertTrue(e.getMessage().contains("version 9") && e.getMessage().contains("same jccl version"), e.getMessage());
        // A single peer info is not a table.
        e = assertThrows(JcclException.class, () -> PeerInfoCodec.decodeAll(one));
        assertTrue(e.getMessage().contains("magic"), e.getMessage());
        // A huge claimed count is refused without allocating for it.
        ByteBuffer b = ByteBuffer.allocate(8).putShort((short) 0x5054).putShort((short) 1).putInt(Integer.MAX_VALUE);
        e = assertThrows(JcclException.class, () -> PeerInfoCodec.decodeAll(b.array()));
        assertTrue(e.getMessage().contains("2147483647 entries"), e.getMessage());
    }

    @Test
    @Timeout(10)
    void malformedUtf8IsAProtocolError() {
        byte[] one = PeerInfoCodec.encode(new PeerInfo(0, "ab", 1, "c", "d", Map.of()));
        // host "ab" starts after magic, version, rank, pid and its length: offset 2+2+4+8+2 = 18.
        one[18] = (byte) 0xC3;
        one[19] = (byte) 0x28;
        JcclException e = assertThrows(JcclException.class, () -> PeerInfoCodec.decode(one));
        assertTrue(e.getMessage().contains("UTF-8"), e.getMessage());
    }

    @Test
    @Timeout(10)
    void oversizedFieldsAreRefusedAtEncoding() {
        JcclException e = assertThrows(JcclException.class, () -> PeerInfoCodec.encode(
                new PeerInfo(0, "h".repeat(PeerInfoCodec.MAX_STRING_BYTES + 1), 1, "", "", Map.of())));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("host"), e.getMessage());
        Map<String, byte[]> many = new LinkedHashMap<>();
        for (int i = 0; i <= PeerInfoCodec.MAX_ADDRESSES; i++) {
            many.put("T" + i, new byte[1]);
        }
        e = assertThrows(JcclException.class, () -> PeerInfoCodec.encode(new PeerInfo(0, "h", 1, "", "", many)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        e = assertThrows(JcclException.class, () -> PeerInfoCodec.encode(
                new PeerInfo(0, "h", 1, "", "", Map.of("TCP", new byte[PeerInfoCodec.MAX_ADDRESS_BYTES + 1]))));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("TCP"), e.getMessage());
        e = assertThrows(JcclException.class, () -> PeerInfoCodec.encodeAll(new PeerInfo[] {sample(0), null}));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    }
}
