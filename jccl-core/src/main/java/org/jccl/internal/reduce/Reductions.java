package org.jccl.internal.reduce;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.Locale;
import java.util.Optional;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.config.ConfigLoader;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;

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
 * byte order. Each call checks its arguments once, then runs one specialised loop per (type,
 * operator): for native (and mapped) memory, the Vector API loops of {@link VectorKernels} when the JVM has the
 * {@code jdk.incubator.vector} module ({@code --add-modules jdk.incubator.vector}, which every java
 * command line jccl owns passes) and {@code JCCL_REDUCE_VECTOR} is not {@code 0}; otherwise the
 * scalar loops of {@link Kernels}, which stream the operands through small per-thread arrays. The
 * choice is made once, when this class initialises. The two agree bit for bit on integer types and
 * on every non-NaN float result (see {@link VectorKernels}).
 *
 * <p>Thread-safe: concurrent calls are fine as long as they write disjoint memory (the staging
 * arrays are per thread).
 */
public final class Reductions {

    /** The Vector API module's name: present in the boot layer only with {@code --add-modules}. */
    static final String VECTOR_MODULE = "jdk.incubator.vector";

    /** Whether {@link #reduce} runs the Vector API kernels; fixed at class initialisation. */
    private static final boolean VECTOR = chooseVector();

    /**
     * Whether float16 and bfloat16 also take the Vector API loops ({@code JCCL_REDUCE_VECTOR=1}).
     * Not under auto: JDK 25's Vector API has no half-precision conversion, and the integer-lane
     * emulation measured slower than C2's auto-vectorised scalar loop for float16 (which uses F16C)
     * and, for both, needs seconds of JIT warm-up during which it runs far slower than scalar.
     */
    private static final boolean VECTOR_16BIT_FLOATS = VECTOR && forced(ConfigLoader.processValue(Settings.REDUCE_VECTOR));

    private Reductions() {
    }

    /** Which kernels this JVM runs, for logs and tests: "Vector API, 512-bit (...)" or "scalar". */
    public static String implementation() {
        return VECTOR ? VectorKernels.describe() + (VECTOR_16BIT_FLOATS ? "" : "; float16/bfloat16 scalar") : "scalar";
    }

    /** Whether the Vector API kernels are in use. */
    public static boolean vectorized() {
        return VECTOR;
    }

    private static boolean chooseVector() {
        String value = ConfigLoader.processValue(Settings.REDUCE_VECTOR);
        boolean present = ModuleLayer.boot().findModule(VECTOR_MODULE).isPresent();
        Choice c = choose(value == null ? Settings.REDUCE_VECTOR.defaultValue() : value, present);
        if (c.message() != null) {
            Log.log(c.level(), Log.Subsys.INIT, -1, c.message());
        }
        if (!c.vector()) {
            return false;
        }
        try {
            if (VectorKernels.usable()) {
                Log.info(Log.Subsys.INIT, -1, "reduction kernels: " + VectorKernels.describe()
                        + (forced(value) ? "" : "; float16/bfloat16 scalar (JCCL_REDUCE_VECTOR=1 vectorises them too)"));
                return true;
            }
            Log.info(Log.Subsys.INIT, -1, "reduction kernels: scalar (preferred vector shape "
                    + VectorKernels.SHAPE.vectorBitSize() + " bits is too narrow)");
        } catch (LinkageError | RuntimeException e) {
            Log.warn(Log.Subsys.INIT, -1, "reduction kernels: scalar (Vector API unusable: " + e + ")");
        }
        return false;
    }

    private static boolean forced(String setting) {
        if (setting == null) {
            return false;
        }
        return switch (setting.trim().toLowerCase(Locale.ROOT)) {
            case "1", "true", "yes", "on" -> true;
            default -> false;
        };
    }

    /** Which kernels {@link #reduceWith} runs. */
    public enum Impl { SCALAR, VECTOR }

    /**
     * {@link #reduce(MemorySegment, MemorySegment, MemorySegment, long, DataType, ReduceOp)} with the
     * kernels chosen by the caller, whatever {@code JCCL_REDUCE_VECTOR} says: for benchmarks and
     * tests. {@code VECTOR} needs the module ({@code --add-modules jdk.incubator.vector}).
     *
     * @throws IllegalStateException for VECTOR when the module is absent
     */
    public static void reduceWith(Impl impl, MemorySegment dst, MemorySegment a, MemorySegment b, long count,
                                  DataType type, ReduceOp op) {
        Objects.requireNonNull(impl, "impl");
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(op, "op");
        long bytes = checkCount(count, type);
        checkWritable(dst, bytes, "dst", count, type);
        checkReadable(a, bytes, "a", count, type);
        checkReadable(b, bytes, "b", count, type);
        checkAlias(dst, a, bytes, "a");
        checkAlias(dst, b, bytes, "b");
        if (impl == Impl.VECTOR && ModuleLayer.boot().findModule(VECTOR_MODULE).isEmpty()) {
            throw new IllegalStateException("the Vector API kernels need --add-modules " + VECTOR_MODULE);
        }
        if (count == 0) {
            return;
        }
        if (impl == Impl.VECTOR) {
            reduceVector(dst, a, b, count, type, op);
        } else {
            reduceScalar(dst, a, b, count, type, op);
        }
    }

    /**
     * The Vector API kernels, whatever the setting says: arguments already checked, {@code count > 0},
     * the module present. For tests and benchmarks.
     */
    static void reduceVector(MemorySegment dst, MemorySegment a, MemorySegment b, long count,
                             DataType type, ReduceOp op) {
        VectorKernels.reduce(dst, a, b, count, type, op);
    }

    /** The outcome of {@link #choose}: whether to use the Vector API, and what to log (message may be null). */
    record Choice(boolean vector, Log.Level level, String message) {
    }

    /**
     * The decision behind {@link #vectorized()}, from the {@code JCCL_REDUCE_VECTOR} value and
     * whether the module is in the boot layer. Separate so that tests can cover every case. An
     * invalid value is warned about and treated as auto (this runs in a class initialiser, where an
     * exception would make every later reduction fail with NoClassDefFoundError).
     */
    static Choice choose(String setting, boolean modulePresent) {
        String v = setting == null ? "auto" : setting.trim().toLowerCase(Locale.ROOT);
        String enable = "add --add-modules " + VECTOR_MODULE + " to the java command line to enable them";
        return switch (v) {
            case "auto", "" -> modulePresent ? new Choice(true, Log.Level.INFO, null)
                    : new Choice(false, Log.Level.INFO, "reduction kernels: scalar; the Vector API module "
                            + VECTOR_MODULE + " is absent (" + enable + ")");
            case "1", "true", "yes", "on" -> modulePresent ? new Choice(true, Log.Level.INFO, null)
                    : new Choice(false, Log.Level.WARN, "JCCL_REDUCE_VECTOR=" + setting + " but the module "
                            + VECTOR_MODULE + " is absent: using the scalar reduction kernels (" + enable + ")");
            case "0", "false", "no", "off" -> new Choice(false, Log.Level.INFO,
                    "reduction kernels: scalar (JCCL_REDUCE_VECTOR=" + setting + ")");
            default -> new Choice(modulePresent, Log.Level.WARN, "JCCL_REDUCE_VECTOR=" + setting
                    + " is not valid (expected auto, 1 or 0); treating it as auto");
        };
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
        // Heap segments take the scalar kernels even when the Vector API ones are on: the Vector API
        // reads segments through JDK code whose type profile is shared by every caller, and heap
        // segments of a few array types (each its own class) made the native-memory loops ~4x slower
        // than scalar once they had passed through it. Native and mapped segments keep it fast.
        if (VECTOR && (VECTOR_16BIT_FLOATS || (type != DataType.FLOAT16 && type != DataType.BFLOAT16))
                && dst.isNative() && a.isNative() && b.isNative()) {
            VectorKernels.reduce(dst, a, b, count, type, op);
        } else {
            reduceScalar(dst, a, b, count, type, op);
        }
    }

    /**
     * The scalar kernels, whatever {@link #vectorized()} says: arguments already checked. Also the
     * reference the Vector API kernels are tested against, and what they run on their tails.
     */
    static void reduceScalar(MemorySegment dst, MemorySegment a, MemorySegment b, long count,
                             DataType type, ReduceOp op) {
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
        long shared;
        if (dst.isNative() && src.isNative()) {
            // Native memory: compare the address ranges (no slices on the path of every small reduction).
            long d = dst.address();
            long s = src.address();
            shared = d == s ? bytes : Math.max(0, Math.min(d, s) + bytes - Math.max(d, s));
        } else {
            // Both views have the same length, so d lying wholly inside s means d is exactly s.
            Optional<MemorySegment> overlap = dst.asSlice(0, bytes).asOverlappingSlice(src.asSlice(0, bytes));
            shared = overlap.isPresent() ? overlap.get().byteSize() : 0;
        }
        if (shared != 0 && shared != bytes) {
            throw new IllegalArgumentException("Reductions: dst partially overlaps '" + srcName + "' ("
                    + shared + " of " + bytes + " bytes shared); it must be exactly the same memory or disjoint");
        }
    }
}
