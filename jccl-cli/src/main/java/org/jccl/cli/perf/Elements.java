package org.jccl.cli.perf;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.jccl.DataType;

/**
 * Reads and writes single elements of any {@link DataType} in native memory, as raw bits and as
 * numbers. The data check works on raw bits so that it compares exactly what the collective wrote.
 *
 * <p>Elements are accessed unaligned: the benchmark's buffers are aligned, but slices start at
 * rank-dependent offsets and an aligned layout would turn a correct offset into an exception.
 */
final class Elements {
    private Elements() {
    }

    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    /** The raw bits of element {@code index}, zero-extended to a long. */
    static long getBits(MemorySegment s, long index, DataType t) {
        return switch (t.size()) {
            case 1 -> s.get(ValueLayout.JAVA_BYTE, index) & 0xFFL;
            case 2 -> s.get(SHORT, index * 2) & 0xFFFFL;
            case 4 -> s.get(INT, index * 4) & 0xFFFF_FFFFL;
            default -> s.get(LONG, index * 8);
        };
    }

    /** Stores the low {@code t.size()} bytes of {@code bits} as element {@code index}. */
    static void setBits(MemorySegment s, long index, DataType t, long bits) {
        switch (t.size()) {
            case 1 -> s.set(ValueLayout.JAVA_BYTE, index, (byte) bits);
            case 2 -> s.set(SHORT, index * 2, (short) bits);
            case 4 -> s.set(INT, index * 4, (int) bits);
            default -> s.set(LONG, index * 8, bits);
        }
    }

    /**
     * The bits of the integer {@code v} in type {@code t}: two's-complement truncation for integer
     * types (so wrap-around matches what C and Java arithmetic do), rounding for floating types.
     */
    static long fromLong(DataType t, long v) {
        return t.isFloatingPoint() ? fromDouble(t, (double) v) : v & mask(t);
    }

    /** The bits of {@code v} rounded to the nearest value of type {@code t} (ties to even). */
    static long fromDouble(DataType t, double v) {
        return switch (t) {
            case FLOAT64 -> Double.doubleToRawLongBits(v);
            case FLOAT32 -> Float.floatToRawIntBits((float) v) & 0xFFFF_FFFFL;
            case FLOAT16 -> Float.floatToFloat16((float) v) & 0xFFFFL;
            case BFLOAT16 -> bf16((float) v);
            default -> (long) v & mask(t); // integer types: truncation toward zero, then wrap
        };
    }

    /** The value of {@code bits} of type {@code t} as a double (unsigned types read as unsigned). */
    static double toDouble(DataType t, long bits) {
        return switch (t) {
            case FLOAT64 -> Double.longBitsToDouble(bits);
            case FLOAT32 -> Float.intBitsToFloat((int) bits);
            case FLOAT16 -> Float.float16ToFloat((short) bits);
            case BFLOAT16 -> Float.intBitsToFloat((int) (bits << 16));
            case UINT64 -> bits >= 0 ? (double) bits : (double) (bits >>> 1) * 2.0 + (bits & 1);
            default -> (double) toLong(t, bits);
        };
    }

    /** The value of integer-type {@code bits}: sign-extended for signed types, zero-extended otherwise. */
    static long toLong(DataType t, long bits) {
        int width = t.size() * 8;
        if (width == 64) {
            return bits;
        }
        return t.isSigned() ? (bits << (64 - width)) >> (64 - width) : bits & mask(t);
    }

    /** All ones over the type's width. */
    static long mask(DataType t) {
        return t.size() == 8 ? -1L : (1L << (t.size() * 8)) - 1;
    }

    // float -> bfloat16, round to nearest even, keeping NaNs quiet (the upper half of a float32).
    private static long bf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if (Float.isNaN(f)) {
            return ((bits >>> 16) | 0x40) & 0xFFFFL;
        }
        int rounding = 0x7FFF + ((bits >>> 16) & 1);
        return ((bits + rounding) >>> 16) & 0xFFFFL;
    }
}
