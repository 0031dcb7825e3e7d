package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.PeerFailedException;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.internal.transport.local.LocalTransport;
import org.jccl.internal.transport.shm.ShmTransport;
import org.jccl.internal.transport.tcp.TcpTransport;
import org.jccl.testing.FdWakeTransport;
import org.jccl.spi.CollectiveCall;
import org.jccl.spi.CollectiveProvider;
import org.jccl.spi.CollectiveProvider.Collective;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The collective provider contract (org.jccl.spi.CollectiveProvider, CollectiveCall) over every transport, built-in or
 * found by ServiceLoader, straight through the SPI, without the runtime: each rank (a thread) opens the transport's
 * endpoint, prepares it for its peers and asks for a provider. A transport offers one on every rank or on none; where it
 * offers one, on 2, 3 and 4 ranks it runs every collective right (against references computed here, in place and not,
 * over several rounds), takes its waits through the call's idle step, publishes the call's guard word and signature and
 * hands each peer's to the call before using the peer's data, and fails every rank (no hang) when their guard words
 * differ. The call object here is the test's own (what the runtime's ProviderCall does, checked by the runtime's tests).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CollectiveProviderConformance {
    private static final SecureRandom RANDOM = new SecureRandom();
    /** Longest wait a scenario allows before it fails (instead of hanging). */
    private static final long DEADLINE_NANOS = 60_000_000_000L;

    private Path dir;

    @BeforeEach
    void makeDir() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-providertest-");
    }

    @AfterEach
    void removeDir() throws IOException {
        try (Stream<Path> left = Files.list(dir)) {
            List<Path> files = left.toList();
            for (Path f : files) {
                Files.deleteIfExists(f);
            }
            assertEquals(List.of(), files, "the provider and its endpoint left files behind");
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    /** Every transport the runtime could use: the built-in ones and those ServiceLoader finds (tests register one). */
    static List<Transport> transports() {
        List<Transport> all = new ArrayList<>(List.of(new LocalTransport(), new ShmTransport(), new TcpTransport()));
        for (Transport t : ServiceLoader.load(Transport.class)) {
            if (all.stream().noneMatch(x -> x.name().equals(t.name()))) {
                all.add(t);
            }
        }
        return all;
    }

    /** A small shared segment for SHM (16 KiB per rank: rounds of 8 KiB), so that the counts below take many rounds. */
    private Config config() {
        return Config.defaults().with("JCCL_SHM_DIR", dir.toString()).with("JCCL_SHM_COLL_BUFFER", "16K").with("JCCL_SOCKET_IFNAME", "lo")
                .with("JCCL_CONNECT_TIMEOUT", "30");
    }

    static Stream<Arguments> offered() {
        // The transports that offer none (checked for every transport by the all-or-none test): LOCAL, TCP, and the test
        // transport of the wake descriptor tests.
        return transports().stream().filter(t -> !Set.of("LOCAL", "TCP", FdWakeTransport.NAME).contains(t.name()))
                .flatMap(t -> Stream.of(2, 3, 4).map(n -> Arguments.of(t.name(), n)));
    }

    private static Transport named(String name) {
        return transports().stream().filter(t -> t.name().equals(name)).findFirst().orElseThrow();
    }

    /** One rank's part of a scenario, with its provider (null when the transport offers none). */
    @FunctionalInterface
    interface Body {
        void run(int rank, int n, CollectiveProvider p) throws Exception;
    }

    /**
     * Runs {@code body} on {@code n} rank threads, each with an endpoint of {@code t} prepared for every peer and the provider
     * {@code t} offers; a rank that fails closes its provider (as the runtime's abort does), so that the others fail too.
     * Returns each rank's failure (null: none); everything is closed at the end.
     */
    private Throwable[] ranks(Transport t, int n, Body body) throws Exception {
        Config cfg = config();
        byte[] comm = new byte[16];
        byte[] secret = new byte[16];
        RANDOM.nextBytes(comm);
        RANDOM.nextBytes(secret);
        SpiRig[] rigs = new SpiRig[n];
        CollectiveProvider[] providers = new CollectiveProvider[n];
        Throwable[] failed = new Throwable[n];
        try {
            for (int r = 0; r < n; r++) {
                rigs[r] = SpiRig.open(t, comm, secret, r, n, cfg);
            }
            PeerInfo[] infos = new PeerInfo[n];
            for (int r = 0; r < n; r++) {
                infos[r] = rigs[r].info(t, "testhost-boot", ProcessHandle.current().pid(), "test-jvm");
            }
            for (SpiRig rig : rigs) {
                rig.setPeers(infos);
            }
            Thread[] threads = new Thread[n];
            for (int r = 0; r < n; r++) {
                int rank = r;
                threads[r] = Thread.ofPlatform().name("provider-rank-" + r).start(() -> {
                    try {
                        rigs[rank].connectAll();
                        providers[rank] = t.openCollectives(rigs[rank].endpoint());
                        body.run(rank, n, providers[rank]);
                    } catch (Throwable e) {
                        failed[rank] = e;
                        if (providers[rank] != null) {
                            providers[rank].close();
                        }
                    }
                });
            }
            for (Thread th : threads) {
                th.join(DEADLINE_NANOS / 1_000_000 + 30_000);
                assertTrue(!th.isAlive(), th.getName() + " did not finish in time");
            }
            return failed;
        } finally {
            for (int r = 0; r < n; r++) {
                if (providers[r] != null) {
                    providers[r].close();
                }
                if (rigs[r] != null) {
                    rigs[r].close();
                }
            }
        }
    }

    private static void rethrow(Throwable[] failed) throws Exception {
        for (Throwable f : failed) {
            if (f instanceof Exception e) {
                throw e;
            }
            if (f instanceof Error e) {
                throw e;
            }
        }
    }

    /** Every transport offers a provider on every rank or on none; SHM offers one (so the suite below is not empty). */
    @Test
    void aTransportOffersAProviderOnEveryRankOrOnNone() throws Exception {
        List<String> offering = Collections.synchronizedList(new ArrayList<>());
        for (Transport t : transports()) {
            AtomicInteger some = new AtomicInteger();
            rethrow(ranks(t, 3, (rank, n, p) -> {
                if (p != null) {
                    some.incrementAndGet();
                    for (Collective c : Collective.values()) {
                        // the tuner's inputs: no NaN, no negative price
                        double cost = p.cost(c, 1 << 20);
                        assertTrue(cost >= 0, t.name() + " " + c + " cost " + cost);
                    }
                }
            }));
            assertTrue(some.get() == 0 || some.get() == 3, t.name() + " offered a provider on " + some.get() + " of 3 ranks");
            if (some.get() == 3) {
                offering.add(t.name());
            }
        }
        assertTrue(offering.contains("SHM"), "offering: " + offering);
        assertTrue(!offering.contains("LOCAL") && !offering.contains("TCP") && !offering.contains(FdWakeTransport.NAME), "offering: " + offering);
    }

    /** Every collective the provider supports, checked against references, on 2..4 ranks; waits go through the call. */
    @ParameterizedTest(name = "{0} {1} ranks")
    @MethodSource("offered")
    void theProviderRunsEveryCollectiveItSupportsRight(String transport, int ranks) throws Exception {
        Transport t = named(transport);
        long[] guards = new long[ranks];
        java.util.Arrays.fill(guards, 0x5a5a_0000L);
        rethrow(ranks(t, ranks, (rank, n, p) -> {
            if (p == null) {
                throw new AssertionError(transport + " offered no provider");
            }
            try (Arena arena = Arena.ofShared()) {
                TestCall call = new TestCall(rank, n, guards, null);
                int checked = 0;
                for (long count : new long[] {1, 7, 1000, 10_003}) {
                    for (boolean inPlace : new boolean[] {false, true}) {
                        checked += allReduce(p, call, arena, rank, n, count, DataType.FLOAT32, ReduceOp.SUM, inPlace);
                        checked += allReduce(p, call, arena, rank, n, count, DataType.INT32, ReduceOp.MAX, inPlace);
                        checked += allReduce(p, call, arena, rank, n, count, DataType.FLOAT64, ReduceOp.AVG, inPlace);
                        checked += reduceScatter(p, call, arena, rank, n, count, inPlace);
                    }
                    checked += allGather(p, call, arena, rank, n, count * 3);
                }
                if (p.supports(Collective.BARRIER, null, null)) {
                    for (int i = 0; i < 5; i++) {
                        p.barrier(call.of(null, null));
                    }
                    checked++;
                }
                assertTrue(checked > 0, "the provider supports none of the collectives");
                assertTrue(call.moved.get() > 0, "the provider counted no bytes (CollectiveCall.moved/movedWith)");
                // Every peer's guard word reached the call (all equal here, so none threw).
                assertTrue(call.guardsSeen.size() > 0, "the provider compared no guard word");
                for (long g : call.guardsSeen) {
                    assertEquals(guards[0], g);
                }
            }
        }));
    }

    /**
     * Ranks whose calls have different guard words: every rank fails (none hangs, none returns), and at least one does so in
     * checkGuard with a peer's real word.
     */
    @ParameterizedTest(name = "{0} {1} ranks")
    @MethodSource("offered")
    void differentGuardWordsFailEveryRank(String transport, int ranks) throws Exception {
        Transport t = named(transport);
        long[] guards = new long[ranks];
        for (int r = 0; r < ranks; r++) {
            guards[r] = r == ranks - 1 ? 0x2222_0000L : 0x1111_0000L;
        }
        Throwable[] failed = ranks(t, ranks, (rank, n, p) -> {
            try (Arena arena = Arena.ofShared()) {
                TestCall call = new TestCall(rank, n, guards, null);
                MemorySegment buf = arena.allocate(8 * 4);
                assertTrue(takes(p, Collective.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, buf.byteSize()));
                // a few calls: the mismatch must stop every rank at the first
                for (int i = 0; i < 3; i++) {
                    p.allReduce(call.of(DataType.FLOAT32, ReduceOp.SUM), buf, buf, 8, DataType.FLOAT32, ReduceOp.SUM);
                }
            }
        });
        int mismatches = 0;
        for (int r = 0; r < ranks; r++) {
            assertTrue(failed[r] != null, "rank " + r + " returned from a call whose guard words differ");
            if (failed[r] instanceof GuardMismatch m) {
                mismatches++;
                assertTrue(m.theirs != guards[r] && (m.theirs == 0x1111_0000L || m.theirs == 0x2222_0000L), m.getMessage());
            } else {
                assertTrue(failed[r] instanceof JcclException, "rank " + r + ": " + failed[r]);
            }
        }
        assertTrue(mismatches > 0, "no rank saw the other's guard word");
    }

    /** Signatures (JCCL_CHECK=1) travel with the data: each rank's reaches its peers' checkSignature byte for byte. */
    @ParameterizedTest(name = "{0} {1} ranks")
    @MethodSource("offered")
    void signaturesReachThePeers(String transport, int ranks) throws Exception {
        Transport t = named(transport);
        long[] guards = new long[ranks];
        rethrow(ranks(t, ranks, (rank, n, p) -> {
            try (Arena arena = Arena.ofShared()) {
                MemorySegment[] sigs = new MemorySegment[n];
                for (int q = 0; q < n; q++) {
                    sigs[q] = arena.allocate(CollectiveCall.SIGNATURE_BYTES);
                    for (int i = 0; i < CollectiveCall.SIGNATURE_BYTES; i++) {
                        sigs[q].set(ValueLayout.JAVA_BYTE, i, (byte) (q * 31 + i));
                    }
                }
                TestCall call = new TestCall(rank, n, guards, sigs);
                MemorySegment buf = arena.allocate(1000 * 4);
                assertTrue(takes(p, Collective.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, buf.byteSize()));
                p.allReduce(call.of(DataType.FLOAT32, ReduceOp.SUM), buf, buf, 1000, DataType.FLOAT32, ReduceOp.SUM);
                if (p.supports(Collective.BARRIER, null, null)) {
                    p.barrier(call.of(null, null));
                }
                assertTrue(call.signaturesSeen.get() >= n - 1, "checkSignature saw " + call.signaturesSeen.get() + " signatures");
            }
        }));
    }

    // ------------------------------------------------------------------------------------------ scenarios

    /** Rank r's input element i: small integers, exact in every type and in any order of summation. */
    private static double input(int r, long i) {
        return ((r + 1) * 7 + i * 3) % 23 - 5;
    }

    private static int allReduce(CollectiveProvider p, TestCall call, Arena arena, int rank, int n, long count, DataType t, ReduceOp op,
                                 boolean inPlace) {
        if (!takes(p, Collective.ALL_REDUCE, t, op, t.bytes(count))) {
            return 0;
        }
        MemorySegment s = arena.allocate(t.bytes(count), 64);
        MemorySegment r = inPlace ? s : arena.allocate(t.bytes(count), 64);
        for (long i = 0; i < count; i++) {
            set(s, t, i, input(rank, i));
        }
        p.allReduce(call.of(t, op), s, r, count, t, op);
        for (long i = 0; i < count; i++) {
            double want = op == ReduceOp.MAX ? Double.NEGATIVE_INFINITY : 0;
            for (int q = 0; q < n; q++) {
                want = op == ReduceOp.MAX ? Math.max(want, input(q, i)) : want + input(q, i); // AVG: the provider leaves the sum
            }
            assertEquals(want, get(r, t, i), 0, "all-reduce " + t + " " + op + " of " + count + (inPlace ? " in place" : "") + ", element " + i);
        }
        return 1;
    }

    private static int reduceScatter(CollectiveProvider p, TestCall call, Arena arena, int rank, int n, long count, boolean inPlace) {
        DataType t = DataType.FLOAT32;
        if (!takes(p, Collective.REDUCE_SCATTER, t, ReduceOp.SUM, t.bytes(count * n))) {
            return 0;
        }
        MemorySegment s = arena.allocate(t.bytes(count * n), 64);
        for (long i = 0; i < count * n; i++) {
            set(s, t, i, input(rank, i));
        }
        MemorySegment before = arena.allocate(s.byteSize(), 64).copyFrom(s);
        MemorySegment r = inPlace ? s.asSlice(t.bytes(count * rank), t.bytes(count)) : arena.allocate(t.bytes(count), 64);
        p.reduceScatter(call.of(t, ReduceOp.SUM), s, r, count, t, ReduceOp.SUM);
        for (long i = 0; i < count; i++) {
            double want = 0;
            for (int q = 0; q < n; q++) {
                want += input(q, rank * count + i);
            }
            assertEquals(want, get(r, t, i), 0, "reduce-scatter of " + count + (inPlace ? " in place" : "") + ", element " + i);
        }
        for (long i = 0; i < count * n; i++) {
            if (!inPlace || i / count != rank) {
                assertEquals(get(before, t, i), get(s, t, i), 0, "reduce-scatter changed its input outside this rank's block");
            }
        }
        return 1;
    }

    private static int allGather(CollectiveProvider p, TestCall call, Arena arena, int rank, int n, long bytesPerRank) {
        if (!takes(p, Collective.ALL_GATHER, null, null, bytesPerRank * n)) {
            return 0;
        }
        MemorySegment r = arena.allocate(bytesPerRank * n, 64);
        r.fill((byte) 0x77);
        for (long i = 0; i < bytesPerRank; i++) {
            r.set(ValueLayout.JAVA_BYTE, rank * bytesPerRank + i, (byte) (rank * 13 + i));
        }
        p.allGather(call.of(null, null), r, bytesPerRank);
        byte[] want = new byte[(int) (bytesPerRank * n)];
        for (int q = 0; q < n; q++) {
            for (long i = 0; i < bytesPerRank; i++) {
                want[(int) (q * bytesPerRank + i)] = (byte) (q * 13 + i);
            }
        }
        assertArrayEquals(want, r.toArray(ValueLayout.JAVA_BYTE), "all-gather of " + bytesPerRank + " B per rank");
        return 1;
    }

    /** Whether the runtime would hand the provider this call: supported, at a finite cost (an infinite one declines the size). */
    private static boolean takes(CollectiveProvider p, Collective kind, DataType t, ReduceOp op, long bytes) {
        return p.supports(kind, t, op) && p.cost(kind, bytes) < Double.POSITIVE_INFINITY;
    }

    private static void set(MemorySegment s, DataType t, long i, double v) {
        switch (t) {
            case FLOAT32 -> s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) v);
            case FLOAT64 -> s.setAtIndex(ValueLayout.JAVA_DOUBLE, i, v);
            case INT32 -> s.setAtIndex(ValueLayout.JAVA_INT, i, (int) v);
            default -> throw new IllegalArgumentException(t.toString());
        }
    }

    private static double get(MemorySegment s, DataType t, long i) {
        return switch (t) {
            case FLOAT32 -> s.getAtIndex(ValueLayout.JAVA_FLOAT, i);
            case FLOAT64 -> s.getAtIndex(ValueLayout.JAVA_DOUBLE, i);
            case INT32 -> s.getAtIndex(ValueLayout.JAVA_INT, i);
            default -> throw new IllegalArgumentException(t.toString());
        };
    }

    /** checkGuard's failure: the peer's word differs. */
    static final class GuardMismatch extends RuntimeException {
        final long theirs;

        GuardMismatch(int rank, int peer, long theirs, long mine) {
            super("rank " + rank + ": rank " + peer + "'s guard word " + Long.toHexString(theirs) + " differs from " + Long.toHexString(mine));
            this.theirs = theirs;
        }
    }

    /** The test's side of a call: a yielding idle step with a deadline, the reference reductions, records of what it was handed. */
    static final class TestCall implements CollectiveCall {
        private final int rank;
        private final int n;
        private final long[] guards;
        private final MemorySegment[] signatures;
        private DataType type;
        private ReduceOp op;
        private long waitStart;
        final AtomicInteger signaturesSeen = new AtomicInteger();
        final List<Long> guardsSeen = new ArrayList<>();
        final java.util.concurrent.atomic.AtomicLong moved = new java.util.concurrent.atomic.AtomicLong();

        TestCall(int rank, int n, long[] guards, MemorySegment[] signatures) {
            this.rank = rank;
            this.n = n;
            this.guards = guards;
            this.signatures = signatures;
        }

        TestCall of(DataType t, ReduceOp o) {
            this.type = t;
            this.op = o;
            return this;
        }

        @Override
        public int rank() {
            return rank;
        }

        @Override
        public int size() {
            return n;
        }

        @Override
        public void checkAborted() {
            if (Thread.currentThread().isInterrupted()) {
                throw new JcclException(ErrorCode.ABORTED, "rank " + rank + ": interrupted");
            }
        }

        @Override
        public long idle(boolean start) {
            long now = System.nanoTime();
            if (start) {
                waitStart = now;
            }
            long waited = now - waitStart;
            if (waited > DEADLINE_NANOS) {
                throw new AssertionError("rank " + rank + ": a wait in the provider lasted over " + DEADLINE_NANOS / 1_000_000_000 + " s");
            }
            Thread.yield();
            return waited;
        }

        @Override
        public PeerFailedException peerFailed(int peer, IOException cause) {
            return new PeerFailedException(peer, "rank " + rank + ": rank " + peer + " failed: " + cause.getMessage(), cause);
        }

        @Override
        public long guard() {
            return guards[rank];
        }

        @Override
        public void checkGuard(int peer, long theirs) {
            assertTrue(peer != rank && peer >= 0 && peer < n, "checkGuard for peer " + peer);
            guardsSeen.add(theirs);
            if (theirs != guards[rank] && theirs != 0 && guards[rank] != 0) {
                throw new GuardMismatch(rank, peer, theirs, guards[rank]);
            }
        }

        @Override
        public MemorySegment signature() {
            return signatures == null ? null : signatures[rank];
        }

        @Override
        public void checkSignature(int peer, MemorySegment theirs) {
            assertTrue(signatures != null, "checkSignature without a signature");
            assertArrayEquals(signatures[peer].toArray(ValueLayout.JAVA_BYTE),
                    theirs.asSlice(0, SIGNATURE_BYTES).toArray(ValueLayout.JAVA_BYTE), "rank " + peer + "'s signature as rank " + rank + " got it");
            signaturesSeen.incrementAndGet();
        }

        @Override
        public void reduce(MemorySegment dst, MemorySegment a, MemorySegment b, long count) {
            Reductions.reduce(dst, a, b, count, type, op);
        }

        @Override
        public void moved(long perPeer) {
            moved.addAndGet(perPeer);
        }

        @Override
        public void movedWith(int peer, long bytes) {
            moved.addAndGet(bytes);
        }
    }
}
