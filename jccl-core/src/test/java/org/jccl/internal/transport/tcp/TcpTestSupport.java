package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.testing.TestTransportContext;

/** Test helpers: a small "cluster" of TCP endpoints in one JVM (over {@link TestTransportContext}), and rank threads. */
final class TcpTestSupport {
    private static final SecureRandom RANDOM = new SecureRandom();

    private TcpTestSupport() {
    }

    /** Loopback only (the tests never leave the host), short connect timeout. */
    static Config loopback() {
        return Config.defaults().with("JCCL_SOCKET_IFNAME", "lo").with("JCCL_CONNECT_TIMEOUT", "10");
    }

    static byte[] random16() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return b;
    }

    static PeerInfo info(int rank, byte[] tcpAddress) {
        return new PeerInfo(rank, "testhost", 1000 + rank, "hosthash", "proc-" + rank,
                tcpAddress == null ? Map.of() : Map.of(TcpTransport.NAME, tcpAddress));
    }

    /** n ranks of one communicator, each with an open TCP endpoint and every peer's info. */
    static final class Cluster implements AutoCloseable {
        final TestTransportContext[] ctx;
        final Endpoint[] ep;
        final byte[] commId = random16();
        final byte[] secret = random16();

        Cluster(int n, Config config) throws IOException {
            this(java.util.Collections.nCopies(n, config).toArray(Config[]::new));
        }

        /** One rank per configuration. */
        Cluster(Config... configs) throws IOException {
            int n = configs.length;
            ctx = new TestTransportContext[n];
            ep = new Endpoint[n];
            TcpTransport t = new TcpTransport();
            try {
                for (int r = 0; r < n; r++) {
                    ctx[r] = new TestTransportContext(commId, r, n, secret, configs[r]);
                    ep[r] = t.open(ctx[r]);
                }
            } catch (IOException | RuntimeException e) {
                close();
                throw e;
            }
            for (int r = 0; r < n; r++) {
                PeerInfo p = info(r, ep[r].address());
                for (TestTransportContext c : ctx) {
                    c.setPeer(r, p);
                }
            }
        }

        @Override
        public void close() {
            for (Endpoint e : ep) {
                if (e != null) {
                    e.close();
                }
            }
        }
    }

    /** Body of one rank's thread. */
    @FunctionalInterface
    interface RankBody {
        void run(int rank) throws Exception;
    }

    /** Runs one thread per rank and rethrows the first failure (others are attached as suppressed). */
    static void runRanks(int n, long timeoutMillis, RankBody body) throws Exception {
        List<Throwable> errors = new ArrayList<>();
        Thread[] threads = new Thread[n];
        for (int r = 0; r < n; r++) {
            int rank = r;
            threads[r] = Thread.ofPlatform().name("test-rank-" + r).start(() -> {
                try {
                    body.run(rank);
                } catch (Throwable t) {
                    synchronized (errors) {
                        errors.add(new AssertionError("rank " + rank + ": " + t, t));
                    }
                }
            });
        }
        long deadline = System.currentTimeMillis() + timeoutMillis;
        for (Thread t : threads) {
            t.join(Math.max(1, deadline - System.currentTimeMillis()));
            if (t.isAlive()) {
                errors.add(new AssertionError(t.getName() + " did not finish within " + timeoutMillis + " ms"));
            }
        }
        if (!errors.isEmpty()) {
            Throwable first = errors.get(0);
            for (int i = 1; i < errors.size(); i++) {
                first.addSuppressed(errors.get(i));
            }
            if (first instanceof Exception e) {
                throw e;
            }
            throw (Error) first;
        }
    }

    /** Spins progress on every connection until all requests are done; fails on a request error or after the deadline. */
    static void drive(long timeoutMillis, List<? extends Connection> conns, List<P2pRequest> reqs) throws IOException {
        TestTransportContext.drive("", timeoutMillis, conns, reqs);
    }

    static void drive(long timeoutMillis, Connection c, P2pRequest... reqs) throws IOException {
        drive(timeoutMillis, List.of(c), List.of(reqs));
    }

    /**
     * Sends a message of each of {@code sizes} to the peer while receiving the peer's, all posted at once (each
     * receive before its send), drives them to completion, and checks every byte and every request's position.
     * Message i of rank r carries {@link #fill}'s pattern of seed {@code r * 100 + i + salt}.
     */
    static void exchangeChecked(Connection conn, java.lang.foreign.Arena arena, long[] sizes, int rank, int peer, int salt)
            throws IOException {
        List<P2pRequest> reqs = new ArrayList<>();
        List<MemorySegment> in = new ArrayList<>();
        for (int i = 0; i < sizes.length; i++) {
            MemorySegment src = arena.allocate(sizes[i]);
            fill(src, rank * 100L + i + salt);
            MemorySegment dst = arena.allocate(sizes[i]);
            in.add(dst);
            reqs.add(conn.recv(dst));
            reqs.add(conn.send(src));
        }
        drive(40_000, conn, reqs.toArray(P2pRequest[]::new));
        for (int i = 0; i < sizes.length; i++) {
            org.junit.jupiter.api.Assertions.assertEquals(-1, check(in.get(i), peer * 100L + i + salt),
                    "message " + i + " of " + sizes[i] + " bytes");
        }
        for (P2pRequest r : reqs) {
            org.junit.jupiter.api.Assertions.assertEquals(r.size(), r.position);
        }
    }

    /** Fills a segment with a pattern that depends on the seed and on the position (so shifted or swapped data is caught). */
    static void fill(MemorySegment s, long seed) {
        long n = s.byteSize();
        long i = 0;
        for (; i + 8 <= n; i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, mix(seed, i));
        }
        for (; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) mix(seed, i & ~7L));
        }
    }

    /** Checks {@link #fill}'s pattern; returns the first wrong offset or -1. */
    static long check(MemorySegment s, long seed) {
        long n = s.byteSize();
        long i = 0;
        for (; i + 8 <= n; i += 8) {
            if (s.get(ValueLayout.JAVA_LONG_UNALIGNED, i) != mix(seed, i)) {
                return i;
            }
        }
        for (; i < n; i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) != (byte) mix(seed, i & ~7L)) {
                return i;
            }
        }
        return -1;
    }

    private static long mix(long seed, long i) {
        long z = seed * 0x9E3779B97F4A7C15L + i;
        z = (z ^ (z >>> 31)) * 0xBF58476D1CE4E5B9L;
        return z ^ (z >>> 29);
    }
}
