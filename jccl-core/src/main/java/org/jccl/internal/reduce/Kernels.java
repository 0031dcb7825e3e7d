package org.jccl.internal.reduce;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The specialised loops behind {@link Reductions}: one method per (element width, operator, and
 * signedness where it matters), each a counted loop {@code d[i] = a[i] op b[i]} with a long
 * induction variable and nothing else in its body.
 *
 * <p>Why one method per combination instead of one generic loop with a lambda or a switch per
 * element: C2 compiles each method on its own, so every loop keeps a clean profile, is unrolled,
 * and carries no call or branch that depends on the operator. A shared loop would see many
 * operators and stop inlining them.
 *
 * <p>Sum and product are the same bits for signed and unsigned integers (two's complement wraps),
 * so only min and max have unsigned variants. {@code d} may be exactly {@code a} or {@code b}: each
 * element is read before it is written and no element reads another index. Callers check bounds
 * and overlap; the segments' own checks stay as the safety net.
 *
 * <p>Stateless; safe for concurrent use on disjoint memory.
 */
final class Kernels {

    // Unaligned layouts in native byte order: buffers may start at any byte offset, heap or native.
    static final ValueLayout.OfByte I8 = ValueLayout.JAVA_BYTE;
    static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;
    static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;
    static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED;
    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED;

    private Kernels() {
    }

    // ---- 8-bit integers (int8, uint8) ----

    /** Wrapping sum, int8 and uint8 alike. */
    static void sum8(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            byte x = a.getAtIndex(I8, i);
            byte y = b.getAtIndex(I8, i);
            d.setAtIndex(I8, i, (byte) (x + y));
        }
    }

    /** Wrapping product: the low 8 bits do not depend on signedness. */
    static void prod8(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            byte x = a.getAtIndex(I8, i);
            byte y = b.getAtIndex(I8, i);
            d.setAtIndex(I8, i, (byte) (x * y));
        }
    }

    static void minS8(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            byte x = a.getAtIndex(I8, i);
            byte y = b.getAtIndex(I8, i);
            d.setAtIndex(I8, i, (byte) Math.min(x, y));
        }
    }

    static void maxS8(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            byte x = a.getAtIndex(I8, i);
            byte y = b.getAtIndex(I8, i);
            d.setAtIndex(I8, i, (byte) Math.max(x, y));
        }
    }

    /** Unsigned: widen without sign extension, so 0xFF is 255, not -1. */
    static void minU8(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            byte x = a.getAtIndex(I8, i);
            byte y = b.getAtIndex(I8, i);
            d.setAtIndex(I8, i, (byte) Math.min(x & 0xFF, y & 0xFF));
        }
    }

    static void maxU8(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            byte x = a.getAtIndex(I8, i);
            byte y = b.getAtIndex(I8, i);
            d.setAtIndex(I8, i, (byte) Math.max(x & 0xFF, y & 0xFF));
        }
    }

    // ---- 32-bit integers (int32, uint32) ----

    static void sum32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            int x = a.getAtIndex(I32, i);
            int y = b.getAtIndex(I32, i);
            d.setAtIndex(I32, i, x + y);
        }
    }

    static void prod32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            int x = a.getAtIndex(I32, i);
            int y = b.getAtIndex(I32, i);
            d.setAtIndex(I32, i, x * y);
        }
    }

    static void minS32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            int x = a.getAtIndex(I32, i);
            int y = b.getAtIndex(I32, i);
            d.setAtIndex(I32, i, Math.min(x, y));
        }
    }

    static void maxS32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            int x = a.getAtIndex(I32, i);
            int y = b.getAtIndex(I32, i);
            d.setAtIndex(I32, i, Math.max(x, y));
        }
    }

    /** Unsigned: flipping the sign bit maps unsigned order onto signed order, and keeps the loop branch-free (a compareUnsigned ternary would be a branch per element). */
    static void minU32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            int x = a.getAtIndex(I32, i);
            int y = b.getAtIndex(I32, i);
            d.setAtIndex(I32, i, Math.min(x ^ Integer.MIN_VALUE, y ^ Integer.MIN_VALUE) ^ Integer.MIN_VALUE);
        }
    }

    static void maxU32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            int x = a.getAtIndex(I32, i);
            int y = b.getAtIndex(I32, i);
            d.setAtIndex(I32, i, Math.max(x ^ Integer.MIN_VALUE, y ^ Integer.MIN_VALUE) ^ Integer.MIN_VALUE);
        }
    }

    // ---- 64-bit integers (int64, uint64) ----

    static void sum64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            long x = a.getAtIndex(I64, i);
            long y = b.getAtIndex(I64, i);
            d.setAtIndex(I64, i, x + y);
        }
    }

    static void prod64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            long x = a.getAtIndex(I64, i);
            long y = b.getAtIndex(I64, i);
            d.setAtIndex(I64, i, x * y);
        }
    }

    static void minS64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            long x = a.getAtIndex(I64, i);
            long y = b.getAtIndex(I64, i);
            d.setAtIndex(I64, i, Math.min(x, y));
        }
    }

    static void maxS64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            long x = a.getAtIndex(I64, i);
            long y = b.getAtIndex(I64, i);
            d.setAtIndex(I64, i, Math.max(x, y));
        }
    }

    /** Unsigned via the sign-bit flip, as {@link #minU32}. */
    static void minU64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            long x = a.getAtIndex(I64, i);
            long y = b.getAtIndex(I64, i);
            d.setAtIndex(I64, i, Math.min(x ^ Long.MIN_VALUE, y ^ Long.MIN_VALUE) ^ Long.MIN_VALUE);
        }
    }

    static void maxU64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            long x = a.getAtIndex(I64, i);
            long y = b.getAtIndex(I64, i);
            d.setAtIndex(I64, i, Math.max(x ^ Long.MIN_VALUE, y ^ Long.MIN_VALUE) ^ Long.MIN_VALUE);
        }
    }

    // ---- float16: widen to float (F16C on x86), operate, round back to nearest-even ----

    /** Exact enough: float has 24 >= 2*11+2 bits, so rounding through float equals one rounding to half. */
    static void sumF16(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            short x = a.getAtIndex(I16, i);
            short y = b.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Float.floatToFloat16(Float.float16ToFloat(x) + Float.float16ToFloat(y)));
        }
    }

    static void prodF16(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            short x = a.getAtIndex(I16, i);
            short y = b.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Float.floatToFloat16(Float.float16ToFloat(x) * Float.float16ToFloat(y)));
        }
    }

    static void minF16(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            short x = a.getAtIndex(I16, i);
            short y = b.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Float.floatToFloat16(Math.min(Float.float16ToFloat(x), Float.float16ToFloat(y))));
        }
    }

    static void maxF16(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            short x = a.getAtIndex(I16, i);
            short y = b.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Float.floatToFloat16(Math.max(Float.float16ToFloat(x), Float.float16ToFloat(y))));
        }
    }

    // ---- bfloat16: the upper half of a float32 ----

    static void sumBf16(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            short x = a.getAtIndex(I16, i);
            short y = b.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Reductions.floatToBf16(Reductions.bf16ToFloat(x) + Reductions.bf16ToFloat(y)));
        }
    }

    static void prodBf16(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            short x = a.getAtIndex(I16, i);
            short y = b.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Reductions.floatToBf16(Reductions.bf16ToFloat(x) * Reductions.bf16ToFloat(y)));
        }
    }

    static void minBf16(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            short x = a.getAtIndex(I16, i);
            short y = b.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Reductions.floatToBf16(Math.min(Reductions.bf16ToFloat(x), Reductions.bf16ToFloat(y))));
        }
    }

    static void maxBf16(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            short x = a.getAtIndex(I16, i);
            short y = b.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Reductions.floatToBf16(Math.max(Reductions.bf16ToFloat(x), Reductions.bf16ToFloat(y))));
        }
    }

    // ---- float32 and float64: Math.min/max so NaN propagates and -0.0 < +0.0 ----

    static void sumF32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            float x = a.getAtIndex(F32, i);
            float y = b.getAtIndex(F32, i);
            d.setAtIndex(F32, i, x + y);
        }
    }

    static void prodF32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            float x = a.getAtIndex(F32, i);
            float y = b.getAtIndex(F32, i);
            d.setAtIndex(F32, i, x * y);
        }
    }

    static void minF32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            float x = a.getAtIndex(F32, i);
            float y = b.getAtIndex(F32, i);
            d.setAtIndex(F32, i, Math.min(x, y));
        }
    }

    static void maxF32(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            float x = a.getAtIndex(F32, i);
            float y = b.getAtIndex(F32, i);
            d.setAtIndex(F32, i, Math.max(x, y));
        }
    }

    static void sumF64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            double x = a.getAtIndex(F64, i);
            double y = b.getAtIndex(F64, i);
            d.setAtIndex(F64, i, x + y);
        }
    }

    static void prodF64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            double x = a.getAtIndex(F64, i);
            double y = b.getAtIndex(F64, i);
            d.setAtIndex(F64, i, x * y);
        }
    }

    static void minF64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            double x = a.getAtIndex(F64, i);
            double y = b.getAtIndex(F64, i);
            d.setAtIndex(F64, i, Math.min(x, y));
        }
    }

    static void maxF64(MemorySegment d, MemorySegment a, MemorySegment b, long n) {
        for (long i = 0; i < n; i++) {
            double x = a.getAtIndex(F64, i);
            double y = b.getAtIndex(F64, i);
            d.setAtIndex(F64, i, Math.max(x, y));
        }
    }

    // ---- AVG finish: divide the sum by the rank count in place (ranks >= 1) ----

    /** Java integer division truncates toward zero, as C does. */
    static void avgS8(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            byte x = d.getAtIndex(I8, i);
            d.setAtIndex(I8, i, (byte) (x / ranks));
        }
    }

    /** Both operands non-negative, so signed division is the unsigned one. */
    static void avgU8(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            byte x = d.getAtIndex(I8, i);
            d.setAtIndex(I8, i, (byte) ((x & 0xFF) / ranks));
        }
    }

    static void avgS32(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            int x = d.getAtIndex(I32, i);
            d.setAtIndex(I32, i, x / ranks);
        }
    }

    static void avgU32(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            int x = d.getAtIndex(I32, i);
            d.setAtIndex(I32, i, Integer.divideUnsigned(x, ranks));
        }
    }

    static void avgS64(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            long x = d.getAtIndex(I64, i);
            d.setAtIndex(I64, i, x / ranks);
        }
    }

    /** ranks is positive, so widening it to long keeps its value. */
    static void avgU64(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            long x = d.getAtIndex(I64, i);
            d.setAtIndex(I64, i, Long.divideUnsigned(x, ranks));
        }
    }

    /** Divided in float: ranks converts exactly up to 2^24, and float has the bits to round once to half. */
    static void avgF16(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            short x = d.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Float.floatToFloat16(Float.float16ToFloat(x) / ranks));
        }
    }

    static void avgBf16(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            short x = d.getAtIndex(I16, i);
            d.setAtIndex(I16, i, Reductions.floatToBf16(Reductions.bf16ToFloat(x) / ranks));
        }
    }

    static void avgF32(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            float x = d.getAtIndex(F32, i);
            d.setAtIndex(F32, i, x / ranks);
        }
    }

    static void avgF64(MemorySegment d, long n, int ranks) {
        for (long i = 0; i < n; i++) {
            double x = d.getAtIndex(F64, i);
            d.setAtIndex(F64, i, x / ranks);
        }
    }
}
