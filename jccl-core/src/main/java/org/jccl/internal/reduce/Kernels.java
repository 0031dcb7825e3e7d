package org.jccl.internal.reduce;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.jccl.ReduceOp;

/**
 * The loops behind {@link Reductions}. Each call walks its operands in chunks of
 * {@value #CHUNK_BYTES} bytes: bulk-copy the chunk of {@code a} and of {@code b} into two
 * per-thread Java arrays, combine them with a plain counted array loop, bulk-copy the result to
 * {@code d}. The operator is chosen by one switch per chunk; the per-element loops contain nothing
 * but the arithmetic.
 *
 * <h2>Why stage through arrays instead of looping over the segments</h2>
 * Measured on JDK 25 (AMD EPYC, AVX-512), 4 MiB operands, float32 sum:
 * <ul>
 *   <li>A loop of {@code MemorySegment.getAtIndex/setAtIndex} runs at ~40 GB/s while every segment
 *       the process ever touched through those accessors was native, but at <b>0.5 GB/s</b> once
 *       heap segments of a few array types had also passed through them. The accessors' type
 *       profiles live in shared JDK code, so one heap {@code float[]} user anywhere in the JVM
 *       turns each element access into virtual calls. A collective library cannot rely on the
 *       rest of the process only using native memory.</li>
 *   <li>C2 does not vectorize loops over two different segments (it cannot prove they do not
 *       overlap), but it does vectorize the same loop over two Java arrays it owns.</li>
 * </ul>
 * Staged, the same sum runs at ~50-57 GB/s whatever kinds of segments the process uses, and
 * int8, int32 and float16 gain most (float16 went from 0.7 to ~20 GB/s). The extra copies stay in
 * L1: {@value #CHUNK_BYTES} bytes per array measured best (1 KiB and 16 KiB were slower).
 *
 * <h2>Operand rules</h2>
 * {@code d} may be exactly {@code a} or {@code b}: both sources of a chunk are copied out before
 * the chunk is written back. Partial overlap is rejected by the caller. Sum and product are the
 * same bits for signed and unsigned integers (two's complement wraps), so only min and max have
 * unsigned variants.
 *
 * <p>Thread-safe: the scratch arrays are per thread, and nothing else is shared.
 *
 * <p><b>Why one file of about 740 lines.</b> It is one loop shape (stage a chunk, combine, write back)
 * written out for every data type and operator, because each must be a monomorphic counted loop
 * over a primitive array for C2 to vectorise it: generics or a lambda per element would box or
 * megamorph the loop and lose the speed this class exists for. The length is types times
 * operators, not several roles; split per type, the per-thread scratch arrays and the chunk walk
 * they share would have to be repeated or made visible across files.
 */
final class Kernels {

    /** Bytes of each scratch array; two per element type per thread. */
    static final int CHUNK_BYTES = 4096;

    // Unaligned layouts in native byte order: buffers may start at any byte offset, heap or native.
    private static final ValueLayout.OfByte I8 = ValueLayout.JAVA_BYTE;
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED;

    /**
     * Scratch arrays, made on first use per element type so that a thread reducing only floats
     * holds 8 KiB, not 48. Per thread because reductions run concurrently on progress threads
     * and callers' threads; a ThreadLocal lookup costs nanoseconds against microseconds of work.
     */
    private static final class Scratch {
        byte[][] i8;
        short[][] i16;
        int[][] i32;
        long[][] i64;
        float[][] f32;
        double[][] f64;
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    private Kernels() {
    }

    private static byte[][] i8() {
        Scratch s = SCRATCH.get();
        if (s.i8 == null) {
            s.i8 = new byte[][] {new byte[CHUNK_BYTES], new byte[CHUNK_BYTES]};
        }
        return s.i8;
    }

    private static short[][] i16() {
        Scratch s = SCRATCH.get();
        if (s.i16 == null) {
            s.i16 = new short[][] {new short[CHUNK_BYTES / 2], new short[CHUNK_BYTES / 2]};
        }
        return s.i16;
    }

    private static int[][] i32() {
        Scratch s = SCRATCH.get();
        if (s.i32 == null) {
            s.i32 = new int[][] {new int[CHUNK_BYTES / 4], new int[CHUNK_BYTES / 4]};
        }
        return s.i32;
    }

    private static long[][] i64() {
        Scratch s = SCRATCH.get();
        if (s.i64 == null) {
            s.i64 = new long[][] {new long[CHUNK_BYTES / 8], new long[CHUNK_BYTES / 8]};
        }
        return s.i64;
    }

    private static float[][] f32() {
        Scratch s = SCRATCH.get();
        if (s.f32 == null) {
            s.f32 = new float[][] {new float[CHUNK_BYTES / 4], new float[CHUNK_BYTES / 4]};
        }
        return s.f32;
    }

    private static double[][] f64() {
        Scratch s = SCRATCH.get();
        if (s.f64 == null) {
            s.f64 = new double[][] {new double[CHUNK_BYTES / 8], new double[CHUNK_BYTES / 8]};
        }
        return s.f64;
    }

    // ---------------------------------------------------------------------------------------------
    // Drivers: chunking and operator choice. AVG reduces as SUM; Reductions.finishAvg divides.

    /** int8: signed order for min/max. */
    static void reduceInt8(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        byte[][] scratch = i8();
        byte[] x = scratch[0];
        byte[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 1;
            MemorySegment.copy(a, I8, offset, x, 0, m);
            MemorySegment.copy(b, I8, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sum(x, y, m);
                case PROD -> prod(x, y, m);
                case MIN -> min(x, y, m);
                case MAX -> max(x, y, m);
            }
            MemorySegment.copy(x, 0, d, I8, offset, m);
        }
    }

    /** uint8: unsigned order for min/max. */
    static void reduceUint8(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        byte[][] scratch = i8();
        byte[] x = scratch[0];
        byte[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 1;
            MemorySegment.copy(a, I8, offset, x, 0, m);
            MemorySegment.copy(b, I8, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sum(x, y, m);
                case PROD -> prod(x, y, m);
                case MIN -> minUnsigned(x, y, m);
                case MAX -> maxUnsigned(x, y, m);
            }
            MemorySegment.copy(x, 0, d, I8, offset, m);
        }
    }

    /** int32: signed order for min/max. */
    static void reduceInt32(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        int[][] scratch = i32();
        int[] x = scratch[0];
        int[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 4;
            MemorySegment.copy(a, I32, offset, x, 0, m);
            MemorySegment.copy(b, I32, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sum(x, y, m);
                case PROD -> prod(x, y, m);
                case MIN -> min(x, y, m);
                case MAX -> max(x, y, m);
            }
            MemorySegment.copy(x, 0, d, I32, offset, m);
        }
    }

    /** uint32: unsigned order for min/max. */
    static void reduceUint32(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        int[][] scratch = i32();
        int[] x = scratch[0];
        int[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 4;
            MemorySegment.copy(a, I32, offset, x, 0, m);
            MemorySegment.copy(b, I32, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sum(x, y, m);
                case PROD -> prod(x, y, m);
                case MIN -> minUnsigned(x, y, m);
                case MAX -> maxUnsigned(x, y, m);
            }
            MemorySegment.copy(x, 0, d, I32, offset, m);
        }
    }

    /** int64: signed order for min/max. */
    static void reduceInt64(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        long[][] scratch = i64();
        long[] x = scratch[0];
        long[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 8;
            MemorySegment.copy(a, I64, offset, x, 0, m);
            MemorySegment.copy(b, I64, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sum(x, y, m);
                case PROD -> prod(x, y, m);
                case MIN -> min(x, y, m);
                case MAX -> max(x, y, m);
            }
            MemorySegment.copy(x, 0, d, I64, offset, m);
        }
    }

    /** uint64: unsigned order for min/max. */
    static void reduceUint64(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        long[][] scratch = i64();
        long[] x = scratch[0];
        long[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 8;
            MemorySegment.copy(a, I64, offset, x, 0, m);
            MemorySegment.copy(b, I64, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sum(x, y, m);
                case PROD -> prod(x, y, m);
                case MIN -> minUnsigned(x, y, m);
                case MAX -> maxUnsigned(x, y, m);
            }
            MemorySegment.copy(x, 0, d, I64, offset, m);
        }
    }

    /** float16 (IEEE binary16), through float. */
    static void reduceFloat16(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        short[][] scratch = i16();
        short[] x = scratch[0];
        short[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 2;
            MemorySegment.copy(a, I16, offset, x, 0, m);
            MemorySegment.copy(b, I16, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sumF16(x, y, m);
                case PROD -> prodF16(x, y, m);
                case MIN -> minF16(x, y, m);
                case MAX -> maxF16(x, y, m);
            }
            MemorySegment.copy(x, 0, d, I16, offset, m);
        }
    }

    /** bfloat16, through float. */
    static void reduceBfloat16(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        short[][] scratch = i16();
        short[] x = scratch[0];
        short[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 2;
            MemorySegment.copy(a, I16, offset, x, 0, m);
            MemorySegment.copy(b, I16, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sumBf16(x, y, m);
                case PROD -> prodBf16(x, y, m);
                case MIN -> minBf16(x, y, m);
                case MAX -> maxBf16(x, y, m);
            }
            MemorySegment.copy(x, 0, d, I16, offset, m);
        }
    }

    /** float32. */
    static void reduceFloat32(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        float[][] scratch = f32();
        float[] x = scratch[0];
        float[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 4;
            MemorySegment.copy(a, F32, offset, x, 0, m);
            MemorySegment.copy(b, F32, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sum(x, y, m);
                case PROD -> prod(x, y, m);
                case MIN -> min(x, y, m);
                case MAX -> max(x, y, m);
            }
            MemorySegment.copy(x, 0, d, F32, offset, m);
        }
    }

    /** float64. */
    static void reduceFloat64(MemorySegment d, MemorySegment a, MemorySegment b, long n, ReduceOp op) {
        double[][] scratch = f64();
        double[] x = scratch[0];
        double[] y = scratch[1];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 8;
            MemorySegment.copy(a, F64, offset, x, 0, m);
            MemorySegment.copy(b, F64, offset, y, 0, m);
            switch (op) {
                case SUM, AVG -> sum(x, y, m);
                case PROD -> prod(x, y, m);
                case MIN -> min(x, y, m);
                case MAX -> max(x, y, m);
            }
            MemorySegment.copy(x, 0, d, F64, offset, m);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // AVG finish drivers: divide in place by the rank count (ranks >= 1, checked by the caller).

    /** int8 average, truncating toward zero. */
    static void averageInt8(MemorySegment d, long n, int ranks) {
        byte[] x = i8()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 1;
            MemorySegment.copy(d, I8, offset, x, 0, m);
            divide(x, m, ranks);
            MemorySegment.copy(x, 0, d, I8, offset, m);
        }
    }

    /** uint8 average. */
    static void averageUint8(MemorySegment d, long n, int ranks) {
        byte[] x = i8()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 1;
            MemorySegment.copy(d, I8, offset, x, 0, m);
            divideUnsigned(x, m, ranks);
            MemorySegment.copy(x, 0, d, I8, offset, m);
        }
    }

    /** int32 average, truncating toward zero. */
    static void averageInt32(MemorySegment d, long n, int ranks) {
        int[] x = i32()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 4;
            MemorySegment.copy(d, I32, offset, x, 0, m);
            divide(x, m, ranks);
            MemorySegment.copy(x, 0, d, I32, offset, m);
        }
    }

    /** uint32 average. */
    static void averageUint32(MemorySegment d, long n, int ranks) {
        int[] x = i32()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 4;
            MemorySegment.copy(d, I32, offset, x, 0, m);
            divideUnsigned(x, m, ranks);
            MemorySegment.copy(x, 0, d, I32, offset, m);
        }
    }

    /** int64 average, truncating toward zero. */
    static void averageInt64(MemorySegment d, long n, int ranks) {
        long[] x = i64()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 8;
            MemorySegment.copy(d, I64, offset, x, 0, m);
            divide(x, m, ranks);
            MemorySegment.copy(x, 0, d, I64, offset, m);
        }
    }

    /** uint64 average. */
    static void averageUint64(MemorySegment d, long n, int ranks) {
        long[] x = i64()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 8;
            MemorySegment.copy(d, I64, offset, x, 0, m);
            divideUnsigned(x, m, ranks);
            MemorySegment.copy(x, 0, d, I64, offset, m);
        }
    }

    /** float16 average, divided in float. */
    static void averageFloat16(MemorySegment d, long n, int ranks) {
        short[] x = i16()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 2;
            MemorySegment.copy(d, I16, offset, x, 0, m);
            divideF16(x, m, ranks);
            MemorySegment.copy(x, 0, d, I16, offset, m);
        }
    }

    /** bfloat16 average, divided in float. */
    static void averageBfloat16(MemorySegment d, long n, int ranks) {
        short[] x = i16()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 2;
            MemorySegment.copy(d, I16, offset, x, 0, m);
            divideBf16(x, m, ranks);
            MemorySegment.copy(x, 0, d, I16, offset, m);
        }
    }

    /** float32 average. */
    static void averageFloat32(MemorySegment d, long n, int ranks) {
        float[] x = f32()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 4;
            MemorySegment.copy(d, F32, offset, x, 0, m);
            divide(x, m, ranks);
            MemorySegment.copy(x, 0, d, F32, offset, m);
        }
    }

    /** float64 average. */
    static void averageFloat64(MemorySegment d, long n, int ranks) {
        double[] x = f64()[0];
        for (long done = 0; done < n; done += x.length) {
            int m = (int) Math.min(x.length, n - done);
            long offset = done * 8;
            MemorySegment.copy(d, F64, offset, x, 0, m);
            divide(x, m, ranks);
            MemorySegment.copy(x, 0, d, F64, offset, m);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Array kernels: x[i] = x[i] op y[i]. Plain counted loops over arrays, which C2 unrolls and
    // (for most of them) turns into SIMD.

    /** Wrapping sum; the low 8 bits do not depend on signedness. */
    private static void sum(byte[] x, byte[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = (byte) (x[i] + y[i]);
        }
    }

    private static void prod(byte[] x, byte[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = (byte) (x[i] * y[i]);
        }
    }

    /**
     * C2 on JDK 25 does not vectorize min/max of bytes (~7 GB/s at 4 MiB against ~50 for sum); no
     * rewrite tried (ternary, branch-free arithmetic, sign-flip) did better.
     */
    private static void min(byte[] x, byte[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = (byte) Math.min(x[i], y[i]);
        }
    }

    private static void max(byte[] x, byte[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = (byte) Math.max(x[i], y[i]);
        }
    }

    /** Unsigned: widen without sign extension, so 0xFF is 255, not -1. */
    private static void minUnsigned(byte[] x, byte[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = (byte) Math.min(x[i] & 0xFF, y[i] & 0xFF);
        }
    }

    private static void maxUnsigned(byte[] x, byte[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = (byte) Math.max(x[i] & 0xFF, y[i] & 0xFF);
        }
    }

    private static void sum(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
        }
    }

    private static void prod(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
        }
    }

    private static void min(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
        }
    }

    private static void max(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
        }
    }

    /**
     * Unsigned: flipping the sign bit maps unsigned order onto signed order; this form vectorizes
     * and measured twice as fast as a compareUnsigned ternary.
     */
    private static void minUnsigned(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i] ^ Integer.MIN_VALUE, y[i] ^ Integer.MIN_VALUE) ^ Integer.MIN_VALUE;
        }
    }

    private static void maxUnsigned(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i] ^ Integer.MIN_VALUE, y[i] ^ Integer.MIN_VALUE) ^ Integer.MIN_VALUE;
        }
    }

    private static void sum(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
        }
    }

    private static void prod(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
        }
    }

    private static void min(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
        }
    }

    private static void max(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
        }
    }

    /** Unsigned, as for int. */
    private static void minUnsigned(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i] ^ Long.MIN_VALUE, y[i] ^ Long.MIN_VALUE) ^ Long.MIN_VALUE;
        }
    }

    private static void maxUnsigned(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i] ^ Long.MIN_VALUE, y[i] ^ Long.MIN_VALUE) ^ Long.MIN_VALUE;
        }
    }

    private static void sum(float[] x, float[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
        }
    }

    private static void prod(float[] x, float[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
        }
    }

    /** Math.min: NaN wins and -0.0 is below +0.0, as IEEE minimum. */
    private static void min(float[] x, float[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
        }
    }

    private static void max(float[] x, float[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
        }
    }

    private static void sum(double[] x, double[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
        }
    }

    private static void prod(double[] x, double[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
        }
    }

    private static void min(double[] x, double[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
        }
    }

    private static void max(double[] x, double[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
        }
    }

    /**
     * float16 via float: float has 24 >= 2*11+2 significand bits, so rounding the float result to
     * half equals rounding the exact result once.
     */
    private static void sumF16(short[] x, short[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Float.floatToFloat16(Float.float16ToFloat(x[i]) + Float.float16ToFloat(y[i]));
        }
    }

    private static void prodF16(short[] x, short[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Float.floatToFloat16(Float.float16ToFloat(x[i]) * Float.float16ToFloat(y[i]));
        }
    }

    private static void minF16(short[] x, short[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Float.floatToFloat16(Math.min(Float.float16ToFloat(x[i]), Float.float16ToFloat(y[i])));
        }
    }

    private static void maxF16(short[] x, short[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Float.floatToFloat16(Math.max(Float.float16ToFloat(x[i]), Float.float16ToFloat(y[i])));
        }
    }

    /**
     * bfloat16 via float (24 >= 2*8+2 bits, as for float16). Scalar on JDK 25 (~4 GB/s at 4 MiB):
     * C2 does not vectorize the int/float bit reinterpretation, in one loop or split into several.
     */
    private static void sumBf16(short[] x, short[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Reductions.floatToBf16(Reductions.bf16ToFloat(x[i]) + Reductions.bf16ToFloat(y[i]));
        }
    }

    private static void prodBf16(short[] x, short[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Reductions.floatToBf16(Reductions.bf16ToFloat(x[i]) * Reductions.bf16ToFloat(y[i]));
        }
    }

    private static void minBf16(short[] x, short[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Reductions.floatToBf16(Math.min(Reductions.bf16ToFloat(x[i]), Reductions.bf16ToFloat(y[i])));
        }
    }

    private static void maxBf16(short[] x, short[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Reductions.floatToBf16(Math.max(Reductions.bf16ToFloat(x[i]), Reductions.bf16ToFloat(y[i])));
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Division kernels: x[i] = x[i] / ranks.

    /** Java integer division truncates toward zero, as C does. */
    private static void divide(byte[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = (byte) (x[i] / ranks);
        }
    }

    /** Both operands non-negative, so signed division is the unsigned one. */
    private static void divideUnsigned(byte[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = (byte) ((x[i] & 0xFF) / ranks);
        }
    }

    private static void divide(int[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] / ranks;
        }
    }

    /** ranks is positive, so its unsigned value is its value. */
    private static void divideUnsigned(int[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = Integer.divideUnsigned(x[i], ranks);
        }
    }

    private static void divide(long[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] / ranks;
        }
    }

    private static void divideUnsigned(long[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = Long.divideUnsigned(x[i], ranks);
        }
    }

    /** ranks converts to float exactly up to 2^24, far beyond any rank count. */
    private static void divide(float[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] / ranks;
        }
    }

    private static void divide(double[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] / ranks;
        }
    }

    /** Divided in float and rounded once to half (see sumF16 for why that is exact enough). */
    private static void divideF16(short[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = Float.floatToFloat16(Float.float16ToFloat(x[i]) / ranks);
        }
    }

    private static void divideBf16(short[] x, int n, int ranks) {
        for (int i = 0; i < n; i++) {
            x[i] = Reductions.floatToBf16(Reductions.bf16ToFloat(x[i]) / ranks);
        }
    }
}
