package org.jccl.internal.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link HandshakeServer} against the real, unchanged client {@link Handshake#connect} (and against
 * hand-made clients for what a real client never sends) over loopback sockets, served by one
 * selector thread as TcpEndpoint and BootstrapRoot serve it.
 */
class HandshakeServerTest {

    private static final SecureRandom RANDOM = new SecureRandom();
    private static final Duration CLIENT_TIMEOUT = Duration.ofSeconds(5);

    private final byte[] secret = random(16);
    private final ExecutorService clients = Executors.newVirtualThreadPerTaskExecutor();
    private Server server;

    @AfterEach
    void tearDown() throws Exception {
        if (server != null) {
            server.close();
        }
        clients.shutdownNow();
    }

    /** What one accepted connection's handshake ended with. */
    private record Outcome(HandshakeServer.Status status, byte[] hello, JcclException error, IOException io) {
    }

    /** A selector thread that runs HandshakeServer on every accepted connection and reports outcomes. */
    private static final class Server implements AutoCloseable {
        final ServerSocketChannel listener;
        final Selector selector;
        final Thread thread;
        final BlockingQueue<Outcome> outcomes = new LinkedBlockingQueue<>();
        volatile boolean closed;

        Server(byte[] secret, Handshake.Kind kind, Duration timeout) throws IOException {
            listener = ServerSocketChannel.open();
            listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            listener.configureBlocking(false);
            selector = Selector.open();
            SelectionKey acceptKey = listener.register(selector, SelectionKey.OP_ACCEPT);
            thread = Thread.ofPlatform().name("test-handshake-selector").daemon(true).start(() -> {
                try {
                    while (!closed) {
                        selector.select(20);
                        for (Iterator<SelectionKey> it = selector.selectedKeys().iterator(); it.hasNext(); ) {
                            SelectionKey key = it.next();
                            it.remove();
                            if (!key.isValid()) {
                                continue;
                            }
                            if (key == acceptKey) {
                                SocketChannel ch;
                                while ((ch = listener.accept()) != null) {
                                    ch.configureBlocking(false);
                                    HandshakeServer hs = HandshakeServer.start(ch, secret, kind, timeout);
                                    SelectionKey k = ch.register(selector, 0, hs);
                                    step(k, hs);
                                }
                            } else {
                                step(key, (HandshakeServer) key.attachment());
                            }
                        }
                        long now = System.nanoTime();
                        for (SelectionKey key : List.copyOf(selector.keys())) {
                            if (key.isValid() && key.attachment() instanceof HandshakeServer hs) {
                                HandshakeServer.Result r = hs.expired(now);
                                if (r != null) {
                                    finish(key, hs, r);
                                }
                            }
                        }
                    }
                } catch (IOException e) {
                    outcomes.add(new Outcome(null, null, null, e));
                }
            });
        }

        InetSocketAddress address() throws IOException {
            return (InetSocketAddress) listener.getLocalAddress();
        }

        private void step(SelectionKey key, HandshakeServer hs) {
            try {
                finish(key, hs, hs.step());
            } catch (IOException e) {
                key.cancel();
                close(key);
                outcomes.add(new Outcome(HandshakeServer.Status.FAILED, null, null, e));
            }
        }

        private void finish(SelectionKey key, HandshakeServer hs, HandshakeServer.Result r) {
            switch (r.status()) {
                case IN_PROGRESS -> key.interestOps(r.interestOps());
                case DONE -> {
                    key.interestOps(0);
                    outcomes.add(new Outcome(r.status(), hs.hello(), null, null));
                }
                case FAILED -> {
                    close(key);
                    outcomes.add(new Outcome(r.status(), null, r.error(), null));
                }
            }
        }

        private static void close(SelectionKey key) {
            try {
                key.channel().close();
            } catch (IOException ignored) {
                // Dropped either way.
            }
        }

        Outcome next() throws InterruptedException {
            Outcome o = outcomes.poll(15, TimeUnit.SECONDS);
            assertNotNull(o, "the server reported no outcome within 15 s");
            return o;
        }

        @Override
        public void close() throws Exception {
            closed = true;
            selector.wakeup();
            thread.join(2000);
            for (SelectionKey k : selector.keys()) {
                k.channel().close();
            }
            selector.close();
        }
    }

    private static byte[] random(int n) {
        byte[] b = new byte[n];
        RANDOM.nextBytes(b);
        return b;
    }

    private Server serve(Handshake.Kind kind, Duration timeout) throws IOException {
        server = new Server(secret, kind, timeout);
        return server;
    }

    private Future<Void> client(byte[] key, Handshake.Kind kind, byte[] hello) {
        return clients.submit(() -> {
            try (SocketChannel ch = SocketChannel.open(server.address())) {
                Handshake.connect(ch, key, kind, hello, CLIENT_TIMEOUT);
            }
            return null;
        });
    }

    private static Throwable failure(Future<?> f) {
        java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                () -> f.get(15, TimeUnit.SECONDS));
        return e.getCause();
    }

    private static void assertFailed(Outcome o, ErrorCode code, String text) {
        assertEquals(HandshakeServer.Status.FAILED, o.status(), "outcome " + o);
        assertNotNull(o.error(), "a FAILED result carries its JcclException; got " + o);
        assertEquals(code, o.error().code(), o.error().getMessage());
        assertTrue(o.error().getMessage().contains(text), o.error().getMessage());
    }

    @Test
    @Timeout(20)
    void theRealClientIsAdmittedWithItsHello() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofSeconds(10));
        byte[] hello = random(Handshake.MAX_HELLO);
        Future<Void> c = client(secret, Handshake.Kind.DATA, hello);
        c.get(15, TimeUnit.SECONDS);
        Outcome o = s.next();
        assertEquals(HandshakeServer.Status.DONE, o.status(), "outcome " + o);
        assertArrayEquals(hello, o.hello());
    }

    @Test
    @Timeout(20)
    void anEmptyHelloIsAdmitted() throws Exception {
        Server s = serve(Handshake.Kind.BOOTSTRAP, Duration.ofSeconds(10));
        client(secret, Handshake.Kind.BOOTSTRAP, new byte[0]).get(15, TimeUnit.SECONDS);
        Outcome o = s.next();
        assertEquals(HandshakeServer.Status.DONE, o.status(), "outcome " + o);
        assertArrayEquals(new byte[0], o.hello());
    }

    @Test
    @Timeout(20)
    void wrongSecretFailsBothSides() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofSeconds(10));
        Throwable t = failure(client(random(16), Handshake.Kind.DATA, new byte[] {1, 2, 3}));
        JcclException e = (JcclException) t;
        assertEquals(ErrorCode.AUTHENTICATION, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("rejected this rank's proof of the job secret"), e.getMessage());
        assertFailed(s.next(), ErrorCode.AUTHENTICATION, "failed authentication (wrong secret: its JCCL_AUTH_TOKEN, secret file or JcclId differs");
    }

    @Test
    @Timeout(20)
    void wrongKindIsRefusedByTheClientAndTheServerSeesTheClose() throws Exception {
        Server s = serve(Handshake.Kind.BOOTSTRAP, Duration.ofSeconds(10));
        JcclException e = (JcclException) failure(client(secret, Handshake.Kind.DATA, new byte[8]));
        assertEquals(ErrorCode.PROTOCOL, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("is a jccl BOOTSTRAP port, not a DATA port"), e.getMessage());
        assertFailed(s.next(), ErrorCode.PROTOCOL, "closed during the jccl handshake; dropped");
    }

    @Test
    @Timeout(20)
    void garbageIsNotAJcclPeer() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofSeconds(10));
        try (Socket raw = new Socket(InetAddress.getLoopbackAddress(), s.address().getPort())) {
            new DataInputStream(raw.getInputStream()).readFully(new byte[23]);
            raw.getOutputStream().write("GET / HTTP/1.0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            assertFailed(s.next(), ErrorCode.PROTOCOL, "is not a jccl peer (bad magic 0x47455420); dropped");
            assertEquals(-1, raw.getInputStream().read(), "the server closes the connection");
        }
    }

    @Test
    @Timeout(20)
    void anImmediateCloseIsReported() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofSeconds(10));
        new Socket(InetAddress.getLoopbackAddress(), s.address().getPort()).close();
        Outcome o = s.next();
        // The close races the challenge: EOF when it is seen first, a reset when the challenge hit a closed socket.
        if (o.io() == null) {
            assertFailed(o, ErrorCode.PROTOCOL, "closed during the jccl handshake; dropped");
        } else {
            assertEquals(HandshakeServer.Status.FAILED, o.status());
        }
    }

    @Test
    @Timeout(20)
    void aSilentClientTimesOutWhileAnotherCompletes() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofMillis(1500));
        try (Socket silent = new Socket(InetAddress.getLoopbackAddress(), s.address().getPort())) {
            long t0 = System.nanoTime();
            client(secret, Handshake.Kind.DATA, new byte[] {42}).get(15, TimeUnit.SECONDS);
            Outcome first = s.next();
            assertEquals(HandshakeServer.Status.DONE, first.status(), "the real client completes first: " + first);
            assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 1500, "the silent client held the other up");
            assertFailed(s.next(), ErrorCode.PROTOCOL, "did not complete the jccl handshake within 1500 ms; dropped");
            assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) >= 1400, "timed out too early");
            new DataInputStream(silent.getInputStream()).readFully(new byte[23]);
            assertEquals(-1, silent.getInputStream().read(), "the silent client is dropped");
        }
    }

    @Test
    @Timeout(20)
    void anOversizedHelloIsRefusedBeforeItIsRead() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofSeconds(10));
        try (Socket raw = new Socket(InetAddress.getLoopbackAddress(), s.address().getPort())) {
            new DataInputStream(raw.getInputStream()).readFully(new byte[23]);
            ByteBuffer b = ByteBuffer.allocate(24);
            b.putInt(Handshake.MAGIC).putShort(Handshake.VERSION).put(random(Handshake.NONCE)).putShort((short) 5000);
            raw.getOutputStream().write(b.array());
            assertFailed(s.next(), ErrorCode.PROTOCOL, "sent a hello of 5000 bytes (at most 4096); dropped");
        }
    }

    @Test
    @Timeout(20)
    void anotherVersionGetsStatusTwo() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofSeconds(10));
        try (Socket raw = new Socket(InetAddress.getLoopbackAddress(), s.address().getPort())) {
            DataInputStream in = new DataInputStream(raw.getInputStream());
            in.readFully(new byte[23]);
            // Only magic and version: the server judges the version before the rest arrives, as Handshake.accept does.
            raw.getOutputStream().write(ByteBuffer.allocate(6).putInt(Handshake.MAGIC).putShort((short) 99).array());
            assertEquals(2, in.read(), "status byte 2: bad version");
            assertFailed(s.next(), ErrorCode.AUTHENTICATION, "speaks jccl protocol version 99, this rank speaks "
                    + Handshake.VERSION + ": mixed jccl versions in one job; dropped");
        }
    }

    @Test
    @Timeout(30)
    void aClientSendingOneByteAtATimeIsAdmitted() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofSeconds(10));
        byte[] hello = "rank 7 of 8".getBytes(StandardCharsets.US_ASCII);
        try (Socket raw = new Socket(InetAddress.getLoopbackAddress(), s.address().getPort())) {
            raw.setTcpNoDelay(true);
            DataInputStream in = new DataInputStream(raw.getInputStream());
            assertEquals(Handshake.MAGIC, in.readInt());
            assertEquals(Handshake.VERSION, in.readShort());
            assertEquals(Handshake.Kind.DATA.code, in.readUnsignedByte());
            byte[] nonceA = new byte[Handshake.NONCE];
            in.readFully(nonceA);
            byte[] nonceC = random(Handshake.NONCE);
            ByteBuffer b = ByteBuffer.allocate(24 + hello.length + Handshake.MAC_LEN);
            b.putInt(Handshake.MAGIC).putShort(Handshake.VERSION).put(nonceC).putShort((short) hello.length).put(hello)
                    .put(Handshake.mac(secret, "jccl-C", Handshake.Kind.DATA, nonceA, nonceC, hello));
            OutputStream out = raw.getOutputStream();
            for (byte x : b.array()) {
                out.write(x);
                out.flush();
                Thread.sleep(2);
            }
            assertEquals(0, in.readUnsignedByte(), "status 0: admitted");
            byte[] macA = new byte[Handshake.MAC_LEN];
            in.readFully(macA);
            assertTrue(MessageDigest.isEqual(Handshake.mac(secret, "jccl-A", Handshake.Kind.DATA, nonceC, nonceA, hello), macA),
                    "the server proves the secret back");
            Outcome o = s.next();
            assertEquals(HandshakeServer.Status.DONE, o.status(), "outcome " + o);
            assertArrayEquals(hello, o.hello());
        }
    }

    @Test
    @Timeout(20)
    void manyClientsAtOnceAllComplete() throws Exception {
        Server s = serve(Handshake.Kind.DATA, Duration.ofSeconds(10));
        int n = 50;
        List<Future<Void>> fs = new java.util.ArrayList<>();
        for (int i = 0; i < n; i++) {
            fs.add(client(secret, Handshake.Kind.DATA, new byte[] {(byte) i}));
        }
        for (Future<Void> f : fs) {
            f.get(15, TimeUnit.SECONDS);
        }
        boolean[] seen = new boolean[n];
        for (int i = 0; i < n; i++) {
            Outcome o = s.next();
            assertEquals(HandshakeServer.Status.DONE, o.status(), "outcome " + o);
            seen[o.hello()[0]] = true;
        }
        for (int i = 0; i < n; i++) {
            assertTrue(seen[i], "client " + i + " completed");
        }
    }

    @Test
    @Timeout(10)
    void aBlockingChannelIsRefused() throws Exception {
        try (ServerSocketChannel l = ServerSocketChannel.open()) {
            l.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            try (SocketChannel c = SocketChannel.open(l.getLocalAddress()); SocketChannel a = l.accept()) {
                assertNotNull(c);
                assertThrows(IllegalArgumentException.class,
                        () -> HandshakeServer.start(a, secret, Handshake.Kind.DATA, Duration.ofSeconds(1)));
            }
        }
    }

    @Test
    @Timeout(10)
    void theThreadProbeSeesVirtualThreads() throws Exception {
        // Guards the other tests' "no handshake thread" assertions: a virtual thread so named must be found.
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        Thread probe = Thread.ofVirtual().name("jccl-probe-handshake-test").start(() -> {
            try {
                release.await();
            } catch (InterruptedException ignored) {
                // Ends either way.
            }
        });
        try {
            assertTrue(HandshakeThreads.live().contains("jccl-probe-handshake-test"), "probe not found: " + HandshakeThreads.live());
        } finally {
            release.countDown();
            probe.join();
        }
    }
}
