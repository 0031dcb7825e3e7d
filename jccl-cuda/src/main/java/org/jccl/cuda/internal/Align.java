package org.jccl.cuda.internal;

/** Integer arithmetic of sizes and slices. */
public final class Align {
    private Align() {
    }

    public static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    /** {@code a} rounded up to a multiple of {@code m}. */
    public static long roundUp(long a, long m) {
        return ceilDiv(a, m) * m;
    }

    /** Whether the byte ranges [a, a + alen) and [b, b + blen) share a byte. */
    public static boolean overlaps(long a, long alen, long b, long blen) {
        return a < b + blen && b < a + alen && alen > 0 && blen > 0;
    }
}
