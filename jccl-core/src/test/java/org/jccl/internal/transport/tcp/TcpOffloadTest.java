package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.internal.transport.tcp.TcpTestSupport.Cluster;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import static org.jccl.internal.transport.tcp.TcpTestSupport.check;
import static org.jccl.internal.transport.tcp.TcpTestSupport.drive;
import static org.jccl.internal.transport.tcp.TcpTestSupport.exchangeChecked;
import static org.jccl.internal.transport.tcp.TcpTestSupport.fill;
import static org.jccl.internal.transport.tcp.TcpTestSupport.loopback;
import static org.jccl.internal.transport.tcp.TcpTestSupport.runRanks;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** TCP connections whose sockets are driven by stream threads ({@code JCCL_SOCKET_OFFLOAD=1}), over real loopback sockets. */
class TcpOffloadTest {

    private static final long[] SIZES = {0, 1, 16, 4095, 8192, 300_000, (1 << 20) + 3, 64L << 20};

    private static Config offload(int threads, int perThread) {
        return loopback().with("JCCL_SOCKET_OFFLOAD", "1").with("JCCL_SOCKET_NTHREADS", Integer.toString(threads))
                .with("JCCL_NSOCKS_PERTHREAD", Integer.toString(perThread));
    }

    private static long ioThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith("jccl-tcp-io-") && t.isAlive()).count();
    }

    @ParameterizedTest(name = "threads={0} socketsPerThread={1}")
    @CsvSource({"1,1", "2,2", "3,1"})
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void messagesOfEverySizeBothDirectionsAtOnce(int threads, int perThread) throws Exception {
        long before = ioThreads();
        try (Cluster c = new Cluster(2, offload(threads, perThread))) {
            runRanks(2, 50_000, rank -> {
                int peer = 1 - rank;
                TcpConnection conn = (TcpConnection) c.ep[rank].connect(peer);
                assertTrue(conn.offloaded());
                assertEquals(threads * perThread, conn.sockets());
                assertEquals(0, conn.channels().length, "the stream threads select on the sockets, not the runtime");
                assertTrue(conn.describe().endsWith(threads + (threads == 1 ? " stream thread)" : " stream threads)")), conn.describe());
                try (Arena arena = Arena.ofShared()) {
                    for (int round = 0; round < 3; round++) {
                        exchangeChecked(conn, arena, SIZES, rank, peer, round);
                    }
                }
            });
            assertEquals(before + 2L * threads, ioThreads(), "one thread per stream group on each side while open");
        }
        assertEquals(before, ioThreads(), "close ends the stream threads");
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void peerCloseFailsTheWaitingReceiveNamingThePeer() throws Exception {
        try (Cluster c = new Cluster(2, offload(2, 1))) {
            runRanks(2, 25_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                try (Arena arena = Arena.ofShared()) {
                    MemorySegment one = arena.allocate(64);
                    if (rank == 1) {
                        drive(10_000, conn, conn.send(one));
                        conn.close();
                        P2pRequest late = conn.send(one);
                        assertTrue(late.isDone() && late.error() != null, "send after close fails at once");
                        assertTrue(late.error().getMessage().contains("closed by this rank"), late.error().getMessage());
                    } else {
                        drive(10_000, conn, conn.recv(one));
                        P2pRequest r = conn.recv(arena.allocate(1 << 20));
                        IOException e = assertThrows(IOException.class, () -> drive(10_000, conn, r));
                        assertTrue(e.getMessage().contains("TCP connection to rank 1 (testhost pid 1001) closed by the peer"), e.getMessage());
                        assertTrue(r.isDone() && r.error() != null, "the pending receive is failed");
                        IOException again = assertThrows(IOException.class, conn::progress);
                        assertTrue(again.getMessage().contains("closed by the peer"), again.getMessage());
                        P2pRequest late = conn.recv(one);
                        assertTrue(late.isDone() && late.error() != null, "a receive posted after the failure fails at once");
                    }
                }
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void sizeMismatchOnAStreamThreadReachesTheCaller() throws Exception {
        try (Cluster c = new Cluster(2, offload(2, 2))) {
            runRanks(2, 25_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                try (Arena arena = Arena.ofShared()) {
                    if (rank == 0) {
                        try {
                            drive(20_000, conn, conn.send(arena.allocate(2 << 20)));
                        } catch (IOException expectedFailure) {
                            // the receiver dropped the link after spotting the mismatch
                        }
                    } else {
                        P2pRequest r = conn.recv(arena.allocate(1 << 20));
                        IOException e = assertThrows(IOException.class, () -> drive(20_000, conn, r));
                        assertTrue(e.getMessage().contains("rank 0 (testhost pid 1000) sent " + (2 << 20) + " bytes where rank 1 expected "
                                + (1 << 20)), e.getMessage());
                    }
                }
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void confinedMemoryIsRefusedNamingTheFix() throws Exception {
        try (Cluster c = new Cluster(2, offload(1, 1))) {
            runRanks(2, 25_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                try (Arena confined = Arena.ofConfined(); Arena shared = Arena.ofShared()) {
                    P2pRequest bad = rank == 0 ? conn.send(confined.allocate(64)) : conn.recv(confined.allocate(64));
                    assertTrue(bad.isDone() && bad.error() instanceof IllegalArgumentException, String.valueOf(bad.error()));
                    assertTrue(bad.error().getMessage().contains("Arena.ofShared()"), bad.error().getMessage());
                    // Nothing was queued: the pair still works.
                    MemorySegment src = shared.allocate(100);
                    MemorySegment dst = shared.allocate(100);
                    fill(src, 7 + rank);
                    drive(10_000, conn, conn.send(src), conn.recv(dst));
                    assertEquals(-1, check(dst, 8 - rank));
                }
            });
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void autoStaysOffWithOneThreadAndWhereTheCpusCannotRunEveryThread() {
        int cpus = Runtime.getRuntime().availableProcessors();
        assertEquals(0, TcpSettings.conclude(loopback()).streamThreads(1, 64), "one thread (the default) stays inline however many CPUs");
        assertEquals(1, TcpSettings.conclude(loopback().with("JCCL_SOCKET_OFFLOAD", "1")).streamThreads(1, cpus), "forced on");
        assertEquals(0, TcpSettings.conclude(offload(4, 2).with("JCCL_SOCKET_OFFLOAD", "0")).streamThreads(1, 64), "forced off");
        TcpSettings auto = TcpSettings.conclude(offload(2, 2).with("JCCL_SOCKET_OFFLOAD", "-1"));
        assertEquals(2, auto.streamThreads(1, 3), "2 stream threads and the operation thread: 3 CPUs");
        assertEquals(0, auto.streamThreads(1, 2), "2 CPUs cannot run 3 busy threads");
        assertEquals(2, auto.streamThreads(-1, 3), "ranks on the host unknown: counted as 1");
        assertEquals(2, auto.streamThreads(4, 12), "4 ranks on the host, 3 CPUs each");
        assertEquals(0, auto.streamThreads(4, 11));
        assertEquals(4, TcpSettings.conclude(offload(4, 4)).streamThreads(2, 64), "the 4 x 4 of the issue on a 64-CPU host");
    }
}
