package org.jccl.cuda.testing;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Locale;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;

/**
 * Test data and an independent reference for every {@link DataType} and {@link ReduceOp}: the GPU
 * results are checked against it, never against another GPU run.
 *
 * <p><b>Inputs.</b> Element {@code i} of rank {@code r} is a pure function of (seed, rank, i) (a
 * SplitMix64 stream per rank), so a failing case is reproduced from its seed alone and the reference
 * is recomputed from the same function rather than read back from the buffers under test. The value
 * domains are chosen so that the reference is exact where exactness is expected:
 * <ul>
 *   <li>integers: uniform over the whole type; SUM, PROD and AVG wrap around at the type's width
 *       (two's complement), which {@link #combine} models exactly;</li>
 *   <li>float32/float64: uniform in [-1, 1) (PROD: +-[0.5, 2), so n-rank products stay in range);
 *       compared within a rounding bound (see {@link #tolerance});</li>
 *   <li>float16: multiples of 1/16 in [-7.94, 7.94] and bfloat16: multiples of 1/4 in [-3.75, 3.75],
 *       so that every partial sum over up to 8 ranks is exact in the type: SUM, MIN, MAX (and AVG
 *       over a power-of-two rank count) must match bit for bit, whatever the summation order; PROD
 *       uses +-k/8 (k = 4..16) and is compared within a rounding bound.</li>
 * </ul>
 *
 * <p><b>Semantics</b> are those of jccl's CPU path ({@link Reductions}, NCCL's): integer AVG is the
 * wrapped SUM divided once by the rank count, truncating toward zero (unsigned types divide as
 * unsigned); unsigned MIN/MAX compare as unsigned; float AVG is SUM / n.
 *
 * <p>Integers are carried as canonical {@code long}s: signed types sign-extended, uint8/uint32
 * zero-extended, uint64 as its raw bits. Floats are carried as {@code double}s (exact widenings).
 */
public final class Elements {
    private Elements() {
    }

    // ------------------------------------------------------------------ pseudo-random inputs

    /** SplitMix64's finaliser. */
    public static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    /** The seed of rank {@code rank}'s stream within a case seeded with {@code seed}. */
    public static long rankSeed(long seed, int rank) {
        return mix(seed ^ (0xD1B54A32D192ED03L * (rank + 1)));
    }

    private static long bits(long rankSeed, long i) {
        return mix(rankSeed + 0x9E3779B97F4A7C15L * (i + 1));
    }

    /** 64-bit FNV-1a of a string: a stable per-case seed component. */
    public static long fnv(String s) {
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < s.length(); i++) {
            h ^= s.charAt(i);
            h *= 0x100000001b3L;
        }
        return h;
    }

    /** Integer input element {@code i} of the rank whose stream is {@code rankSeed} (canonical form). */
    public static long intValue(DataType t, long rankSeed, long i) {
        return normalize(t, bits(rankSeed, i));
    }

    /** Floating-point input element {@code i} (exactly representable in {@code t}). */
    public static double floatValue(DataType t, ReduceOp op, long rankSeed, long i) {
        long h = bits(rankSeed, i);
        boolean prod = op == ReduceOp.PROD;
        double sign = (h & 1) == 0 ? 1.0 : -1.0;
        double u = (h >>> 11) * 0x1.0p-53; // [0, 1)
        return switch (t) {
            case FLOAT64 -> prod ? sign * (0.5 + 1.5 * u) : 2.0 * u - 1.0;
            case FLOAT32 -> (float) (prod ? sign * (0.5 + 1.5 * u) : 2.0 * u - 1.0);
            case FLOAT16 -> prod ? sign * (4 + Long.remainderUnsigned(h >>> 1, 13)) / 8.0
                    : (Long.remainderUnsigned(h >>> 1, 255) - 127) / 16.0;
            case BFLOAT16 -> prod ? sign * (4 + Long.remainderUnsigned(h >>> 1, 13)) / 8.0
                    : (Long.remainderUnsigned(h >>> 1, 31) - 15) / 4.0;
            default -> throw new IllegalArgumentException(t + " is not a floating-point type");
        };
    }

    /** Writes input element {@code i} of a rank into {@code s} (element {@code i} of the segment). */
    public static void fill(MemorySegment s, DataType t, ReduceOp op, long rankSeed, long count) {
        if (t.isFloatingPoint()) {
            for (long i = 0; i < count; i++) {
                putFloat(s, t, i, floatValue(t, op, rankSeed, i));
            }
        } else {
            for (long i = 0; i < count; i++) {
                putInt(s, t, i, intValue(t, rankSeed, i));
            }
        }
    }

    // ------------------------------------------------------------------ element access (native order)

    /** The canonical long of an integer value at the type's width. */
    public static long normalize(DataType t, long v) {
        return switch (t) {
            case INT8 -> (byte) v;
            case UINT8 -> v & 0xFFL;
            case INT32 -> (int) v;
            case UINT32 -> v & 0xFFFF_FFFFL;
            case INT64, UINT64 -> v;
            default -> throw new IllegalArgumentException(t + " is not an integer type");
        };
    }

    public static void putInt(MemorySegment s, DataType t, long i, long v) {
        long o = i * t.size();
        switch (t) {
            case INT8, UINT8 -> s.set(ValueLayout.JAVA_BYTE, o, (byte) v);
            case INT32, UINT32 -> s.set(ValueLayout.JAVA_INT_UNALIGNED, o, (int) v);
            case INT64, UINT64 -> s.set(ValueLayout.JAVA_LONG_UNALIGNED, o, v);
            default -> throw new IllegalArgumentException(t + " is not an integer type");
        }
    }

    public static long getInt(MemorySegment s, DataType t, long i) {
        long o = i * t.size();
        return switch (t) {
            case INT8 -> s.get(ValueLayout.JAVA_BYTE, o);
            case UINT8 -> Byte.toUnsignedLong(s.get(ValueLayout.JAVA_BYTE, o));
            case INT32 -> s.get(ValueLayout.JAVA_INT_UNALIGNED, o);
            case UINT32 -> Integer.toUnsignedLong(s.get(ValueLayout.JAVA_INT_UNALIGNED, o));
            case INT64, UINT64 -> s.get(ValueLayout.JAVA_LONG_UNALIGNED, o);
            default -> throw new IllegalArgumentException(t + " is not an integer type");
        };
    }

    /** Writes {@code v}, which must be exact in {@code t} (it is rounded to nearest-even otherwise). */
    public static void putFloat(MemorySegment s, DataType t, long i, double v) {
        long o = i * t.size();
        switch (t) {
            case FLOAT16 -> s.set(ValueLayout.JAVA_SHORT_UNALIGNED, o, Reductions.floatToHalf((float) v));
            case BFLOAT16 -> s.set(ValueLayout.JAVA_SHORT_UNALIGNED, o, Reductions.floatToBf16((float) v));
            case FLOAT32 -> s.set(ValueLayout.JAVA_FLOAT_UNALIGNED, o, (float) v);
            case FLOAT64 -> s.set(ValueLayout.JAVA_DOUBLE_UNALIGNED, o, v);
            default -> throw new IllegalArgumentException(t + " is not a floating-point type");
        }
    }

    public static double getFloat(MemorySegment s, DataType t, long i) {
        long o = i * t.size();
        return switch (t) {
            case FLOAT16 -> Reductions.halfToFloat(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, o));
            case BFLOAT16 -> Reductions.bf16ToFloat(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, o));
            case FLOAT32 -> s.get(ValueLayout.JAVA_FLOAT_UNALIGNED, o);
            case FLOAT64 -> s.get(ValueLayout.JAVA_DOUBLE_UNALIGNED, o);
            default -> throw new IllegalArgumentException(t + " is not a floating-point type");
        };
    }

    /** The raw bits of element {@code i}, as an unsigned hex string of the type's width. */
    public static String hex(MemorySegment s, DataType t, long i) {
        long o = i * t.size();
        long raw = switch (t.size()) {
            case 1 -> Byte.toUnsignedLong(s.get(ValueLayout.JAVA_BYTE, o));
            case 2 -> Short.toUnsignedLong(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, o));
            case 4 -> Integer.toUnsignedLong(s.get(ValueLayout.JAVA_INT_UNALIGNED, o));
            default -> s.get(ValueLayout.JAVA_LONG_UNALIGNED, o);
        };
        return "0x" + String.format(Locale.ROOT, "%0" + (2 * t.size()) + "x", raw);
    }

    // ------------------------------------------------------------------ reference arithmetic

    /** {@code a op b} for canonical integers of type {@code t}; AVG combines as SUM. */
    public static long combine(DataType t, ReduceOp op, long a, long b) {
        return switch (op) {
            case SUM, AVG -> normalize(t, a + b);
            case PROD -> normalize(t, a * b); // the low bits of a product do not depend on signedness
            case MIN -> (t.isSigned() ? Long.compare(a, b) : Long.compareUnsigned(a, b)) <= 0 ? a : b;
            case MAX -> (t.isSigned() ? Long.compare(a, b) : Long.compareUnsigned(a, b)) >= 0 ? a : b;
        };
    }

    /** Finishes an integer AVG: the wrapped sum divided by n, truncating toward zero / unsigned. */
    public static long finishAvg(DataType t, long sum, int n) {
        return t.isSigned() ? normalize(t, sum / n) : normalize(t, Long.divideUnsigned(sum, n));
    }

    /** {@code a op b} in float64; AVG combines as SUM. */
    public static double combine(ReduceOp op, double a, double b) {
        return switch (op) {
            case SUM, AVG -> a + b;
            case PROD -> a * b;
            case MIN -> Math.min(a, b);
            case MAX -> Math.max(a, b);
        };
    }

    /** Significand bits (with the implicit one) of a floating-point type. */
    public static int precision(DataType t) {
        return switch (t) {
            case FLOAT64 -> 53;
            case FLOAT32 -> 24;
            case FLOAT16 -> 11;
            case BFLOAT16 -> 8;
            default -> throw new IllegalArgumentException(t + " is not a floating-point type");
        };
    }

    /** The spacing of {@code t}'s values around {@code v} (one ulp), at least the smallest subnormal. */
    public static double ulp(DataType t, double v) {
        double a = Math.abs(v);
        int p = precision(t);
        int minExp = switch (t) {
            case FLOAT64 -> -1022;
            case FLOAT32 -> -126;
            case FLOAT16 -> -14;
            case BFLOAT16 -> -126;
            default -> throw new IllegalArgumentException(t.toString());
        };
        int e = a == 0 || !Double.isFinite(a) ? minExp : Math.max(Math.getExponent(a), minExp);
        return Math.scalb(1.0, e - (p - 1));
    }

    /** {@code v} rounded to the nearest value of {@code t} (as a double). */
    public static double roundTo(DataType t, double v) {
        return switch (t) {
            case FLOAT64 -> v;
            case FLOAT32 -> (float) v;
            case FLOAT16 -> Reductions.halfToFloat(Reductions.floatToHalf((float) v));
            case BFLOAT16 -> Reductions.bf16ToFloat(Reductions.floatToBf16((float) v));
            default -> throw new IllegalArgumentException(t.toString());
        };
    }

    /**
     * Whether a float reduction over {@code n} ranks of this test's inputs must be exact: float16 and
     * bfloat16 SUM/MIN/MAX over at most 8 ranks (every partial sum is representable), AVG too when n
     * is a power of two (the division is exact); MIN/MAX always.
     */
    public static boolean exact(DataType t, ReduceOp op, int n) {
        if (op == ReduceOp.MIN || op == ReduceOp.MAX) {
            return true;
        }
        boolean small16 = (t == DataType.FLOAT16 || t == DataType.BFLOAT16) && n <= 8;
        return small16 && (op == ReduceOp.SUM || (op == ReduceOp.AVG && Integer.bitCount(n) == 1));
    }

    /**
     * The largest acceptable |got - ref| for a float reduction over {@code n} ranks, where {@code ref}
     * is the float64 reference (in rank order) and {@code sumAbs} the sum of the inputs' magnitudes:
     * a worst-case bound for n-1 roundings in the type in any order (2 n u sumAbs for SUM, over n for
     * AVG, 2 n u |ref| for PROD, u = 2^-precision), plus one ulp of the type at the result for the
     * final rounding (which also covers AVG computed as a pre-multiplied sum, as NCCL does). Zero
     * where {@link #exact} holds.
     */
    public static double tolerance(DataType t, ReduceOp op, int n, double ref, double sumAbs) {
        if (exact(t, op, n)) {
            return 0;
        }
        double u = Math.scalb(1.0, -precision(t));
        double bound = switch (op) {
            case SUM -> 2.0 * n * u * sumAbs;
            case AVG -> 2.0 * n * u * sumAbs / n + 2 * u * Math.abs(ref);
            case PROD -> 2.0 * n * u * Math.abs(ref);
            case MIN, MAX -> 0;
        };
        return bound + ulp(t, ref);
    }

    /** A value for a message: the number (unsigned where the type is) and its bits. */
    public static String show(MemorySegment s, DataType t, long i) {
        String v;
        if (t.isFloatingPoint()) {
            v = Double.toString(getFloat(s, t, i));
        } else if (t == DataType.UINT64) {
            v = Long.toUnsignedString(getInt(s, t, i));
        } else {
            v = Long.toString(getInt(s, t, i));
        }
        return v + " (" + hex(s, t, i) + ")";
    }

    /** An expected integer for a message. */
    public static String showInt(DataType t, long v) {
        String d = t == DataType.UINT64 ? Long.toUnsignedString(v) : Long.toString(v);
        long raw = t.size() == 8 ? v : v & ((1L << (8 * t.size())) - 1);
        return d + " (0x" + String.format(Locale.ROOT, "%0" + (2 * t.size()) + "x", raw) + ")";
    }
}
