package org.jccl.internal.reduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link Reductions} against {@link ReferenceArithmetic} for every type and operator, in every
 * placement a collective can hand it: native and heap memory (byte[] and long[] backed, mixed
 * between operands), aligned and odd byte offsets, the accumulate form and the three-operand form
 * with a separate destination or one aliasing either source. Every run also checks that the bytes
 * after {@code count} elements and the sources are left untouched.
 */
class ReductionsTest {

    private static final long[] COUNTS = {0, 1, 2, 7, 1003, 4099};
    private static final int[] OFFSETS = {0, 1, 3};
    private static final int GUARD_BYTES = 16;
    private static final byte GUARD = (byte) 0x5A;

    /** Where operands live. Heap segments of different array types have different base alignment. */
    enum Mem { NATIVE, HEAP_BYTES, HEAP_LONGS }

    /** How reduce is called. */
    enum Form { ACCUMULATE, SEPARATE_DST, DST_IS_A, DST_IS_B }

    // ---------------------------------------------------------------------------------------------
    // The full matrix

    static Stream<Arguments> typesAndOps() {
        List<Arguments> all = new ArrayList<>();
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                all.add(Arguments.of(t, op));
            }
        }
        return all.stream();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("typesAndOps")
    @Timeout(60)
    void reduceMatchesReferenceEverywhere(DataType type, ReduceOp op) {
        for (long count : COUNTS) {
            Random rnd = new Random(31L * type.ordinal() + 7L * op.ordinal() + count);
            long[] a = new long[(int) count];
            long[] b = new long[(int) count];
            long[] expected = new long[(int) count];
            for (int i = 0; i < count; i++) {
                a[i] = randomValue(type, rnd);
                b[i] = randomValue(type, rnd);
                expected[i] = ReferenceArithmetic.apply(type, op, a[i], b[i]);
            }
            for (Form form : Form.values()) {
                for (Mem mem : Mem.values()) {
                    for (int offset : OFFSETS) {
                        runOne(type, op, form, mem, offset, a, b, expected);
                    }
                }
            }
        }
    }

    private static void runOne(DataType type, ReduceOp op, Form form, Mem mem, int offset,
                               long[] a, long[] b, long[] expected) {
        int count = a.length;
        // Sources differ in kind and misalignment from each other, as a user heap array reduced
        // with a native receive buffer would.
        Mem otherMem = Mem.values()[(mem.ordinal() + 1) % Mem.values().length];
        int otherOffset = offset == 0 ? 0 : 4 - offset;
        String where = type + " " + op + " count=" + count + " " + form + " " + mem + "+" + offset;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment sa = place(arena, mem, type, count, offset);
            MemorySegment sb = place(arena, otherMem, type, count, otherOffset);
            store(sa, type, a);
            store(sb, type, b);
            MemorySegment result;
            switch (form) {
                case ACCUMULATE -> {
                    Reductions.reduce(sa, sb, count, type, op);
                    result = sa;
                    assertElements(where + " (in untouched)", type, b, sb);
                }
                case SEPARATE_DST -> {
                    MemorySegment sd = place(arena, mem, type, count, otherOffset);
                    Reductions.reduce(sd, sa, sb, count, type, op);
                    result = sd;
                    assertElements(where + " (a untouched)", type, a, sa);
                    assertElements(where + " (b untouched)", type, b, sb);
                }
                case DST_IS_A -> {
                    Reductions.reduce(sa, sa, sb, count, type, op);
                    result = sa;
                    assertElements(where + " (b untouched)", type, b, sb);
                }
                case DST_IS_B -> {
                    Reductions.reduce(sb, sa, sb, count, type, op);
                    result = sb;
                    assertElements(where + " (a untouched)", type, a, sa);
                }
                default -> throw new AssertionError(form);
            }
            assertResult(where, type, a, b, expected, result);
            assertGuards(where, type, count, sa, sb, result);
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(DataType.class)
    @Timeout(60)
    void finishAvgMatchesReferenceEverywhere(DataType type) {
        for (long count : COUNTS) {
            for (int n : new int[] {1, 2, 3, 7, 8}) {
                Random rnd = new Random(97L * type.ordinal() + count * 5 + n);
                long[] v = new long[(int) count];
                long[] expected = new long[(int) count];
                for (int i = 0; i < count; i++) {
                    v[i] = randomValue(type, rnd);
                    expected[i] = ReferenceArithmetic.average(type, v[i], n);
                }
                for (Mem mem : Mem.values()) {
                    for (int offset : OFFSETS) {
                        String where = type + " avg/" + n + " count=" + count + " " + mem + "+" + offset;
                        try (Arena arena = Arena.ofConfined()) {
                            MemorySegment s = place(arena, mem, type, (int) count, offset);
                            store(s, type, v);
                            Reductions.finishAvg(s, count, type, ReduceOp.AVG, n);
                            for (int i = 0; i < count; i++) {
                                long got = load(s, type, i);
                                if (!ReferenceArithmetic.matches(type, expected[i], got)) {
                                    fail(where + " [" + i + "]: " + hex(type, v[i]) + " / " + n + " expected "
                                            + hex(type, expected[i]) + " got " + hex(type, got));
                                }
                            }
                            assertGuards(where, type, (int) count, s);
                            // Any other operator leaves the data alone, whatever n says.
                            store(s, type, v);
                            for (ReduceOp op : ReduceOp.values()) {
                                if (op != ReduceOp.AVG) {
                                    Reductions.finishAvg(s, count, type, op, n);
                                    Reductions.finishAvg(s, count, type, op, 0);
                                }
                            }
                            assertElements(where + " (non-AVG is a no-op)", type, v, s);
                        }
                    }
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Named cases: the semantics most likely to be got wrong

    @Test
    @Timeout(10)
    void unsignedMinMaxUseUnsignedOrder() {
        // uint8: 0xFF is 255, above 0x01; int8: the same bits are -1, below it.
        assertOp(DataType.UINT8, ReduceOp.MIN, 0xFF, 0x01, 0x01);
        assertOp(DataType.UINT8, ReduceOp.MAX, 0xFF, 0x01, 0xFF);
        assertOp(DataType.UINT8, ReduceOp.MAX, 0x80, 0x7F, 0x80);
        assertOp(DataType.INT8, ReduceOp.MIN, 0xFF, 0x01, 0xFF);
        assertOp(DataType.INT8, ReduceOp.MAX, 0xFF, 0x01, 0x01);
        assertOp(DataType.UINT32, ReduceOp.MIN, 0xFFFF_FFFFL, 1, 1);
        assertOp(DataType.UINT32, ReduceOp.MAX, 0xFFFF_FFFFL, 1, 0xFFFF_FFFFL);
        assertOp(DataType.UINT32, ReduceOp.MAX, 0x8000_0000L, 0x7FFF_FFFFL, 0x8000_0000L);
        assertOp(DataType.UINT32, ReduceOp.MIN, 0x8000_0000L, 0x7FFF_FFFFL, 0x7FFF_FFFFL);
        assertOp(DataType.INT32, ReduceOp.MIN, 0xFFFF_FFFFL, 1, 0xFFFF_FFFFL);
        assertOp(DataType.UINT64, ReduceOp.MIN, -1L, 1L, 1L);
        assertOp(DataType.UINT64, ReduceOp.MAX, -1L, 1L, -1L);
        assertOp(DataType.UINT64, ReduceOp.MAX, Long.MIN_VALUE, Long.MAX_VALUE, Long.MIN_VALUE);
        assertOp(DataType.UINT64, ReduceOp.MIN, Long.MIN_VALUE, Long.MAX_VALUE, Long.MAX_VALUE);
        assertOp(DataType.INT64, ReduceOp.MIN, -1L, 1L, -1L);
    }

    @Test
    @Timeout(10)
    void integerSumAndProductWrapAround() {
        assertOp(DataType.INT8, ReduceOp.SUM, 0x7F, 0x01, 0x80);
        assertOp(DataType.UINT8, ReduceOp.SUM, 0xFF, 0x01, 0x00);
        assertOp(DataType.UINT8, ReduceOp.PROD, 16, 16, 0);
        assertOp(DataType.INT8, ReduceOp.PROD, 0x80, 0xFF, 0x80); // -128 * -1 wraps to -128
        assertOp(DataType.INT32, ReduceOp.SUM, Integer.MAX_VALUE, 1, 0x8000_0000L);
        assertOp(DataType.UINT32, ReduceOp.SUM, 0xFFFF_FFFFL, 2, 1);
        assertOp(DataType.INT32, ReduceOp.PROD, 0x10000, 0x10000, 0);
        assertOp(DataType.INT64, ReduceOp.SUM, Long.MAX_VALUE, 1, Long.MIN_VALUE);
        assertOp(DataType.UINT64, ReduceOp.SUM, -1L, -1L, -2L);
        assertOp(DataType.INT64, ReduceOp.PROD, 1L << 32, 1L << 32, 0);
        assertOp(DataType.INT64, ReduceOp.PROD, Long.MIN_VALUE, -1L, Long.MIN_VALUE);
    }

    @Test
    @Timeout(10)
    void signedAverageTruncatesTowardZero() {
        assertAvg(DataType.INT8, 0xF9, 2, 0xFD);                    // -7 / 2 = -3, not -4
        assertAvg(DataType.INT8, 0x80, 3, (-128 / 3) & 0xFF);       // -42
        assertAvg(DataType.INT32, -7L & 0xFFFF_FFFFL, 2, -3L & 0xFFFF_FFFFL);
        assertAvg(DataType.INT32, 0x8000_0000L, 2, 0xC000_0000L);   // MIN / 2
        assertAvg(DataType.INT64, -7L, 4, -1L);
        assertAvg(DataType.INT64, -3L, 4, 0L);
        // The whole path: AVG reduces as a sum, then one division.
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment acc = arena.allocate(4);
            MemorySegment in = arena.allocate(4);
            acc.set(ValueLayout.JAVA_INT, 0, -3);
            in.set(ValueLayout.JAVA_INT, 0, -4);
            Reductions.reduce(acc, in, 1, DataType.INT32, ReduceOp.AVG);
            assertEquals(-7, acc.get(ValueLayout.JAVA_INT, 0), "AVG reduces as SUM");
            Reductions.finishAvg(acc, 1, DataType.INT32, ReduceOp.AVG, 2);
            assertEquals(-3, acc.get(ValueLayout.JAVA_INT, 0));
        }
    }

    @Test
    @Timeout(10)
    void unsignedAverageOfLargeValues() {
        assertAvg(DataType.UINT8, 0xFE, 2, 0x7F);
        assertAvg(DataType.UINT8, 0xFF, 3, 0x55);
        assertAvg(DataType.UINT32, 0xFFFF_FFFEL, 2, 0x7FFF_FFFFL);
        assertAvg(DataType.UINT32, 0xFFFF_FFFFL, 3, 0x5555_5555L);
        assertAvg(DataType.UINT64, -2L, 2, Long.MAX_VALUE);
        assertAvg(DataType.UINT64, -1L, 3, 0x5555_5555_5555_5555L);
        assertAvg(DataType.UINT64, Long.MIN_VALUE, 8, 1L << 60);
    }

    @Test
    @Timeout(10)
    void halfRoundsTiesToEven() {
        // Between 1.0 (0x3C00) and 1+2^-10 (0x3C01), 1+2^-11 is the tie: even is 0x3C00.
        assertEquals(0x3C00, Reductions.floatToHalf(1f + 0x1p-11f) & 0xFFFF);
        // Between 0x3C01 and 0x3C02 the tie goes up to the even 0x3C02.
        assertEquals(0x3C02, Reductions.floatToHalf(1f + 3 * 0x1p-11f) & 0xFFFF);
        assertEquals(0x3C01, Reductions.floatToHalf(1f + 0x1p-11f + 0x1p-20f) & 0xFFFF);
        assertEquals(0x7BFF, Reductions.floatToHalf(65519.99f) & 0xFFFF);
        assertEquals(0x7C00, Reductions.floatToHalf(65520f) & 0xFFFF, "the tie above the largest half is infinity");
        // The same ties through a reduction: one rounding of the float sum.
        assertOp(DataType.FLOAT16, ReduceOp.SUM, 0x3C00, 0x1000, 0x3C00);   // 1 + 2^-11
        assertOp(DataType.FLOAT16, ReduceOp.SUM, 0x3C01, 0x1000, 0x3C02);   // (1 + 2^-10) + 2^-11
        assertOp(DataType.FLOAT16, ReduceOp.SUM, 0x7BFF, 0x5000, 0x7C00);   // 65504 + 32 overflows
    }

    @Test
    @Timeout(10)
    void bf16RoundsTiesToEven() {
        assertEquals(0x3F80, Reductions.floatToBf16(Float.intBitsToFloat(0x3F80_8000)) & 0xFFFF);
        assertEquals(0x3F82, Reductions.floatToBf16(Float.intBitsToFloat(0x3F81_8000)) & 0xFFFF);
        assertEquals(0x3F81, Reductions.floatToBf16(Float.intBitsToFloat(0x3F80_8001)) & 0xFFFF);
        assertEquals(0x3F80, Reductions.floatToBf16(Float.intBitsToFloat(0x3F80_7FFF)) & 0xFFFF);
        assertEquals(0xBF82, Reductions.floatToBf16(Float.intBitsToFloat(0xBF81_8000)) & 0xFFFF);
        assertEquals(0x7F80, Reductions.floatToBf16(Float.intBitsToFloat(0x7F7F_8000)) & 0xFFFF, "to infinity");
        assertEquals(0x7F7F, Reductions.floatToBf16(Float.intBitsToFloat(0x7F7F_7FFF)) & 0xFFFF);
        assertEquals(0xFF80, Reductions.floatToBf16(Float.NEGATIVE_INFINITY) & 0xFFFF);
        assertEquals(0x0000, Reductions.floatToBf16(Float.intBitsToFloat(0x0000_8000)) & 0xFFFF, "subnormal tie");
        assertEquals(0x0002, Reductions.floatToBf16(Float.intBitsToFloat(0x0001_8000)) & 0xFFFF);
        assertOp(DataType.BFLOAT16, ReduceOp.SUM, 0x3F80, 0x3B80, 0x3F80);  // 1 + 2^-8: tie, stays 1
        assertOp(DataType.BFLOAT16, ReduceOp.SUM, 0x3F81, 0x3B80, 0x3F82);  // (1 + 2^-7) + 2^-8
    }

    @Test
    @Timeout(10)
    void bf16OfNaNStaysNaN() {
        for (int nan : new int[] {0x7F80_0001, 0x7FC0_0000, 0xFF80_0001, 0x7F80_FFFF, 0xFFFF_FFFF}) {
            short h = Reductions.floatToBf16(Float.intBitsToFloat(nan));
            assertTrue(Float.isNaN(Reductions.bf16ToFloat(h)), "bf16 of " + Integer.toHexString(nan));
            assertEquals(nan >>> 31, (h >>> 15) & 1, "sign of NaN " + Integer.toHexString(nan));
            assertEquals(0x0040, h & 0x0040, "quiet bit of " + Integer.toHexString(nan));
        }
        assertEquals((short) 0x7FC0, Reductions.floatToBf16(Float.NaN));
        for (ReduceOp op : ReduceOp.values()) {
            long got = reduceOne(DataType.BFLOAT16, op, 0x7FC0, 0x3F80);
            assertTrue(ReferenceArithmetic.isNaN(DataType.BFLOAT16, got), op + " with a NaN operand");
        }
    }

    @Test
    @Timeout(10)
    void aDestinationPartlyOverlappingASourceIsRefusedInNativeAndHeapMemory() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment native24 = arena.allocate(96, 64);
            MemorySegment heap24 = MemorySegment.ofArray(new float[24]);
            for (MemorySegment m : List.of(native24, heap24)) {
                MemorySegment dst = m.asSlice(4, 32);
                MemorySegment other = m.asSlice(40, 8 * 4);
                // The source starts 1 element after (or before) the destination: 28 of 32 bytes shared.
                IllegalArgumentException after = assertThrows(IllegalArgumentException.class,
                        () -> Reductions.reduce(dst, m.asSlice(8, 32), other, 8, DataType.FLOAT32, ReduceOp.SUM));
                assertEquals("Reductions: dst partially overlaps 'a' (28 of 32 bytes shared); it must be exactly the same memory or"
                        + " disjoint", after.getMessage());
                IllegalArgumentException before = assertThrows(IllegalArgumentException.class,
                        () -> Reductions.reduce(dst, other, m.asSlice(0, 32), 8, DataType.FLOAT32, ReduceOp.SUM));
                assertTrue(before.getMessage().startsWith("Reductions: dst partially overlaps 'b' (28 of 32 bytes shared)"),
                        before.getMessage());
                // Exactly the same memory through another segment object, and the memory right after, are fine.
                MemorySegment d7 = m.asSlice(4, 28);
                MemorySegment same = m.asSlice(4, 28);
                MemorySegment adjacent = m.asSlice(32, 28);
                same.fill((byte) 0);
                adjacent.fill((byte) 0);
                adjacent.set(ValueLayout.JAVA_FLOAT_UNALIGNED, 0, 7f);
                Reductions.reduce(d7, same, adjacent, 7, DataType.FLOAT32, ReduceOp.SUM);
                assertEquals(7f, d7.get(ValueLayout.JAVA_FLOAT_UNALIGNED, 0), m.isNative() ? "native" : "heap");
            }
        }
    }

    @Test
    @Timeout(10)
    void subnormalHalves() {
        assertEquals(0x1p-24f, Reductions.halfToFloat((short) 0x0001));
        assertEquals(1023 * 0x1p-24f, Reductions.halfToFloat((short) 0x03FF));
        assertEquals(-0x1p-24f, Reductions.halfToFloat((short) 0x8001));
        assertEquals(0x0000, Reductions.floatToHalf(0x1p-25f) & 0xFFFF, "tie between 0 and the least subnormal");
        assertEquals(0x0001, Reductions.floatToHalf(0x1p-25f + 0x1p-40f) & 0xFFFF);
        assertEquals(0x0002, Reductions.floatToHalf(3 * 0x1p-25f) & 0xFFFF, "tie to even subnormal");
        assertEquals(0x8000, Reductions.floatToHalf(-0x1p-26f) & 0xFFFF, "underflow keeps the sign");
        assertOp(DataType.FLOAT16, ReduceOp.SUM, 0x0001, 0x0001, 0x0002);
        assertOp(DataType.FLOAT16, ReduceOp.SUM, 0x03FF, 0x0001, 0x0400);   // into the normal range
        assertOp(DataType.FLOAT16, ReduceOp.PROD, 0x0200, 0x3800, 0x0100);  // subnormal * 0.5
        assertOp(DataType.FLOAT16, ReduceOp.PROD, 0x0001, 0x3800, 0x0000);  // 2^-25: tie to zero
        assertOp(DataType.FLOAT16, ReduceOp.MIN, 0x8001, 0x0001, 0x8001);
        assertAvg(DataType.FLOAT16, 0x0003, 2, 0x0002);                      // 1.5 ulp: tie to even
    }

    @Test
    @Timeout(30)
    void halfConversionsMatchTheFormatDefinition() {
        for (int h = 0; h < 0x10000; h++) {
            double want = ReferenceArithmetic.decode(DataType.FLOAT16, h);
            float got = Reductions.halfToFloat((short) h);
            if (Double.isNaN(want)) {
                assertTrue(Float.isNaN(got), "half " + Integer.toHexString(h));
                assertTrue(Float.isNaN(Reductions.halfToFloat(Reductions.floatToHalf(got))));
                continue;
            }
            assertEquals(Double.doubleToRawLongBits(want), Double.doubleToRawLongBits(got),
                    "half " + Integer.toHexString(h));
            assertEquals(h, Reductions.floatToHalf(got) & 0xFFFF, "round trip of " + Integer.toHexString(h));
            // The midpoint to the next half up (exact in float) must go to the even neighbour.
            if ((h & 0x7FFF) < 0x7BFF) {
                float next = Reductions.halfToFloat((short) (h + 1));
                float mid = (got + next) / 2;
                int even = (h & 1) == 0 ? h : h + 1;
                assertEquals(even, Reductions.floatToHalf(mid) & 0xFFFF, "midpoint above " + Integer.toHexString(h));
            }
        }
        Random rnd = new Random(11);
        for (int i = 0; i < 200_000; i++) {
            float f = Float.intBitsToFloat(i % 2 == 0 ? rnd.nextInt() : (rnd.nextInt() & 0x8FFF_FFFF) | 0x3000_0000);
            assertRoundsLike(DataType.FLOAT16, f, Reductions.floatToHalf(f));
        }
    }

    @Test
    @Timeout(30)
    void bf16ConversionsMatchTheFormatDefinition() {
        for (int h = 0; h < 0x10000; h++) {
            double want = ReferenceArithmetic.decode(DataType.BFLOAT16, h);
            float got = Reductions.bf16ToFloat((short) h);
            if (Double.isNaN(want)) {
                assertTrue(Float.isNaN(got), "bf16 " + Integer.toHexString(h));
                continue;
            }
            assertEquals(Double.doubleToRawLongBits(want), Double.doubleToRawLongBits(got),
                    "bf16 " + Integer.toHexString(h));
            assertEquals(h, Reductions.floatToBf16(got) & 0xFFFF, "round trip of " + Integer.toHexString(h));
        }
        Random rnd = new Random(13);
        for (int i = 0; i < 200_000; i++) {
            float f = Float.intBitsToFloat(rnd.nextInt());
            assertRoundsLike(DataType.BFLOAT16, f, Reductions.floatToBf16(f));
        }
    }

    @Test
    @Timeout(60)
    void concurrentCallsKeepTheirOwnScratch() throws Exception {
        // The kernels stage chunks through per-thread arrays; threads reducing at once, on types
        // that share a scratch width, must never see each other's data.
        DataType[] types = {DataType.FLOAT32, DataType.INT32, DataType.FLOAT16, DataType.BFLOAT16};
        int threads = types.length;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                DataType type = types[t];
                int seed = t;
                done.add(pool.submit(() -> {
                    Random rnd = new Random(seed);
                    int count = 5000;
                    long[] a = new long[count];
                    long[] b = new long[count];
                    long[] expected = new long[count];
                    for (int i = 0; i < count; i++) {
                        a[i] = randomValue(type, rnd);
                        b[i] = randomValue(type, rnd);
                        expected[i] = ReferenceArithmetic.apply(type, ReduceOp.SUM, a[i], b[i]);
                    }
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment sa = place(arena, Mem.NATIVE, type, count, 1);
                        MemorySegment sb = place(arena, Mem.HEAP_BYTES, type, count, 3);
                        MemorySegment sd = place(arena, Mem.NATIVE, type, count, 0);
                        store(sa, type, a);
                        store(sb, type, b);
                        for (int rep = 0; rep < 300; rep++) {
                            sd.fill((byte) rep);
                            Reductions.reduce(sd, sa, sb, count, type, ReduceOp.SUM);
                            assertResult(type + " thread " + seed + " rep " + rep, type, a, b, expected, sd);
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Argument checks

    @Test
    @Timeout(10)
    void rejectsBadArguments() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = arena.allocate(64);
            MemorySegment t = arena.allocate(64);
            assertThrows(IllegalArgumentException.class,
                    () -> Reductions.reduce(s, t, -1, DataType.FLOAT32, ReduceOp.SUM));
            assertThrows(IndexOutOfBoundsException.class,
                    () -> Reductions.reduce(s, t, 17, DataType.FLOAT32, ReduceOp.SUM));
            assertThrows(IndexOutOfBoundsException.class,
                    () -> Reductions.reduce(s, s, t.asSlice(0, 8), 3, DataType.FLOAT32, ReduceOp.SUM));
            assertThrows(IllegalArgumentException.class,
                    () -> Reductions.reduce(s.asReadOnly(), t, 1, DataType.INT8, ReduceOp.SUM));
            // A destination shifted by one element from its source would read what it just wrote.
            assertThrows(IllegalArgumentException.class,
                    () -> Reductions.reduce(s.asSlice(4), s, t, 8, DataType.FLOAT32, ReduceOp.SUM));
            assertThrows(IllegalArgumentException.class,
                    () -> Reductions.reduce(s, t, s.asSlice(1), 8, DataType.FLOAT32, ReduceOp.SUM));
            assertThrows(IllegalArgumentException.class,
                    () -> Reductions.finishAvg(s, 4, DataType.FLOAT32, ReduceOp.AVG, 0));
            assertThrows(IndexOutOfBoundsException.class,
                    () -> Reductions.finishAvg(s, 9, DataType.FLOAT64, ReduceOp.AVG, 2));
            assertThrows(NullPointerException.class,
                    () -> Reductions.reduce(s, t, 1, null, ReduceOp.SUM));
            // Exact aliasing, views of the same bytes, and zero counts are all fine.
            Reductions.reduce(s, s, 16, DataType.FLOAT32, ReduceOp.SUM);
            Reductions.reduce(s.asSlice(8), s.asSlice(8), t, 8, DataType.FLOAT32, ReduceOp.MAX);
            Reductions.reduce(s.asSlice(4), s, t, 0, DataType.FLOAT32, ReduceOp.SUM);
            // Disjoint halves of one allocation, and one source aliasing the other, are fine too.
            Reductions.reduce(s.asSlice(0, 32), s.asSlice(32), 8, DataType.FLOAT32, ReduceOp.SUM);
            Reductions.reduce(s, t, t, 16, DataType.FLOAT32, ReduceOp.SUM);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Helpers

    /** Raw bits of one element: specials, full-range random bits, and values of like magnitude. */
    static long randomValue(DataType t, Random r) {
        int kind = r.nextInt(10);
        long m = ReferenceArithmetic.mask(t);
        return switch (t) {
            case INT8, UINT8, INT32, UINT32, INT64, UINT64 -> {
                if (kind < 2) {
                    long[] special = {0, 1, -1, Long.MIN_VALUE, Long.MAX_VALUE, m >>> 1, (m >>> 1) + 1, 2, -2};
                    yield special[r.nextInt(special.length)] & m;
                }
                yield (kind < 6 ? r.nextLong() : r.nextInt(201) - 100) & m;
            }
            case FLOAT16 -> switch (kind) {
                case 0, 1 -> special16(r, new int[] {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x0001, 0x03FF,
                    0x8001, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00});
                case 2, 3, 4 -> r.nextInt() & 0xFFFFL;
                default -> ((long) r.nextInt(2) << 15) | ((long) (13 + r.nextInt(5)) << 10) | r.nextInt(1 << 10);
            };
            case BFLOAT16 -> switch (kind) {
                case 0, 1 -> special16(r, new int[] {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0001, 0x007F,
                    0x8001, 0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80});
                case 2, 3, 4 -> r.nextInt() & 0xFFFFL;
                default -> ((long) r.nextInt(2) << 15) | ((long) (125 + r.nextInt(5)) << 7) | r.nextInt(1 << 7);
            };
            case FLOAT32 -> switch (kind) {
                case 0, 1 -> {
                    float[] special = {0f, -0f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN,
                        Float.MIN_VALUE, -Float.MIN_VALUE, Float.MIN_NORMAL, Float.MAX_VALUE, -Float.MAX_VALUE, 1f};
                    yield Float.floatToRawIntBits(special[r.nextInt(special.length)]) & m;
                }
                case 2, 3, 4 -> r.nextInt() & m;
                default -> ((long) r.nextInt(2) << 31) | ((long) (125 + r.nextInt(5)) << 23) | r.nextInt(1 << 23);
            };
            case FLOAT64 -> switch (kind) {
                case 0, 1 -> {
                    double[] special = {0d, -0d, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.NaN,
                        Double.MIN_VALUE, -Double.MIN_VALUE, Double.MIN_NORMAL, Double.MAX_VALUE, -Double.MAX_VALUE, 1d};
                    yield Double.doubleToRawLongBits(special[r.nextInt(special.length)]);
                }
                case 2, 3, 4 -> r.nextLong();
                default -> ((long) r.nextInt(2) << 63) | ((long) (1021 + r.nextInt(5)) << 52)
                        | (r.nextLong() & ((1L << 52) - 1));
            };
        };
    }

    private static long special16(Random r, int[] values) {
        return values[r.nextInt(values.length)];
    }

    private static MemorySegment place(Arena arena, Mem mem, DataType t, int count, int offset) {
        long total = (long) count * t.size() + offset + GUARD_BYTES;
        MemorySegment base = switch (mem) {
            case NATIVE -> arena.allocate(total, 8);
            case HEAP_BYTES -> MemorySegment.ofArray(new byte[(int) total]);
            case HEAP_LONGS -> MemorySegment.ofArray(new long[(int) ((total + 7) / 8)]);
        };
        MemorySegment s = base.asSlice(offset, total - offset);
        s.fill(GUARD);
        return s;
    }

    static long load(MemorySegment s, DataType t, long i) {
        return switch (t.size()) {
            case 1 -> s.get(ValueLayout.JAVA_BYTE, i) & 0xFFL;
            case 2 -> s.get(ValueLayout.JAVA_SHORT_UNALIGNED, i * 2) & 0xFFFFL;
            case 4 -> s.get(ValueLayout.JAVA_INT_UNALIGNED, i * 4) & 0xFFFF_FFFFL;
            default -> s.get(ValueLayout.JAVA_LONG_UNALIGNED, i * 8);
        };
    }

    static void store(MemorySegment s, DataType t, long[] values) {
        for (int i = 0; i < values.length; i++) {
            long v = values[i];
            switch (t.size()) {
                case 1 -> s.set(ValueLayout.JAVA_BYTE, i, (byte) v);
                case 2 -> s.set(ValueLayout.JAVA_SHORT_UNALIGNED, i * 2L, (short) v);
                case 4 -> s.set(ValueLayout.JAVA_INT_UNALIGNED, i * 4L, (int) v);
                default -> s.set(ValueLayout.JAVA_LONG_UNALIGNED, i * 8L, v);
            }
        }
    }

    private static void assertResult(String where, DataType t, long[] a, long[] b, long[] expected, MemorySegment s) {
        for (int i = 0; i < expected.length; i++) {
            long got = load(s, t, i);
            if (!ReferenceArithmetic.matches(t, expected[i], got)) {
                fail(where + " [" + i + "]: " + hex(t, a[i]) + " op " + hex(t, b[i]) + " expected "
                        + hex(t, expected[i]) + " got " + hex(t, got));
            }
        }
    }

    private static void assertElements(String where, DataType t, long[] want, MemorySegment s) {
        for (int i = 0; i < want.length; i++) {
            long got = load(s, t, i);
            if (got != want[i]) {
                fail(where + " [" + i + "]: expected " + hex(t, want[i]) + " got " + hex(t, got));
            }
        }
    }

    private static void assertGuards(String where, DataType t, int count, MemorySegment... segments) {
        for (MemorySegment s : segments) {
            for (long o = (long) count * t.size(); o < s.byteSize(); o++) {
                if (s.get(ValueLayout.JAVA_BYTE, o) != GUARD) {
                    fail(where + ": byte " + o + " past the last element was written");
                }
            }
        }
    }

    private static long reduceOne(DataType t, ReduceOp op, long x, long y) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = place(arena, Mem.NATIVE, t, 1, 1);
            MemorySegment b = place(arena, Mem.HEAP_BYTES, t, 1, 3);
            store(a, t, new long[] {x});
            store(b, t, new long[] {y});
            Reductions.reduce(a, b, 1, t, op);
            return load(a, t, 0);
        }
    }

    /** Checks a hand-computed case, and that the reference model agrees with it. */
    private static void assertOp(DataType t, ReduceOp op, long x, long y, long want) {
        long w = want & ReferenceArithmetic.mask(t);
        String what = t + " " + hex(t, x) + " " + op + " " + hex(t, y);
        assertEquals(hex(t, w), hex(t, ReferenceArithmetic.apply(t, op, x, y)), "reference: " + what);
        assertEquals(hex(t, w), hex(t, reduceOne(t, op, x, y)), what);
    }

    private static void assertAvg(DataType t, long x, int n, long want) {
        long w = want & ReferenceArithmetic.mask(t);
        String what = t + " " + hex(t, x) + " / " + n;
        assertEquals(hex(t, w), hex(t, ReferenceArithmetic.average(t, x, n)), "reference: " + what);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = place(arena, Mem.HEAP_LONGS, t, 1, 3);
            store(s, t, new long[] {x});
            Reductions.finishAvg(s, 1, t, ReduceOp.AVG, n);
            assertEquals(hex(t, w), hex(t, load(s, t, 0)), what);
        }
    }

    private static void assertRoundsLike(DataType t, float f, short got) {
        long want;
        if (Float.isNaN(f)) {
            assertTrue(ReferenceArithmetic.isNaN(t, got & 0xFFFF), t + " of NaN " + Float.floatToRawIntBits(f));
            return;
        } else if (f == 0 || Float.isInfinite(f)) {
            want = ReferenceArithmetic.encode(t, f);
        } else {
            want = ReferenceArithmetic.encode(t, ReferenceArithmetic.round(
                    ReferenceArithmetic.Rational.of(f), ReferenceArithmetic.Format.of(t)));
        }
        assertEquals(hex(t, want), hex(t, got & 0xFFFF), t + " of " + f + " (" + Integer.toHexString(Float.floatToRawIntBits(f)) + ")");
    }

    private static String hex(DataType t, long raw) {
        String h = Long.toHexString(raw & ReferenceArithmetic.mask(t));
        return "0x" + "0".repeat(Math.max(0, t.size() * 2 - h.length())) + h;
    }
}
