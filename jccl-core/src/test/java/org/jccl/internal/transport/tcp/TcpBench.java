package org.jccl.internal.transport.tcp;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import org.jccl.internal.transport.tcp.TcpTestSupport.Cluster;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;

/**
 * Throwaway measurement (not a test): 8-byte ping-pong latency between two endpoints on two threads
 * spinning on progress, and one-way throughput of 64 MiB messages over 1 and 4 sockets, on loopback.
 * Run: {@code java -cp jccl-core/target/classes:jccl-core/target/test-classes org.jccl.internal.transport.tcp.TcpBench}
 */
public final class TcpBench {
    private TcpBench() {
    }

    public static void main(String[] args) throws Exception {
        int iters = args.length > 0 ? Integer.parseInt(args[0]) : 100_000;
        int reps = args.length > 1 ? Integer.parseInt(args[1]) : 20;
        long big = args.length > 2 ? Long.parseLong(args[2]) : 64L << 20;
        rawPingPong(iters);
        pingPong(iters);
        for (int nsocks : new int[] {1, 4}) {
            throughput(nsocks, big, reps);
        }
    }

    private static void pingPong(int iters) throws Exception {
        try (Cluster c = new Cluster(2, TcpTestSupport.loopback())) {
            long[] result = new long[2];
            TcpTestSupport.runRanks(2, 600_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment out = arena.allocate(8);
                    MemorySegment in = arena.allocate(8);
                    com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
                    int warm = Math.max(1000, iters / 10);
                    long t0 = 0;
                    long a0 = 0;
                    for (int i = 0; i < warm + iters; i++) {
                        if (i == warm) {
                            t0 = System.nanoTime();
                            a0 = mx.getCurrentThreadAllocatedBytes();
                        }
                        if (rank == 0) {
                            P2pRequest s = conn.send(out);
                            P2pRequest r = conn.recv(in);
                            spin(conn, s, r);
                        } else {
                            P2pRequest r = conn.recv(in);
                            spin(conn, r);
                            P2pRequest s = conn.send(out);
                            spin(conn, s);
                        }
                    }
                    if (rank == 0) {
                        result[0] = System.nanoTime() - t0;
                        result[1] = mx.getCurrentThreadAllocatedBytes() - a0;
                    }
                }
            });
            System.out.printf("ping-pong 8 B: %d round trips, %.2f us round trip, %.2f us one-way; rank 0 allocated %.1f B per round trip%n",
                    iters, result[0] / 1e3 / iters, result[0] / 2e3 / iters, (double) result[1] / iters);
        }
    }

    private static void throughput(int nsocks, long size, int reps) throws Exception {
        try (Cluster c = new Cluster(2, TcpTestSupport.loopback().with("JCCL_NSOCKS_PERTHREAD", Integer.toString(nsocks)))) {
            long[] ns = new long[1];
            TcpTestSupport.runRanks(2, 600_000, rank -> {
                Connection conn = c.ep[rank].connect(1 - rank);
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment buf = arena.allocate(size, 4096);
                    MemorySegment ack = arena.allocate(8);
                    for (int round = 0; round < 2; round++) { // round 0 warms up
                        long t0 = System.nanoTime();
                        if (rank == 0) {
                            for (int i = 0; i < reps; i++) {
                                spin(conn, conn.send(buf));
                            }
                            spin(conn, conn.recv(ack));
                            if (round == 1) {
                                ns[0] = System.nanoTime() - t0;
                            }
                        } else {
                            for (int i = 0; i < reps; i++) {
                                spin(conn, conn.recv(buf));
                            }
                            spin(conn, conn.send(ack));
                        }
                    }
                }
            });
            double gbs = (double) size * reps / ns[0];
            System.out.printf("one-way %d MiB x %d, %d socket(s): %.2f GB/s (%.1f ms per message)%n",
                    size >> 20, reps, nsocks, gbs, ns[0] / 1e6 / reps);
        }
    }

    // Two fixed-arity spins (no varargs array), so the allocation figure shows the transport's own.
    private static void spin(Connection conn, P2pRequest a) throws Exception {
        while (!a.isDone()) {
            conn.progress();
        }
        if (a.error() != null) {
            throw new IllegalStateException(a.error());
        }
    }

    private static void spin(Connection conn, P2pRequest a, P2pRequest b) throws Exception {
        while (!a.isDone() || !b.isDone()) {
            conn.progress();
        }
        if (a.error() != null || b.error() != null) {
            throw new IllegalStateException(a.error() != null ? a.error() : b.error());
        }
    }

    /** The same ping-pong over one plain non-blocking SocketChannel pair, busy-polling read: the floor under the transport. */
    private static void rawPingPong(int iters) throws Exception {
        try (ServerSocketChannel server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0))) {
            SocketChannel a = SocketChannel.open(server.getLocalAddress());
            SocketChannel b = server.accept();
            long[] result = new long[1];
            TcpTestSupport.runRanks(2, 600_000, rank -> {
                SocketChannel ch = rank == 0 ? a : b;
                ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
                ch.configureBlocking(false);
                ByteBuffer out = ByteBuffer.allocateDirect(8);
                ByteBuffer in = ByteBuffer.allocateDirect(8);
                int warm = Math.max(1000, iters / 10);
                long t0 = 0;
                for (int i = 0; i < warm + iters; i++) {
                    if (i == warm) {
                        t0 = System.nanoTime();
                    }
                    if (rank == 0) {
                        out.clear();
                        while (out.hasRemaining()) {
                            ch.write(out);
                        }
                    }
                    in.clear();
                    while (in.hasRemaining()) {
                        if (ch.read(in) < 0) {
                            throw new IllegalStateException("closed");
                        }
                    }
                    if (rank == 1) {
                        out.clear();
                        while (out.hasRemaining()) {
                            ch.write(out);
                        }
                    }
                }
                if (rank == 0) {
                    result[0] = System.nanoTime() - t0;
                }
            });
            a.close();
            b.close();
            System.out.printf("baseline raw SocketChannel ping-pong 8 B: %.2f us round trip%n", result[0] / 1e3 / iters);
        }
    }
}
