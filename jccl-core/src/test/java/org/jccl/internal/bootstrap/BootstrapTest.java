package org.jccl.internal.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclId;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.HandshakeThreads;
import org.jccl.spi.PeerInfo;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The bootstrap over real loopback sockets: one thread per rank, as Gloo's tests do, with the
 * failures a job meets in the field (wrong token, port scanners, silent sockets, duplicate ranks,
 * disagreeing world sizes, ranks that never come).
 */
class BootstrapTest {

    private static final SecureRandom RANDOM = new SecureRandom();
    private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();
    /** Generous, so a slow CI machine never trips it; the tests that want a deadline set their own. */
    private static final Config CONFIG = Config.defaults().with("JCCL_INIT_TIMEOUT", "20");

    private final List<AutoCloseable> cleanup = new ArrayList<>();
    private ExecutorService ranks;
    private byte[] secret;

    @BeforeEach
    void setUp() {
        ranks = Executors.newCachedThreadPool();
        secret = new byte[JcclId.SECRET_BYTES];
        RANDOM.nextBytes(secret);
    }

    @AfterEach
    void tearDown() throws Exception {
        for (AutoCloseable c : cleanup) {
            c.close();
        }
        ranks.shutdownNow();
        assertTrue(ranks.awaitTermination(10, TimeUnit.SECONDS), "rank threads did not end");
    }

    static PeerInfo peer(int rank) {
        return new PeerInfo(rank, "host" + rank, 1000 + rank, "hh", "pid-" + rank,
                Map.of("TCP", new byte[] {(byte) rank, 1, 2, 3}, "SHM", ("shm-" + rank).getBytes(StandardCharsets.UTF_8)));
    }

    private BootstrapRoot root(Config config) {
        BootstrapRoot root = BootstrapRoot.start(new InetSocketAddress(LOOPBACK, 0), secret, config);
        cleanup.add(root);
        return root;
    }

    private JcclId id(BootstrapRoot root) {
        return JcclId.of(root.address(), secret);
    }

    private Future<PeerInfo[]> rank(JcclId id, int rank, int size, PeerInfo self, Config config) {
        return ranks.submit(() -> Bootstrap.rendezvous(id, rank, size, self, config));
    }

    private Future<PeerInfo[]> rank(JcclId id, int rank, int size) {
        return rank(id, rank, size, peer(rank), CONFIG);
    }

    private static void assertTable(PeerInfo[] table, int size) {
        assertEquals(size, table.length);
        for (int i = 0; i < size; i++) {
            PeerInfo expected = peer(i);
            PeerInfo got = table[i];
            assertEquals(i, got.rank());
            assertEquals(expected.host(), got.host());
            assertEquals(expected.pid(), got.pid());
            assertEquals(expected.hostHash(), got.hostHash());
            assertEquals(expected.processId(), got.processId());
            assertEquals(expected.addresses().keySet(), got.addresses().keySet());
            for (String t : expected.addresses().keySet()) {
                assertArrayEquals(expected.addresses().get(t), got.addresses().get(t));
            }
        }
    }

    private static PeerInfo[] get(Future<PeerInfo[]> f) throws Exception {
        try {
            return f.get(25, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw new AssertionError("rank failed: " + e.getCause(), e.getCause());
        }
    }

    private static JcclException failure(Future<PeerInfo[]> f) throws Exception {
        try {
            PeerInfo[] t = f.get(25, TimeUnit.SECONDS);
            throw new AssertionError("expected a failure, got a table of " + t.length);
        } catch (ExecutionException e) {
            return assertInstanceOf(JcclException.class, e.getCause());
        }
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out waiting until " + what);
            }
            Thread.sleep(10);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, LOOPBACK)) {
            return s.getLocalPort();
        }
    }

    // ------------------------------------------------------------------ forming a job

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 5, 16})
    @Timeout(30)
    void everyRankGetsTheSameTableInRankOrder(int n) throws Exception {
        BootstrapRoot root = root(CONFIG);
        JcclId id = id(root);
        List<Future<PeerInfo[]>> futures = new ArrayList<>();
        // Start in reverse order so the table's order cannot come from arrival order.
        for (int r = n - 1; r >= 0; r--) {
            futures.add(rank(id, r, n));
        }
        for (Future<PeerInfo[]> f : futures) {
            assertTable(get(f), n);
        }
        await(root::isStopped, "the root stops after serving the job");
    }

    @Test
    @Timeout(30)
    void ranksThatArriveBeforeTheRootKeepRetrying() throws Exception {
        int port = freePort();
        JcclId id = JcclId.of(new InetSocketAddress(LOOPBACK, port), secret);
        List<Future<PeerInfo[]>> futures = new ArrayList<>();
        for (int r = 0; r < 3; r++) {
            futures.add(rank(id, r, 3));
        }
        Thread.sleep(300);
        cleanup.add(BootstrapRoot.start(new InetSocketAddress(LOOPBACK, port), secret, CONFIG));
        for (Future<PeerInfo[]> f : futures) {
            assertTable(get(f), 3);
        }
    }

    @Test
    @Timeout(30)
    void wildcardBindReportsAConcreteAddress() {
        BootstrapRoot root = BootstrapRoot.start(new InetSocketAddress(0), secret, CONFIG);
        cleanup.add(root);
        assertFalse(root.address().getAddress().isAnyLocalAddress(), root.address().toString());
        assertNotEquals(0, root.address().getPort());
    }

    /**
     * A root on two addresses with one port: ranks that know either address form one job, and a rank
     * given both, the first of which nothing answers at, joins through the second.
     */
    @Test
    @Timeout(30)
    void aRootListensOnEveryAddressGivenWithOnePort() throws Exception {
        InetAddress second = InetAddress.getByName("127.0.0.2");
        BootstrapRoot root = BootstrapRoot.start(List.of(new InetSocketAddress(LOOPBACK, 0), new InetSocketAddress(second, 0)),
                secret, CONFIG);
        cleanup.add(root);
        assertEquals(2, root.addresses().size(), root.addresses().toString());
        int port = root.address().getPort();
        assertEquals(new InetSocketAddress(second, port), root.addresses().get(1));
        int dead = freePort();
        List<Future<PeerInfo[]>> futures = List.of(
                ranks.submit(() -> Bootstrap.rendezvous(List.of(root.addresses().get(0)), secret, "test", 0, 3, peer(0), CONFIG)),
                ranks.submit(() -> Bootstrap.rendezvous(List.of(root.addresses().get(1)), secret, "test", 1, 3, peer(1), CONFIG)),
                ranks.submit(() -> Bootstrap.rendezvous(List.of(new InetSocketAddress(LOOPBACK, dead), root.addresses().get(1)), secret,
                        "test", 2, 3, peer(2), CONFIG)));
        for (Future<PeerInfo[]> f : futures) {
            assertTable(get(f), 3);
        }
    }

    /** An extra address that cannot be bound (not this host's) is skipped; the first one still must work. */
    @Test
    @Timeout(30)
    void anExtraAddressThatCannotBeBoundIsSkipped() throws Exception {
        BootstrapRoot root = BootstrapRoot.start(List.of(new InetSocketAddress(LOOPBACK, 0),
                new InetSocketAddress(InetAddress.getByAddress(new byte[] {(byte) 192, 0, 2, 1}), 0)), secret, CONFIG);
        cleanup.add(root);
        assertEquals(List.of(root.address()), root.addresses());
    }

    // ------------------------------------------------------------------ strangers and broken peers

    @Test
    @Timeout(30)
    void wrongSecretFailsThatRankAndTheJobCompletes() throws Exception {
        BootstrapRoot root = root(CONFIG);
        JcclId id = id(root);
        Future<PeerInfo[]> r0 = rank(id, 0, 3);
        Future<PeerInfo[]> r1 = rank(id, 1, 3);
        byte[] wrong = secret.clone();
        wrong[0] ^= 1;
        JcclException e = failure(rank(JcclId.of(root.address(), wrong), 2, 3, peer(2), CONFIG));
        assertEquals(ErrorCode.AUTHENTICATION, e.code(), e.toString());
        assertTrue(e.getMessage().contains("rank 2") && e.getMessage().contains(BootstrapWire.hostPort(root.address())), e.getMessage());
        Future<PeerInfo[]> r2 = rank(id, 2, 3);
        assertTable(get(r0), 3);
        assertTable(get(r1), 3);
        assertTable(get(r2), 3);
    }

    @Test
    @Timeout(30)
    void garbageAndEarlyClosesAreDroppedAndTheJobCompletes() throws Exception {
        BootstrapRoot root = root(CONFIG);
        JcclId id = id(root);
        Future<PeerInfo[]> r0 = rank(id, 0, 2);
        // A port scanner: connects and closes at once.
        new Socket(LOOPBACK, root.address().getPort()).close();
        // An HTTP client that got the wrong port.
        try (Socket s = new Socket(LOOPBACK, root.address().getPort())) {
            s.getOutputStream().write("GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            s.setSoTimeout(5000);
            // The root drops it: reading reaches the end or a reset (after the root's challenge) instead of hanging.
            byte[] buf = new byte[256];
            try {
                while (s.getInputStream().read(buf) >= 0) {
                    // Drain the challenge.
                }
            } catch (java.net.SocketException dropped) {
                // A reset: the root closed while our request was unread, which is how it drops a stranger.
            }
        }
        // A peer that answers the challenge with random bytes of the right length.
        try (Socket s = new Socket(LOOPBACK, root.address().getPort())) {
            new DataInputStream(s.getInputStream()).readFully(new byte[23]);
            byte[] junk = new byte[100];
            RANDOM.nextBytes(junk);
            s.getOutputStream().write(junk);
        }
        Future<PeerInfo[]> r1 = rank(id, 1, 2);
        assertTable(get(r0), 2);
        assertTable(get(r1), 2);
    }

    @Test
    @Timeout(30)
    void silentConnectionsDoNotHoldUpRegistrations() throws Exception {
        BootstrapRoot root = root(CONFIG);
        JcclId id = id(root);
        List<Socket> silent = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                silent.add(new Socket(LOOPBACK, root.address().getPort()));
            }
            long t0 = System.nanoTime();
            List<Future<PeerInfo[]>> futures = new ArrayList<>();
            for (int r = 0; r < 4; r++) {
                futures.add(rank(id, r, 4));
            }
            for (Future<PeerInfo[]> f : futures) {
                assertTable(get(f), 4);
            }
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertTrue(ms < BootstrapRoot.HANDSHAKE_TIMEOUT.toMillis(), "the job took " + ms + " ms: silent sockets held it up");
        } finally {
            for (Socket s : silent) {
                s.close();
            }
        }
    }

    @Test
    @Timeout(30)
    void aHandshakeInProgressHasNoThreadOfItsOwn() throws Exception {
        BootstrapRoot root = root(CONFIG);
        try (Socket silent = new Socket(LOOPBACK, root.address().getPort())) {
            // The challenge arrived: the root is in the handshake with this connection right now.
            new DataInputStream(silent.getInputStream()).readFully(new byte[23]);
            assertEquals(List.of(), HandshakeThreads.live(), "threads serving a handshake");
        }
        JcclId id = id(root);
        Future<PeerInfo[]> r0 = rank(id, 0, 2);
        Future<PeerInfo[]> r1 = rank(id, 1, 2);
        assertTable(get(r0), 2);
        assertTable(get(r1), 2);
    }

    @Test
    @Timeout(30)
    void aRegistrationArrivingInPiecesIsReadWithoutBlockingTheRoot() throws Exception {
        BootstrapRoot root = root(CONFIG);
        try (SocketChannel ch = SocketChannel.open(root.address())) {
            Handshake.connect(ch, secret, Handshake.Kind.BOOTSTRAP, BootstrapWire.hello(0, 2), Duration.ofSeconds(5));
            ch.setOption(java.net.StandardSocketOptions.TCP_NODELAY, true);
            byte[] frame = BootstrapWire.registerFrame(0, 2, PeerInfoCodec.encode(peer(0)));
            // Rank 1 registers in full while rank 0's frame is still trickling in.
            Future<PeerInfo[]> r1 = rank(id(root), 1, 2);
            await(() -> root.arrivedCount() == 1, "rank 1 registered while rank 0's frame is incomplete");
            for (byte b : frame) {
                ch.write(ByteBuffer.wrap(new byte[] {b}));
                Thread.sleep(1);
            }
            BootstrapWire.Frame reply = BootstrapWire.readFrame(new DataInputStream(ch.socket().getInputStream()),
                    BootstrapWire.MAX_REPLY_FRAME, "root");
            assertEquals(BootstrapWire.TABLE, reply.type());
            assertTable(PeerInfoCodec.decodeAll(reply.body()), 2);
            assertTable(get(r1), 2);
        }
    }

    @Test
    @Timeout(30)
    void anAuthenticatedOversizedRegistrationIsToldWhy() throws Exception {
        BootstrapRoot root = root(CONFIG);
        try (SocketChannel ch = SocketChannel.open(root.address())) {
            Handshake.connect(ch, secret, Handshake.Kind.BOOTSTRAP, BootstrapWire.hello(0, 2), Duration.ofSeconds(5));
            ch.write(ByteBuffer.allocate(4).putInt(BootstrapWire.MAX_REGISTRATION_FRAME + 1).flip());
            BootstrapWire.Frame reply = BootstrapWire.readFrame(new DataInputStream(ch.socket().getInputStream()),
                    BootstrapWire.MAX_REPLY_FRAME, "root");
            assertEquals(BootstrapWire.ERROR, reply.type());
            JcclException e = BootstrapWire.parseError(reply.body(), "root");
            assertEquals(ErrorCode.PROTOCOL, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains("claims " + (BootstrapWire.MAX_REGISTRATION_FRAME + 1) + " bytes (allowed 1.."
                    + BootstrapWire.MAX_REGISTRATION_FRAME + ")"), e.getMessage());
        }
        JcclId id = id(root);
        Future<PeerInfo[]> r0 = rank(id, 0, 2);
        Future<PeerInfo[]> r1 = rank(id, 1, 2);
        assertTable(get(r0), 2);
        assertTable(get(r1), 2);
    }

    @Test
    @Timeout(30)
    void aRegisteredRankThatDiesFreesItsRank() throws Exception {
        BootstrapRoot root = root(CONFIG);
        try (SocketChannel ch = SocketChannel.open(root.address())) {
            Handshake.connect(ch, secret, Handshake.Kind.BOOTSTRAP, BootstrapWire.hello(0, 2), Duration.ofSeconds(5));
            ch.write(ByteBuffer.wrap(BootstrapWire.registerFrame(0, 2, PeerInfoCodec.encode(
                    new PeerInfo(0, "dead-host", 1, "hh", "dead", Map.of())))));
            await(() -> root.arrivedCount() == 1, "the first process is registered");
        }
        await(() -> root.arrivedCount() == 0, "the root notices the first process is gone");
        JcclId id = id(root);
        Future<PeerInfo[]> r0 = rank(id, 0, 2);
        Future<PeerInfo[]> r1 = rank(id, 1, 2);
        assertTable(get(r0), 2);
        assertTable(get(r1), 2);
    }

    // ------------------------------------------------------------------ ranks that disagree

    @Test
    @Timeout(30)
    void duplicateRankIsRejectedNamingBothProcesses() throws Exception {
        BootstrapRoot root = root(CONFIG);
        JcclId id = id(root);
        Future<PeerInfo[]> first = rank(id, 1, 3);
        await(() -> root.arrivedCount() == 1, "rank 1 is registered");
        PeerInfo impostor = new PeerInfo(1, "other-node", 4242, "hh2", "pid-z", Map.of());
        JcclException e = failure(rank(id, 1, 3, impostor, CONFIG));
        assertEquals(ErrorCode.MISMATCH, e.code(), e.toString());
        String m = e.getMessage();
        assertTrue(m.contains("duplicate rank 1"), m);
        assertTrue(m.contains("host host1 pid 1001"), m);
        assertTrue(m.contains("host other-node pid 4242"), m);
        // The job itself is unharmed.
        Future<PeerInfo[]> r0 = rank(id, 0, 3);
        Future<PeerInfo[]> r2 = rank(id, 2, 3);
        assertTable(get(first), 3);
        assertTable(get(r0), 3);
        assertTable(get(r2), 3);
    }

    @Test
    @Timeout(30)
    void worldSizeMismatchNamesBothSizes() throws Exception {
        BootstrapRoot root = root(CONFIG);
        JcclId id = id(root);
        Future<PeerInfo[]> r0 = rank(id, 0, 2);
        await(() -> root.arrivedCount() == 1, "rank 0 is registered");
        JcclException e = failure(rank(id, 3, 4));
        assertEquals(ErrorCode.MISMATCH, e.code(), e.toString());
        assertTrue(e.getMessage().contains("world size mismatch: rank 3 says 4 but rank 0 says 2"), e.getMessage());
        Future<PeerInfo[]> r1 = rank(id, 1, 2);
        assertTable(get(r0), 2);
        assertTable(get(r1), 2);
    }

    @Test
    @Timeout(30)
    void missingRanksAreListedAtTheDeadline() throws Exception {
        Config config = Config.defaults().with("JCCL_INIT_TIMEOUT", "2");
        BootstrapRoot root = root(config);
        JcclId id = id(root);
        long t0 = System.nanoTime();
        List<Future<PeerInfo[]>> futures = new ArrayList<>();
        for (int r : new int[] {0, 2, 3, 5}) {
            futures.add(rank(id, r, 8, peer(r), config));
        }
        String expected = "ranks [1, 4, 6, 7] of 8 never arrived at the bootstrap root " + BootstrapWire.hostPort(root.address())
                + " within 2 s (JCCL_INIT_TIMEOUT)";
        for (Future<PeerInfo[]> f : futures) {
            JcclException e = failure(f);
            assertInstanceOf(JcclTimeoutException.class, e);
            assertTrue(e.getMessage().startsWith(expected), e.getMessage());
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms >= 1500 && ms < 6000, "ranks failed after " + ms + " ms, expected about 2000");
    }

    // ------------------------------------------------------------------ the root goes away

    @Test
    @Timeout(30)
    void unreachableRootTimesOutWithTheAddressAndTheFix() throws Exception {
        int port = freePort();
        Config config = Config.defaults().with("JCCL_INIT_TIMEOUT", "1");
        JcclId id = JcclId.of(new InetSocketAddress(LOOPBACK, port), secret);
        JcclException e = failure(rank(id, 3, 4, peer(3), config));
        assertInstanceOf(JcclTimeoutException.class, e);
        assertTrue(e.getMessage().startsWith("rank 3 could not reach the bootstrap root at " + BootstrapWire.hostPort(id.rootAddress())
                + " within 1 s (JCCL_INIT_TIMEOUT): is rank 0 running"), e.getMessage());
    }

    @Test
    @Timeout(30)
    void closingTheRootFailsWaitingRanks() throws Exception {
        BootstrapRoot root = root(CONFIG);
        JcclId id = id(root);
        Future<PeerInfo[]> r0 = rank(id, 0, 2);
        await(() -> root.arrivedCount() == 1, "rank 0 is registered");
        root.close();
        root.close();
        JcclException e = failure(r0);
        assertEquals(ErrorCode.ABORTED, e.code(), e.toString());
        assertTrue(e.getMessage().contains(BootstrapWire.hostPort(root.address())) && e.getMessage().contains("missing [1]"), e.getMessage());
        assertTrue(root.isStopped());
    }

    @Test
    @Timeout(30)
    void rootThatDropsTheConnectionIsNamed() throws Exception {
        try (ServerSocketChannel fake = ServerSocketChannel.open()) {
            fake.bind(new InetSocketAddress(LOOPBACK, 0));
            InetSocketAddress where = (InetSocketAddress) fake.getLocalAddress();
            Future<PeerInfo[]> r0 = rank(JcclId.of(where, secret), 0, 2);
            try (SocketChannel ch = fake.accept()) {
                Handshake.accept(ch, secret, Handshake.Kind.BOOTSTRAP, Duration.ofSeconds(5));
                BootstrapWire.readFrame(new DataInputStream(ch.socket().getInputStream()), 1 << 20, "rank");
            }
            JcclException e = failure(r0);
            assertEquals(ErrorCode.PEER_FAILED, e.code(), e.toString());
            assertTrue(e.getMessage().contains("the bootstrap root at " + BootstrapWire.hostPort(where) + " closed the connection"),
                    e.getMessage());
        }
    }

    // ------------------------------------------------------------------ starting the root

    @Test
    @Timeout(30)
    void portInUseIsAResourceErrorNamingTheAddress() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, LOOPBACK)) {
            InetSocketAddress a = new InetSocketAddress(LOOPBACK, taken.getLocalPort());
            JcclException e = assertThrows(JcclException.class, () -> BootstrapRoot.start(a, secret, CONFIG));
            assertEquals(ErrorCode.RESOURCE, e.code(), e.toString());
            assertTrue(e.getMessage().contains(BootstrapWire.hostPort(a)) && e.getMessage().contains("MASTER_PORT"), e.getMessage());
        }
    }

    @Test
    @Timeout(30)
    void foreignAddressIsAConfigError() throws Exception {
        // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this host.
        InetSocketAddress a = new InetSocketAddress(InetAddress.getByName("192.0.2.1"), 29500);
        JcclException e = assertThrows(JcclException.class, () -> BootstrapRoot.start(a, secret, CONFIG));
        assertEquals(ErrorCode.CONFIG, e.code(), e.toString());
        assertTrue(e.getMessage().contains("192.0.2.1:29500") && e.getMessage().contains("not an address of this host"), e.getMessage());
    }

    @Test
    @Timeout(30)
    void invalidRankIsRefusedBeforeConnecting() {
        JcclId id = JcclId.of(new InetSocketAddress(LOOPBACK, 1), secret);
        JcclException e = assertThrows(JcclException.class, () -> Bootstrap.rendezvous(id, 4, 4, peer(4), CONFIG));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        e = assertThrows(JcclException.class, () -> Bootstrap.rendezvous(id, 0, 4, peer(1), CONFIG));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    }

    @Test
    @Timeout(10)
    void missingRankListsAreShortenedButExact() {
        assertEquals("[1, 4, 6, 7]", BootstrapWire.missing(List.of(0, 2, 3, 5), 8));
        assertEquals("[0-9]", BootstrapWire.missing(List.of(), 10));
        assertEquals("[0, 1, 5-9]", BootstrapWire.missing(List.of(2, 3, 4), 10));
        assertEquals("[]", BootstrapWire.missing(List.of(0, 1), 2));
        List<Integer> even = new ArrayList<>();
        for (int i = 0; i < 400; i += 2) {
            even.add(i);
        }
        String s = BootstrapWire.missing(even, 400);
        assertTrue(s.startsWith("[1, 3, 5") && s.endsWith(", ... 136 more]"), s);
    }
}
