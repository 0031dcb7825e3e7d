package org.jccl.internal.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The pure parts of the wire format: addresses, hellos, striping. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TcpWireTest {

    @Test
    void addressRoundTrip() {
        for (String host : new String[] {"10.1.2.3", "fd00::2", "::1"}) {
            InetSocketAddress a = new InetSocketAddress(host, 65535);
            assertEquals(a, TcpWire.decodeAddress(TcpWire.encodeAddress(a)));
        }
        assertEquals("[fd00::2]:80", TcpWire.format(new InetSocketAddress("fd00::2", 80)));
        assertEquals("[::1]:1", TcpWire.format(new InetSocketAddress("::1", 1)));
        assertEquals("[::]:1", TcpWire.format(new InetSocketAddress("::", 1)));
        assertEquals("[2001:db8::1:0:0:1]:1", TcpWire.format(new InetSocketAddress("2001:db8:0:0:1:0:0:1", 1)));
        assertEquals("[2001:db8:0:1:1:1:1:1]:1", TcpWire.format(new InetSocketAddress("2001:db8:0:1:1:1:1:1", 1)),
                "a single zero group stays");
        assertEquals("[1::]:1", TcpWire.format(new InetSocketAddress("1:0:0:0:0:0:0:0", 1)));
        assertEquals("10.1.2.3:9", TcpWire.format(new InetSocketAddress("10.1.2.3", 9)));
        assertThrows(IllegalArgumentException.class, () -> TcpWire.decodeAddress(new byte[] {5, 1, 2, 3, 4, 0, 1}));
        assertThrows(IllegalArgumentException.class, () -> TcpWire.decodeAddress(new byte[] {4, 1, 2, 3, 4, 0}));
        assertThrows(IllegalArgumentException.class, () -> TcpWire.decodeAddress(new byte[0]));
    }

    @Test
    void helloRoundTrip() {
        byte[] id = TcpTestSupport.random16();
        TcpWire.Hello h = TcpWire.Hello.parse(TcpWire.hello(id, 7, 3, 4, TcpWire.FLAG_CHECKSUM));
        assertArrayEquals(id, h.commId());
        assertEquals(7, h.rank());
        assertEquals(3, h.socketIndex());
        assertEquals(4, h.nsocks());
        assertEquals(TcpWire.FLAG_CHECKSUM, h.flags());
        assertNull(TcpWire.Hello.parse(new byte[TcpWire.HELLO_BYTES - 1]));
    }

    @Test
    void stripesTileTheMessage() {
        for (int n : new int[] {1, 2, 3, 4, 7, 64}) {
            for (long size : new long[] {0, 1, 63, 256 * 1024, (1 << 20) + 3, 3L << 31}) {
                long next = 0;
                for (int i = 0; i < n; i++) {
                    assertEquals(next, TcpWire.stripeOffset(size, n, i));
                    long len = TcpWire.stripeLength(size, n, i);
                    assertTrue(len == size / n || len == size / n + 1);
                    next += len;
                }
                assertEquals(size, next, "n=" + n + " size=" + size);
            }
        }
    }

    @Test
    void splitRule() {
        assertFalse(TcpWire.isSplit(64L << 20, 1), "one socket never splits");
        assertFalse(TcpWire.isSplit(TcpWire.SPLIT_THRESHOLD - 1, 4));
        assertTrue(TcpWire.isSplit(TcpWire.SPLIT_THRESHOLD, 4));
        assertFalse(TcpWire.isSplit(1 << 20, 64), "64 sockets need at least 64 x MIN_STRIPE");
        assertTrue(TcpWire.isSplit(2 << 20, 64));
        assertEquals(3, TcpWire.socketOf(7, 4));
        assertEquals(1, TcpWire.socketOf(-1L, 2), "sequence numbers are unsigned");
    }
}
