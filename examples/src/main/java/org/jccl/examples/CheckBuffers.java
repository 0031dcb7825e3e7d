package org.jccl.examples;

import static org.jccl.examples.CheckValues.GUARD;
import static org.jccl.examples.CheckValues.POISON;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.function.LongUnaryOperator;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.examples.CollectiveCheck.MismatchException;

/**
 * The memory and data of one check: buffers (native memory of a shared arena, which jccl's
 * operation thread may use, or heap arrays), each followed by a poisoned guard, and the check's
 * salt, which makes its data differ from every other check's. Its {@code expect...} methods compare
 * a buffer with the exact reference of {@link CheckValues} and throw a {@link MismatchException}
 * naming the check, the rank and the first wrong element.
 */
final class CheckBuffers implements AutoCloseable {
    final boolean heap;
    final String what;
    /** This rank and the number of ranks, for the expected values and the failure messages. */
    private final int rank;
    private final int n;
    private final CheckValues values;
    private final Arena arena;

    CheckBuffers(boolean heap, long salt, String what, int rank, int n) {
        this.heap = heap;
        this.what = what;
        this.rank = rank;
        this.n = n;
        this.values = new CheckValues(salt, n);
        this.arena = heap ? null : Arena.ofShared();
    }

    /** count elements of t plus the guard, all poisoned. */
    MemorySegment alloc(DataType t, long count) {
        long bytes = t.bytes(count) + GUARD;
        MemorySegment s = heap ? MemorySegment.ofArray(new long[Math.toIntExact((bytes + 7) / 8)]).asSlice(0, bytes)
                : arena.allocate(bytes, 64);
        s.fill(POISON);
        return s;
    }

    long bits(int src, long index) {
        return values.bits(src, index);
    }

    void fillBits(MemorySegment s, int size, int src, long first, long count) {
        for (long i = 0; i < count; i++) {
            CheckValues.putBits(s, size, i, values.bits(src, first + i));
        }
    }

    void fillInput(MemorySegment s, DataType t, ReduceOp op, int r, long first, long count) {
        int size = t.size();
        for (long i = 0; i < count; i++) {
            CheckValues.putBits(s, size, i, values.input(t, op, r, first + i));
        }
    }

    void expectBits(MemorySegment s, int size, long count, LongUnaryOperator expected, String buffer) {
        for (long i = 0; i < count; i++) {
            long got = CheckValues.getBits(s, size, i);
            long want = CheckValues.mask(size, expected.applyAsLong(i));
            if (got != want) {
                throw fail(buffer + " element " + i + " is 0x" + Long.toHexString(got) + ", expected 0x" + Long.toHexString(want)
                        + (got == CheckValues.mask(size, poisonBits()) ? " (never written)" : ""));
            }
        }
    }

    void expectReduced(MemorySegment s, DataType t, ReduceOp op, long first, long count, String buffer) {
        int size = t.size();
        for (long i = 0; i < count; i++) {
            long got = CheckValues.getBits(s, size, i);
            long want = values.reduced(t, op, first + i);
            if (!CheckValues.same(t, got, want)) {
                throw fail(buffer + " element " + i + " is " + CheckValues.show(t, got) + ", expected " + CheckValues.show(t, want)
                        + " (the " + op + " of element " + (first + i) + " over " + n + " ranks)");
            }
        }
    }

    void expectInputUnchanged(MemorySegment s, DataType t, ReduceOp op, int r, long first, long count) {
        int size = t.size();
        for (long i = 0; i < count; i++) {
            long got = CheckValues.getBits(s, size, i);
            long want = values.input(t, op, r, first + i);
            if (got != want) {
                throw fail("send element " + (first + i) + " changed to " + CheckValues.show(t, got) + " from "
                        + CheckValues.show(t, want) + ": an input of an out-of-place call must not be written");
            }
        }
    }

    /** Bytes [from, to) of s must still be poison. */
    void expectPoison(MemorySegment s, long from, long to, String region) {
        for (long o = from; o < to; o++) {
            byte b = s.get(ValueLayout.JAVA_BYTE, o);
            if (b != POISON) {
                throw fail(region + ": byte " + o + " was written (0x" + Integer.toHexString(b & 0xFF) + ")");
            }
        }
    }

    void expectGuard(MemorySegment s, DataType t, long count, String buffer) {
        expectPoison(s, t.bytes(count), t.bytes(count) + GUARD, "the " + GUARD + " bytes after " + buffer + " (" + count
                + " elements)");
    }

    MismatchException fail(String detail) {
        return new MismatchException(what + ", rank " + rank + " of " + n + ": " + detail);
    }

    private long poisonBits() {
        return 0xA5A5_A5A5_A5A5_A5A5L;
    }

    @Override
    public void close() {
        if (arena != null) {
            arena.close();
        }
    }
}
