package org.jccl.testing;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * Deterministic test data and an independent float64/long reference for every type and operator.
 * Integer references use wrap-around arithmetic at the type's width (as NCCL); float references
 * are computed in double and compared within the rounding the type allows for n terms.
 */
public final class Data {
    private Data() {
    }

    /** Element i of rank r's input: small values, exact in every type; products stay near 1. */
    public static double value(DataType t, ReduceOp op, int rank, long i) {
        long h = (rank * 31L + i * 17L + (i >>> 7) * 5) % 97;
        if (t.isFloatingPoint()) {
            return op == ReduceOp.PROD ? 0.5 + 0.5 * (h % 3) : h / 8.0 - 6.0;
        }
        long v = op == ReduceOp.PROD ? (h % 3) + (t.isSigned() ? -1 : 1) : (t.isSigned() ? h - 48 : h);
        return v;
    }

    public static void fill(MemorySegment s, DataType t, ReduceOp op, int rank, long count) {
        for (long i = 0; i < count; i++) {
            put(s, t, i, value(t, op, rank, i));
        }
    }

    /** Writes v (already exact in the type) at element i. */
    public static void put(MemorySegment s, DataType t, long i, double v) {
        long o = i * t.size();
        switch (t) {
            case INT8, UINT8 -> s.set(ValueLayout.JAVA_BYTE, o, (byte) (long) v);
            case INT32, UINT32 -> s.set(ValueLayout.JAVA_INT_UNALIGNED, o, (int) (long) v);
            case INT64, UINT64 -> s.set(ValueLayout.JAVA_LONG_UNALIGNED, o, (long) v);
            case FLOAT16 -> s.set(ValueLayout.JAVA_SHORT_UNALIGNED, o, Float.floatToFloat16((float) v));
            case BFLOAT16 -> s.set(ValueLayout.JAVA_SHORT_UNALIGNED, o, (short) (Float.floatToRawIntBits((float) v) >>> 16));
            case FLOAT32 -> s.set(ValueLayout.JAVA_FLOAT_UNALIGNED, o, (float) v);
            case FLOAT64 -> s.set(ValueLayout.JAVA_DOUBLE_UNALIGNED, o, v);
        }
    }

    /** Element i as a double (floats) or as the exact integer value (unsigned types as unsigned, uint64 as signed bits). */
    public static double get(MemorySegment s, DataType t, long i) {
        long o = i * t.size();
        return switch (t) {
            case INT8 -> s.get(ValueLayout.JAVA_BYTE, o);
            case UINT8 -> Byte.toUnsignedInt(s.get(ValueLayout.JAVA_BYTE, o));
            case INT32 -> s.get(ValueLayout.JAVA_INT_UNALIGNED, o);
            case UINT32 -> Integer.toUnsignedLong(s.get(ValueLayout.JAVA_INT_UNALIGNED, o));
            case INT64, UINT64 -> s.get(ValueLayout.JAVA_LONG_UNALIGNED, o);
            case FLOAT16 -> Float.float16ToFloat(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, o));
            case BFLOAT16 -> Float.intBitsToFloat(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, o) << 16);
            case FLOAT32 -> s.get(ValueLayout.JAVA_FLOAT_UNALIGNED, o);
            case FLOAT64 -> s.get(ValueLayout.JAVA_DOUBLE_UNALIGNED, o);
        };
    }

    /** Reference reduction of element i over ranks 0..n-1 (integers wrap at the type's width). */
    public static double reduce(DataType t, ReduceOp op, int n, long i) {
        if (t.isFloatingPoint()) {
            double acc = value(t, op, 0, i);
            for (int r = 1; r < n; r++) {
                double x = value(t, op, r, i);
                acc = switch (op) {
                    case SUM, AVG -> acc + x;
                    case PROD -> acc * x;
                    case MIN -> Math.min(acc, x);
                    case MAX -> Math.max(acc, x);
                };
            }
            return op == ReduceOp.AVG ? acc / n : acc;
        }
        long acc = (long) value(t, op, 0, i);
        for (int r = 1; r < n; r++) {
            long x = (long) value(t, op, r, i);
            acc = switch (op) {
                case SUM, AVG -> acc + x;
                case PROD -> acc * x;
                case MIN -> t.isSigned() ? Math.min(acc, x) : (Long.compareUnsigned(acc, x) <= 0 ? acc : x);
                case MAX -> t.isSigned() ? Math.max(acc, x) : (Long.compareUnsigned(acc, x) >= 0 ? acc : x);
            };
        }
        acc = narrow(t, acc);
        if (op == ReduceOp.AVG) {
            acc = t.isSigned() ? acc / n : Long.divideUnsigned(acc, n);
            acc = narrow(t, acc);
        }
        return acc;
    }

    /** Wraps to the type's width, returned as the value get() would read. */
    static long narrow(DataType t, long v) {
        return switch (t) {
            case INT8 -> (byte) v;
            case UINT8 -> v & 0xFF;
            case INT32 -> (int) v;
            case UINT32 -> v & 0xFFFF_FFFFL;
            default -> v;
        };
    }

    /** Allowed error for a reduction of n terms of this type (0 for integers and for min/max). */
    public static double tolerance(DataType t, ReduceOp op, int n, long i) {
        if (!t.isFloatingPoint() || op == ReduceOp.MIN || op == ReduceOp.MAX) {
            return 0;
        }
        double eps = switch (t) {
            case FLOAT16 -> 0x1p-10;
            case BFLOAT16 -> 0x1p-7;
            case FLOAT32 -> 0x1p-23;
            default -> 0x1p-52;
        };
        double mag = 0;
        if (op == ReduceOp.PROD) {
            mag = Math.abs(reduce(t, op, n, i));
        } else {
            for (int r = 0; r < n; r++) {
                mag += Math.abs(value(t, op, r, i));
            }
        }
        return 2 * n * eps * mag + 1e-300;
    }

    /** Fills with a value that no correct result has here (NaN for floats, a pattern for integers). */
    public static void poison(MemorySegment s) {
        s.fill((byte) 0x7F);
    }
}
