package org.jccl.internal.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.code_intelligence.jazzer.junit.FuzzTest;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.spi.PeerInfo;

/**
 * Fuzz tests of every bootstrap decoder (Jazzer {@code @FuzzTest}): the peer info and peer table
 * codec, the registration and error bodies, and the frame reader. Each property: the decoder either
 * returns a value that re-encodes to exactly the input (decoding is exact), or fails with a
 * {@link ErrorCode#PROTOCOL} {@link JcclException} (or, for the stream reader, an EOF); never any
 * other exception, never an allocation sized by the input beyond the frame bound.
 *
 * <p>Under plain JUnit (CI, {@code ./mvnw test}) each method replays its seed corpus in {@code
 * src/test/resources/org/jccl/internal/bootstrap/BootstrapWireFuzzTestInputs/<method>/} plus an
 * empty input, asserting the same properties. To fuzz for real, see docs/WIRE.md ("Wire
 * format"): {@code JAZZER_FUZZ=1} with {@code -Djazzer.max_duration}.
 */
class BootstrapWireFuzzTest {

    @FuzzTest(maxDuration = "60s")
    void peerInfo(byte[] input) {
        PeerInfo info;
        try {
            info = PeerInfoCodec.decode(input);
        } catch (JcclException e) {
            assertProtocol(e);
            return;
        }
        assertArrayEquals(input, PeerInfoCodec.encode(info), "a decoded peer info re-encodes to its input");
    }

    @FuzzTest(maxDuration = "60s")
    void peerTable(byte[] input) {
        PeerInfo[] table;
        try {
            table = PeerInfoCodec.decodeAll(input);
        } catch (JcclException e) {
            assertProtocol(e);
            return;
        }
        assertArrayEquals(input, PeerInfoCodec.encodeAll(table), "a decoded peer table re-encodes to its input");
    }

    @FuzzTest(maxDuration = "60s")
    void registration(byte[] body) {
        BootstrapWire.Registration reg;
        try {
            reg = BootstrapWire.parseRegistration(body, "fuzz:1");
        } catch (JcclException e) {
            assertProtocol(e);
            return;
        }
        byte[] frame = BootstrapWire.registerFrame(reg.rank(), reg.size(), PeerInfoCodec.encode(reg.info()));
        // The frame is length | type | body: the body must come back unchanged.
        byte[] again = new byte[frame.length - 5];
        System.arraycopy(frame, 5, again, 0, again.length);
        assertArrayEquals(body, again, "a decoded registration re-encodes to its body");
    }

    @FuzzTest(maxDuration = "60s")
    void errorBody(byte[] body) {
        // The root is authenticated, but its error frame is still parsed without trusting a length.
        JcclException e = BootstrapWire.parseError(body, "fuzz:1");
        assertNotNull(e.getMessage());
        assertNotNull(e.code());
    }

    @FuzzTest(maxDuration = "60s")
    void frame(byte[] stream) throws IOException {
        int max = 1 << 16;
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(stream));
        int frames = 0;
        while (true) {
            BootstrapWire.Frame f;
            try {
                f = BootstrapWire.readFrame(in, max, "fuzz:1");
            } catch (EOFException e) {
                return; // truncated (or simply the end): the caller drops the connection
            } catch (JcclException e) {
                assertProtocol(e);
                assertTrue(e.getMessage().contains("fuzz:1"), "names the peer: " + e.getMessage());
                return;
            }
            assertTrue(f.body().length + 1 <= max, "a frame within the bound");
            assertTrue(++frames <= stream.length / 5, "every frame consumes at least 5 bytes");
        }
    }

    private static void assertProtocol(JcclException e) {
        if (e.code() != ErrorCode.PROTOCOL) {
            fail("expected a PROTOCOL error, got " + e.code() + ": " + e.getMessage(), e);
        }
        assertTrue(e.getMessage().length() > 20, "the error says what is wrong: " + e.getMessage());
    }

    /** Writes the seed corpus: valid encodings the fuzzer mutates from. Run by hand when the formats change. */
    public static void main(String[] args) throws IOException {
        java.nio.file.Path base = java.nio.file.Path.of(args.length > 0 ? args[0]
                : "jccl-core/src/test/resources/org/jccl/internal/bootstrap/BootstrapWireFuzzTestInputs");
        Map<String, byte[]> addresses = new LinkedHashMap<>();
        addresses.put("TCP", new byte[] {4, 127, 0, 0, 1, 0x75, 0x30});
        addresses.put("SHM", "/jccl-shm-1234".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        PeerInfo a = new PeerInfo(0, "node-a", 4242, "hash-a", "proc-a", addresses);
        PeerInfo b = new PeerInfo(1, "node-b.example", 77, "hash-b", "proc-b", Map.of());
        write(base.resolve("peerInfo"), "valid", PeerInfoCodec.encode(a));
        write(base.resolve("peerInfo"), "no-addresses", PeerInfoCodec.encode(b));
        write(base.resolve("peerTable"), "two", PeerInfoCodec.encodeAll(new PeerInfo[] {a, b}));
        write(base.resolve("peerTable"), "empty", PeerInfoCodec.encodeAll(new PeerInfo[0]));
        byte[] reg = BootstrapWire.registerFrame(0, 2, PeerInfoCodec.encode(a));
        write(base.resolve("registration"), "valid", java.util.Arrays.copyOfRange(reg, 5, reg.length));
        byte[] err = BootstrapWire.errorFrame(ErrorCode.TIMEOUT, "ranks [1] never arrived");
        write(base.resolve("errorBody"), "timeout", java.util.Arrays.copyOfRange(err, 5, err.length));
        java.io.ByteArrayOutputStream two = new java.io.ByteArrayOutputStream();
        two.write(reg);
        two.write(BootstrapWire.tableFrame(PeerInfoCodec.encodeAll(new PeerInfo[] {a, b})));
        write(base.resolve("frame"), "register-then-table", two.toByteArray());
        write(base.resolve("frame"), "huge-length", new byte[] {(byte) 0x80, 0, 0, 0, 1});
        write(base.resolve("frame"), "truncated", java.util.Arrays.copyOf(reg, 9));
    }

    private static void write(java.nio.file.Path dir, String name, byte[] bytes) throws IOException {
        java.nio.file.Files.createDirectories(dir);
        java.nio.file.Files.write(dir.resolve(name), bytes);
    }
}
