package org.jccl.internal.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.code_intelligence.jazzer.junit.FuzzTest;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Map;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;

/**
 * Fuzz tests of the TCP transport's decoders (Jazzer {@code @FuzzTest}): the published endpoint
 * address, the data hello, and the data stream itself, fed to a real {@link TcpConnection} over a
 * loopback socket.
 *
 * <p>{@link #stream}: the first two input bytes choose the posted receive size (0..32767, so both
 * the inline and the direct path run) and, with the top bit, whether {@code JCCL_CHECKSUM} is on;
 * the rest is what the "peer" sends before closing. Property: the receive either completes with
 * exactly the payload of a well-formed stripe (header with the posted length, payload, and the
 * matching CRC32C trailer when checksums are on), or fails with an error naming the peer; it never
 * hangs, never completes with other bytes, and never throws anything but an {@link IOException}.
 *
 * <p>Plain JUnit replays {@code src/test/resources/org/jccl/internal/transport/tcp/TcpWireFuzzTestInputs/};
 * {@code JAZZER_FUZZ=1} fuzzes (see docs/WIRE.md, "Wire format").
 */
class TcpWireFuzzTest {

    private static final PeerInfo PEER = new PeerInfo(1, "fuzzhost", 4711, "hash", "proc", Map.of());
    private static ServerSocketChannel listener;

    private static synchronized ServerSocketChannel listener() throws IOException {
        if (listener == null) {
            listener = ServerSocketChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
        }
        return listener;
    }

    @FuzzTest(maxDuration = "60s")
    void address(byte[] input) {
        InetSocketAddress a;
        try {
            a = TcpWire.decodeAddress(input);
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage() != null && !e.getMessage().isEmpty(), "says what is wrong");
            return;
        }
        assertArrayEquals(input, TcpWire.encodeAddress(a), "a decoded address re-encodes to its input");
    }

    @FuzzTest(maxDuration = "60s")
    void hello(byte[] input) {
        TcpWire.Hello h = TcpWire.Hello.parse(input);
        if (input.length != TcpWire.HELLO_BYTES) {
            assertNull(h, "a hello of the wrong length is refused");
            return;
        }
        assertArrayEquals(input, TcpWire.hello(h.commId(), h.rank(), h.socketIndex(), h.nsocks(), h.flags()));
    }

    @FuzzTest(maxDuration = "60s")
    void stream(byte[] input) throws IOException {
        int control = input.length >= 2 ? ((input[0] & 0xFF) << 8) | (input[1] & 0xFF) : 0;
        int posted = control & 0x7FFF;
        boolean checksum = (control & 0x8000) != 0;
        byte[] sent = input.length >= 2 ? java.util.Arrays.copyOfRange(input, 2, input.length) : new byte[0];
        ServerSocketChannel l = listener();
        try (Arena arena = Arena.ofConfined();
                SocketChannel peer = SocketChannel.open(l.getLocalAddress());
                SocketChannel accepted = l.accept()) {
            accepted.configureBlocking(false);
            TcpConnection conn = new TcpConnection(0, PEER, "fuzz", new org.jccl.internal.net.WireChannel[] {org.jccl.internal.net.WireChannel.plain(accepted)}, checksum);
            MemorySegment dst = arena.allocate(Math.max(1, posted)).asSlice(0, posted);
            dst.fill((byte) 0x5A);
            P2pRequest r = conn.recv(dst);
            peer.write(ByteBuffer.wrap(sent));
            peer.shutdownOutput();
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            IOException failure = null;
            try {
                while (!r.isDone()) {
                    conn.progress();
                    if (System.nanoTime() > deadline) {
                        fail("a receive of " + posted + " bytes was still pending 10 s after the peer closed");
                    }
                }
            } catch (IOException e) {
                failure = e;
            } finally {
                conn.close();
            }
            if (failure == null && r.error() == null) {
                assertEquals(posted, r.position, "completed with the whole message");
                assertTrue(wellFormed(sent, posted, checksum), "completed although the stream is not a well-formed stripe");
                byte[] got = dst.toArray(ValueLayout.JAVA_BYTE);
                assertArrayEquals(java.util.Arrays.copyOfRange(sent, TcpWire.HEADER_BYTES, TcpWire.HEADER_BYTES + posted), got);
                return;
            }
            Throwable e = failure != null ? failure : r.error();
            assertTrue(e instanceof IOException, "fails with an IOException, not " + e);
            assertTrue(e.getMessage().contains(PEER.describe()), "the error names the peer: " + e.getMessage());
            assertTrue(!wellFormed(sent, posted, checksum), "a well-formed stripe was refused: " + e.getMessage());
        }
    }

    /** Whether {@code sent} starts with a whole, valid stripe 0 of a {@code posted}-byte message. */
    private static boolean wellFormed(byte[] sent, int posted, boolean checksum) {
        int need = TcpWire.HEADER_BYTES + posted + (checksum ? TcpWire.TRAILER_BYTES : 0);
        if (sent.length < need) {
            return false;
        }
        ByteBuffer b = ByteBuffer.wrap(sent);
        if (b.getInt(0) != (checksum ? TcpWire.MAGIC_CHECKSUM : TcpWire.MAGIC) || b.getInt(4) != 0 || b.getLong(8) != posted) {
            return false;
        }
        if (checksum) {
            java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
            crc.update(sent, TcpWire.HEADER_BYTES, posted);
            return b.getInt(TcpWire.HEADER_BYTES + posted) == (int) crc.getValue();
        }
        return true;
    }

    /** Writes the seed corpus. Run by hand when the format changes. */
    public static void main(String[] args) throws IOException {
        java.nio.file.Path base = java.nio.file.Path.of(args.length > 0 ? args[0]
                : "jccl-core/src/test/resources/org/jccl/internal/transport/tcp/TcpWireFuzzTestInputs");
        write(base.resolve("address"), "v4", TcpWire.encodeAddress(new InetSocketAddress("10.0.0.2", 41234)));
        write(base.resolve("address"), "v6", TcpWire.encodeAddress(new InetSocketAddress("fd00::2", 41234)));
        write(base.resolve("hello"), "valid", TcpWire.hello(new byte[16], 3, 1, 2, TcpWire.FLAG_CHECKSUM));
        for (int size : new int[] {0, 8, 9000}) {
            for (boolean checksum : new boolean[] {false, true}) {
                ByteBuffer b = ByteBuffer.allocate(2 + TcpWire.HEADER_BYTES + size + (checksum ? TcpWire.TRAILER_BYTES : 0));
                b.putShort((short) (size | (checksum ? 0x8000 : 0)));
                b.putInt(checksum ? TcpWire.MAGIC_CHECKSUM : TcpWire.MAGIC).putInt(0).putLong(size);
                byte[] payload = new byte[size];
                for (int i = 0; i < size; i++) {
                    payload[i] = (byte) (i * 31);
                }
                b.put(payload);
                if (checksum) {
                    java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
                    crc.update(payload);
                    b.putInt((int) crc.getValue());
                }
                write(base.resolve("stream"), "stripe-" + size + (checksum ? "-crc" : ""), b.array());
            }
        }
    }

    private static void write(java.nio.file.Path dir, String name, byte[] bytes) throws IOException {
        java.nio.file.Files.createDirectories(dir);
        java.nio.file.Files.write(dir.resolve(name), bytes);
    }
}
