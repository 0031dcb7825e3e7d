package org.jccl.internal.reduce;

import static jdk.incubator.vector.VectorOperators.ADD;
import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GE;
import static jdk.incubator.vector.VectorOperators.GT;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;
import static jdk.incubator.vector.VectorOperators.LT;
import static jdk.incubator.vector.VectorOperators.MAX;
import static jdk.incubator.vector.VectorOperators.MIN;
import static jdk.incubator.vector.VectorOperators.MUL;
import static jdk.incubator.vector.VectorOperators.UMAX;
import static jdk.incubator.vector.VectorOperators.UMIN;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.LongVector;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * The Vector API (jdk.incubator.vector) loops behind {@link Reductions}, used when that module is in
 * the boot layer ({@code --add-modules jdk.incubator.vector}) and {@code JCCL_REDUCE_VECTOR} allows
 * it. Only {@link Reductions} touches this class, and only after it has checked that the module is
 * present, so a JVM without the module never loads it.
 *
 * <p>Each loop reads whole vectors straight from the segments ({@code fromMemorySegment} in native
 * byte order, any byte offset, heap or native) and writes the result straight back; no staging.
 * (Correct for heap segments, but {@link Reductions} sends calls with a heap segment to the scalar
 * kernels: heap segments' classes pollute the type profile of the JDK's segment accessors and slow
 * these loops down for native memory too.) The
 * last {@code < one vector} of elements goes through the scalar {@link Kernels}, so the tail has
 * exactly the scalar semantics. The shape is the platform's preferred one
 * ({@code FloatVector.SPECIES_PREFERRED}: 512 bits with AVX-512, 256 with AVX2, 128 on NEON), fixed
 * at class initialisation; every species is a {@code static final} constant so that C2 compiles each
 * loop to plain SIMD instructions.
 *
 * <h2>Agreement with the scalar kernels</h2>
 * <ul>
 *   <li>Integers: bit-identical. Sum and product wrap lane-wise in the element's width (int8
 *       products included); unsigned min/max use {@code UMIN}/{@code UMAX}.</li>
 *   <li>float32, float64: bit-identical for every result that is not NaN (the same IEEE operation on
 *       the same operands; {@code MIN}/{@code MAX} follow {@link Math#min(float, float)}, -0.0 below
 *       +0.0). Where the scalar result is NaN the vector result is NaN too, but its sign and payload
 *       may differ (which operand's NaN propagates, and whether hardware quiets it, is not fixed by
 *       Java's specification).</li>
 *   <li>float16, bfloat16: the same widening, the same float operation and the same
 *       round-to-nearest-even narrowing as the scalar code, done with integer lane arithmetic, so
 *       again bit-identical except for NaN sign/payload. JDK 25's Vector API has no half-precision
 *       lane type or conversion operator ({@code jdk.incubator.vector.Float16} is a scalar class,
 *       and {@code VectorOperators} has no float16 conversion), so each 32-bit int lane, loaded
 *       straight from memory, holds two 16-bit elements that are processed as two float vectors:
 *       the low one shifted into the high half ({@code LSHL 16}), the high one masked
 *       ({@code AND 0xFFFF0000}), then {@code reinterpretAsFloats} — for bfloat16 that is the whole
 *       widening; both halves are written back with one store, so no lane-count-changing
 *       conversion ({@code convertShape}) is needed (those measured several times slower).
 *       bfloat16 narrows with the bias trick {@code (x + 0x7FFF + ((x >>> 16) & 1)) >>> 16}, a NaN
 *       kept a quiet NaN by a blend. float16 widens by the exponent-rebias trick (magnitude bits
 *       shifted into place and multiplied by 2^112, which also makes subnormals exact;
 *       infinity/NaN blended in) and narrows by rebias-and-round for normal results, the add-0.5f
 *       trick for subnormal ones, and the same overflow and NaN rules as
 *       {@link Float#floatToFloat16}. The float16 loops are correct but slower than the scalar
 *       ones, which C2 compiles to F16C conversions; {@link Reductions} only uses them with
 *       {@code JCCL_REDUCE_VECTOR=1}.</li>
 * </ul>
 *
 * <p><b>Why one file of about 750 lines.</b> As {@link Kernels}: one loop per data type and
 * operator, each over {@code static final} species so that C2 compiles it to plain SIMD, with
 * the float16/bfloat16 lane tricks above written into the loops of those types. The length is types times
 * operators, behind one dispatch ({@code reduce}); split per type, the species and the float16
 * constants would be repeated or made visible across files, for no reader but {@link Reductions}.
 */
final class VectorKernels {

    private static final ByteOrder NATIVE = ByteOrder.nativeOrder();

    /** The preferred shape, read once. */
    static final VectorShape SHAPE = FloatVector.SPECIES_PREFERRED.vectorShape();
    private static final VectorSpecies<Byte> B = VectorSpecies.of(byte.class, SHAPE);
    private static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, SHAPE);
    private static final VectorSpecies<Long> L = VectorSpecies.of(long.class, SHAPE);
    private static final VectorSpecies<Float> F = VectorSpecies.of(float.class, SHAPE);
    private static final VectorSpecies<Double> D = VectorSpecies.of(double.class, SHAPE);

    // float16 narrowing constants (float32 bit patterns).
    /** Rebias float32 exponent to binary16's, plus the 0xFFF of the rounding bias. */
    private static final int F16_REBIAS = ((15 - 127) << 23) + 0xFFF;
    /** 0.5f: adding it aligns a binary16 subnormal's 10 bits at the bottom, rounding to nearest-even. */
    private static final int F16_HALF_BITS = 126 << 23;
    /** 2^-14, binary16's smallest normal. */
    private static final int F16_MIN_NORMAL_BITS = 113 << 23;
    /** 2^16: at and above it the result is infinity (65520..65535 round up to it on their own). */
    private static final int F16_OVERFLOW_BITS = 143 << 23;

    private VectorKernels() {
    }

    /** Whether the preferred shape is wide enough for the 16-bit float loops (half of it >= 64 bits). */
    static boolean usable() {
        return SHAPE.vectorBitSize() >= 128;
    }

    /** For logs: e.g. "Vector API, 512-bit (16 x float32)". */
    static String describe() {
        return "Vector API, " + SHAPE.vectorBitSize() + "-bit (" + F.length() + " x float32)";
    }

    /** Same contract as {@link Reductions#reduce}, arguments already checked, {@code n > 0}. */
    static void reduce(MemorySegment d, MemorySegment a, MemorySegment b, long n, DataType type, ReduceOp op) {
        long bytes = type.bytes(n);
        long done = switch (type) {
            case INT8 -> switch (op) {
                case SUM, AVG -> addI8(d, a, b, bytes);
                case PROD -> mulI8(d, a, b, bytes);
                case MIN -> minI8(d, a, b, bytes);
                case MAX -> maxI8(d, a, b, bytes);
            };
            case UINT8 -> switch (op) {
                case SUM, AVG -> addI8(d, a, b, bytes);
                case PROD -> mulI8(d, a, b, bytes);
                case MIN -> uminI8(d, a, b, bytes);
                case MAX -> umaxI8(d, a, b, bytes);
            };
            case INT32 -> switch (op) {
                case SUM, AVG -> addI32(d, a, b, bytes);
                case PROD -> mulI32(d, a, b, bytes);
                case MIN -> minI32(d, a, b, bytes);
                case MAX -> maxI32(d, a, b, bytes);
            };
            case UINT32 -> switch (op) {
                case SUM, AVG -> addI32(d, a, b, bytes);
                case PROD -> mulI32(d, a, b, bytes);
                case MIN -> uminI32(d, a, b, bytes);
                case MAX -> umaxI32(d, a, b, bytes);
            };
            case INT64 -> switch (op) {
                case SUM, AVG -> addI64(d, a, b, bytes);
                case PROD -> mulI64(d, a, b, bytes);
                case MIN -> minI64(d, a, b, bytes);
                case MAX -> maxI64(d, a, b, bytes);
            };
            case UINT64 -> switch (op) {
                case SUM, AVG -> addI64(d, a, b, bytes);
                case PROD -> mulI64(d, a, b, bytes);
                case MIN -> uminI64(d, a, b, bytes);
                case MAX -> umaxI64(d, a, b, bytes);
            };
            case FLOAT16 -> switch (op) {
                case SUM, AVG -> addF16(d, a, b, bytes);
                case PROD -> mulF16(d, a, b, bytes);
                case MIN -> minF16(d, a, b, bytes);
                case MAX -> maxF16(d, a, b, bytes);
            };
            case BFLOAT16 -> switch (op) {
                case SUM, AVG -> addBF16(d, a, b, bytes);
                case PROD -> mulBF16(d, a, b, bytes);
                case MIN -> minBF16(d, a, b, bytes);
                case MAX -> maxBF16(d, a, b, bytes);
            };
            case FLOAT32 -> switch (op) {
                case SUM, AVG -> addF32(d, a, b, bytes);
                case PROD -> mulF32(d, a, b, bytes);
                case MIN -> minF32(d, a, b, bytes);
                case MAX -> maxF32(d, a, b, bytes);
            };
            case FLOAT64 -> switch (op) {
                case SUM, AVG -> addF64(d, a, b, bytes);
                case PROD -> mulF64(d, a, b, bytes);
                case MIN -> minF64(d, a, b, bytes);
                case MAX -> maxF64(d, a, b, bytes);
            };
        };
        if (done < bytes) {
            // The tail (fewer elements than one vector): the scalar kernel, so it has its semantics exactly.
            // Inputs shorter than one vector (done == 0: an 8-byte all-reduce) need no slices.
            Reductions.reduceScalar(done == 0 ? d : d.asSlice(done), done == 0 ? a : a.asSlice(done), done == 0 ? b : b.asSlice(done),
                    n - done / type.size(), type, op);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // One loop per (lane type, operator), each returning the byte offset where it stopped: a whole
    // number of vectors. Signed and unsigned share sum and product (two's complement wraps).
    // The operator is a constant in every loop, which C2 needs to emit SIMD instructions.

    private static long addI8(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = B.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            ByteVector x = ByteVector.fromMemorySegment(B, a, i, NATIVE);
            ByteVector y = ByteVector.fromMemorySegment(B, b, i, NATIVE);
            x.lanewise(ADD, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long mulI8(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = B.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            ByteVector x = ByteVector.fromMemorySegment(B, a, i, NATIVE);
            ByteVector y = ByteVector.fromMemorySegment(B, b, i, NATIVE);
            x.lanewise(MUL, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long minI8(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = B.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            ByteVector x = ByteVector.fromMemorySegment(B, a, i, NATIVE);
            ByteVector y = ByteVector.fromMemorySegment(B, b, i, NATIVE);
            x.lanewise(MIN, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long maxI8(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = B.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            ByteVector x = ByteVector.fromMemorySegment(B, a, i, NATIVE);
            ByteVector y = ByteVector.fromMemorySegment(B, b, i, NATIVE);
            x.lanewise(MAX, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long uminI8(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = B.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            ByteVector x = ByteVector.fromMemorySegment(B, a, i, NATIVE);
            ByteVector y = ByteVector.fromMemorySegment(B, b, i, NATIVE);
            x.lanewise(UMIN, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long umaxI8(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = B.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            ByteVector x = ByteVector.fromMemorySegment(B, a, i, NATIVE);
            ByteVector y = ByteVector.fromMemorySegment(B, b, i, NATIVE);
            x.lanewise(UMAX, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long addI32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector x = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector y = IntVector.fromMemorySegment(I, b, i, NATIVE);
            x.lanewise(ADD, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long mulI32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector x = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector y = IntVector.fromMemorySegment(I, b, i, NATIVE);
            x.lanewise(MUL, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long minI32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector x = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector y = IntVector.fromMemorySegment(I, b, i, NATIVE);
            x.lanewise(MIN, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long maxI32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector x = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector y = IntVector.fromMemorySegment(I, b, i, NATIVE);
            x.lanewise(MAX, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long uminI32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector x = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector y = IntVector.fromMemorySegment(I, b, i, NATIVE);
            x.lanewise(UMIN, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long umaxI32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector x = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector y = IntVector.fromMemorySegment(I, b, i, NATIVE);
            x.lanewise(UMAX, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long addI64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = L.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            LongVector x = LongVector.fromMemorySegment(L, a, i, NATIVE);
            LongVector y = LongVector.fromMemorySegment(L, b, i, NATIVE);
            x.lanewise(ADD, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long mulI64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = L.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            LongVector x = LongVector.fromMemorySegment(L, a, i, NATIVE);
            LongVector y = LongVector.fromMemorySegment(L, b, i, NATIVE);
            x.lanewise(MUL, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long minI64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = L.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            LongVector x = LongVector.fromMemorySegment(L, a, i, NATIVE);
            LongVector y = LongVector.fromMemorySegment(L, b, i, NATIVE);
            x.lanewise(MIN, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long maxI64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = L.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            LongVector x = LongVector.fromMemorySegment(L, a, i, NATIVE);
            LongVector y = LongVector.fromMemorySegment(L, b, i, NATIVE);
            x.lanewise(MAX, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long uminI64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = L.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            LongVector x = LongVector.fromMemorySegment(L, a, i, NATIVE);
            LongVector y = LongVector.fromMemorySegment(L, b, i, NATIVE);
            x.lanewise(UMIN, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long umaxI64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = L.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            LongVector x = LongVector.fromMemorySegment(L, a, i, NATIVE);
            LongVector y = LongVector.fromMemorySegment(L, b, i, NATIVE);
            x.lanewise(UMAX, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long addF32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = F.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            FloatVector x = FloatVector.fromMemorySegment(F, a, i, NATIVE);
            FloatVector y = FloatVector.fromMemorySegment(F, b, i, NATIVE);
            x.lanewise(ADD, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long mulF32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = F.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            FloatVector x = FloatVector.fromMemorySegment(F, a, i, NATIVE);
            FloatVector y = FloatVector.fromMemorySegment(F, b, i, NATIVE);
            x.lanewise(MUL, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long minF32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = F.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            FloatVector x = FloatVector.fromMemorySegment(F, a, i, NATIVE);
            FloatVector y = FloatVector.fromMemorySegment(F, b, i, NATIVE);
            x.lanewise(MIN, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long maxF32(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = F.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            FloatVector x = FloatVector.fromMemorySegment(F, a, i, NATIVE);
            FloatVector y = FloatVector.fromMemorySegment(F, b, i, NATIVE);
            x.lanewise(MAX, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long addF64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = D.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            DoubleVector x = DoubleVector.fromMemorySegment(D, a, i, NATIVE);
            DoubleVector y = DoubleVector.fromMemorySegment(D, b, i, NATIVE);
            x.lanewise(ADD, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long mulF64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = D.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            DoubleVector x = DoubleVector.fromMemorySegment(D, a, i, NATIVE);
            DoubleVector y = DoubleVector.fromMemorySegment(D, b, i, NATIVE);
            x.lanewise(MUL, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long minF64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = D.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            DoubleVector x = DoubleVector.fromMemorySegment(D, a, i, NATIVE);
            DoubleVector y = DoubleVector.fromMemorySegment(D, b, i, NATIVE);
            x.lanewise(MIN, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long maxF64(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = D.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            DoubleVector x = DoubleVector.fromMemorySegment(D, a, i, NATIVE);
            DoubleVector y = DoubleVector.fromMemorySegment(D, b, i, NATIVE);
            x.lanewise(MAX, y).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }

    private static long addF16(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector xa = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector ya = IntVector.fromMemorySegment(I, b, i, NATIVE);
            IntVector xlh = xa.and(0xFFFF);
            IntVector xlm = xlh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector xl = xlm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(xlm.or(0x7F80_0000), xlh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(xlh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector ylh = ya.and(0xFFFF);
            IntVector ylm = ylh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector yl = ylm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(ylm.or(0x7F80_0000), ylh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(ylh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector xhh = xa.lanewise(LSHR, 16);
            IntVector xhm = xhh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector xh = xhm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(xhm.or(0x7F80_0000), xhh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(xhh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector yhh = ya.lanewise(LSHR, 16);
            IntVector yhm = yhh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector yh = yhm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(yhm.or(0x7F80_0000), yhh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(yhh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector rl = xl.lanewise(ADD, yl).reinterpretAsInts();
            IntVector rh = xh.lanewise(ADD, yh).reinterpretAsInts();
            IntVector rla = rl.and(0x7FFF_FFFF);
            IntVector ol = rla.add(F16_REBIAS).add(rla.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13)
                    .blend(rla.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(F16_HALF_BITS),
                            rla.compare(LT, F16_MIN_NORMAL_BITS))
                    .blend(0x7C00, rla.compare(GE, F16_OVERFLOW_BITS))
                    .blend(rl.and(0x007F_E000).lanewise(LSHR, 13).or(rl.and(0x1FF0).lanewise(LSHR, 4))
                            .or(rl.and(0xF)).or(0x7C00), rla.compare(GT, 0x7F80_0000))
                    .or(rl.lanewise(LSHR, 16).and(0x8000));
            IntVector rha = rh.and(0x7FFF_FFFF);
            IntVector oh = rha.add(F16_REBIAS).add(rha.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13)
                    .blend(rha.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(F16_HALF_BITS),
                            rha.compare(LT, F16_MIN_NORMAL_BITS))
                    .blend(0x7C00, rha.compare(GE, F16_OVERFLOW_BITS))
                    .blend(rh.and(0x007F_E000).lanewise(LSHR, 13).or(rh.and(0x1FF0).lanewise(LSHR, 4))
                            .or(rh.and(0xF)).or(0x7C00), rha.compare(GT, 0x7F80_0000))
                    .or(rh.lanewise(LSHR, 16).and(0x8000));
            ol.or(oh.lanewise(LSHL, 16)).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long mulF16(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector xa = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector ya = IntVector.fromMemorySegment(I, b, i, NATIVE);
            IntVector xlh = xa.and(0xFFFF);
            IntVector xlm = xlh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector xl = xlm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(xlm.or(0x7F80_0000), xlh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(xlh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector ylh = ya.and(0xFFFF);
            IntVector ylm = ylh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector yl = ylm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(ylm.or(0x7F80_0000), ylh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(ylh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector xhh = xa.lanewise(LSHR, 16);
            IntVector xhm = xhh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector xh = xhm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(xhm.or(0x7F80_0000), xhh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(xhh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector yhh = ya.lanewise(LSHR, 16);
            IntVector yhm = yhh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector yh = yhm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(yhm.or(0x7F80_0000), yhh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(yhh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector rl = xl.lanewise(MUL, yl).reinterpretAsInts();
            IntVector rh = xh.lanewise(MUL, yh).reinterpretAsInts();
            IntVector rla = rl.and(0x7FFF_FFFF);
            IntVector ol = rla.add(F16_REBIAS).add(rla.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13)
                    .blend(rla.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(F16_HALF_BITS),
                            rla.compare(LT, F16_MIN_NORMAL_BITS))
                    .blend(0x7C00, rla.compare(GE, F16_OVERFLOW_BITS))
                    .blend(rl.and(0x007F_E000).lanewise(LSHR, 13).or(rl.and(0x1FF0).lanewise(LSHR, 4))
                            .or(rl.and(0xF)).or(0x7C00), rla.compare(GT, 0x7F80_0000))
                    .or(rl.lanewise(LSHR, 16).and(0x8000));
            IntVector rha = rh.and(0x7FFF_FFFF);
            IntVector oh = rha.add(F16_REBIAS).add(rha.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13)
                    .blend(rha.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(F16_HALF_BITS),
                            rha.compare(LT, F16_MIN_NORMAL_BITS))
                    .blend(0x7C00, rha.compare(GE, F16_OVERFLOW_BITS))
                    .blend(rh.and(0x007F_E000).lanewise(LSHR, 13).or(rh.and(0x1FF0).lanewise(LSHR, 4))
                            .or(rh.and(0xF)).or(0x7C00), rha.compare(GT, 0x7F80_0000))
                    .or(rh.lanewise(LSHR, 16).and(0x8000));
            ol.or(oh.lanewise(LSHL, 16)).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long minF16(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector xa = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector ya = IntVector.fromMemorySegment(I, b, i, NATIVE);
            IntVector xlh = xa.and(0xFFFF);
            IntVector xlm = xlh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector xl = xlm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(xlm.or(0x7F80_0000), xlh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(xlh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector ylh = ya.and(0xFFFF);
            IntVector ylm = ylh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector yl = ylm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(ylm.or(0x7F80_0000), ylh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(ylh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector xhh = xa.lanewise(LSHR, 16);
            IntVector xhm = xhh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector xh = xhm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(xhm.or(0x7F80_0000), xhh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(xhh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector yhh = ya.lanewise(LSHR, 16);
            IntVector yhm = yhh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector yh = yhm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(yhm.or(0x7F80_0000), yhh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(yhh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector rl = xl.lanewise(MIN, yl).reinterpretAsInts();
            IntVector rh = xh.lanewise(MIN, yh).reinterpretAsInts();
            IntVector rla = rl.and(0x7FFF_FFFF);
            IntVector ol = rla.add(F16_REBIAS).add(rla.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13)
                    .blend(rla.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(F16_HALF_BITS),
                            rla.compare(LT, F16_MIN_NORMAL_BITS))
                    .blend(0x7C00, rla.compare(GE, F16_OVERFLOW_BITS))
                    .blend(rl.and(0x007F_E000).lanewise(LSHR, 13).or(rl.and(0x1FF0).lanewise(LSHR, 4))
                            .or(rl.and(0xF)).or(0x7C00), rla.compare(GT, 0x7F80_0000))
                    .or(rl.lanewise(LSHR, 16).and(0x8000));
            IntVector rha = rh.and(0x7FFF_FFFF);
            IntVector oh = rha.add(F16_REBIAS).add(rha.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13)
                    .blend(rha.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(F16_HALF_BITS),
                            rha.compare(LT, F16_MIN_NORMAL_BITS))
                    .blend(0x7C00, rha.compare(GE, F16_OVERFLOW_BITS))
                    .blend(rh.and(0x007F_E000).lanewise(LSHR, 13).or(rh.and(0x1FF0).lanewise(LSHR, 4))
                            .or(rh.and(0xF)).or(0x7C00), rha.compare(GT, 0x7F80_0000))
                    .or(rh.lanewise(LSHR, 16).and(0x8000));
            ol.or(oh.lanewise(LSHL, 16)).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long maxF16(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector xa = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector ya = IntVector.fromMemorySegment(I, b, i, NATIVE);
            IntVector xlh = xa.and(0xFFFF);
            IntVector xlm = xlh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector xl = xlm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(xlm.or(0x7F80_0000), xlh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(xlh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector ylh = ya.and(0xFFFF);
            IntVector ylm = ylh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector yl = ylm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(ylm.or(0x7F80_0000), ylh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(ylh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector xhh = xa.lanewise(LSHR, 16);
            IntVector xhm = xhh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector xh = xhm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(xhm.or(0x7F80_0000), xhh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(xhh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector yhh = ya.lanewise(LSHR, 16);
            IntVector yhm = yhh.and(0x7FFF).lanewise(LSHL, 13);
            FloatVector yh = yhm.reinterpretAsFloats().mul(0x1p112f).reinterpretAsInts()
                    .blend(yhm.or(0x7F80_0000), yhh.and(0x7C00).compare(EQ, 0x7C00))
                    .or(yhh.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
            IntVector rl = xl.lanewise(MAX, yl).reinterpretAsInts();
            IntVector rh = xh.lanewise(MAX, yh).reinterpretAsInts();
            IntVector rla = rl.and(0x7FFF_FFFF);
            IntVector ol = rla.add(F16_REBIAS).add(rla.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13)
                    .blend(rla.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(F16_HALF_BITS),
                            rla.compare(LT, F16_MIN_NORMAL_BITS))
                    .blend(0x7C00, rla.compare(GE, F16_OVERFLOW_BITS))
                    .blend(rl.and(0x007F_E000).lanewise(LSHR, 13).or(rl.and(0x1FF0).lanewise(LSHR, 4))
                            .or(rl.and(0xF)).or(0x7C00), rla.compare(GT, 0x7F80_0000))
                    .or(rl.lanewise(LSHR, 16).and(0x8000));
            IntVector rha = rh.and(0x7FFF_FFFF);
            IntVector oh = rha.add(F16_REBIAS).add(rha.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13)
                    .blend(rha.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(F16_HALF_BITS),
                            rha.compare(LT, F16_MIN_NORMAL_BITS))
                    .blend(0x7C00, rha.compare(GE, F16_OVERFLOW_BITS))
                    .blend(rh.and(0x007F_E000).lanewise(LSHR, 13).or(rh.and(0x1FF0).lanewise(LSHR, 4))
                            .or(rh.and(0xF)).or(0x7C00), rha.compare(GT, 0x7F80_0000))
                    .or(rh.lanewise(LSHR, 16).and(0x8000));
            ol.or(oh.lanewise(LSHL, 16)).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long addBF16(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector xa = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector ya = IntVector.fromMemorySegment(I, b, i, NATIVE);
            FloatVector xl = xa.lanewise(LSHL, 16).reinterpretAsFloats();
            FloatVector yl = ya.lanewise(LSHL, 16).reinterpretAsFloats();
            FloatVector xh = xa.and(0xFFFF_0000).reinterpretAsFloats();
            FloatVector yh = ya.and(0xFFFF_0000).reinterpretAsFloats();
            IntVector rl = xl.lanewise(ADD, yl).reinterpretAsInts();
            IntVector rh = xh.lanewise(ADD, yh).reinterpretAsInts();
            IntVector ol = rl.add(rl.lanewise(LSHR, 16).and(1)).add(0x7FFF).lanewise(LSHR, 16)
                    .blend(rl.lanewise(LSHR, 16).or(0x0040), rl.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
            IntVector oh = rh.add(rh.lanewise(LSHR, 16).and(1)).add(0x7FFF).lanewise(LSHR, 16)
                    .blend(rh.lanewise(LSHR, 16).or(0x0040), rh.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
            ol.or(oh.lanewise(LSHL, 16)).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long mulBF16(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector xa = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector ya = IntVector.fromMemorySegment(I, b, i, NATIVE);
            FloatVector xl = xa.lanewise(LSHL, 16).reinterpretAsFloats();
            FloatVector yl = ya.lanewise(LSHL, 16).reinterpretAsFloats();
            FloatVector xh = xa.and(0xFFFF_0000).reinterpretAsFloats();
            FloatVector yh = ya.and(0xFFFF_0000).reinterpretAsFloats();
            IntVector rl = xl.lanewise(MUL, yl).reinterpretAsInts();
            IntVector rh = xh.lanewise(MUL, yh).reinterpretAsInts();
            IntVector ol = rl.add(rl.lanewise(LSHR, 16).and(1)).add(0x7FFF).lanewise(LSHR, 16)
                    .blend(rl.lanewise(LSHR, 16).or(0x0040), rl.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
            IntVector oh = rh.add(rh.lanewise(LSHR, 16).and(1)).add(0x7FFF).lanewise(LSHR, 16)
                    .blend(rh.lanewise(LSHR, 16).or(0x0040), rh.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
            ol.or(oh.lanewise(LSHL, 16)).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long minBF16(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector xa = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector ya = IntVector.fromMemorySegment(I, b, i, NATIVE);
            FloatVector xl = xa.lanewise(LSHL, 16).reinterpretAsFloats();
            FloatVector yl = ya.lanewise(LSHL, 16).reinterpretAsFloats();
            FloatVector xh = xa.and(0xFFFF_0000).reinterpretAsFloats();
            FloatVector yh = ya.and(0xFFFF_0000).reinterpretAsFloats();
            IntVector rl = xl.lanewise(MIN, yl).reinterpretAsInts();
            IntVector rh = xh.lanewise(MIN, yh).reinterpretAsInts();
            IntVector ol = rl.add(rl.lanewise(LSHR, 16).and(1)).add(0x7FFF).lanewise(LSHR, 16)
                    .blend(rl.lanewise(LSHR, 16).or(0x0040), rl.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
            IntVector oh = rh.add(rh.lanewise(LSHR, 16).and(1)).add(0x7FFF).lanewise(LSHR, 16)
                    .blend(rh.lanewise(LSHR, 16).or(0x0040), rh.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
            ol.or(oh.lanewise(LSHL, 16)).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
    private static long maxBF16(MemorySegment d, MemorySegment a, MemorySegment b, long bytes) {
        long step = I.vectorByteSize();
        long end = bytes - step;
        long i = 0;
        for (; i <= end; i += step) {
            IntVector xa = IntVector.fromMemorySegment(I, a, i, NATIVE);
            IntVector ya = IntVector.fromMemorySegment(I, b, i, NATIVE);
            FloatVector xl = xa.lanewise(LSHL, 16).reinterpretAsFloats();
            FloatVector yl = ya.lanewise(LSHL, 16).reinterpretAsFloats();
            FloatVector xh = xa.and(0xFFFF_0000).reinterpretAsFloats();
            FloatVector yh = ya.and(0xFFFF_0000).reinterpretAsFloats();
            IntVector rl = xl.lanewise(MAX, yl).reinterpretAsInts();
            IntVector rh = xh.lanewise(MAX, yh).reinterpretAsInts();
            IntVector ol = rl.add(rl.lanewise(LSHR, 16).and(1)).add(0x7FFF).lanewise(LSHR, 16)
                    .blend(rl.lanewise(LSHR, 16).or(0x0040), rl.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
            IntVector oh = rh.add(rh.lanewise(LSHR, 16).and(1)).add(0x7FFF).lanewise(LSHR, 16)
                    .blend(rh.lanewise(LSHR, 16).or(0x0040), rh.and(0x7FFF_FFFF).compare(GT, 0x7F80_0000));
            ol.or(oh.lanewise(LSHL, 16)).intoMemorySegment(d, i, NATIVE);
        }
        return i;
    }
}
