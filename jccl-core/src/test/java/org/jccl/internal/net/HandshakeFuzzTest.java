package org.jccl.internal.net;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.code_intelligence.jazzer.junit.FuzzTest;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import org.jccl.ErrorCode;
import org.jccl.JcclException;

/**
 * Fuzz tests of both handshake decoders over real loopback sockets (Jazzer {@code @FuzzTest}):
 * <ul>
 * <li>{@link #acceptor}: the bytes a connecting peer sends to a listening rank, read by the
 *     non-blocking {@link HandshakeServer} every jccl listener uses;</li>
 * <li>{@link #connector}: the bytes a listening "peer" sends to a rank that connects, read by
 *     {@link Handshake#connect}.</li>
 * </ul>
 * Property: no input gets through (a valid MAC over fresh nonces cannot be guessed), every input is
 * refused with a PROTOCOL or AUTHENTICATION error that names the remote address (or the socket's own
 * EOF/reset), and nothing hangs: the input ends with the peer closing its side.
 *
 * <p>Plain JUnit replays the seed corpus in {@code
 * src/test/resources/org/jccl/internal/net/HandshakeFuzzTestInputs/}; {@code JAZZER_FUZZ=1}
 * fuzzes (see docs/WIRE.md, "Wire format").
 */
class HandshakeFuzzTest {

    private static final byte[] SECRET = "fuzz-test-secret".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    private static ServerSocketChannel listener;

    private static synchronized ServerSocketChannel listener() throws IOException {
        if (listener == null) {
            listener = ServerSocketChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
        }
        return listener;
    }

    @FuzzTest(maxDuration = "60s")
    void acceptor(byte[] answer) throws IOException {
        ServerSocketChannel l = listener();
        try (SocketChannel client = SocketChannel.open(l.getLocalAddress()); SocketChannel accepted = l.accept()) {
            accepted.configureBlocking(false);
            HandshakeServer hs = HandshakeServer.start(accepted, SECRET, Handshake.Kind.DATA, Duration.ofSeconds(10));
            client.write(ByteBuffer.wrap(answer));
            client.shutdownOutput();
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            HandshakeServer.Result r;
            try {
                do {
                    r = hs.step();
                    if (System.nanoTime() > deadline) {
                        fail("the acceptor was still in its handshake 10 s after the peer closed (" + answer.length + " bytes)");
                    }
                } while (r.status() == HandshakeServer.Status.IN_PROGRESS);
            } catch (IOException e) {
                return; // reset by the peer: the caller drops the connection
            }
            if (r.status() == HandshakeServer.Status.DONE) {
                fail("a peer without the secret was admitted with " + answer.length + " bytes");
            }
            assertRefused(r.error(), hs.remote());
        }
    }

    @FuzzTest(maxDuration = "60s")
    void connector(byte[] challenge) throws IOException {
        ServerSocketChannel l = listener();
        try (SocketChannel client = SocketChannel.open(l.getLocalAddress()); SocketChannel accepted = l.accept()) {
            accepted.write(ByteBuffer.wrap(challenge));
            accepted.shutdownOutput();
            try {
                Handshake.connect(client, SECRET, Handshake.Kind.DATA, new byte[28], Duration.ofSeconds(10));
                fail("a listener without the secret was trusted after sending " + challenge.length + " bytes");
            } catch (JcclException e) {
                assertRefused(e, Handshake.remote(client));
            } catch (java.net.SocketTimeoutException e) {
                fail("the connector waited out its timeout although the peer had closed", e);
            } catch (IOException e) {
                // EOF or reset: Bootstrap and TcpEndpoint report it naming the peer
            }
        }
    }

    private static void assertRefused(JcclException e, String remote) {
        assertNotNull(e);
        if (e.code() != ErrorCode.PROTOCOL && e.code() != ErrorCode.AUTHENTICATION) {
            fail("expected PROTOCOL or AUTHENTICATION, got " + e.code() + ": " + e.getMessage(), e);
        }
        assertTrue(e.getMessage().contains(remote), "the refusal names " + remote + ": " + e.getMessage());
    }

    /** Writes the seed corpus (valid-looking answers and challenges). Run by hand when the handshake changes. */
    public static void main(String[] args) throws IOException {
        java.nio.file.Path base = java.nio.file.Path.of(args.length > 0 ? args[0]
                : "jccl-core/src/test/resources/org/jccl/internal/net/HandshakeFuzzTestInputs");
        ByteBuffer answer = ByteBuffer.allocate(4 + 2 + Handshake.NONCE + 2 + 28 + Handshake.MAC_LEN);
        answer.putInt(Handshake.MAGIC).putShort(Handshake.VERSION).put(new byte[Handshake.NONCE]).putShort((short) 28)
                .put(new byte[28]).put(new byte[Handshake.MAC_LEN]);
        write(base.resolve("acceptor"), "answer", answer.array());
        write(base.resolve("acceptor"), "header-only", java.util.Arrays.copyOf(answer.array(), 24));
        ByteBuffer challenge = ByteBuffer.allocate(4 + 2 + 1 + Handshake.NONCE + 1 + Handshake.MAC_LEN);
        challenge.putInt(Handshake.MAGIC).putShort(Handshake.VERSION).put((byte) 2).put(new byte[Handshake.NONCE]).put((byte) 0)
                .put(new byte[Handshake.MAC_LEN]);
        write(base.resolve("connector"), "challenge-and-ok", challenge.array());
        byte[] bootstrapKind = java.util.Arrays.copyOf(challenge.array(), 23);
        bootstrapKind[6] = 1;
        write(base.resolve("connector"), "bootstrap-kind", bootstrapKind);
    }

    private static void write(java.nio.file.Path dir, String name, byte[] bytes) throws IOException {
        java.nio.file.Files.createDirectories(dir);
        java.nio.file.Files.write(dir.resolve(name), bytes);
    }
}
