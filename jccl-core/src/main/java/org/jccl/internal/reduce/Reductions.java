package org.jccl.internal.reduce;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.Optional;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * Element-wise reductions of {@code count} elements of one {@link DataType} with one
 * {@link ReduceOp}: the arithmetic every reducing collective runs on each chunk it receives.
 *
 * <p>Semantics, the same as NCCL's:
 * <ul>
 *   <li>integer {@code SUM} and {@code PROD} wrap around (two's complement);</li>
 *   <li>{@code UINT8}, {@code UINT32} and {@code UINT64} compare as unsigned for {@code MIN}/{@code MAX}
 *       and divide as unsigned in {@link #finishAvg};</li>
 *   <li>{@code FLOAT16} and {@code BFLOAT16} are widened to float32, combined, and rounded back to
 *       nearest-even once per call;</li>
 *   <li>float {@code MIN}/{@code MAX} follow {@link Math#min(float, float)}: NaN wins, -0.0 &lt; +0.0;</li>
 *   <li>{@code AVG} is computed as {@code SUM} by the reduce methods; the caller divides the final
 *       result once with {@link #finishAvg} (dividing at every step would lose precision and, for
 *       integers, give a different answer).</li>
 * </ul>
 *
 * <p>Segments may be native or heap and may start at any byte offset; elements are read in native
 * byte order. Each call checks its arguments once, then streams the operands through small
 * per-thread arrays in chunks, where one specialised loop per (type, operator) does the arithmetic
 * (see {@link Kernels} for why, and for measured speeds).
 *
 * <p>Thread-safe: concurrent calls are fine as long as they write disjoint memory (the staging
 * arrays are per thread).
 */
public final class Reductions {

    private Reductions() {
    }

    /**
     * {@code acc[i] = acc[i] op in[i]} for {@code i < count}. For {@link ReduceOp#AVG} this computes
     * the SUM; the division happens in {@link #finishAvg}.
     *
     * @throws IllegalArgumentException if {@code count} is negative, {@code acc} is read-only, or the
     *         two ranges overlap other than exactly
     * @throws IndexOutOfBoundsException if a segment is shorter than {@code count} elements
     */
    public static void reduce(MemorySegment acc, MemorySegment in, long count, DataType type, ReduceOp op) {
        // An accumulate is the three-operand form with dst == a: each chunk of both sources is read
        // before that chunk of the destination is written.
        reduce(acc, acc, in, count, type, op);
    }

    /**
     * {@code dst[i] = a[i] op b[i]} for {@code i < count}. {@code dst} may be exactly the same memory
     * as {@code a} or {@code b}, but must not partially overlap either. For {@link ReduceOp#AVG} this
     * computes the SUM; the division happens in {@link #finishAvg}.
     *
     * @throws IllegalArgumentException if {@code count} is negative, {@code dst} is read-only, or
     *         {@code dst} partially overlaps {@code a} or {@code b}
     * @throws IndexOutOfBoundsException if a segment is shorter than {@code count} elements
     */
    public static void reduce(MemorySegment dst, MemorySegment a, MemorySegment b, long count,
                              DataType type, ReduceOp op) {
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(op, "op");
        long bytes = checkCount(count, type);
        checkWritable(dst, bytes, "dst", count, type);
        checkReadable(a, bytes, "a", count, type);
        checkReadable(b, bytes, "b", count, type);
        checkAlias(dst, a, bytes, "a");
        checkAlias(dst, b, bytes, "b");
        if (count == 0) {
            return;
        }
        // One switch per call picks the type's driver; it picks the operator's loop once per chunk.
        switch (type) {
            case INT8 -> Kernels.reduceInt8(dst, a, b, count, op);
            case UINT8 -> Kernels.reduceUint8(dst, a, b, count, op);
            case INT32 -> Kernels.reduceInt32(dst, a, b, count, op);
            case UINT32 -> Kernels.reduceUint32(dst, a, b, count, op);
            case INT64 -> Kernels.reduceInt64(dst, a, b, count, op);
            case UINT64 -> Kernels.reduceUint64(dst, a, b, count, op);
            case FLOAT16 -> Kernels.reduceFloat16(dst, a, b, count, op);
            case BFLOAT16 -> Kernels.reduceBfloat16(dst, a, b, count, op);
            case FLOAT32 -> Kernels.reduceFloat32(dst, a, b, count, op);
            case FLOAT64 -> Kernels.reduceFloat64(dst, a, b, count, op);
        }
    }

    /**
     * Completes an {@link ReduceOp#AVG}: {@code data[i] = data[i] / n} in place, where {@code data}
     * holds the SUM over {@code n} ranks. Signed integers truncate toward zero, unsigned integers
     * divide as unsigned, float16 and bfloat16 divide in float and round back to nearest-even,
     * float32 and float64 divide in their own precision. Does nothing for any other operator (and
     * then ignores {@code n}).
     *
     * @throws IllegalArgumentException if {@code op} is AVG and {@code n < 1}, if {@code count} is
     *         negative, or if {@code data} is read-only
     * @throws IndexOutOfBoundsException if {@code data} is shorter than {@code count} elements
     */
    public static void finishAvg(MemorySegment data, long count, DataType type, ReduceOp op, int n) {
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(op, "op");
        if (op != ReduceOp.AVG) {
            return;
        }
        if (n < 1) {
            throw new IllegalArgumentException("finishAvg: rank count must be >= 1, got " + n);
        }
        long bytes = checkCount(count, type);
        checkWritable(data, bytes, "data", count, type);
        if (count == 0 || n == 1) {
            return; // dividing by one is the identity; skipping it also leaves NaN payloads as they are
        }
        switch (type) {
            case INT8 -> Kernels.averageInt8(data, count, n);
            case UINT8 -> Kernels.averageUint8(data, count, n);
            case INT32 -> Kernels.averageInt32(data, count, n);
            case UINT32 -> Kernels.averageUint32(data, count, n);
            case INT64 -> Kernels.averageInt64(data, count, n);
            case UINT64 -> Kernels.averageUint64(data, count, n);
            case FLOAT16 -> Kernels.averageFloat16(data, count, n);
            case BFLOAT16 -> Kernels.averageBfloat16(data, count, n);
            case FLOAT32 -> Kernels.averageFloat32(data, count, n);
            case FLOAT64 -> Kernels.averageFloat64(data, count, n);
        }
    }

    // ---- 16-bit float conversions ----

    /** Widens IEEE 754 binary16 bits to float; exact for every value, NaN stays NaN. */
    public static float halfToFloat(short bits) {
        return Float.float16ToFloat(bits); // an intrinsic (F16C on x86) since JDK 20
    }

    /** Rounds a float to IEEE 754 binary16 bits, to nearest-even; overflow gives infinity. */
    public static short floatToHalf(float f) {
        return Float.floatToFloat16(f);
    }

    /** Widens bfloat16 bits (the upper half of a float32) to float; exact for every value. */
    public static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /**
     * Rounds a float to bfloat16 bits (its upper 16 bits) to nearest-even; overflow gives infinity,
     * and a NaN stays a NaN of the same sign, made quiet.
     */
    public static short floatToBf16(float f) {
        int x = Float.floatToRawIntBits(f);
        if ((x & 0x7FFF_FFFF) > 0x7F80_0000) {
            // Truncating alone could drop every payload bit and turn the NaN into infinity; setting
            // the quiet bit (top mantissa bit of the bfloat16) keeps it a NaN.
            return (short) ((x >>> 16) | 0x0040);
        }
        // Add just under half a bfloat16 ulp, plus one when the kept part is odd: a tie then carries
        // into the kept bits only when they are odd, which is round-half-to-even. A carry out of the
        // mantissa bumps the exponent, which is right (up to infinity at the top).
        int roundingBias = 0x7FFF + ((x >>> 16) & 1);
        return (short) ((x + roundingBias) >>> 16);
    }

    // ---- argument checks: once per call, so the loops need none of their own ----

    private static long checkCount(long count, DataType type) {
        if (count < 0) {
            throw new IllegalArgumentException("Reductions: negative element count " + count);
        }
        return type.bytes(count);
    }

    private static void checkReadable(MemorySegment s, long bytes, String name, long count, DataType type) {
        Objects.requireNonNull(s, name);
        if (s.byteSize() < bytes) {
            throw new IndexOutOfBoundsException("Reductions: segment '" + name + "' holds " + s.byteSize()
                    + " bytes, needs " + bytes + " (" + count + " x " + type.ncclName() + ")");
        }
    }

    private static void checkWritable(MemorySegment s, long bytes, String name, long count, DataType type) {
        checkReadable(s, bytes, name, count, type);
        if (s.isReadOnly() && bytes > 0) {
            throw new IllegalArgumentException("Reductions: destination segment '" + name + "' is read-only");
        }
    }

    /**
     * Rejects a destination that overlaps a source at a different start: the loop runs forward, so
     * it would read elements it had already overwritten and return a silently wrong result.
     */
    private static void checkAlias(MemorySegment dst, MemorySegment src, long bytes, String srcName) {
        if (bytes == 0 || dst == src) {
            return;
        }
        // Both views have the same length, so d lying wholly inside s means d is exactly s.
        Optional<MemorySegment> overlap = dst.asSlice(0, bytes).asOverlappingSlice(src.asSlice(0, bytes));
        if (overlap.isPresent() && overlap.get().byteSize() != bytes) {
            throw new IllegalArgumentException("Reductions: dst partially overlaps '" + srcName + "' ("
                    + overlap.get().byteSize() + " of " + bytes
                    + " bytes shared); it must be exactly the same memory or disjoint");
        }
    }
}
