package org.jccl.cuda.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.Group;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Checks the GPU tests' own harness without a GPU (so it runs on CI): the same cases, laid out by
 * {@link Layout}, are run by jccl's CPU collectives (in-process ranks) on host memory, and {@link
 * CaseRunner#check} must accept every result — so the reference (wrap-around, unsigned, AVG,
 * float16/bfloat16 rounding, tolerances) agrees with jccl's CPU semantics — and must reject
 * corrupted results, guards and untouched areas.
 */
@Timeout(120)
class HarnessSelfTest {

    /** Host stand-ins for a rank's two scratch areas, and its input as generated (null where it has none). */
    private record Areas(MemorySegment send, MemorySegment recv, MemorySegment input) {
    }

    private static Buffer view(Areas a, Layout.Place p, DataType t) {
        if (p == null) {
            return null;
        }
        MemorySegment area = p.area() == Layout.Area.SEND ? a.send() : a.recv();
        return Buffer.of(area.asSlice(p.offset()), p.count(), t);
    }

    /** Lays out, poisons, fills and runs c with jccl's CPU collectives; returns the areas afterwards. */
    private static Areas[] runOnCpu(List<Communicator> comms, ExecutorService pool, Case c, Arena arena) throws Exception {
        int n = comms.size();
        Layout l = Layout.of(c, n);
        Areas[] areas = new Areas[n];
        for (int r = 0; r < n; r++) {
            MemorySegment s = l.sendSpan() > 0 ? arena.allocate(l.sendSpan(), 256) : null;
            MemorySegment v = arena.allocate(l.recvSpan(), 256);
            if (s != null) {
                s.fill(CaseRunner.POISON);
            }
            v.fill(CaseRunner.POISON);
            MemorySegment input = null;
            if (l.hasInput(r)) {
                long bytes = c.type().bytes(l.sc());
                input = arena.allocate(Math.max(1, bytes), 8);
                Elements.fill(input, c.type(), c.op(), Elements.rankSeed(c.seed(), r), l.sc());
                Layout.Place p = l.send(r);
                MemorySegment.copy(input, 0, p.area() == Layout.Area.SEND ? s : v, p.offset(), bytes);
            }
            areas[r] = new Areas(s, v, input);
        }
        List<Future<?>> fs = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            int rank = r;
            fs.add(pool.submit(() -> {
                Communicator comm = comms.get(rank);
                Buffer send = view(areas[rank], l.send(rank), c.type());
                Buffer recv = view(areas[rank], l.recv(rank), c.type());
                switch (c.coll()) {
                    case ALL_REDUCE -> comm.allReduce(send, recv, c.op());
                    case BROADCAST -> comm.broadcast(send, recv, c.root());
                    case REDUCE -> comm.reduce(send, recv, c.op(), c.root());
                    case ALL_GATHER -> comm.allGather(send, recv);
                    case REDUCE_SCATTER -> comm.reduceScatter(send, recv, c.op());
                    case ALL_TO_ALL -> comm.allToAll(send, recv);
                    case SEND_RECV -> {
                        try (Group g = comm.group()) {
                            comm.send(send, Math.floorMod(rank + c.root(), n));
                            comm.recv(recv, Math.floorMod(rank - c.root(), n));
                        }
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : fs) {
            f.get(60, TimeUnit.SECONDS);
        }
        return areas;
    }

    /** Checks both ways (element by element, and with the bulk comparison against the inputs); they must agree. */
    private static String check(Case c, int n, Areas[] areas) {
        MemorySegment[] hr = new MemorySegment[n];
        MemorySegment[] hs = new MemorySegment[n];
        MemorySegment[] in = new MemorySegment[n];
        for (int r = 0; r < n; r++) {
            hr[r] = areas[r].recv();
            hs[r] = areas[r].send();
            in[r] = areas[r].input();
        }
        String slow = CaseRunner.check(Layout.of(c, n), hr, hs);
        String fast = CaseRunner.check(Layout.of(c, n), hr, hs, in);
        assertEquals(slow, fast, () -> "the bulk comparison disagrees with the element checks for " + c);
        return slow;
    }

    private static void sweepOnCpu(int n, Sweep.Mode mode, long[] counts) throws Exception {
        List<Communicator> comms = Jccl.initLocal(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        List<String> failures = new ArrayList<>();
        int ran = 0;
        try (Arena arena = Arena.ofShared()) {
            for (Coll coll : Coll.values()) {
                for (Case c : Sweep.cases(mode, coll, n, Style.THREADS, 42)) {
                    boolean wanted = false;
                    for (long k : counts) {
                        wanted |= c.count() == k;
                    }
                    if (!wanted) {
                        continue;
                    }
                    // ofAuto: the rank threads use the areas, and the GC frees them.
                    Areas[] areas = runOnCpu(comms, pool, c, Arena.ofAuto());
                    String f = check(c, n, areas);
                    ran++;
                    if (f != null && failures.size() < 10) {
                        failures.add(f);
                    }
                }
            }
            for (Case c : Sweep.misaligned(Sweep.Mode.TINY, n, 42)) {
                String f = check(c, n, runOnCpu(comms, pool, c, arena));
                ran++;
                if (f != null && failures.size() < 10) {
                    failures.add(f);
                }
            }
        } finally {
            pool.shutdownNow();
            comms.forEach(Communicator::close);
        }
        assertTrue(ran > 0);
        if (!failures.isEmpty()) {
            fail("the reference disagrees with jccl's CPU collectives over " + n + " ranks in " + failures.size() + " of " + ran
                    + " cases:\n" + String.join("\n", failures));
        }
    }

    @Test
    @Timeout(300)
    void referenceAgreesWithTheCpuCollectivesOnFourRanks() throws Exception {
        sweepOnCpu(4, Sweep.Mode.DEFAULT, new long[] {1, 17, 1000, 4099});
    }

    @Test
    @Timeout(300)
    void referenceAgreesWithTheCpuCollectivesOnThreeRanks() throws Exception {
        // 3 ranks: AVG divides by a non-power of two, float16/bfloat16 AVG is no longer exact.
        sweepOnCpu(3, Sweep.Mode.DEFAULT, new long[] {1, 3, 17});
    }

    @Test
    @Timeout(120)
    void referenceAgreesWithTheCpuCollectivesOnOneRank() throws Exception {
        sweepOnCpu(1, Sweep.Mode.TINY, new long[] {1, 17});
    }

    /** The checker must see a wrong element, an unwritten one, a write past the end and a changed send buffer. */
    @Test
    @Timeout(120)
    void theCheckerCatchesCorruption() throws Exception {
        int n = 4;
        List<Communicator> comms = Jccl.initLocal(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try (Arena arena = Arena.ofShared()) {
            for (DataType t : DataType.values()) {
                for (Coll coll : Coll.values()) {
                    ReduceOp op = coll.reduces() ? ReduceOp.SUM : null;
                    int root = coll.rooted() ? 1 : coll == Coll.SEND_RECV ? 1 : -1;
                    Case c = Case.of(coll, t, op, 17, root, false, Style.THREADS, 0, 7);
                    Layout l = Layout.of(c, n);
                    Areas[] a = runOnCpu(comms, pool, c, arena);
                    assertNull(check(c, n, a), () -> "clean run of " + c);
                    int r = l.recv(0) != null ? 0 : c.root();
                    long at = l.recv(r).offset();
                    MemorySegment out = a[r].recv();
                    int es = t.size();

                    // 1. two different elements swapped: a plausible value in the wrong place
                    byte[] e0 = out.asSlice(at, es).toArray(ValueLayout.JAVA_BYTE);
                    byte[] e1 = out.asSlice(at + es, es).toArray(ValueLayout.JAVA_BYTE);
                    if (!java.util.Arrays.equals(e0, e1)) {
                        MemorySegment.copy(MemorySegment.ofArray(e1), 0, out, at, es);
                        MemorySegment.copy(MemorySegment.ofArray(e0), 0, out, at + es, es);
                        String f = check(c, n, a);
                        assertNotNull(f, () -> "swapped elements not seen: " + c);
                        assertTrue(f.contains("2 wrong element(s)"), f);
                        MemorySegment.copy(MemorySegment.ofArray(e0), 0, out, at, es);
                        MemorySegment.copy(MemorySegment.ofArray(e1), 0, out, at + es, es);
                    }

                    // 2. the last element never written
                    long last = at + (l.recv(r).count() - 1) * es;
                    byte[] keep = out.asSlice(last, es).toArray(ValueLayout.JAVA_BYTE);
                    out.asSlice(last, es).fill(CaseRunner.POISON);
                    String f2 = check(c, n, a);
                    if (!java.util.Arrays.equals(keep, out.asSlice(last, es).toArray(ValueLayout.JAVA_BYTE))) {
                        assertNotNull(f2, () -> "unwritten element not seen: " + c);
                        assertTrue(f2.contains("never written (still 0xA5)"), f2);
                    }
                    MemorySegment.copy(MemorySegment.ofArray(keep), 0, out, last, es);

                    // 3. one byte past the end of the receive buffer
                    long end = at + l.recv(r).count() * es;
                    out.set(ValueLayout.JAVA_BYTE, end, (byte) 0);
                    String f3 = check(c, n, a);
                    assertNotNull(f3, () -> "write past the end not seen: " + c);
                    assertTrue(f3.contains("1 byte(s) changed after the receive buffer (first at byte +0"), f3);
                    out.set(ValueLayout.JAVA_BYTE, end, CaseRunner.POISON);

                    // 4. a changed send buffer (out of place), or a write into a null buffer's area
                    int s = l.send(0) != null ? 0 : c.root();
                    MemorySegment in = a[s].send();
                    long sAt = l.send(s).offset();
                    byte old = in.get(ValueLayout.JAVA_BYTE, sAt);
                    in.set(ValueLayout.JAVA_BYTE, sAt, (byte) (old ^ 0x40));
                    String f4 = check(c, n, a);
                    assertNotNull(f4, () -> "changed send buffer not seen: " + c);
                    assertTrue(f4.contains("rank " + s + " send[0]"), f4);
                    in.set(ValueLayout.JAVA_BYTE, sAt, old);
                    for (int q = 0; q < n; q++) {
                        if (l.recv(q) == null) {
                            a[q].recv().set(ValueLayout.JAVA_BYTE, l.rOff(), (byte) 1);
                            String f5 = check(c, n, a);
                            assertNotNull(f5);
                            assertTrue(f5.contains("in the receive area (recv was null)"), f5);
                            a[q].recv().set(ValueLayout.JAVA_BYTE, l.rOff(), CaseRunner.POISON);
                        }
                    }
                    assertNull(check(c, n, a), () -> "restored run of " + c);
                }
            }
        } finally {
            pool.shutdownNow();
            comms.forEach(Communicator::close);
        }
    }

    /** Outputs above a million elements are checked in parallel chunks: still every element, and the right one reported. */
    @Test
    @Timeout(120)
    void largeOutputsAreCheckedInParallelChunks() throws Exception {
        int n = 4;
        List<Communicator> comms = Jccl.initLocal(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try (Arena arena = Arena.ofShared()) {
            List<Case> cases = List.of(
                    Case.of(Coll.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, Sweep.MEG + 5, -1, true, Style.THREADS, 0, 9),
                    Case.of(Coll.ALL_GATHER, DataType.BFLOAT16, null, (Sweep.LARGE / n) | 1, -1, false, Style.THREADS, 0, 9),
                    Case.of(Coll.REDUCE_SCATTER, DataType.INT32, ReduceOp.SUM, Sweep.MEG + 5, -1, false, Style.THREADS, 0, 9));
            for (Case c : cases) {
                Layout l = Layout.of(c, n);
                Areas[] a = runOnCpu(comms, pool, c, arena);
                assertNull(check(c, n, a), () -> "clean run of " + c);
                long last = l.recv(3).count() - 1;
                long at = l.recv(3).offset() + last * c.type().size();
                byte old = a[3].recv().get(ValueLayout.JAVA_BYTE, at);
                a[3].recv().set(ValueLayout.JAVA_BYTE, at, (byte) (old ^ 0x10));
                String f = check(c, n, a);
                assertNotNull(f, c::toString);
                assertTrue(f.contains(": 1 wrong element(s) (rank 3: 1)") && f.contains("rank 3 recv[" + last + "]"), f);
                a[3].recv().set(ValueLayout.JAVA_BYTE, at, old);
            }
        } finally {
            pool.shutdownNow();
            comms.forEach(Communicator::close);
        }
    }

    /** The exactness the float16/bfloat16 references rely on: every partial sum of up to 8 inputs, in any order, is a value of the type. */
    @Test
    @Timeout(60)
    void halfAndBfloat16SumsOfTheTestInputsAreExact() {
        SplittableRandom rnd = new SplittableRandom(1);
        for (DataType t : List.of(DataType.FLOAT16, DataType.BFLOAT16)) {
            for (int trial = 0; trial < 20_000; trial++) {
                int n = 2 + rnd.nextInt(7);
                double acc = 0;
                for (int q = 0; q < n; q++) {
                    acc += Elements.floatValue(t, ReduceOp.SUM, rnd.nextLong(), rnd.nextLong(1 << 20));
                    assertEquals(acc, Elements.roundTo(t, acc), () -> t + ": a partial sum is not exact");
                }
                assertTrue(Elements.exact(t, ReduceOp.SUM, n));
            }
        }
    }

    @Test
    @Timeout(60)
    void ulpAndToleranceAreSane() {
        assertEquals(Math.ulp(1.0f), Elements.ulp(DataType.FLOAT32, 1.0), 0);
        assertEquals(Math.ulp(1.0), Elements.ulp(DataType.FLOAT64, 1.0), 0);
        assertEquals(0x1.0p-10, Elements.ulp(DataType.FLOAT16, 1.5), 0);
        assertEquals(0x1.0p-7, Elements.ulp(DataType.BFLOAT16, 1.5), 0);
        assertEquals(0x1.0p-24, Elements.ulp(DataType.FLOAT16, 0), 0);
        assertEquals(0, Elements.tolerance(DataType.FLOAT32, ReduceOp.MAX, 4, 1, 4));
        assertEquals(0, Elements.tolerance(DataType.BFLOAT16, ReduceOp.SUM, 4, 1, 4));
        double tol = Elements.tolerance(DataType.FLOAT32, ReduceOp.SUM, 4, 0.5, 2);
        assertTrue(tol > 0 && tol < 1e-5, () -> "float32 sum tolerance " + tol);
        assertEquals(Elements.normalize(DataType.UINT8, 255), Elements.finishAvg(DataType.UINT8, 255 + 255 * 0, 1));
        assertEquals(-2, Elements.finishAvg(DataType.INT8, -7, 3), "signed AVG truncates toward zero");
        assertEquals(0x55, Elements.finishAvg(DataType.UINT8, 0xFF, 3), "unsigned AVG divides as unsigned");
        assertEquals(Long.divideUnsigned(-1L, 4), Elements.finishAvg(DataType.UINT64, -1L, 4));
        assertEquals(0xFFL, Elements.combine(DataType.UINT8, ReduceOp.MAX, 0xFFL, 1L), "unsigned MAX");
        assertEquals(-1L, Elements.combine(DataType.UINT64, ReduceOp.MAX, -1L, 1L), "uint64 MAX compares unsigned");
        assertEquals((byte) (100 * 3), Elements.combine(DataType.INT8, ReduceOp.PROD, 100, 3), "int8 PROD wraps");
    }
}
