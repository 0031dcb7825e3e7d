package org.jccl.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * CollectiveCheck compares without tolerance, so its reference must be the only correct answer: any
 * evaluation order in the type's own precision (forward, backward, pairwise, rounding after every
 * step) must give exactly the reference's bits, and AVG's sum must fit the type and divide evenly.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CheckValuesTest {

    private static final int[] RANKS = {1, 2, 3, 4, 5, 7, 8, 16, 33, 64};
    private static final int ELEMENTS = 3000;

    /** Rounds a float32 to the type's precision, as a reduction kernel stores an intermediate result. */
    private static float round(DataType t, float v) {
        return switch (t) {
            case FLOAT16 -> Float.float16ToFloat(Float.floatToFloat16(v));
            case BFLOAT16 -> {
                int bits = Float.floatToRawIntBits(v);
                int rounded = (bits + 0x7FFF + ((bits >>> 16) & 1)) & 0xFFFF0000; // round to nearest even
                yield Float.intBitsToFloat(rounded);
            }
            default -> v;
        };
    }

    /** op over the ranks in [from, to) in the type's precision, combining halves (a tree) when pairwise. */
    private static double combine(CheckValues v, DataType t, ReduceOp op, int[] order, int from, int to, long i, boolean pairwise) {
        if (to - from == 1) {
            return CheckValues.decode(t, v.input(t, op, order[from], i));
        }
        double a;
        double b;
        if (pairwise) {
            int mid = (from + to) >>> 1;
            a = combine(v, t, op, order, from, mid, i, true);
            b = combine(v, t, op, order, mid, to, i, true);
        } else {
            a = combine(v, t, op, order, from, to - 1, i, false);
            b = CheckValues.decode(t, v.input(t, op, order[to - 1], i));
        }
        double r = switch (op) {
            case SUM, AVG -> a + b;
            case PROD -> a * b;
            case MIN -> Math.min(a, b);
            case MAX -> Math.max(a, b);
        };
        return t == DataType.FLOAT64 ? r : round(t, (float) r);
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(value = DataType.class, names = {"FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64"})
    void floatingReductionsAreExactInAnyOrder(DataType t) {
        for (int n : RANKS) {
            int[] forward = new int[n];
            int[] backward = new int[n];
            for (int r = 0; r < n; r++) {
                forward[r] = r;
                backward[r] = n - 1 - r;
            }
            for (ReduceOp op : ReduceOp.values()) {
                CheckValues v = new CheckValues(n * 31L + op.ordinal(), n);
                for (long i = 0; i < ELEMENTS; i++) {
                    long want = v.reduced(t, op, i);
                    for (int[] order : new int[][] {forward, backward}) {
                        for (boolean pairwise : new boolean[] {false, true}) {
                            double got = combine(v, t, op, order, 0, n, i, pairwise);
                            if (op == ReduceOp.AVG) {
                                got = t == DataType.FLOAT64 ? got / n : round(t, (float) got / n);
                            }
                            assertTrue(CheckValues.same(t, CheckValues.encode(t, got), want), t + " " + op + " n=" + n + " i=" + i
                                    + (pairwise ? " pairwise" : " in order") + ": got " + got + ", reference "
                                    + CheckValues.show(t, want));
                        }
                    }
                }
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(value = DataType.class, names = {"INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64"})
    void integerAverageSumsFitTheTypeAndDivideEvenly(DataType t) {
        long min = switch (t) {
            case INT8 -> Byte.MIN_VALUE;
            case INT32 -> Integer.MIN_VALUE;
            case INT64 -> Long.MIN_VALUE;
            default -> 0;
        };
        long max = switch (t) {
            case INT8 -> Byte.MAX_VALUE;
            case UINT8 -> 255;
            case INT32 -> Integer.MAX_VALUE;
            case UINT32 -> 0xFFFF_FFFFL;
            default -> Long.MAX_VALUE;
        };
        for (int n : RANKS) {
            CheckValues v = new CheckValues(n, n);
            for (long i = 0; i < ELEMENTS; i++) {
                long sum = 0;
                for (int r = 0; r < n; r++) {
                    long x = CheckValues.integer(t, v.input(t, ReduceOp.AVG, r, i));
                    assertTrue(x >= min && x <= max, t + " input " + x);
                    sum += x;
                    // Every partial sum fits too: a kernel that wraps at the type's width must not overflow.
                    assertTrue(sum >= min && sum <= max, t + " n=" + n + " partial sum " + sum);
                }
                assertEquals(0, sum % n, t + " n=" + n + " i=" + i + ": sum " + sum + " is not a multiple of n");
                assertEquals(CheckValues.mask(t.size(), sum / n), v.reduced(t, ReduceOp.AVG, i));
            }
        }
    }

    @Test
    void integerSumsWrapAtTheTypesWidth() {
        CheckValues v = new CheckValues(5, 3);
        for (long i = 0; i < ELEMENTS; i++) {
            int a = (int) CheckValues.integer(DataType.INT32, v.input(DataType.INT32, ReduceOp.SUM, 0, i));
            int b = (int) CheckValues.integer(DataType.INT32, v.input(DataType.INT32, ReduceOp.SUM, 1, i));
            int c = (int) CheckValues.integer(DataType.INT32, v.input(DataType.INT32, ReduceOp.SUM, 2, i));
            assertEquals(Integer.toUnsignedLong(a + b + c), v.reduced(DataType.INT32, ReduceOp.SUM, i));
            byte x = (byte) v.input(DataType.UINT8, ReduceOp.MAX, 0, i);
            byte y = (byte) v.input(DataType.UINT8, ReduceOp.MAX, 1, i);
            byte z = (byte) v.input(DataType.UINT8, ReduceOp.MAX, 2, i);
            int umax = Math.max(Byte.toUnsignedInt(x), Math.max(Byte.toUnsignedInt(y), Byte.toUnsignedInt(z)));
            assertEquals(umax, v.reduced(DataType.UINT8, ReduceOp.MAX, i), "uint8 max compares unsigned");
        }
    }

    @Test
    void everyCheckAndEveryRankHasItsOwnData() {
        CheckValues a = new CheckValues(1, 4);
        CheckValues b = new CheckValues(2, 4);
        int same = 0;
        for (long i = 0; i < 1000; i++) {
            same += a.bits(0, i) == b.bits(0, i) ? 1 : 0;
            same += a.bits(0, i) == a.bits(1, i) ? 1 : 0;
            same += a.bits(0, i) == a.bits(0, i + 1) ? 1 : 0;
        }
        assertEquals(0, same);
        int differ = 0;
        for (long i = 0; i < 100; i++) {
            differ += a.reduced(DataType.FLOAT32, ReduceOp.SUM, i) != b.reduced(DataType.FLOAT32, ReduceOp.SUM, i) ? 1 : 0;
        }
        assertTrue(differ > 50, "two checks' results differ in most elements, got " + differ + " of 100");
    }
}
