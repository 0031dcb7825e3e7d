package org.jccl.internal.transport.tcp;

import java.io.DataInputStream;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.HandshakeThreads;
import org.jccl.internal.transport.tcp.TcpTestSupport.Cluster;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.testing.TestTransportContext;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import static org.jccl.internal.transport.tcp.TcpTestSupport.check;
import static org.jccl.internal.transport.tcp.TcpTestSupport.drive;
import static org.jccl.internal.transport.tcp.TcpTestSupport.exchangeChecked;
import static org.jccl.internal.transport.tcp.TcpTestSupport.fill;
import static org.jccl.internal.transport.tcp.TcpTestSupport.loopback;
import static org.jccl.internal.transport.tcp.TcpTestSupport.runRanks;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Two and three TCP endpoints in one JVM over real loopback sockets, one thread per rank. */
class TcpTransportTest {

    private static final long[] SIZES = {0, 1, 16, 4095, (1 << 20) + 3, 64L << 20};

    private static Config withSockets(int nsocks) {
        return loopback().with("JCCL_NSOCKS_PERTHREAD", Integer.toString(nsocks));
    }

    @Test
    @Timeout(value = 10, unit = TimeUnit.SECONDS)
    void transportBasics() throws IOException {
        TcpTransport t = new TcpTransport();
        assertEquals("TCP", t.name());
        assertEquals(100, t.priority());
        assertTrue(t.isEnabled(Config.defaults()));
        PeerInfo with = TcpTestSupport.info(0, new byte[] {4, 127, 0, 0, 1, 0, 1});
        PeerInfo without = TcpTestSupport.info(1, null);
        assertTrue(t.canConnect(with, with.withRank(1)));
        assertFalse(t.canConnect(with, without));
        try (Cluster c = new Cluster(2, loopback())) {
            InetSocketAddress a = TcpWire.decodeAddress(c.ep[0].address());
            assertEquals("127.0.0.1", a.getAddress().getHostAddress());
            assertTrue(a.getPort() > 0);
            assertEquals(7, c.ep[0].address().length, "family, IPv4, port");
        }
    }

    @ParameterizedTest(name = "nsocks={0}")
    @ValueSource(ints = {1, 4})
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void messagesOfEverySizeBothDirectionsAtOnce(int nsocks) throws Exception {
        try (Cluster c = new Cluster(2, withSockets(nsocks))) {
            runRanks(2, 50_000, rank -> {
                int peer = 1 - rank;
                Connection conn = c.ep[rank].connect(peer);
                assertEquals(peer, conn.peer());
                assertEquals(nsocks, ((TcpConnection) conn).sockets());
                assertTrue(conn.describe().startsWith("TCP 127.0.0.1:"), conn.describe());
                try (Arena arena = Arena.ofConfined()) {
                    exchangeChecked(conn, arena, SIZES, rank, peer, 0);
                }
                assertSame(conn, c.ep[rank].connect(peer), "connect returns the existing connection");
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void thousandSmallMessagesInOrder() throws Exception {
        int count = 1000;
        try (Cluster c = new Cluster(2, withSockets(4))) {
            runRanks(2, 25_000, rank -> {
                int peer = 1 - rank;
                Connection conn = c.ep[rank].connect(peer);
                try (Arena arena = Arena.ofConfined()) {
                    List<P2pRequest> reqs = new ArrayList<>();
                    MemorySegment[] in = new MemorySegment[count];
                    for (int i = 0; i < count; i++) {
                        // Sizes vary so that a message landing in the wrong receive fails the size check.
                        int size = 8 + (i % 13) * 8;
                        MemorySegment src = arena.allocate(size);
                        for (int k = 0; k < size; k += 8) {
                            src.set(ValueLayout.JAVA_LONG_UNALIGNED, k, ((long) rank << 48) | ((long) i << 16) | k);
                        }
                        in[i] = arena.allocate(size);
                        reqs.add(conn.send(src));
                        reqs.add(conn.recv(in[i]));
                    }
                    drive(20_000, conn, reqs.toArray(P2pRequest[]::new));
                    for (int i = 0; i < count; i++) {
                        for (int k = 0; k < in[i].byteSize(); k += 8) {
                            assertEquals(((long) peer << 48) | ((long) i << 16) | k, in[i].get(ValueLayout.JAVA_LONG_UNALIGNED, k),
                                    "message " + i + " word " + k);
                        }
                    }
                }
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void socketCountIsCappedAt64() throws Exception {
        Config cfg = loopback().with("JCCL_SOCKET_NTHREADS", "16").with("JCCL_NSOCKS_PERTHREAD", "16").with("JCCL_SOCKET_SPLIT", "0");
        try (Cluster c = new Cluster(2, cfg)) {
            runRanks(2, 25_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                assertEquals(64, ((TcpConnection) conn).sockets());
                assertTrue(conn.describe().endsWith("(64 sockets)"), conn.describe());
                try (Arena arena = Arena.ofConfined()) {
                    List<P2pRequest> reqs = new ArrayList<>();
                    List<MemorySegment> in = new ArrayList<>();
                    // 4 MiB + 5 is split into 64 uneven stripes; the small ones rotate over the sockets.
                    for (long size : new long[] {(4 << 20) + 5, 100, 0, 70_000}) {
                        MemorySegment src = arena.allocate(size);
                        fill(src, size + rank);
                        MemorySegment dst = arena.allocate(size);
                        in.add(dst);
                        reqs.add(conn.send(src));
                        reqs.add(conn.recv(dst));
                    }
                    drive(20_000, conn, reqs.toArray(P2pRequest[]::new));
                    for (MemorySegment dst : in) {
                        assertEquals(-1, check(dst, dst.byteSize() + 1 - rank), dst.byteSize() + " bytes");
                    }
                }
            });
        }
    }

    @ParameterizedTest(name = "nsocks={0}")
    @ValueSource(ints = {1, 3, 40})
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void eachDirectionHasSocketsOfItsOwnByDefault(int nsocks) throws Exception {
        int perWay = Math.min(nsocks, 32); // 64 sockets in all at most
        Config cfg = (nsocks <= 16 ? withSockets(nsocks) : withSockets(nsocks / 4).with("JCCL_SOCKET_NTHREADS", "4"))
                .with("JCCL_SOCKET_OFFLOAD", "0");
        try (Cluster c = new Cluster(2, cfg)) {
            TcpConnection[] conns = new TcpConnection[2];
            runRanks(2, 25_000, rank -> {
                TcpConnection conn = (TcpConnection) c.ep[rank].connect(1 - rank);
                conns[rank] = conn;
                assertTrue(conn.split());
                assertEquals(perWay, conn.sockets());
                // The lower rank receives on both sets (the higher rank's small and large messages), the higher on the first.
                assertEquals(rank == 0 ? 2 * perWay : perWay, conn.channels().length);
                assertTrue(conn.describe().endsWith("(" + perWay + " + " + perWay + " sockets)"), conn.describe());
                // Sizes on both sides of the 64 KiB rule, split over the sockets and whole, small ones batched.
                exchangeOn(conn, rank, (4 << 20) + 1, 70_000, 65_535, 65_536, 5, 0, 300_000);
            });
            for (int k = 0; k < 2 * perWay; k++) {
                assertEquals(local(conns[0].socket(k)), remote(conns[1].socket(k)), "socket " + k);
            }
        }
    }

    @ParameterizedTest(name = "lower rank split={0}")
    @ValueSource(strings = {"0", "1"})
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void theLowerRankDecidesWhetherDirectionsShareSockets(String lowerSplit) throws Exception {
        String higher = "1".equals(lowerSplit) ? "0" : "1";
        try (Cluster c = new Cluster(withSockets(2).with("JCCL_SOCKET_SPLIT", lowerSplit), withSockets(2).with("JCCL_SOCKET_SPLIT", higher))) {
            runRanks(2, 25_000, rank -> {
                TcpConnection conn = (TcpConnection) c.ep[rank].connect(1 - rank);
                assertEquals("1".equals(lowerSplit), conn.split(), "rank " + rank);
                assertEquals(2, conn.sockets());
                exchangeOn(conn, rank, 1 << 20, 10, 0);
            });
        }
    }

    private static String local(org.jccl.internal.net.WireChannel ch) throws IOException {
        return String.valueOf(ch.socket().getLocalAddress());
    }

    private static String remote(org.jccl.internal.net.WireChannel ch) throws IOException {
        return String.valueOf(ch.socket().getRemoteAddress());
    }

    /** Both ranks send and receive messages of the given sizes at once and check them. */
    private static void exchangeOn(Connection conn, int rank, long... sizes) throws Exception {
        try (Arena arena = Arena.ofConfined()) {
            List<P2pRequest> reqs = new ArrayList<>();
            List<MemorySegment> in = new ArrayList<>();
            for (long size : sizes) {
                MemorySegment src = arena.allocate(size);
                fill(src, size * 3 + rank);
                MemorySegment dst = arena.allocate(size);
                in.add(dst);
                reqs.add(conn.recv(dst));
                reqs.add(conn.send(src));
            }
            drive(20_000, conn, reqs.toArray(P2pRequest[]::new));
            for (MemorySegment dst : in) {
                assertEquals(-1, check(dst, dst.byteSize() * 3 + 1 - rank), dst.byteSize() + " bytes");
            }
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void threeRanksAllPairsInAnyConnectOrder() throws Exception {
        int n = 3;
        long size = 300_000; // split over the 2 sockets
        try (Cluster c = new Cluster(n, withSockets(2))) {
            runRanks(n, 25_000, rank -> {
                // Each rank connects to its peers in a different order: no order may deadlock.
                int[] order = rank == 0 ? new int[] {2, 1} : rank == 1 ? new int[] {0, 2} : new int[] {1, 0};
                List<Connection> conns = new ArrayList<>();
                for (int p : order) {
                    conns.add(c.ep[rank].connect(p));
                }
                try (Arena arena = Arena.ofConfined()) {
                    List<P2pRequest> reqs = new ArrayList<>();
                    List<MemorySegment> in = new ArrayList<>();
                    for (Connection conn : conns) {
                        MemorySegment src = arena.allocate(size);
                        fill(src, rank * 10 + conn.peer());
                        MemorySegment dst = arena.allocate(size);
                        in.add(dst);
                        reqs.add(conn.send(src));
                        reqs.add(conn.recv(dst));
                    }
                    drive(20_000, conns, reqs);
                    for (int i = 0; i < conns.size(); i++) {
                        int p = conns.get(i).peer();
                        assertEquals(-1, check(in.get(i), p * 10 + rank), "from rank " + p);
                    }
                }
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void windowedViewsOfLargeStripes() throws Exception {
        // The 1 GiB window of the >2 GiB path, exercised with a 4000-byte window on a 1 MiB+3 message.
        long size = (1 << 20) + 3;
        try (Cluster c = new Cluster(2, withSockets(2))) {
            runRanks(2, 25_000, rank -> {
                TcpConnection conn = (TcpConnection) c.ep[rank].connect(1 - rank);
                conn.maxView = 4000;
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment buf = arena.allocate(size);
                    if (rank == 0) {
                        fill(buf, 7);
                        drive(20_000, conn, conn.send(buf));
                    } else {
                        drive(20_000, conn, conn.recv(buf));
                        assertEquals(-1, check(buf, 7));
                    }
                }
            });
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void checksummedStripesRoundTripOnEveryPath() throws Exception {
        // JCCL_CHECKSUM=1 over 3 sockets: empty, inline (<= 8 KiB), direct, split over the sockets, and windowed stripes.
        try (Cluster c = new Cluster(2, withSockets(3).with("JCCL_CHECKSUM", "1"))) {
            for (long size : new long[] {0, 1, 8192, 8193, 300_000, (1 << 20) + 7}) {
                exchange(c, size);
            }
            runRanks(2, 25_000, rank -> {
                TcpConnection conn = (TcpConnection) c.ep[rank].connect(1 - rank);
                assertTrue(conn.checksummed(), conn.describe());
                assertTrue(conn.describe().endsWith("(3 + 3 sockets, CRC32C)"), conn.describe());
                conn.maxView = 4000;
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment buf = arena.allocate((1 << 20) + 3);
                    if (rank == 0) {
                        fill(buf, 9);
                        drive(20_000, conn, conn.send(buf));
                    } else {
                        drive(20_000, conn, conn.recv(buf));
                        assertEquals(-1, check(buf, 9));
                    }
                }
            });
        }
    }

    /**
     * Small messages posted back to back share one write, and small receives posted back to back one read
     * (TcpConnection's inline batches): five messages of 0-24 bytes, the fourth of another call (guard word),
     * with and without checksums. The three before it arrive intact, the fourth fails with the guard mismatch
     * before any of its bytes reach its buffer, and the fifth is failed with the connection.
     */
    @ParameterizedTest(name = "checksum={0}")
    @ValueSource(strings = {"0", "1"})
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void smallMessagesShareWritesAndReadsAndAGuardMismatchMidBatchStopsBeforeItsBytes(String checksum) throws Exception {
        long[] sizes = {0, 8, 24, 8, 16};
        long g = 0x1234_5678_0000_0010L;
        long other = 0x1234_5678_0000_0020L;
        try (Cluster c = new Cluster(2, withSockets(1).with("JCCL_CHECKSUM", checksum))) {
            runRanks(2, 25_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment[] bufs = new MemorySegment[sizes.length];
                    P2pRequest[] reqs = new P2pRequest[sizes.length];
                    for (int i = 0; i < sizes.length; i++) {
                        bufs[i] = arena.allocate(Math.max(1, sizes[i])).asSlice(0, sizes[i]);
                        if (rank == 0) {
                            fill(bufs[i], 100 + i);
                            reqs[i] = conn.send(bufs[i], i == 3 ? other : g);
                        } else {
                            bufs[i].fill((byte) 0x5A);
                            reqs[i] = conn.recv(bufs[i], g);
                        }
                    }
                    if (rank == 0) {
                        try {
                            drive(20_000, conn, reqs);
                        } catch (IOException peerDropped) {
                            // the receiver closes the connection once it finds the mismatch
                        }
                        return;
                    }
                    org.jccl.spi.GuardMismatchException e = assertThrows(org.jccl.spi.GuardMismatchException.class,
                            () -> drive(20_000, conn, reqs));
                    assertEquals(g, e.expected());
                    assertEquals(other, e.received());
                    for (int i = 0; i < 3; i++) {
                        assertTrue(reqs[i].isDone() && reqs[i].error() == null, "message " + i + ": " + reqs[i].error());
                        assertEquals(-1, check(bufs[i], 100 + i), "message " + i);
                    }
                    assertTrue(reqs[3].isDone() && reqs[3].error() == e, "the mismatched receive fails with the mismatch");
                    for (long k = 0; k < bufs[3].byteSize(); k++) {
                        assertEquals((byte) 0x5A, bufs[3].get(ValueLayout.JAVA_BYTE, k), "byte " + k + " of the mismatched message");
                    }
                    assertTrue(reqs[4].isDone() && reqs[4].error() != null, "the receive after it fails with the connection");
                }
            });
        }
    }

    @ParameterizedTest(name = "nsocks={0}")
    @ValueSource(ints = {1, 4})
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void sizeMismatchNamesPeerAndBothSizes(int nsocks) throws Exception {
        long sent = nsocks == 1 ? 4096 : 2 << 20;
        long expected = nsocks == 1 ? 8192 : 1 << 20;
        try (Cluster c = new Cluster(2, withSockets(nsocks))) {
            runRanks(2, 25_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                try (Arena arena = Arena.ofConfined()) {
                    if (rank == 0) {
                        P2pRequest s = conn.send(arena.allocate(sent));
                        // Progress until sent or until rank 1 drops the link after spotting the mismatch.
                        try {
                            drive(20_000, conn, s);
                        } catch (IOException expectedFailure) {
                            // fine: the receiver closed the connection
                        }
                    } else {
                        P2pRequest r = conn.recv(arena.allocate(expected));
                        IOException e = assertThrows(IOException.class, () -> drive(20_000, conn, r));
                        assertEquals("rank 0 (testhost pid 1000) sent " + sent + " bytes where rank 1 expected " + expected
                                + ": ranks called collectives with different counts/types (or send/recv sizes differ)", e.getMessage());
                        assertTrue(r.isDone() && r.error() != null, "the pending receive is failed too");
                        // Later calls report the same failure; new requests fail at once.
                        assertSame(e, assertThrows(IOException.class, conn::progress));
                        P2pRequest late = conn.send(arena.allocate(8));
                        assertTrue(late.isDone() && late.error() == e);
                    }
                }
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void peerCloseFailsProgressNamingThePeer() throws Exception {
        try (Cluster c = new Cluster(2, withSockets(2))) {
            runRanks(2, 25_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment one = arena.allocate(64);
                    if (rank == 1) {
                        drive(10_000, conn, conn.send(one));
                        conn.close();
                        conn.close(); // idempotent
                        P2pRequest late = conn.send(one);
                        assertTrue(late.isDone() && late.error() != null, "send after close fails at once");
                        assertTrue(late.error().getMessage().contains("closed by this rank"), late.error().getMessage());
                    } else {
                        drive(10_000, conn, conn.recv(one));
                        P2pRequest r = conn.recv(arena.allocate(100));
                        IOException e = assertThrows(IOException.class, () -> drive(10_000, conn, r));
                        assertTrue(e.getMessage().startsWith("TCP connection to rank 1 (testhost pid 1001) closed by the peer"
                                + " before the next message (100 bytes) arrived"), e.getMessage());
                        assertTrue(e.getMessage().contains("it exited or crashed"), e.getMessage());
                    }
                }
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void sendToVanishedPeerFails() throws Exception {
        try (Cluster c = new Cluster(2, withSockets(1))) {
            runRanks(2, 25_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                if (rank == 1) {
                    c.ep[1].close();
                    return;
                }
                try (Arena arena = Arena.ofConfined()) {
                    // Far more than the socket buffers can hold: the write side must notice the reset.
                    MemorySegment big = arena.allocate(64L << 20);
                    Thread.sleep(200);
                    IOException e = assertThrows(IOException.class, () -> drive(20_000, conn, conn.send(big)));
                    assertTrue(e.getMessage().startsWith("TCP connection from rank 0 to rank 1 (testhost pid 1001) failed"),
                            e.getMessage());
                }
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void wrongSecretIsRejectedAndThePairStillWorks() throws Exception {
        try (Cluster c = new Cluster(2, loopback())) {
            // An outsider that knows rank 1's address and the communicator id but not the secret, claiming rank 0.
            TestTransportContext intruder = new TestTransportContext(c.commId, 0, 2, TcpTestSupport.random16(), loopback());
            intruder.setPeer(1, c.ctx[0].peer(1));
            try (Endpoint bad = new TcpTransport().open(intruder)) {
                intruder.setPeer(0, TcpTestSupport.info(0, bad.address()));
                JcclException e = assertThrows(JcclException.class, () -> bad.connect(1));
                assertEquals(ErrorCode.AUTHENTICATION, e.code());
                assertTrue(e.getMessage().contains("rank 1 (testhost pid 1001)"), e.getMessage());
                assertTrue(e.getMessage().contains("different JCCL_AUTH_TOKEN"), e.getMessage());
            }
            exchange(c, 1000);
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void foreignCommunicatorAndImpossibleRankAreDropped() throws Exception {
        try (Cluster c = new Cluster(3, loopback())) {
            // Same secret, other communicator id (another communicator of the job): authenticated, then dropped.
            TestTransportContext other = new TestTransportContext(TcpTestSupport.random16(), 0, 3, c.secret, loopback());
            // Same communicator, but "rank 2" connecting to rank 1 as if it were lower: dropped.
            TestTransportContext upside = new TestTransportContext(c.commId, 0, 3, c.secret, loopback());
            for (TestTransportContext t : List.of(other, upside)) {
                for (int r = 0; r < 3; r++) {
                    t.setPeer(r, c.ctx[0].peer(r));
                }
            }
            try (Endpoint e1 = new TcpTransport().open(other); Arena arena = Arena.ofConfined()) {
                Connection fake = e1.connect(1);
                // Its handshake passed, but rank 1 hung up: the first receive sees the close.
                P2pRequest r = fake.recv(arena.allocate(8));
                assertThrows(IOException.class, () -> drive(10_000, fake, r));
            }
            // A lower rank is the initiator: fake "rank 0" hellos are fine, but a hello claiming rank 2 at rank 1 is not.
            try (SocketChannel ch = SocketChannel.open(TcpWire.decodeAddress(c.ep[1].address()))) {
                Handshake.connect(ch, c.secret, Handshake.Kind.DATA, TcpWire.hello(c.commId, 2, 0, 1, 0), Duration.ofSeconds(5));
                assertEquals(-1, ch.read(ByteBuffer.allocate(1)), "rank 1 drops a hello from a higher rank");
            }
            exchange(c, 64);
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aHandshakeInProgressHasNoThreadOfItsOwn() throws Exception {
        try (Cluster c = new Cluster(2, loopback())) {
            InetSocketAddress a = TcpWire.decodeAddress(c.ep[1].address());
            try (Socket silent = new Socket()) {
                silent.connect(a, 5000);
                // The challenge arrived: rank 1's acceptor is in the handshake with this socket right now.
                new DataInputStream(silent.getInputStream()).readFully(new byte[23]);
                assertEquals(List.of(), HandshakeThreads.live(), "threads serving a handshake");
                exchange(c, 64);
            }
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void garbageSilenceAndImmediateCloseDoNotDisturbTheEndpoint() throws Exception {
        try (Cluster c = new Cluster(2, loopback())) {
            InetSocketAddress a = TcpWire.decodeAddress(c.ep[1].address());
            try (Socket silent = new Socket()) {
                // A silent client holds its handshake open; it must not delay the real connection.
                silent.connect(a, 5000);
                for (int i = 0; i < 3; i++) {
                    try (Socket s = new Socket()) {
                        s.connect(a, 5000);
                        s.getOutputStream().write("GET / HTTP/1.0\r\n\r\n garbage garbage garbage".getBytes());
                        s.getOutputStream().flush();
                    }
                    try (Socket s = new Socket()) {
                        s.connect(a, 5000); // and close at once
                    }
                }
                long t0 = System.nanoTime();
                exchange(c, 4096);
                long ms = (System.nanoTime() - t0) / 1_000_000;
                assertTrue(ms < 5000, "connect took " + ms + " ms despite the silent client");
            }
        }
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void higherRankTimesOutNamingThePeer() throws Exception {
        try (Cluster c = new Cluster(2, loopback().with("JCCL_CONNECT_TIMEOUT", "1"))) {
            JcclTimeoutException e = assertThrows(JcclTimeoutException.class, () -> c.ep[1].connect(0));
            assertTrue(e.getMessage().startsWith("rank 1 waited 1 s (JCCL_CONNECT_TIMEOUT) for rank 0 (testhost pid 1000) to open"
                    + " its TCP connection to 127.0.0.1:"), e.getMessage());
            assertTrue(e.getMessage().contains("0 of its sockets arrived"), e.getMessage());
        }
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void waitingConnectStopsWhenTheCommunicatorStops() throws Exception {
        try (Cluster c = new Cluster(2, loopback())) {
            Thread.ofPlatform().start(() -> {
                try {
                    Thread.sleep(300);
                } catch (InterruptedException ignored) {
                    return;
                }
                c.ctx[1].setStopping(true);
            });
            long t0 = System.nanoTime();
            IOException e = assertThrows(IOException.class, () -> c.ep[1].connect(0));
            assertTrue((System.nanoTime() - t0) < 5_000_000_000L);
            assertTrue(e.getMessage().contains("closing or was aborted"), e.getMessage());
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void lowerRankRetriesUntilTheTimeoutWhenNobodyListens() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort(); // closed again: connections to it are refused
        }
        Config cfg = loopback().with("JCCL_CONNECT_TIMEOUT", "1");
        TestTransportContext ctx = new TestTransportContext(TcpTestSupport.random16(), 0, 2, TcpTestSupport.random16(), cfg);
        try (Endpoint ep = new TcpTransport().open(ctx)) {
            ctx.setPeer(0, TcpTestSupport.info(0, ep.address()));
            ctx.setPeer(1, TcpTestSupport.info(1, TcpWire.encodeAddress(new InetSocketAddress("127.0.0.1", port))));
            long t0 = System.nanoTime();
            JcclTimeoutException e = assertThrows(JcclTimeoutException.class, () -> ep.connect(1));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 500 && ms < 5000, ms + " ms");
            assertTrue(e.getMessage().startsWith("rank 0 could not connect to rank 1 (testhost pid 1001) at 127.0.0.1:" + port
                    + " over TCP within 1 s"), e.getMessage());
        }
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void closedEndpointRefusesAndCloseIsIdempotent() throws Exception {
        Cluster c = new Cluster(2, loopback());
        c.close();
        c.close();
        IOException e = assertThrows(IOException.class, () -> c.ep[0].connect(1));
        assertTrue(e.getMessage().contains("endpoint is closed"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> c.ep[0].connect(0));
        assertThrows(IllegalArgumentException.class, () -> c.ep[0].connect(2));
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void ipv6Loopback() throws Exception {
        try (ServerSocket probe = new ServerSocket()) {
            probe.bind(new InetSocketAddress("::1", 0));
        } catch (IOException e) {
            Assumptions.abort("this host has no IPv6 loopback (::1): " + e.getMessage());
        }
        Config v6 = loopback().with("JCCL_SOCKET_FAMILY", "AF_INET6").with("JCCL_NSOCKS_PERTHREAD", "2");
        try (Cluster c = new Cluster(2, v6)) {
            assertEquals(19, c.ep[0].address().length, "family, IPv6, port");
            assertTrue(c.ep[0].connect(1).describe().startsWith("TCP [::1]:"), c.ep[0].connect(1).describe());
            exchange(c, (1 << 20) + 3);
        }
    }

    /** Rank 0 and rank 1 swap one message of {@code size} bytes and check it. */
    private static void exchange(Cluster c, long size) throws Exception {
        runRanks(2, 20_000, rank -> {
            Connection conn = c.ep[rank].connect(1 - rank);
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment src = arena.allocate(size);
                MemorySegment dst = arena.allocate(size);
                fill(src, 40 + rank);
                drive(15_000, conn, conn.send(src), conn.recv(dst));
                assertEquals(-1, check(dst, 41 - rank));
            }
        });
    }
}
