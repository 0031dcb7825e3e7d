package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.internal.guard.OpGuard;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The always-on mismatch guard ({@code JCCL_CHECK} at its default), written once and run over every
 * transport and path (one subclass each, as {@link CollectiveConformance}): ranks call the same
 * collective with a different count (by one element, and by more than a chunk, so that messages of
 * equal size meet on some link), a different data type of the same size (float vs int32, which
 * would otherwise "succeed" with garbage), a different reduction op, or a different root, each for
 * the collectives that have that argument. Every rank must fail, none may hang or return, with a
 * MISMATCH that names both calls. Fresh communicators per case: a mismatch aborts them.
 *
 * <p>Removing any of the checks makes these tests fail: without the guard the type and op cases
 * return wrong results without an error, and the count cases fail with a size error (not MISMATCH),
 * hang, or return partly reduced data ({@link MismatchGuardOffTest} shows it with the guard off).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
public abstract class MismatchGuardConformance {
    static final Duration STEP = Duration.ofSeconds(60);

    /** The settings that make ranks of one JVM use the transport or path under test (the guard at its default). */
    protected abstract Config config();

    /** The settings for {@code n} ranks (a layout of hosts may depend on it). */
    protected Config config(int n) {
        return config();
    }

    /** Rank counts the cases run with. */
    protected int[] ranks() {
        return new int[] {2, 3};
    }

    /**
     * One call: collective {@code name} of {@code count} elements (the per-rank count the API takes:
     * allGather's and gather's send, reduceScatter's and scatter's receive, allToAll's block per rank)
     * of {@code type}, with {@code op} (null: none) and {@code root} (-1: none).
     */
    record Call(String name, long count, DataType type, ReduceOp op, int root) {
        /** The words the error names this call by (OpGuard's description). */
        String described(int n) {
            long total = switch (name) {
                case "allGather", "reduceScatter", "allToAll", "gather", "scatter" -> count * n;
                default -> count;
            };
            return OpGuard.describe(OpGuard.collective(name, total, type, op, root));
        }

        boolean rooted() {
            return root >= 0;
        }

        /**
         * Whether rank {@code r}'s own result of this call cannot depend on another rank (a broadcast's or scatter's
         * root: its output is its own input; a reduce's or gather's leaf: no output; 0 elements): such a rank
         * returns without waiting for the guard's ring confirmation (OpGuard.needsConfirmation), so with a
         * mismatch it may return (its result right) and fail at its next call or at close().
         */
        boolean standsAlone(int r) {
            return count == 0 || switch (name) {
                case "broadcast", "scatter" -> r == root;
                case "reduce", "gather" -> r != root;
                default -> false;
            };
        }
    }

    private static Call call(String name, long count, DataType type, ReduceOp op, int root) {
        return new Call(name, count, type, op, root);
    }

    /** What every rank but rank 1 calls, and what rank 1 calls instead. */
    enum Case {
        ALLREDUCE_COUNT_BY_ONE(call("allReduce", 1000, DataType.FLOAT32, ReduceOp.SUM, -1),
                call("allReduce", 1001, DataType.FLOAT32, ReduceOp.SUM, -1)),
        /** 800 KB against 1.2 MB: more than a chunk (512 KiB), so some chunks of both have the same size. */
        ALLREDUCE_COUNT_BY_CHUNKS(call("allReduce", 200_000, DataType.FLOAT32, ReduceOp.SUM, -1),
                call("allReduce", 300_000, DataType.FLOAT32, ReduceOp.SUM, -1)),
        ALLREDUCE_TYPE(call("allReduce", 1000, DataType.FLOAT32, ReduceOp.SUM, -1), call("allReduce", 1000, DataType.INT32, ReduceOp.SUM, -1)),
        ALLREDUCE_OP(call("allReduce", 1000, DataType.FLOAT32, ReduceOp.SUM, -1), call("allReduce", 1000, DataType.FLOAT32, ReduceOp.MAX, -1)),
        BROADCAST_ROOT(call("broadcast", 1000, DataType.FLOAT32, null, 0), call("broadcast", 1000, DataType.FLOAT32, null, 1)),
        BROADCAST_COUNT_BY_CHUNKS(call("broadcast", 200_000, DataType.FLOAT32, null, 0), call("broadcast", 300_000, DataType.FLOAT32, null, 0)),
        BROADCAST_TYPE(call("broadcast", 1000, DataType.FLOAT32, null, 0), call("broadcast", 1000, DataType.INT32, null, 0)),
        REDUCE_ROOT(call("reduce", 1000, DataType.INT64, ReduceOp.SUM, 0), call("reduce", 1000, DataType.INT64, ReduceOp.SUM, 1)),
        REDUCE_OP(call("reduce", 1000, DataType.FLOAT64, ReduceOp.SUM, 0), call("reduce", 1000, DataType.FLOAT64, ReduceOp.PROD, 0)),
        REDUCE_COUNT_BY_ONE(call("reduce", 1000, DataType.INT32, ReduceOp.SUM, 0), call("reduce", 1001, DataType.INT32, ReduceOp.SUM, 0)),
        ALLGATHER_COUNT_BY_ONE(call("allGather", 1000, DataType.INT32, null, -1), call("allGather", 1001, DataType.INT32, null, -1)),
        ALLGATHER_TYPE(call("allGather", 1000, DataType.FLOAT32, null, -1), call("allGather", 1000, DataType.UINT32, null, -1)),
        REDUCESCATTER_COUNT_BY_CHUNKS(call("reduceScatter", 100_000, DataType.FLOAT32, ReduceOp.SUM, -1),
                call("reduceScatter", 150_000, DataType.FLOAT32, ReduceOp.SUM, -1)),
        REDUCESCATTER_OP(call("reduceScatter", 1000, DataType.INT32, ReduceOp.MIN, -1), call("reduceScatter", 1000, DataType.INT32, ReduceOp.MAX, -1)),
        ALLTOALL_COUNT_BY_ONE(call("allToAll", 100, DataType.INT32, null, -1), call("allToAll", 101, DataType.INT32, null, -1)),
        ALLTOALL_TYPE(call("allToAll", 100, DataType.FLOAT32, null, -1), call("allToAll", 100, DataType.INT32, null, -1)),
        GATHER_ROOT(call("gather", 100, DataType.INT32, null, 0), call("gather", 100, DataType.INT32, null, 1)),
        SCATTER_ROOT(call("scatter", 100, DataType.INT32, null, 0), call("scatter", 100, DataType.INT32, null, 1)),
        SCATTER_COUNT_BY_ONE(call("scatter", 100, DataType.INT32, null, 0), call("scatter", 101, DataType.INT32, null, 0)),
        REDUCE_TYPE(call("reduce", 1000, DataType.FLOAT32, ReduceOp.SUM, 0), call("reduce", 1000, DataType.INT32, ReduceOp.SUM, 0)),
        REDUCESCATTER_TYPE(call("reduceScatter", 1000, DataType.FLOAT64, ReduceOp.SUM, -1),
                call("reduceScatter", 1000, DataType.INT64, ReduceOp.SUM, -1)),
        GATHER_COUNT_BY_ONE(call("gather", 100, DataType.INT32, null, 0), call("gather", 101, DataType.INT32, null, 0)),
        GATHER_TYPE(call("gather", 100, DataType.FLOAT32, null, 0), call("gather", 100, DataType.INT32, null, 0)),
        SCATTER_TYPE(call("scatter", 100, DataType.FLOAT16, null, 0), call("scatter", 100, DataType.BFLOAT16, null, 0)),
        /** A rank with no elements at all (nothing moves on it: the guard's ring confirmation and backstop). */
        ALLREDUCE_ZERO(call("allReduce", 1000, DataType.FLOAT32, ReduceOp.SUM, -1), call("allReduce", 0, DataType.FLOAT32, ReduceOp.SUM, -1));

        final Call agreed;
        final Call deviant;

        Case(Call agreed, Call deviant) {
            this.agreed = agreed;
            this.deviant = deviant;
        }
    }

    /** Cases this path runs (a path without some collective's form overrides it). */
    protected Stream<Case> cases() {
        return Stream.of(Case.values());
    }

    Stream<Arguments> matrix() {
        return java.util.Arrays.stream(ranks()).boxed().flatMap(n -> cases().map(k -> Arguments.of(n, k)));
    }

    /**
     * Runs {@code c} on {@code comm} with buffers in {@code arena}, filled with this rank's values (every byte
     * rank + 1; receive buffers 0); returns the buffer that holds this rank's result.
     */
    static MemorySegment invoke(Communicator comm, Call c, Arena arena) {
        int n = comm.size();
        long cnt = c.count;
        Buffer out;
        switch (c.name) {
            case "allReduce" -> comm.allReduce(buf(arena, cnt, c.type, comm.rank()), out = buf(arena, cnt, c.type, -1), c.op);
            case "broadcast" -> comm.broadcast(out = buf(arena, cnt, c.type, comm.rank()), c.root);
            case "reduce" -> comm.reduce(buf(arena, cnt, c.type, comm.rank()), out = buf(arena, cnt, c.type, -1), c.op, c.root);
            case "allGather" -> comm.allGather(buf(arena, cnt, c.type, comm.rank()), out = buf(arena, cnt * n, c.type, -1));
            case "reduceScatter" -> comm.reduceScatter(buf(arena, cnt * n, c.type, comm.rank()), out = buf(arena, cnt, c.type, -1), c.op);
            case "allToAll" -> comm.allToAll(buf(arena, cnt * n, c.type, comm.rank()), out = buf(arena, cnt * n, c.type, -1));
            case "gather" -> comm.gather(buf(arena, cnt, c.type, comm.rank()), out = buf(arena, cnt * n, c.type, -1), c.root);
            case "scatter" -> comm.scatter(buf(arena, cnt * n, c.type, comm.rank()), out = buf(arena, cnt, c.type, -1), c.root);
            default -> throw new IllegalArgumentException(c.name);
        }
        return out.segment();
    }

    /**
     * The result a rank that returned from {@code c} must hold, where the agreed call defines one: a broadcast's
     * output is its root's bytes (root + 1), a scatter's the root's block (root + 1); null where there is
     * none to check (a reduce's or gather's leaf, 0 elements) or where the call has no single right answer here.
     */
    static Byte expectedByte(Call c, int r) {
        if (c.count == 0) {
            return null;
        }
        return switch (c.name) {
            case "broadcast", "scatter" -> (byte) (c.root + 1);
            default -> null;
        };
    }

    /** Every byte of {@code out} is {@code b}, else fails naming rank, call and the first wrong byte. */
    static void assertAllBytes(int r, String call, MemorySegment out, byte b) {
        for (long i = 0; i < out.byteSize(); i++) {
            byte got = out.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i);
            if (got != b) {
                fail("rank " + r + " returned from " + call + " with a wrong result: byte " + i + " of " + out.byteSize() + " is " + got
                        + ", expected " + b);
            }
        }
    }

    private static Buffer buf(Arena arena, long count, DataType t, int fill) {
        MemorySegment s = arena.allocate(Math.max(1, t.bytes(count)), 64);
        s.fill((byte) (fill + 1));
        return Buffer.of(s.asSlice(0, t.bytes(count)), count, t);
    }

    /**
     * n ranks; rank 1 makes the deviant call, the others the agreed one, after one agreed all-reduce
     * that must work. Every rank must then fail with MISMATCH naming both calls, from the call itself or,
     * where the call may return, from its next call: a rank whose own result of its call stands alone
     * ({@link Call#standsAlone}: it does not wait for the ring confirmation), or, in a rooted call on 3+
     * ranks, a rank that only met agreeing ranks. A rank that returned must hold the right result.
     * {@code closeNext}: the next call is close() itself (no abort() before it), which must then throw.
     */
    private void mismatch(int n, Case k, boolean closeNext) {
        List<Communicator> cs = Jccl.initLocal(n, config(n).with("JCCL_INIT_TIMEOUT", "30"));
        Map<Integer, Throwable> errors = new ConcurrentHashMap<>();
        Map<Integer, Throwable> next = new ConcurrentHashMap<>();
        try (Arena arena = Arena.ofShared()) {
            try {
                Ranks.run(cs, STEP, c -> {
                    float[] warm = {c.rank() + 1f};
                    c.allReduce(Buffer.of(warm), ReduceOp.SUM);
                    assertEquals(n * (n + 1) / 2f, warm[0], "the agreed all-reduce before the mismatch");
                    Call mine = c.rank() == 1 ? k.deviant : k.agreed;
                    MemorySegment out;
                    try {
                        out = invoke(c, mine, arena);
                    } catch (JcclException e) {
                        errors.put(c.rank(), e);
                        return;
                    }
                    Byte want = expectedByte(mine, c.rank());
                    if (want != null) {
                        assertAllBytes(c.rank(), mine.described(n), out, want);
                    }
                    try {
                        if (closeNext) {
                            c.close();
                            next.put(c.rank(), new AssertionError("close() after the mismatch returned normally"));
                        } else {
                            c.barrier();
                            next.put(c.rank(), new AssertionError("the call after the mismatch returned too"));
                        }
                    } catch (JcclException e) {
                        next.put(c.rank(), e);
                    }
                });
            } finally {
                cs.forEach(Communicator::abort);
                cs.forEach(Communicator::close);
            }
        }
        String agreed = k.agreed.described(n);
        String deviant = k.deviant.described(n);
        // Ranks that may close() normally right after the call (see below): while they do, a rank still waiting in the
        // mismatched call for one of them may fail because its link closed before any report reached it.
        java.util.Set<Integer> closedQuietly = new java.util.HashSet<>();
        for (int r = 0; r < n; r++) {
            if (closeNext && errors.get(r) == null && !(next.get(r) instanceof JcclException)) {
                closedQuietly.add(r);
            }
        }
        for (int r = 0; r < n; r++) {
            Throwable e = errors.get(r);
            if (e != null && !closedQuietly.isEmpty() && e instanceof org.jccl.PeerFailedException pf
                    && closedQuietly.stream().anyMatch(q -> pf.getMessage().contains("rank " + q + " "))) {
                continue;
            }
            if (e == null) {
                Call mine = r == 1 ? k.deviant : k.agreed;
                // A rank whose result stands alone returns without the ring confirmation (OpGuard.needsConfirmation); on
                // 3+ ranks a rank of a rooted call may return when it met agreeing ranks only. Nobody else may return.
                boolean mayReturn = mine.standsAlone(r) || (n > 2 && k.agreed.rooted() && k.deviant.rooted() && r != 1);
                if (!mayReturn) {
                    fail("rank " + r + " of " + n + " returned from " + (r == 1 ? deviant : agreed) + " (the others: "
                            + (r == 1 ? agreed : deviant) + ")" + (next.containsKey(r) ? "; its next call: " + next.get(r) : ""));
                }
                e = next.get(r);
                if (closeNext && !(e instanceof JcclException) && n > 2 && r != 1 && (r + n - 1) % n != 1) {
                    // A rank that met agreeing ranks only, and whose ring predecessor agrees too, may close before any
                    // report reaches it (close() is not collective); the ranks next to rank 1 may not.
                    continue;
                }
                assertTrue(e instanceof JcclException, "rank " + r + ": returned, and its next " + (closeNext ? "close()" : "call") + ": " + e);
            }
            assertMismatch(r, e, agreed, deviant);
        }
    }

    @ParameterizedTest(name = "{0} ranks {1}")
    @MethodSource("matrix")
    void everyRankFailsNamingBothCalls(int n, Case k) {
        mismatch(n, k, false);
    }

    /**
     * A program that ends right after the mismatched call: every rank whose call returned (its result right) fails
     * in close() with the MISMATCH naming both calls, none ends quietly. The rooted cases and 0 elements, whose
     * calls may return.
     */
    @ParameterizedTest(name = "{0} ranks {1}")
    @MethodSource("returningMatrix")
    void closeRightAfterTheMismatchThrowsOnEveryRankThatReturned(int n, Case k) {
        mismatch(n, k, true);
    }

    Stream<Arguments> returningMatrix() {
        return matrix().filter(a -> {
            Case k = (Case) a.get()[1];
            return k.agreed.rooted() || k.agreed.count == 0 || k.deviant.count == 0;
        });
    }

    /**
     * No false positives: arguments that legitimately differ between ranks never trip the guard. allToAllv
     * with per-rank counts (some 0), a send and its receive of different types of one size, root-only
     * buffers (null elsewhere), in place on one rank and out of place on the others, collectives of 0
     * elements on every rank, a group of collectives, point-to-point calls between collectives, the
     * barrier; every result checked.
     */
    @ParameterizedTest(name = "{0} ranks")
    @MethodSource("rankCounts")
    void legitimateDifferencesPass(int n) {
        List<Communicator> cs = Jccl.initLocal(n, config(n).with("JCCL_INIT_TIMEOUT", "30"));
        try {
            Ranks.run(cs, STEP, c -> {
                int r = c.rank();
                for (int round = 0; round < 2; round++) {
                    // allToAllv: rank r sends (r + q) % 3 elements to q
                    long[] sc = new long[n];
                    long[] sd = new long[n];
                    long[] rc = new long[n];
                    long[] rd = new long[n];
                    long so = 0;
                    long ro = 0;
                    for (int q = 0; q < n; q++) {
                        sc[q] = (r + q) % 3;
                        sd[q] = so;
                        so += sc[q];
                        rc[q] = (q + r) % 3;
                        rd[q] = ro;
                        ro += rc[q];
                    }
                    int[] sv = new int[(int) Math.max(1, so)];
                    for (int q = 0; q < n; q++) {
                        for (int i = 0; i < sc[q]; i++) {
                            sv[(int) sd[q] + i] = 1000 * r + 10 * q + i;
                        }
                    }
                    int[] rv = new int[(int) Math.max(1, ro)];
                    c.allToAllv(Buffer.of(sv), sc, sd, Buffer.of(rv), rc, rd);
                    for (int q = 0; q < n; q++) {
                        for (int i = 0; i < rc[q]; i++) {
                            assertEquals(1000 * q + 10 * r + i, rv[(int) rd[q] + i], "allToAllv from rank " + q);
                        }
                    }
                    // a send of int32 received as float32 (same bytes)
                    if (r == 0) {
                        c.send(Buffer.of(new int[] {Float.floatToRawIntBits(1.5f), Float.floatToRawIntBits(-2f)}), 1);
                    } else if (r == 1) {
                        float[] got = new float[2];
                        c.recv(Buffer.of(got), 0);
                        assertEquals(1.5f, got[0]);
                        assertEquals(-2f, got[1]);
                    }
                    // root-only buffers
                    float[] b = new float[4];
                    java.util.Arrays.fill(b, r == 1 ? 7f : -1f);
                    c.broadcast(r == 1 ? Buffer.of(b.clone()) : null, Buffer.of(b), 1);
                    assertEquals(7f, b[3], "broadcast with the send buffer on the root only");
                    long[] red = new long[3];
                    c.reduce(Buffer.of(new long[] {r, r, r}), r == 0 ? Buffer.of(red) : null, ReduceOp.SUM, 0);
                    if (r == 0) {
                        assertEquals((long) n * (n - 1) / 2, red[2], "reduce with the receive buffer on the root only");
                    }
                    int[] gathered = new int[n];
                    c.gather(Buffer.of(new int[] {r * 3}), r == n - 1 ? Buffer.of(gathered) : null, n - 1);
                    if (r == n - 1) {
                        assertEquals(3 * (n - 1), gathered[n - 1]);
                    }
                    int[] mine = new int[1];
                    int[] all = new int[n];
                    for (int q = 0; q < n; q++) {
                        all[q] = q * 5;
                    }
                    c.scatter(r == 0 ? Buffer.of(all) : null, Buffer.of(mine), 0);
                    assertEquals(5 * r, mine[0]);
                    // in place on rank 0, out of place elsewhere
                    double[] x = {r, 1};
                    double[] y = new double[2];
                    if (r == 0) {
                        c.allReduce(Buffer.of(x), ReduceOp.SUM);
                        y = x;
                    } else {
                        c.allReduce(Buffer.of(x), Buffer.of(y), ReduceOp.SUM);
                    }
                    assertEquals(n, y[1]);
                    int[] ag = new int[n];
                    if (r == 0) {
                        ag[0] = 11;
                        c.allGather(Buffer.of(MemorySegment.ofArray(ag).asSlice(0, 4), 1, DataType.INT32), Buffer.of(ag));
                    } else {
                        c.allGather(Buffer.of(new int[] {11 * (r + 1)}), Buffer.of(ag));
                    }
                    assertEquals(11 * n, ag[n - 1]);
                    // 0 elements on every rank (the guard's ring confirmation agrees), and the barrier
                    c.allReduce(Buffer.of(new float[0]), ReduceOp.SUM);
                    c.broadcast(Buffer.of(new float[0]), n - 1);
                    c.reduce(Buffer.of(new int[0]), Buffer.of(new int[0]), ReduceOp.MAX, 0);
                    c.barrier();
                    // a group of collectives and point-to-point calls
                    float[] g1 = {r};
                    int[] g2 = new int[2];
                    int[] ring = new int[1];
                    try (org.jccl.Group g = c.group()) {
                        c.allReduce(Buffer.of(g1), ReduceOp.MAX);
                        c.send(Buffer.of(new int[] {r}), (r + 1) % n);
                        c.recv(Buffer.of(ring), (r + n - 1) % n);
                        c.broadcast(Buffer.of(g2), 0);
                    }
                    assertEquals(n - 1f, g1[0]);
                    assertEquals((r + n - 1) % n, ring[0]);
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
    }

    Stream<Integer> rankCounts() {
        return java.util.Arrays.stream(ranks()).boxed();
    }

    Stream<Integer> rankCountsAbove2() {
        return rankCounts().filter(n -> n > 2);
    }

    /**
     * A leaf of the agreed gather (root 0) returns without waiting and sends to the deviant root (rank 1,
     * root 1) before that root starts its gather, while the agreed root is later still: rank 1 meets the
     * leaf's send, not its gather, so that message cannot tell it what the leaf called; it must not blame
     * the send. Every rank's error names both gathers (the hub compares every rank's word of the call).
     * Where a transport's send waits for its receiver (in one JVM), the root's confirmation comes first.
     */
    @ParameterizedTest(name = "{0} ranks")
    @MethodSource("rankCountsAbove2")
    void aLeafAheadOfALateDeviantRootIsNotBlamedForItsNextCall(int n) {
        Case k = Case.GATHER_ROOT;
        List<Communicator> cs = Jccl.initLocal(n, config(n).with("JCCL_INIT_TIMEOUT", "30"));
        Map<Integer, Throwable> errors = new ConcurrentHashMap<>();
        try (Arena arena = Arena.ofShared()) {
            try {
                Ranks.run(cs, STEP, c -> {
                    int r = c.rank();
                    float[] warm = {1f};
                    c.allReduce(Buffer.of(warm), ReduceOp.SUM);
                    assertEquals(n, warm[0], "the agreed all-reduce before the mismatch");
                    try {
                        if (r <= 1) {
                            Thread.sleep(r == 0 ? 600 : 300);
                        }
                        invoke(c, r == 1 ? k.deviant : k.agreed, arena);
                        if (r == 2) {
                            c.send(Buffer.of(new int[4]), 1); // may return: the message waits at rank 1
                        } else if (r == 1) {
                            c.recv(Buffer.of(new int[4]), 2);
                        }
                        c.barrier();
                        errors.put(r, new AssertionError("rank " + r + ": the gather and the calls after it returned"));
                    } catch (JcclException e) {
                        errors.put(r, e);
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                });
            } finally {
                cs.forEach(Communicator::abort);
                cs.forEach(Communicator::close);
            }
        }
        String p2p = org.jccl.internal.guard.OpGuard.describe(org.jccl.internal.guard.OpGuard.p2p());
        for (int r = 0; r < n; r++) {
            Throwable e = errors.get(r);
            assertMismatch(r, e, k.agreed.described(n), k.deviant.described(n));
            assertFalse(e.getMessage().contains("called " + p2p), "rank " + r + " blames the send after the gather: " + e.getMessage());
        }
    }

    /** Collectives inside a group are calls of their own: a count that differs there fails every rank too. */
    @ParameterizedTest(name = "{0} ranks")
    @MethodSource("rankCounts")
    void groupedCollectivesAreGuarded(int n) {
        List<Communicator> cs = Jccl.initLocal(n, config(n).with("JCCL_INIT_TIMEOUT", "30"));
        Map<Integer, Throwable> errors = new ConcurrentHashMap<>();
        try {
            Ranks.run(cs, STEP, c -> {
                try (org.jccl.Group g = c.group()) {
                    c.allReduce(Buffer.of(new float[c.rank() == 1 ? 1001 : 1000]), ReduceOp.SUM);
                } catch (JcclException e) {
                    errors.put(c.rank(), e);
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
        for (int r = 0; r < n; r++) {
            assertMismatch(r, errors.get(r), "allReduce (1000 x float sum)", "allReduce (1001 x float sum)");
        }
    }

    static void assertMismatch(int r, Throwable t, String agreed, String deviant) {
        assertTrue(t instanceof JcclException, "rank " + r + ": " + t);
        JcclException e = (JcclException) t;
        String m = e.getMessage();
        assertEquals(ErrorCode.MISMATCH, e.code(), "rank " + r + ": " + e);
        assertTrue(m.contains("mismatched collective calls"), "rank " + r + ": " + m);
        assertTrue(m.contains(agreed), "rank " + r + " does not name the agreed call \"" + agreed + "\": " + m);
        assertTrue(m.contains(deviant), "rank " + r + " does not name the deviant call \"" + deviant + "\": " + m);
        assertTrue(m.contains("rank 1"), "rank " + r + " does not name the deviant rank: " + m);
    }
}
