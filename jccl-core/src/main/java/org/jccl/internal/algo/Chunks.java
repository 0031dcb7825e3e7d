package org.jccl.internal.algo;

import java.lang.foreign.MemorySegment;

/**
 * A split of a buffer into {@code n} chunks (one per rank) and of each chunk into slices of at most
 * {@code sliceElems} elements, the unit of pipelining. Both sides of every transfer compute the
 * same split from the same arguments, so no sizes travel on the wire.
 */
final class Chunks {
    private final long[] offset;
    private final long[] length;
    private final long sliceElems;

    private Chunks(long[] offset, long[] length, long sliceElems) {
        this.offset = offset;
        this.length = length;
        this.sliceElems = sliceElems;
    }

    /** {@code count} elements in {@code n} chunks whose sizes differ by at most one (the first count % n are larger). */
    static Chunks balanced(long count, int n, long sliceElems) {
        long[] off = new long[n];
        long[] len = new long[n];
        long q = count / n;
        long rem = count % n;
        for (int i = 0; i < n; i++) {
            off[i] = i * q + Math.min(i, rem);
            len[i] = q + (i < rem ? 1 : 0);
        }
        return new Chunks(off, len, Math.max(1, sliceElems));
    }

    /** {@code n} equal blocks of {@code blockElems} elements, block i at i * blockElems. */
    static Chunks equal(long blockElems, int n, long sliceElems) {
        long[] off = new long[n];
        long[] len = new long[n];
        for (int i = 0; i < n; i++) {
            off[i] = i * blockElems;
            len[i] = blockElems;
        }
        return new Chunks(off, len, Math.max(1, sliceElems));
    }

    /** Chunks of the given lengths, laid out one after the other from element 0. */
    static Chunks sized(long[] lengths, long sliceElems) {
        long[] off = new long[lengths.length];
        long at = 0;
        for (int i = 0; i < lengths.length; i++) {
            off[i] = at;
            at += lengths[i];
        }
        return new Chunks(off, lengths.clone(), Math.max(1, sliceElems));
    }

    int slices(int c) {
        return (int) ((length[c] + sliceElems - 1) / sliceElems);
    }

    /** First element of slice k of chunk c. */
    long sliceOffset(int c, int k) {
        return offset[c] + k * sliceElems;
    }

    /** Elements in slice k of chunk c. */
    long sliceLength(int c, int k) {
        return Math.min(sliceElems, length[c] - k * sliceElems);
    }

    long sliceElems() {
        return sliceElems;
    }

    /** Number of chunks. */
    int count() {
        return offset.length;
    }

    /** First element of chunks [lo, hi) (contiguous: chunks are laid out in order). */
    long rangeOffset(int lo) {
        return offset[lo];
    }

    /** Elements in chunks [lo, hi). */
    long rangeLength(int lo, int hi) {
        return hi <= lo ? 0 : offset[hi - 1] + length[hi - 1] - offset[lo];
    }

    /** The bytes of slice k of chunk c of {@code w}, whose elements are {@code esz} bytes. */
    MemorySegment slice(MemorySegment w, int c, int k, int esz) {
        return w.asSlice(sliceOffset(c, k) * esz, sliceLength(c, k) * esz);
    }

    /** The bytes of chunks [lo, hi) of {@code w} (chunks of bytes). */
    MemorySegment range(MemorySegment w, int lo, int hi) {
        return w.asSlice(rangeOffset(lo), rangeLength(lo, hi));
    }
}
