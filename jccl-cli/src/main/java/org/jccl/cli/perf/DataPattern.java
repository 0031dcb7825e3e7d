package org.jccl.cli.perf;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * The deterministic data a check run sends, and the result every rank must then hold.
 *
 * <p>Every value is a small integer chosen so that the expected result is exact in every type
 * and independent of the order in which a runtime combines ranks:
 * <ul>
 * <li>copies (broadcast, all_gather, alltoall, sendrecv) and min/max: a hash of (rank, index,
 *     seed) in [0, 250] ([0, 148] for 8-bit types), centred on 0 for signed types; exact even in
 *     bfloat16, and different for any two ranks less than 251 (149) apart, so data from the
 *     wrong rank is caught;</li>
 * <li>sum and avg: the hash reduced to [0, A) with A chosen so that n*(A-1) stays exact (int8 and
 *     uint8 127, bfloat16 256, half 2048), so no partial sum is ever rounded or wraps;</li>
 * <li>prod: mostly 1, a 2 for one rank in seven and, for signed types, some -1s; products are
 *     powers of two, exact in floating types (half up to about 100 ranks) and exact modulo 2^w for
 *     integer types, whose wrap-around is order independent.</li>
 * </ul>
 * Only avg in floating types is compared with a tolerance (4 units of the type's precision,
 * relative to the expected value):
 * a runtime may divide before or after summing and round twice.
 *
 * <p>The seed changes between checks so that a result left over from an earlier size, variant or
 * check cannot pass for a new one; receive buffers are also filled with {@link #POISON} first.
 */
final class DataPattern {

    /** Byte written over receive buffers before a check: not a small integer in any type (0xA5A5...). */
    static final byte POISON = (byte) 0xA5;

    // Primes, so that ranks r and r' (|r - r'| < range) never share a value at one index. 8-bit
    // types get the smaller one to keep the poison (0xA5: 165, or -91 signed) out of their range.
    private static final int HASH_RANGE = 251;
    private static final int HASH_RANGE_8BIT = 149;

    private final DataType type;
    private final ReduceOp op;
    private final int nranks;
    private final int seed;
    private final long sumRange;
    private final int hashRange;

    /**
     * @param type element type
     * @param op the reduction the data feeds, or null for collectives that only copy
     * @param nranks ranks in the job
     * @param seed varies the data between checks
     */
    DataPattern(DataType type, ReduceOp op, int nranks, int seed) {
        this.type = type;
        this.op = op;
        this.nranks = nranks;
        this.hashRange = type.size() == 1 ? HASH_RANGE_8BIT : HASH_RANGE;
        this.seed = Math.floorMod(seed, hashRange);
        // uint8 stays below 128 too: its sums must never reach the poison value 165.
        long limit = switch (type) {
            case INT8, UINT8 -> 127;
            case BFLOAT16 -> 256;
            case FLOAT16 -> 2048;
            default -> 1L << 24;
        };
        this.sumRange = Math.clamp(limit / nranks + 1, 2, 16);
    }

    DataType type() {
        return type;
    }

    /** Rank {@code rank}'s value at element {@code index} of its send data, as an integer. */
    long value(int rank, long index) {
        long h = Math.floorMod(index * 0x9E37L + rank * 59L + seed * 101L, hashRange);
        if (op == null || op == ReduceOp.MIN || op == ReduceOp.MAX) {
            return type.isSigned() ? h - hashRange / 2 : h;
        }
        return switch (op) {
            case SUM, AVG -> h % sumRange;
            case PROD -> {
                if (Math.floorMod(index + rank + seed, 7) == 0) {
                    yield 2;
                }
                yield type.isSigned() && Math.floorMod(index * 3 + rank + seed, 11) == 0 ? -1 : 1;
            }
            default -> throw new IllegalStateException(op.toString());
        };
    }

    /** {@link #value} as the element's bits. */
    long bits(int rank, long index) {
        return Elements.fromLong(type, value(rank, index));
    }

    /** Writes rank {@code rank}'s elements {@code first .. first+count) to the start of {@code s}. */
    void fill(MemorySegment s, int rank, long first, long count) {
        for (long i = 0; i < count; i++) {
            Elements.setBits(s, i, type, bits(rank, first + i));
        }
    }

    /** The bits of op over all ranks of their element {@code index}. */
    long reducedBits(long index) {
        if (type.isFloatingPoint()) {
            // Values are small integers, so double arithmetic is exact and order does not matter.
            double acc = value(0, index);
            for (int r = 1; r < nranks; r++) {
                double v = value(r, index);
                acc = switch (op) {
                    case SUM, AVG -> acc + v;
                    case PROD -> acc * v;
                    case MIN -> Math.min(acc, v);
                    case MAX -> Math.max(acc, v);
                };
            }
            return Elements.fromDouble(type, op == ReduceOp.AVG ? acc / nranks : acc);
        }
        // Integer types: two's-complement arithmetic in 64 bits, truncated to the type's width at
        // the end, equals the same arithmetic in the type's width (wrap-around included).
        long acc = value(0, index);
        for (int r = 1; r < nranks; r++) {
            long v = value(r, index);
            acc = switch (op) {
                case SUM, AVG -> acc + v;
                case PROD -> acc * v;
                case MIN -> Math.min(acc, v); // pattern values lie inside the type's range: plain compare
                case MAX -> Math.max(acc, v);
            };
        }
        if (op == ReduceOp.AVG) {
            long sum = Elements.toLong(type, Elements.fromLong(type, acc));
            acc = type.isSigned() ? sum / nranks : Long.divideUnsigned(sum, nranks);
        }
        return Elements.fromLong(type, acc);
    }

    /** True when {@code got} is an acceptable result where {@code expected} was computed. */
    boolean matches(long expected, long got) {
        if (expected == got) {
            return true;
        }
        if (op != ReduceOp.AVG || !type.isFloatingPoint()) {
            return false;
        }
        double e = Elements.toDouble(type, expected);
        double g = Elements.toDouble(type, got);
        double eps = switch (type) {
            case FLOAT16 -> 0x1p-10;
            case BFLOAT16 -> 0x1p-7;
            case FLOAT32 -> 0x1p-23;
            default -> 0x1p-52;
        };
        // Relative, so that an expected 0 must be exactly 0 (a poisoned 1e-16 must not pass).
        return Math.abs(g - e) <= 4 * eps * Math.abs(e);
    }

    /** Fills {@code bytes} bytes of {@code s} with {@link #POISON}. */
    static void poison(MemorySegment s, long bytes) {
        s.asSlice(0, bytes).fill(POISON);
    }
}
