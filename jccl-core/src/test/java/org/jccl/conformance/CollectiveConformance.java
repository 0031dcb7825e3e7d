package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.testing.Data;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every collective, written once, checked against an independent reference: each transport's
 * test is a subclass that only says which {@link Config} makes the ranks use it (Netty's testsuite
 * and JCTools' QueueSanityTest pattern). Ranks are threads of this JVM ({@code Jccl.initLocal});
 * communicators are reused across tests of one class, per rank count.
 *
 * <p>Sweep: ranks {1,2,3,4,7,8} x counts {0,1,7,1000,1M+3} x every data type x every operator x
 * in-place and out-of-place; outputs are poisoned before each run.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 600, unit = TimeUnit.SECONDS)
public abstract class CollectiveConformance {

    static final int[] RANKS = {1, 2, 3, 4, 7, 8};
    static final long[] COUNTS = {0, 1, 7, 1000, 1_000_003};
    static final Duration STEP_TIMEOUT = Duration.ofSeconds(120);

    private final Map<Integer, List<Communicator>> comms = new HashMap<>();

    /** The settings that make ranks of one JVM use the transport under test. */
    protected abstract Config config();

    /** Transport name as it appears in test names. */
    protected abstract String transport();

    protected synchronized List<Communicator> comms(int n) {
        return comms.computeIfAbsent(n, k -> Jccl.initLocal(k, config()));
    }

    /** Runs body on every rank of an n-rank communicator; a failure discards those communicators. */
    protected void run(int n, Ranks.Body body) {
        List<Communicator> cs = comms(n);
        try {
            Ranks.run(cs, STEP_TIMEOUT, body);
        } catch (Throwable t) {
            synchronized (this) {
                comms.remove(n);
            }
            cs.forEach(Communicator::abort);
            throw t;
        }
    }

    @AfterAll
    void closeAll() {
        for (List<Communicator> cs : comms.values()) {
            for (Communicator c : cs) {
                c.close();
            }
        }
        comms.clear();
    }

    /** Rank counts of the sweep; subclasses may widen or narrow it. */
    protected int[] ranks() {
        return RANKS;
    }

    /** Element counts of the sweep. */
    protected long[] counts() {
        return COUNTS;
    }

    Stream<Arguments> ranksAndCounts() {
        List<Arguments> a = new ArrayList<>();
        for (int n : ranks()) {
            for (long c : counts()) {
                a.add(Arguments.of(n, c));
            }
        }
        return a.stream();
    }

    /** Compares element i of out with the reference; returns a message for the first mismatch or null. */
    static String checkReduced(MemorySegment out, DataType t, ReduceOp op, int n, long count, double[] expected, double[] tol,
                               String what) {
        for (long i = 0; i < count; i++) {
            double got = Data.get(out, t, i);
            double want = expected[(int) i];
            boolean ok = tol[(int) i] == 0 ? (got == want || (Double.isNaN(got) && Double.isNaN(want)))
                    : Math.abs(got - want) <= tol[(int) i];
            if (!ok) {
                return what + " " + t + " " + op + " n=" + n + " count=" + count + ": element " + i + " is " + got + ", expected "
                        + want + (tol[(int) i] > 0 ? " +- " + tol[(int) i] : "");
            }
        }
        return null;
    }

    static double[][] reference(DataType t, ReduceOp op, int n, long count, long offset) {
        double[] e = new double[(int) count];
        double[] tol = new double[(int) count];
        for (long i = 0; i < count; i++) {
            e[(int) i] = Data.reduce(t, op, n, i + offset);
            tol[(int) i] = Data.tolerance(t, op, n, i + offset);
        }
        return new double[][] {e, tol};
    }

    // ------------------------------------------------------------------------------------ allReduce

    @ParameterizedTest(name = "allReduce n={0} count={1}")
    @MethodSource("ranksAndCounts")
    void allReduce(int n, long count) {
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                double[][] ref = reference(t, op, n, count, 0);
                for (boolean inPlace : new boolean[] {false, true}) {
                    run(n, c -> {
                        try (Arena arena = Arena.ofShared()) {
                            MemorySegment send = arena.allocate(Math.max(1, t.bytes(count)), 64);
                            MemorySegment recv = inPlace ? send : arena.allocate(Math.max(1, t.bytes(count)), 64);
                            if (!inPlace) {
                                Data.poison(recv);
                            }
                            Data.fill(send, t, op, c.rank(), count);
                            c.allReduce(Buffer.of(send, count, t), Buffer.of(recv, count, t), op);
                            String err = checkReduced(recv, t, op, n, count, ref[0], ref[1],
                                    "allReduce" + (inPlace ? " in-place" : "") + " rank " + c.rank());
                            if (err != null) {
                                fail(err);
                            }
                        }
                    });
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------ reduce

    @ParameterizedTest(name = "reduce n={0} count={1}")
    @MethodSource("ranksAndCounts")
    void reduce(int n, long count) {
        int[] roots = count > 1000 ? new int[] {n - 1} : new int[] {0, n - 1};
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                double[][] ref = reference(t, op, n, count, 0);
                for (int root : roots) {
                    for (boolean inPlace : new boolean[] {false, true}) {
                        run(n, c -> {
                            try (Arena arena = Arena.ofShared()) {
                                long bytes = Math.max(1, t.bytes(count));
                                MemorySegment send = arena.allocate(bytes, 64);
                                MemorySegment recv = inPlace ? send : arena.allocate(bytes, 64);
                                Data.fill(send, t, op, c.rank(), count);
                                if (!inPlace) {
                                    Data.poison(recv);
                                }
                                c.reduce(Buffer.of(send, count, t), Buffer.of(recv, count, t), op, root);
                                if (c.rank() == root) {
                                    String err = checkReduced(recv, t, op, n, count, ref[0], ref[1], "reduce root " + root);
                                    if (err != null) {
                                        fail(err);
                                    }
                                }
                            }
                        });
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------ reduceScatter

    @ParameterizedTest(name = "reduceScatter n={0} count={1}")
    @MethodSource("ranksAndCounts")
    void reduceScatter(int n, long total) {
        long count = total / n + (total % n == 0 ? 0 : 1); // per-rank block, any value (not a divisor of anything)
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                double[][] ref = reference(t, op, n, count * n, 0);
                for (boolean inPlace : new boolean[] {false, true}) {
                    run(n, c -> {
                        try (Arena arena = Arena.ofShared()) {
                            MemorySegment send = arena.allocate(Math.max(1, t.bytes(count * n)), 64);
                            Data.fill(send, t, op, c.rank(), count * n);
                            MemorySegment recv = inPlace ? send.asSlice(t.bytes(count) * c.rank(), t.bytes(count))
                                    : arena.allocate(Math.max(1, t.bytes(count)), 64);
                            if (!inPlace) {
                                Data.poison(recv);
                            }
                            c.reduceScatter(Buffer.of(send, count * n, t), Buffer.of(recv, count, t), op);
                            double[] e = java.util.Arrays.copyOfRange(ref[0], (int) (count * c.rank()), (int) (count * (c.rank() + 1)));
                            double[] tl = java.util.Arrays.copyOfRange(ref[1], (int) (count * c.rank()), (int) (count * (c.rank() + 1)));
                            String err = checkReduced(recv, t, op, n, count, e, tl,
                                    "reduceScatter" + (inPlace ? " in-place" : "") + " rank " + c.rank());
                            if (err != null) {
                                fail(err);
                            }
                        }
                    });
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------ data movement

    /** Types whose element sizes differ (1, 2, 4, 8 bytes); data movement does not depend on anything else. */
    static DataType[] movementTypes(long count) {
        return count > 1000 ? new DataType[] {DataType.UINT8, DataType.BFLOAT16, DataType.FLOAT32, DataType.INT64}
                : DataType.values();
    }

    static void expectRankData(MemorySegment out, DataType t, int srcRank, long srcOffset, long dstOffset, long count, String what) {
        for (long i = 0; i < count; i++) {
            double want = Data.value(t, ReduceOp.SUM, srcRank, srcOffset + i);
            double got = Data.get(out, t, dstOffset + i);
            if (got != want) {
                fail(what + " " + t + ": element " + (dstOffset + i) + " is " + got + ", expected " + want + " (from rank " + srcRank
                        + ")");
            }
        }
    }

    @ParameterizedTest(name = "broadcast n={0} count={1}")
    @MethodSource("ranksAndCounts")
    void broadcast(int n, long count) {
        for (DataType t : movementTypes(count)) {
            for (int root : new int[] {0, n - 1, n / 2}) {
                for (boolean inPlace : new boolean[] {false, true}) {
                    run(n, c -> {
                        try (Arena arena = Arena.ofShared()) {
                            long bytes = Math.max(1, t.bytes(count));
                            MemorySegment send = arena.allocate(bytes, 64);
                            MemorySegment recv = inPlace ? send : arena.allocate(bytes, 64);
                            Data.fill(send, t, ReduceOp.SUM, c.rank(), count);
                            if (!inPlace || c.rank() != root) {
                                Data.poison(recv);
                            }
                            c.broadcast(Buffer.of(send, count, t), Buffer.of(recv, count, t), root);
                            expectRankData(recv, t, root, 0, 0, count, "broadcast root " + root + " rank " + c.rank());
                        }
                    });
                }
            }
        }
    }

    @ParameterizedTest(name = "allGather n={0} count={1}")
    @MethodSource("ranksAndCounts")
    void allGather(int n, long total) {
        long count = total / n + (total % n == 0 ? 0 : 1);
        for (DataType t : movementTypes(total)) {
            for (boolean inPlace : new boolean[] {false, true}) {
                run(n, c -> {
                    try (Arena arena = Arena.ofShared()) {
                        long bytes = t.bytes(count);
                        MemorySegment recv = arena.allocate(Math.max(1, bytes * n), 64);
                        Data.poison(recv);
                        MemorySegment send = inPlace ? recv.asSlice(bytes * c.rank(), bytes) : arena.allocate(Math.max(1, bytes), 64);
                        // rank r contributes elements [r*count, (r+1)*count) of its pattern
                        for (long i = 0; i < count; i++) {
                            Data.put(send, t, i, Data.value(t, ReduceOp.SUM, c.rank(), c.rank() * count + i));
                        }
                        c.allGather(Buffer.of(send, count, t), Buffer.of(recv, count * n, t));
                        for (int r = 0; r < n; r++) {
                            expectRankData(recv, t, r, r * count, r * count, count, "allGather" + (inPlace ? " in-place" : "")
                                    + " rank " + c.rank());
                        }
                    }
                });
            }
        }
    }

    @ParameterizedTest(name = "allToAll n={0} count={1}")
    @MethodSource("ranksAndCounts")
    void allToAll(int n, long total) {
        long block = total / n + (total % n == 0 ? 0 : 1);
        for (DataType t : movementTypes(total)) {
            for (boolean inPlace : new boolean[] {false, true}) {
                run(n, c -> {
                    try (Arena arena = Arena.ofShared()) {
                        long bytes = Math.max(1, t.bytes(block * n));
                        MemorySegment send = arena.allocate(bytes, 64);
                        MemorySegment recv = inPlace ? send : arena.allocate(bytes, 64);
                        // block j of rank r's send = pattern of rank r at offset j*block
                        Data.fill(send, t, ReduceOp.SUM, c.rank(), block * n);
                        if (!inPlace) {
                            Data.poison(recv);
                        }
                        c.allToAll(Buffer.of(send, block * n, t), Buffer.of(recv, block * n, t));
                        for (int r = 0; r < n; r++) {
                            expectRankData(recv, t, r, c.rank() * block, r * block, block, "allToAll" + (inPlace ? " in-place" : "")
                                    + " rank " + c.rank());
                        }
                    }
                });
            }
        }
    }

    @ParameterizedTest(name = "gather+scatter n={0} count={1}")
    @MethodSource("ranksAndCounts")
    void gatherScatter(int n, long total) {
        long count = total / n + (total % n == 0 ? 0 : 1);
        for (DataType t : movementTypes(total)) {
            for (int root : new int[] {0, n - 1}) {
                run(n, c -> {
                    try (Arena arena = Arena.ofShared()) {
                        long bytes = t.bytes(count);
                        MemorySegment send = arena.allocate(Math.max(1, bytes), 64);
                        MemorySegment all = arena.allocate(Math.max(1, bytes * n), 64);
                        Data.poison(all);
                        for (long i = 0; i < count; i++) {
                            Data.put(send, t, i, Data.value(t, ReduceOp.SUM, c.rank(), c.rank() * count + i));
                        }
                        c.gather(Buffer.of(send, count, t), Buffer.of(all, count * n, t), root);
                        if (c.rank() == root) {
                            for (int r = 0; r < n; r++) {
                                expectRankData(all, t, r, r * count, r * count, count, "gather root " + root);
                            }
                        }
                        // scatter back what the root gathered: every rank gets its own block again
                        Data.poison(send);
                        c.scatter(Buffer.of(all, count * n, t), Buffer.of(send, count, t), root);
                        expectRankData(send, t, c.rank(), c.rank() * count, 0, count, "scatter root " + root + " rank " + c.rank());
                    }
                });
            }
        }
    }

    // ------------------------------------------------------------------------------------ point-to-point, groups, barrier

    @ParameterizedTest(name = "ring send/recv in a group n={0}")
    @MethodSource("rankCounts")
    void groupedRingExchange(int n) {
        for (long count : new long[] {0, 1, 1000, 300_001}) {
            run(n, c -> {
                int right = (c.rank() + 1) % n;
                int left = (c.rank() + n - 1) % n;
                float[] out = new float[(int) count];
                float[] in = new float[(int) count];
                java.util.Arrays.fill(in, Float.NaN);
                for (int i = 0; i < count; i++) {
                    out[i] = c.rank() * 1000f + i % 1000;
                }
                try (var g = c.group()) {
                    c.send(Buffer.of(out), right);
                    c.recv(Buffer.of(in), left);
                }
                for (int i = 0; i < count; i++) {
                    assertEquals(left * 1000f + i % 1000, in[i], "element " + i + " from rank " + left);
                }
            });
        }
    }

    Stream<Integer> rankCounts() {
        return java.util.Arrays.stream(ranks()).boxed();
    }

    @ParameterizedTest(name = "allToAllv via send/recv and collective n={0}")
    @MethodSource("rankCounts")
    void allToAllv(int n) {
        run(n, c -> {
            int me = c.rank();
            // rank i sends (i + j) % 3 * 5 elements to rank j (zero-sized blocks included)
            long[] sc = new long[n];
            long[] sd = new long[n];
            long[] rc = new long[n];
            long[] rd = new long[n];
            long so = 0;
            long ro = 0;
            for (int j = 0; j < n; j++) {
                sc[j] = ((me + j) % 3) * 5L;
                sd[j] = so;
                so += sc[j] + 1; // gaps between blocks
                rc[j] = ((j + me) % 3) * 5L;
                rd[j] = ro;
                ro += rc[j] + 2;
            }
            long[] send = new long[(int) Math.max(so, 1)];
            long[] recv = new long[(int) Math.max(ro, 1)];
            java.util.Arrays.fill(recv, -1);
            for (int j = 0; j < n; j++) {
                for (long k = 0; k < sc[j]; k++) {
                    send[(int) (sd[j] + k)] = me * 1_000_000L + j * 1000L + k;
                }
            }
            c.allToAllv(Buffer.of(send), sc, sd, Buffer.of(recv), rc, rd);
            for (int i = 0; i < n; i++) {
                for (long k = 0; k < rc[i]; k++) {
                    assertEquals(i * 1_000_000L + me * 1000L + k, recv[(int) (rd[i] + k)], "from rank " + i + " element " + k);
                }
                if (i + 1 < n) {
                    assertEquals(-1, recv[(int) (rd[i] + rc[i])], "gap after block " + i + " was overwritten");
                }
            }
        });
    }

    @ParameterizedTest(name = "barrier n={0}")
    @MethodSource("rankCounts")
    void barrierOrdersSideEffects(int n) {
        java.util.concurrent.atomic.AtomicIntegerArray arrived = new java.util.concurrent.atomic.AtomicIntegerArray(4);
        run(n, c -> {
            for (int round = 0; round < 4; round++) {
                arrived.incrementAndGet(round);
                c.barrier();
                // nobody leaves round k before everybody arrived in it
                assertEquals(n, arrived.get(round), "round " + round + " rank " + c.rank());
            }
        });
    }

    @ParameterizedTest(name = "async ops complete in issue order n={0}")
    @MethodSource("rankCounts")
    void asyncInOrder(int n) {
        run(n, c -> {
            int k = 20;
            List<org.jccl.Work> works = new ArrayList<>();
            List<double[]> bufs = new ArrayList<>();
            for (int i = 0; i < k; i++) {
                double[] x = new double[1000 + i];
                java.util.Arrays.fill(x, c.rank() + i);
                bufs.add(x);
                works.add(c.allReduceAsync(Buffer.of(x), Buffer.of(x), ReduceOp.SUM));
            }
            works.get(k - 1).join();
            for (int i = 0; i < k; i++) {
                assertTrue(works.get(i).isDone(), "op " + i + " not done although a later one is");
                works.get(i).join();
                double want = n * (n - 1) / 2.0 + (double) n * i;
                for (double v : bufs.get(i)) {
                    assertEquals(want, v, "op " + i);
                }
            }
        });
    }

    /**
     * A stream of asynchronous sends and receives around a ring (each rank receives from its left and sends
     * to its right, 120 of each, sizes from 0 to about 9 KB, an asynchronous all-reduce in the middle,
     * issued so that it completes even when each operation waits before the next is posted): the
     * runtime posts consecutive queued sends and receives together (Executor#runHead); every Work must
     * still complete in issue order, every message must land in its own buffer, and the all-reduce must
     * see the sends before it completed.
     */
    @ParameterizedTest(name = "async sends and receives complete in issue order n={0}")
    @MethodSource("rankCounts")
    void asyncSendsAndReceivesCompleteInIssueOrder(int n) {
        org.junit.jupiter.api.Assumptions.assumeTrue(n > 1, "one rank: a send to itself needs a group");
        run(n, c -> {
            int right = (c.rank() + 1) % n;
            int left = (c.rank() + n - 1) % n;
            int k = 120;
            List<org.jccl.Work> works = new ArrayList<>();
            List<int[]> in = new ArrayList<>();
            int[] sum = {c.rank() + 1};
            for (int i = 0; i < k; i++) {
                int len = i % 11 == 0 ? 0 : 1 + (i * 193) % 2300;
                int[] out = new int[len];
                for (int j = 0; j < len; j++) {
                    out[j] = c.rank() * 1_000_000 + i * 3000 + j;
                }
                int[] got = new int[len];
                java.util.Arrays.fill(got, -1);
                in.add(got);
                // Each message goes round the ring as it would one operation at a time (rank 0 sends first, every
                // other rank receives first): nothing may depend on the runtime posting later operations early.
                if (c.rank() == 0) {
                    works.add(c.sendAsync(Buffer.of(out), right));
                    works.add(c.recvAsync(Buffer.of(got), left));
                } else {
                    works.add(c.recvAsync(Buffer.of(got), left));
                    works.add(c.sendAsync(Buffer.of(out), right));
                }
                if (i == k / 2) {
                    works.add(c.allReduceAsync(Buffer.of(sum), Buffer.of(sum), ReduceOp.SUM));
                }
            }
            works.get(works.size() - 1).join();
            for (int w = 0; w < works.size(); w++) {
                assertTrue(works.get(w).isDone(), "operation " + w + " is not done although the last one is");
                works.get(w).join();
            }
            assertEquals(n * (n + 1) / 2, sum[0], "the all-reduce in the middle of the stream");
            for (int i = 0; i < k; i++) {
                int[] got = in.get(i);
                for (int j = 0; j < got.length; j++) {
                    assertEquals(left * 1_000_000 + i * 3000 + j, got[j], "message " + i + " from rank " + left + ", element " + j);
                }
            }
        });
    }

    /**
     * The in-flight bound (JCCL_MAX_INFLIGHT): rank 0 issues far more asynchronous all-reduces than
     * the bound as fast as it can, the other ranks make the same calls slowly, blocking, one every 0.3 ms. Rank 0
     * must be held back at the bound (never more in flight, the bound reached, and its last call issued only
     * after rank 1 had made all but the bound's number of its calls), and every result must be right.
     */
    @ParameterizedTest(name = "async calls are held at the in-flight bound n={0}")
    @MethodSource("fewestRanks")
    void asyncCallsAreHeldAtTheInFlightBound(int n) {
        int limit = 4;
        int ops = 120;
        java.util.concurrent.atomic.AtomicInteger slowIssued = new java.util.concurrent.atomic.AtomicInteger();
        List<Communicator> cs = Jccl.initLocal(n, config().with("JCCL_MAX_INFLIGHT", Integer.toString(limit)));
        try {
            Ranks.run(cs, STEP_TIMEOUT, c -> {
                org.jccl.internal.runtime.CommunicatorImpl impl = (org.jccl.internal.runtime.CommunicatorImpl) c;
                List<org.jccl.Work> works = new ArrayList<>();
                List<long[]> bufs = new ArrayList<>();
                for (int i = 0; i < ops; i++) {
                    long[] x = {i, 1000L * c.rank() + i};
                    bufs.add(x);
                    if (c.rank() == 0) {
                        works.add(c.allReduceAsync(Buffer.of(x), Buffer.of(x), ReduceOp.SUM));
                        int inFlight = impl.inFlight();
                        if (inFlight > limit) {
                            cs.forEach(Communicator::abort); // the slow ranks would otherwise wait for calls that never come
                            fail("rank 0 has " + inFlight + " operations in flight after issuing #" + i + ", more than JCCL_MAX_INFLIGHT="
                                    + limit);
                        }
                    } else {
                        java.util.concurrent.locks.LockSupport.parkNanos(300_000);
                        if (c.rank() == 1) {
                            slowIssued.incrementAndGet();
                        }
                        c.allReduce(x, ReduceOp.SUM);
                    }
                }
                if (c.rank() == 0) {
                    int seen = slowIssued.get();
                    assertTrue(seen >= ops - limit, "rank 0 issued its " + ops + " calls while rank 1 had made only " + seen
                            + ": it was not held back at " + limit + " in flight");
                    assertEquals(limit, impl.inFlightHighWater(), "most operations in flight at once on rank 0");
                }
                for (int i = 0; i < works.size(); i++) {
                    works.get(i).join();
                }
                for (int i = 0; i < ops; i++) {
                    long[] want = {(long) n * i, 1000L * n * (n - 1) / 2 + (long) n * i};
                    org.junit.jupiter.api.Assertions.assertArrayEquals(want, bufs.get(i), "rank " + c.rank() + " op " + i);
                }
            });
        } finally {
            cs.forEach(Communicator::close);
        }
    }

    /**
     * An asynchronous operation whose caller never waits for it still runs (the operation thread
     * starts what its caller left queued, JCCL_OP_THREAD_DELAY_US): rank 0 issues an all-reduce and
     * then only polls {@code isDone()}, the other ranks make the blocking call; all finish.
     */
    @ParameterizedTest(name = "an async operation runs while its caller does not wait n={0}")
    @MethodSource("fewestRanks")
    void anAsyncOperationRunsWhileItsCallerDoesNotWait(int n) {
        run(n, c -> {
            c.barrier();
            float[] x = {1f, c.rank()};
            if (c.rank() == 0) {
                org.jccl.Work w = c.allReduceAsync(Buffer.of(x), Buffer.of(x), ReduceOp.SUM);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (!w.isDone()) {
                    assertTrue(System.nanoTime() - deadline < 0, "the all-reduce of a caller that does not wait never ran");
                    Thread.sleep(1);
                }
                w.join();
            } else {
                c.allReduce(x, ReduceOp.SUM);
            }
            assertEquals(n, x[0]);
            assertEquals(n * (n - 1) / 2f, x[1]);
        });
    }

    /**
     * One thread drives every rank (as jccl-cuda's staged group does: it issues one asynchronous call per
     * communicator, then joins them in turn): the thread joining rank 0's all-reduce runs it and waits in it
     * for the others, whose calls nobody joins yet, so their operation threads must start them.
     */
    @ParameterizedTest(name = "one thread drives every rank n={0}")
    @MethodSource("fewestRanks")
    void oneThreadDrivesEveryRank(int n) throws Exception {
        List<Communicator> cs = comms(n);
        java.util.concurrent.Future<?> f = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "driver");
            t.setDaemon(true);
            return t;
        }).submit(() -> {
            for (int round = 0; round < 20; round++) {
                List<org.jccl.Work> works = new ArrayList<>();
                List<long[]> bufs = new ArrayList<>();
                for (Communicator c : cs) {
                    long[] x = {c.rank() + round, 1};
                    bufs.add(x);
                    works.add(c.allReduceAsync(Buffer.of(x), Buffer.of(x), ReduceOp.SUM));
                }
                for (int r = 0; r < n; r++) {
                    works.get(r).join();
                    org.junit.jupiter.api.Assertions.assertArrayEquals(new long[] {(long) n * (n - 1) / 2 + (long) n * round, n},
                            bufs.get(r), "round " + round + " rank " + r);
                }
            }
            return null;
        });
        try {
            f.get(STEP_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            cs.forEach(Communicator::abort);
            synchronized (this) {
                comms.remove(n);
            }
            fail("one thread driving " + n + " ranks did not finish within " + STEP_TIMEOUT);
        } catch (java.util.concurrent.ExecutionException e) {
            throw new AssertionError(e.getCause());
        }
    }

    /** The smallest rank count of the sweep with more than one rank. */
    Stream<Integer> fewestRanks() {
        return multiRankCounts().limit(1);
    }

    Stream<Integer> multiRankCounts() {
        return java.util.Arrays.stream(ranks()).filter(n -> n >= 2).boxed();
    }

    /**
     * A small blocking call runs inline and reads no clock unless it waits (FlightRecorder's class
     * comment): one that waits 50 ms for a late rank must still have its times, from its wait's first
     * clock read, whatever the transport's way of waiting.
     */
    @ParameterizedTest(name = "a small blocking call that waits is timed in the flight recorder n={0}")
    @MethodSource("multiRankCounts")
    void aSmallBlockingCallThatWaitsIsTimedInTheFlightRecorder(int n) {
        run(n, c -> {
            c.barrier();
            if (c.rank() == n - 1) {
                // 200 ms, of which the check below asks for 40: a rank may leave the barrier well after the last one does
                // (through the leaders of a hierarchical barrier, or descheduled on a loaded machine: 11 ms seen in CI).
                Thread.sleep(200);
            }
            float[] x = {1f, c.rank()};
            c.allReduce(x, ReduceOp.SUM);
            assertEquals(n, x[0]);
            assertEquals(n * (n - 1) / 2.0f, x[1]);
            if (c.rank() != n - 1) {
                org.jccl.internal.control.FlightRecorder rec = ((org.jccl.internal.runtime.CommunicatorImpl) c).flightRecorder();
                org.jccl.internal.control.FlightRecorder.Entry e = rec.entry(rec.lastFinished());
                assertEquals("allReduce", e.name(), e.toString());
                assertEquals(org.jccl.internal.control.FlightRecorder.State.DONE, e.state(), e.toString());
                assertTrue(e.issuedNs() != 0 && e.startNs() != 0 && e.endNs() != 0, "rank " + c.rank() + ": untimed " + e);
                long waitedMs = (e.endNs() - e.startNs()) / 1_000_000;
                assertTrue(waitedMs >= 40 && waitedMs < 20_000, "rank " + c.rank() + " waited about 200 ms for the last rank, the recorder says "
                        + waitedMs + " ms: " + e);
            }
        });
    }
}
