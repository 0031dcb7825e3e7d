package org.jccl.internal.reduce;

import java.math.BigInteger;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * An independent model of what {@link Reductions} must compute, written without the code under
 * test: integers in {@link BigInteger} masked back to their width, floating point as exact
 * rationals rounded once, to nearest-even, by a generic rounder parameterised by precision and
 * exponent range. Element values travel as raw bits in a {@code long}, zero-extended from the
 * type's width, so results can be compared bit for bit.
 */
final class ReferenceArithmetic {

    private static final BigInteger MASK64 = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);

    /** A binary floating-point format: significand bits (with the hidden one) and exponent range. */
    enum Format {
        HALF(11, -14, 15),
        BF16(8, -126, 127),
        SINGLE(24, -126, 127),
        DOUBLE(53, -1022, 1023);

        final int precision;
        final int minExponent;
        final int maxExponent;

        Format(int precision, int minExponent, int maxExponent) {
            this.precision = precision;
            this.minExponent = minExponent;
            this.maxExponent = maxExponent;
        }

        static Format of(DataType t) {
            return switch (t) {
                case FLOAT16 -> HALF;
                case BFLOAT16 -> BF16;
                case FLOAT32 -> SINGLE;
                case FLOAT64 -> DOUBLE;
                default -> throw new IllegalArgumentException(t + " is not floating point");
            };
        }
    }

    private ReferenceArithmetic() {
    }

    static int bits(DataType t) {
        return t.size() * 8;
    }

    static long mask(DataType t) {
        return t.size() == 8 ? -1L : (1L << bits(t)) - 1;
    }

    // ---- integers ----

    static BigInteger intValue(DataType t, long raw) {
        int w = bits(t);
        if (t.isSigned()) {
            return BigInteger.valueOf((raw << (64 - w)) >> (64 - w));
        }
        return BigInteger.valueOf(raw).and(MASK64); // raw is already zero-extended below 64 bits
    }

    static long intBits(DataType t, BigInteger v) {
        return v.longValue() & mask(t); // the low bits of two's complement: wrap-around
    }

    // ---- decoding and encoding, by the formats' definitions ----

    static double decode(DataType t, long raw) {
        return switch (t) {
            case FLOAT16 -> decodeSmall(raw, 5, 10);
            case BFLOAT16 -> decodeSmall(raw, 8, 7);
            case FLOAT32 -> Float.intBitsToFloat((int) raw);
            case FLOAT64 -> Double.longBitsToDouble(raw);
            default -> throw new IllegalArgumentException(t.toString());
        };
    }

    /** Decodes a 16-bit format with the given exponent and fraction widths from its fields. */
    static double decodeSmall(long raw, int expBits, int fracBits) {
        int bias = (1 << (expBits - 1)) - 1;
        int sign = (int) (raw >>> (expBits + fracBits)) & 1;
        int exp = (int) (raw >>> fracBits) & ((1 << expBits) - 1);
        long frac = raw & ((1L << fracBits) - 1);
        double magnitude;
        if (exp == (1 << expBits) - 1) {
            magnitude = frac == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
        } else if (exp == 0) {
            magnitude = Math.scalb((double) frac, 1 - bias - fracBits);
        } else {
            magnitude = Math.scalb((double) ((1L << fracBits) | frac), exp - bias - fracBits);
        }
        return sign == 1 ? -magnitude : magnitude;
    }

    /** Encodes a value that the format represents exactly (the rounder's output). */
    static long encode(DataType t, double v) {
        return switch (t) {
            case FLOAT16 -> encodeSmall(v, 5, 10);
            case BFLOAT16 -> encodeSmall(v, 8, 7);
            case FLOAT32 -> Float.floatToRawIntBits((float) v) & 0xFFFF_FFFFL;
            case FLOAT64 -> Double.doubleToRawLongBits(v);
            default -> throw new IllegalArgumentException(t.toString());
        };
    }

    static long encodeSmall(double v, int expBits, int fracBits) {
        int bias = (1 << (expBits - 1)) - 1;
        long expAll = (1L << expBits) - 1;
        if (Double.isNaN(v)) {
            return (expAll << fracBits) | (1L << (fracBits - 1));
        }
        long sign = (Double.doubleToRawLongBits(v) < 0 ? 1L : 0L) << (expBits + fracBits);
        double a = Math.abs(v);
        if (Double.isInfinite(a)) {
            return sign | (expAll << fracBits);
        }
        int minNormal = 1 - bias;
        if (a < Math.scalb(1.0, minNormal)) {
            double frac = Math.scalb(a, fracBits - minNormal);
            check(frac == Math.rint(frac), v);
            return sign | (long) frac;
        }
        int e = Math.getExponent(a);
        double significand = Math.scalb(a, fracBits - e);
        check(significand == Math.rint(significand) && e <= bias, v);
        return sign | ((long) (e + bias) << fracBits) | ((long) significand - (1L << fracBits));
    }

    private static void check(boolean ok, double v) {
        if (!ok) {
            throw new IllegalStateException("reference: " + v + " is not representable; rounder bug");
        }
    }

    static boolean isNaN(DataType t, long raw) {
        return Double.isNaN(decode(t, raw));
    }

    // ---- exact rational arithmetic and the rounder ----

    /** num / den with den > 0; every finite double is one exactly. */
    record Rational(BigInteger num, BigInteger den) {
        static Rational of(double d) {
            if (d == 0) {
                return new Rational(BigInteger.ZERO, BigInteger.ONE);
            }
            int e = Math.max(Math.getExponent(d), Double.MIN_EXPONENT);
            long m = (long) Math.scalb(d, 52 - e); // an integer below 2^53: exact
            int shift = e - 52;
            return shift >= 0
                    ? new Rational(BigInteger.valueOf(m).shiftLeft(shift), BigInteger.ONE)
                    : new Rational(BigInteger.valueOf(m), BigInteger.ONE.shiftLeft(-shift));
        }

        Rational add(Rational o) {
            return new Rational(num.multiply(o.den).add(o.num.multiply(den)), den.multiply(o.den));
        }

        Rational multiply(Rational o) {
            return new Rational(num.multiply(o.num), den.multiply(o.den));
        }

        Rational divide(int n) {
            return new Rational(num, den.multiply(BigInteger.valueOf(n)));
        }
    }

    /**
     * Rounds an exact value to the format, to nearest with ties to even, with gradual underflow and
     * overflow to infinity. Returns it as a double (every format here fits a double exactly); a
     * result that rounds to zero keeps the value's sign. The caller handles an exact zero.
     */
    static double round(Rational v, Format f) {
        int sign = v.num.signum();
        if (sign == 0) {
            throw new IllegalArgumentException("exact zero: its sign is the caller's business");
        }
        BigInteger a = v.num.abs();
        BigInteger d = v.den;
        // floor(log2(a/d)) is la-ld or one less.
        int e = a.bitLength() - d.bitLength();
        boolean atLeast = e >= 0 ? a.compareTo(d.shiftLeft(e)) >= 0 : a.shiftLeft(-e).compareTo(d) >= 0;
        if (!atLeast) {
            e--;
        }
        // The quantum: the weight of the last significand bit, fixed below the normal range.
        int q = Math.max(e, f.minExponent) - (f.precision - 1);
        BigInteger n = q < 0 ? a.shiftLeft(-q) : a;
        BigInteger dd = q > 0 ? d.shiftLeft(q) : d;
        BigInteger[] mr = n.divideAndRemainder(dd);
        BigInteger m = mr[0];
        int half = mr[1].shiftLeft(1).compareTo(dd);
        if (half > 0 || (half == 0 && m.testBit(0))) {
            m = m.add(BigInteger.ONE);
        }
        double magnitude;
        if (m.signum() == 0) {
            magnitude = 0.0;
        } else if (q + m.bitLength() - 1 > f.maxExponent) {
            magnitude = Double.POSITIVE_INFINITY;
        } else {
            magnitude = Math.scalb(m.doubleValue(), q);
        }
        return sign < 0 ? -magnitude : magnitude;
    }

    // ---- the operators ----

    /** Raw bits of {@code x op y} in type {@code t}; AVG means SUM, as in the reduce methods. */
    static long apply(DataType t, ReduceOp op, long x, long y) {
        if (!t.isFloatingPoint()) {
            BigInteger a = intValue(t, x);
            BigInteger b = intValue(t, y);
            BigInteger r = switch (op) {
                case SUM, AVG -> a.add(b);
                case PROD -> a.multiply(b);
                case MIN -> a.min(b);
                case MAX -> a.max(b);
            };
            return intBits(t, r);
        }
        Format f = Format.of(t);
        double a = decode(t, x);
        double b = decode(t, y);
        double r = switch (op) {
            case SUM, AVG -> add(a, b, f);
            case PROD -> multiply(a, b, f);
            case MIN -> min(a, b);
            case MAX -> max(a, b);
        };
        return encode(t, r);
    }

    /** Raw bits of {@code x / n} as finishAvg defines it. */
    static long average(DataType t, long x, int n) {
        if (!t.isFloatingPoint()) {
            return intBits(t, intValue(t, x).divide(BigInteger.valueOf(n))); // truncates toward zero
        }
        double a = decode(t, x);
        if (Double.isNaN(a) || Double.isInfinite(a) || a == 0) {
            return encode(t, a); // NaN stays NaN, infinity and signed zero are unchanged by /n
        }
        return encode(t, round(Rational.of(a).divide(n), Format.of(t)));
    }

    static double add(double a, double b, Format f) {
        if (Double.isNaN(a) || Double.isNaN(b)) {
            return Double.NaN;
        }
        if (Double.isInfinite(a) || Double.isInfinite(b)) {
            if (Double.isInfinite(a) && Double.isInfinite(b) && a != b) {
                return Double.NaN;
            }
            return Double.isInfinite(a) ? a : b;
        }
        if (a == 0 && b == 0) {
            return isNegativeZero(a) && isNegativeZero(b) ? -0.0 : 0.0;
        }
        Rational s = Rational.of(a).add(Rational.of(b));
        return s.num.signum() == 0 ? 0.0 : round(s, f); // x + (-x) is +0 when rounding to nearest
    }

    static double multiply(double a, double b, Format f) {
        if (Double.isNaN(a) || Double.isNaN(b)) {
            return Double.NaN;
        }
        boolean negative = (Double.doubleToRawLongBits(a) ^ Double.doubleToRawLongBits(b)) < 0;
        if (Double.isInfinite(a) || Double.isInfinite(b)) {
            if (a == 0 || b == 0) {
                return Double.NaN;
            }
            return negative ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY;
        }
        if (a == 0 || b == 0) {
            return negative ? -0.0 : 0.0;
        }
        return round(Rational.of(a).multiply(Rational.of(b)), f);
    }

    static double min(double a, double b) {
        if (Double.isNaN(a) || Double.isNaN(b)) {
            return Double.NaN;
        }
        if (a == 0 && b == 0) {
            return isNegativeZero(a) || isNegativeZero(b) ? -0.0 : 0.0;
        }
        return a < b ? a : b;
    }

    static double max(double a, double b) {
        if (Double.isNaN(a) || Double.isNaN(b)) {
            return Double.NaN;
        }
        if (a == 0 && b == 0) {
            return isNegativeZero(a) && isNegativeZero(b) ? -0.0 : 0.0;
        }
        return a > b ? a : b;
    }

    private static boolean isNegativeZero(double d) {
        return d == 0 && Double.doubleToRawLongBits(d) < 0;
    }

    /** Whether an actual result matches the expected one: equal bits, or both NaN (any payload). */
    static boolean matches(DataType t, long expected, long actual) {
        if (t.isFloatingPoint() && isNaN(t, expected)) {
            return isNaN(t, actual);
        }
        return expected == actual;
    }
}
