package org.jccl.cli.perf;

import java.math.BigDecimal;
import java.math.RoundingMode;

/**
 * The few C {@code printf} conversions nccl-tests uses ({@code %.Nf}, {@code %.Ne}, {@code %g}),
 * reproduced digit for digit.
 *
 * <p>Why not {@link String#format}: Java rounds the shortest decimal form of a double half-up,
 * while glibc rounds the exact binary value half-even, so {@code 0.125} prints as "0.13" in Java
 * and "0.12" in C; and Java's {@code %g} neither strips trailing zeros nor switches to the
 * exponent form as C does. Tables that are meant to be diffed against nccl-tests must agree in
 * the last digit, so every number goes through {@link BigDecimal} built from the exact double.
 */
final class CFormat {
    private CFormat() {
    }

    /** {@code %.<prec>f}. */
    static String fixed(double v, int prec) {
        String special = special(v);
        if (special != null) {
            return special;
        }
        String s = new BigDecimal(v).setScale(prec, RoundingMode.HALF_EVEN).toPlainString();
        return negative(v) && !s.startsWith("-") ? "-" + s : s;
    }

    /** {@code %.<prec>e}: one digit before the point, an exponent of at least two digits. */
    static String exp(double v, int prec) {
        String special = special(v);
        if (special != null) {
            return special;
        }
        String sign = negative(v) ? "-" : "";
        if (v == 0) {
            return sign + (prec > 0 ? "0." + "0".repeat(prec) : "0") + "e+00";
        }
        BigDecimal abs = new BigDecimal(Math.abs(v));
        int e = exponent(abs);
        BigDecimal mantissa = abs.movePointLeft(e).setScale(prec, RoundingMode.HALF_EVEN);
        if (mantissa.compareTo(BigDecimal.TEN) >= 0) {
            // 9.99..5 rounded up to 10.0: renormalise, as printf does.
            e++;
            mantissa = abs.movePointLeft(e).setScale(prec, RoundingMode.HALF_EVEN);
        }
        return sign + mantissa.toPlainString() + exponentSuffix(e);
    }

    /** {@code %g}: six significant digits, trailing zeros removed, exponent form outside [1e-4, 1e6). */
    static String g(double v) {
        return g(v, 6);
    }

    /** {@code %.<prec>g}. */
    static String g(double v, int prec) {
        String special = special(v);
        if (special != null) {
            return special;
        }
        int p = prec == 0 ? 1 : prec;
        String sign = negative(v) ? "-" : "";
        if (v == 0) {
            return sign + "0";
        }
        BigDecimal abs = new BigDecimal(Math.abs(v));
        // C decides between the two forms from the exponent the %e conversion would print.
        int e = exponent(abs);
        BigDecimal rounded = abs.movePointLeft(e).setScale(p - 1, RoundingMode.HALF_EVEN);
        if (rounded.compareTo(BigDecimal.TEN) >= 0) {
            e++;
            rounded = abs.movePointLeft(e).setScale(p - 1, RoundingMode.HALF_EVEN);
        }
        if (e < -4 || e >= p) {
            return sign + stripZeros(rounded.toPlainString()) + exponentSuffix(e);
        }
        String f = abs.setScale(p - 1 - e, RoundingMode.HALF_EVEN).toPlainString();
        return sign + stripZeros(f);
    }

    /** {@code %<width>s}: right-justified, never truncated. */
    static String right(String s, int width) {
        return s.length() >= width ? s : " ".repeat(width - s.length()) + s;
    }

    /** {@code %-<width>s}: left-justified, never truncated. */
    static String left(String s, int width) {
        return s.length() >= width ? s : s + " ".repeat(width - s.length());
    }

    /**
     * nccl-tests' {@code getFloatStr}: the value in at most {@code width} characters, trying two,
     * one and zero decimals, then the exponent form, so huge times never break the columns.
     */
    static String fit(double v, int width) {
        for (int prec = 2; prec >= 0; prec--) {
            String s = right(fixed(v, prec), width);
            if (s.length() <= width) {
                return s;
            }
        }
        // snprintf(str, width+1, ...) truncates to width characters; keep that too.
        String s = right(exp(v, width >= 7 ? 1 : 0), width);
        return s.length() > width ? s.substring(0, width) : s;
    }

    private static int exponent(BigDecimal positive) {
        return positive.precision() - positive.scale() - 1;
    }

    private static String exponentSuffix(int e) {
        int a = Math.abs(e);
        return "e" + (e < 0 ? "-" : "+") + (a < 10 ? "0" : "") + a;
    }

    private static String stripZeros(String s) {
        if (s.indexOf('.') < 0) {
            return s;
        }
        int end = s.length();
        while (s.charAt(end - 1) == '0') {
            end--;
        }
        if (s.charAt(end - 1) == '.') {
            end--;
        }
        return s.substring(0, end);
    }

    private static boolean negative(double v) {
        return v < 0 || (v == 0 && 1 / v < 0);
    }

    private static String special(double v) {
        if (Double.isNaN(v)) {
            return "nan";
        }
        if (Double.isInfinite(v)) {
            return v > 0 ? "inf" : "-inf";
        }
        return null;
    }
}
