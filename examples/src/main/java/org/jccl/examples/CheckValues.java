package org.jccl.examples;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * The inputs {@link CollectiveCheck} gives every rank and the exact result every collective must
 * produce from them, computed independently of jccl.
 *
 * <p><b>Why every reduction result is exact.</b> A check must not need a tolerance (a tolerance hides
 * wrong summation orders and off-by-one-element bugs in the low bits), so the inputs are chosen
 * so that any order of evaluation gives the same bits in every type:
 * <ul>
 *   <li>integer SUM and PROD use random bits over the type's whole range: wrap-around arithmetic
 *       modulo 2^width is associative and commutative, so the reference is computed in {@code long}
 *       and narrowed;</li>
 *   <li>MIN and MAX use random bits too (finite values for floating types): they are exact in any
 *       order, and high-bit values catch signed/unsigned mix-ups;</li>
 *   <li>floating SUM uses multiples of 1/4 small enough that every partial sum of up to 64 ranks
 *       has at most 8 significant bits, which even bfloat16 holds exactly;</li>
 *   <li>AVG (integer and floating) uses small values of which the last rank's is shifted so that
 *       the sum is a multiple of the rank count: the quotient is exact, so truncation, rounding and
 *       "divide once at the end" versus "pre-scale" cannot differ;</li>
 *   <li>floating PROD uses +-1, +-2 and +-1/2 (only ranks below 8 contribute powers other than 1), so
 *       every partial product is a power of two within half precision's range.</li>
 * </ul>
 * That is why at most {@link #MAX_RANKS} ranks are supported.
 *
 * <p>Data-movement collectives (broadcast, gather, all-to-all, send/recv...) use random bits tagged
 * with the source rank and the element's index, compared bit for bit, so a block that lands at the
 * wrong place or comes from the wrong rank is found. Output memory starts out filled with {@link
 * #POISON} and is followed by {@link #GUARD} poisoned bytes that must stay untouched.
 *
 * <p>One instance holds the data of one check over {@code n} ranks: its salt makes every check's data
 * different, so a result left over from an earlier check cannot pass. Immutable.
 */
final class CheckValues {
    /** The largest job whose reductions are exact with these inputs (see the class comment). */
    static final int MAX_RANKS = 64;

    /** Byte every output starts as; a collective that skips an element leaves it visible. */
    static final byte POISON = (byte) 0xA5;

    /** Poisoned bytes after every buffer: a write past the end shows up there. */
    static final long GUARD = 64;

    private static final long GOLDEN = 0x9E3779B97F4A7C15L;

    /** Floating PROD inputs: powers of two, so every partial product is exact. */
    private static final double[] PROD_VALUES = {1, -1, 2, -2, 0.5, -0.5};

    private final int n;
    /** Per source rank, the start of its random stream: computed once, as every element needs one. */
    private final long[] keys;
    /** Magnitude bound of small inputs (see {@link #bound}). */
    private final int m;

    /** The data of the check numbered {@code salt} over {@code n} ranks. */
    CheckValues(long salt, int n) {
        if (n < 1 || n > MAX_RANKS) {
            throw new IllegalArgumentException("ranks must be 1.." + MAX_RANKS + ", got " + n);
        }
        this.n = n;
        this.keys = new long[n];
        for (int r = 0; r < n; r++) {
            keys[r] = mix(mix(salt * GOLDEN + 0x632BE59BD9B4E019L) + r);
        }
        this.m = bound(n);
    }

    // ---------------------------------------------------------------------------------- random bits

    /** SplitMix64's finaliser: a cheap bijection whose output bits all depend on every input bit. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** Random bits for element {@code index} sent by rank {@code src} (SplitMix64's stream from that rank's key). */
    long bits(int src, long index) {
        return mix(keys[src] + index * GOLDEN);
    }

    /** The low {@code size} bytes of {@code bits}. */
    static long mask(int size, long bits) {
        return size == 8 ? bits : bits & ((1L << (8 * size)) - 1);
    }

    /** Writes the low {@code size} bytes of {@code bits} as element {@code i}. */
    static void putBits(MemorySegment s, int size, long i, long bits) {
        long o = i * size;
        switch (size) {
            case 1 -> s.set(ValueLayout.JAVA_BYTE, o, (byte) bits);
            case 2 -> s.set(ValueLayout.JAVA_SHORT_UNALIGNED, o, (short) bits);
            case 4 -> s.set(ValueLayout.JAVA_INT_UNALIGNED, o, (int) bits);
            default -> s.set(ValueLayout.JAVA_LONG_UNALIGNED, o, bits);
        }
    }

    /** Element {@code i}'s bytes, zero-extended. */
    static long getBits(MemorySegment s, int size, long i) {
        long o = i * size;
        return switch (size) {
            case 1 -> Byte.toUnsignedLong(s.get(ValueLayout.JAVA_BYTE, o));
            case 2 -> Short.toUnsignedLong(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, o));
            case 4 -> Integer.toUnsignedLong(s.get(ValueLayout.JAVA_INT_UNALIGNED, o));
            default -> s.get(ValueLayout.JAVA_LONG_UNALIGNED, o);
        };
    }

    // ---------------------------------------------------------------------------------- typed values

    /** The value of a floating-point type's bits, exactly. */
    static double decode(DataType t, long bits) {
        return switch (t) {
            case FLOAT16 -> Float.float16ToFloat((short) bits);
            case BFLOAT16 -> Float.intBitsToFloat((int) (bits << 16));
            case FLOAT32 -> Float.intBitsToFloat((int) bits);
            case FLOAT64 -> Double.longBitsToDouble(bits);
            default -> throw new IllegalArgumentException(t + " is not a floating-point type");
        };
    }

    /** The bits of {@code v} in a floating-point type; only called with values the type holds exactly. */
    static long encode(DataType t, double v) {
        return switch (t) {
            case FLOAT16 -> Short.toUnsignedLong(Float.floatToFloat16((float) v));
            case BFLOAT16 -> Integer.toUnsignedLong(Float.floatToRawIntBits((float) v)) >>> 16;
            case FLOAT32 -> Integer.toUnsignedLong(Float.floatToRawIntBits((float) v));
            case FLOAT64 -> Double.doubleToRawLongBits(v);
            default -> throw new IllegalArgumentException(t + " is not a floating-point type");
        };
    }

    /** An integer type's bits as its value: sign-extended for signed types, zero-extended for unsigned (uint64 stays raw bits). */
    static long integer(DataType t, long bits) {
        return switch (t) {
            case INT8 -> (byte) bits;
            case INT32 -> (int) bits;
            case UINT8 -> bits & 0xFF;
            case UINT32 -> bits & 0xFFFF_FFFFL;
            case INT64, UINT64 -> bits;
            default -> throw new IllegalArgumentException(t + " is not an integer type");
        };
    }

    /** Random bits of a floating type turned into a finite value (NaN and infinity would make MIN/MAX ill-defined). */
    private static long finite(DataType t, long bits) {
        long m = mask(t.size(), bits);
        double v = decode(t, m);
        if (Double.isFinite(v)) {
            return m;
        }
        // Clearing the exponent's lowest bit turns an all-ones exponent into a finite one, keeping the sign.
        int exponentLow = switch (t) {
            case FLOAT16 -> 10;
            case BFLOAT16 -> 7;
            case FLOAT32 -> 23;
            default -> 52;
        };
        return m & ~(1L << exponentLow);
    }

    /** Magnitude bound of small inputs, so that a sum over n ranks stays within 8 significant bits. */
    static int bound(int n) {
        return Math.max(1, Math.min(8, 64 / n));
    }

    /** The bits of element {@code i} of rank {@code rank}'s input to a reduction with {@code op} (see the class comment). */
    long input(DataType t, ReduceOp op, int rank, long i) {
        if (op == ReduceOp.AVG) {
            long units = unit(t, rank, i);
            if (rank == n - 1) {
                units += Math.floorMod(-unitSum(t, i), n);
            }
            return t.isFloatingPoint() ? encode(t, units / 4.0) : mask(t.size(), units);
        }
        long r = bits(rank, i);
        if (!t.isFloatingPoint()) {
            return mask(t.size(), r);
        }
        return switch (op) {
            case MIN, MAX -> finite(t, r);
            case SUM -> encode(t, (Math.floorMod(r, 8 * m + 1) - 4 * m) / 4.0);
            default -> encode(t, PROD_VALUES[Math.floorMod(r, rank < 8 ? 6 : 2)]);
        };
    }

    /**
     * AVG inputs in units (quarters for floating types) before the last rank's shift: floating
     * [-2m, 2m] quarters (so |sum| stays below 192 quarters, exact in bfloat16), signed integers
     * [-m, m], unsigned [0, m].
     */
    private long unit(DataType t, int rank, long i) {
        long r = bits(rank, i);
        if (t.isFloatingPoint()) {
            return Math.floorMod(r, 4 * m + 1) - 2 * m;
        }
        return t.isSigned() ? Math.floorMod(r, 2 * m + 1) - m : Math.floorMod(r, m + 1);
    }

    private long unitSum(DataType t, long i) {
        long sum = 0;
        for (int r = 0; r < n; r++) {
            sum += unit(t, r, i);
        }
        return sum;
    }

    /** The exact bits a reduction over all n ranks must produce at element {@code i}. */
    long reduced(DataType t, ReduceOp op, long i) {
        if (op == ReduceOp.AVG) {
            // The last rank's shift makes the sum a multiple of n that fits the type: the quotient is exact.
            long s0 = unitSum(t, i);
            long quotient = (s0 + Math.floorMod(-s0, n)) / n;
            return t.isFloatingPoint() ? encode(t, quotient / 4.0) : mask(t.size(), quotient);
        }
        if (t.isFloatingPoint()) {
            double acc = decode(t, input(t, op, 0, i));
            for (int r = 1; r < n; r++) {
                double x = decode(t, input(t, op, r, i));
                acc = switch (op) {
                    case SUM -> acc + x;
                    case PROD -> acc * x;
                    case MIN -> Math.min(acc, x);
                    default -> Math.max(acc, x);
                };
            }
            return encode(t, acc);
        }
        long acc = integer(t, input(t, op, 0, i));
        for (int r = 1; r < n; r++) {
            long x = integer(t, input(t, op, r, i));
            acc = switch (op) {
                case SUM -> acc + x;
                case PROD -> acc * x;
                case MIN -> t.isSigned() ? Math.min(acc, x) : (Long.compareUnsigned(acc, x) <= 0 ? acc : x);
                default -> t.isSigned() ? Math.max(acc, x) : (Long.compareUnsigned(acc, x) >= 0 ? acc : x);
            };
        }
        return mask(t.size(), acc);
    }

    /** True when two element bit patterns of type t are the same value (+0 and -0 count as equal for floats). */
    static boolean same(DataType t, long a, long b) {
        if (a == b) {
            return true;
        }
        return t.isFloatingPoint() && decode(t, a) == decode(t, b);
    }

    /** Element bits as a reader wants to see them: the value, and the raw bits in hex. */
    static String show(DataType t, long bits) {
        String v = t.isFloatingPoint() ? Double.toString(decode(t, bits))
                : t == DataType.UINT64 ? Long.toUnsignedString(bits) : Long.toString(integer(t, bits));
        return v + " (0x" + Long.toHexString(bits) + ")";
    }
}
