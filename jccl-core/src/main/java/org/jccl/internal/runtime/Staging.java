package org.jccl.internal.runtime;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.jccl.Buffer;

/**
 * Turns the caller's buffers into memory any thread running the operation may use (the operation
 * thread runs what its caller leaves queued), on the caller's thread,
 * before the operation is queued. Native memory the operation thread can access is used as is
 * (zero copy). Heap memory is copied into native staging memory now (inputs) and copied back by
 * the thread running the operation before it completes (outputs): heap arrays are never handed to
 * socket I/O, and an asynchronous call sees its inputs as they were when it was issued.
 */
final class Staging {
    private final Thread opThread;
    private final Pool pool;
    private List<Runnable> copyBack;
    /** Pooled blocks this call took; handed back when its operation succeeded (see {@link #releaser}). */
    private List<MemorySegment> taken;

    Staging(Thread opThread, Pool pool) {
        this.opThread = opThread;
        this.pool = pool;
    }

    /**
     * Staging blocks of small sizes (powers of two from 64 B to 64 KiB), reused across operations of one
     * communicator. Allocating each staging buffer from its own {@code Arena.ofAuto()} (as larger ones
     * still are) registers a Cleaner per call: measured in SoakTest, 4 ranks spinning on 2 cores over
     * SHM starved the Cleaner thread, and 300,000 small all-reduces left 43 MiB of heap (cleanables
     * waiting) after GC. A block goes back only when its operation succeeded: after a failure a peer
     * might still read it (the in-JVM transport copies from the sender's memory), so it is left to the GC.
     */
    static final class Pool {
        private static final int MIN_SHIFT = 6;
        private static final int MAX_SHIFT = 16;
        private static final int PER_CLASS = 16;
        @SuppressWarnings("unchecked")
        private final java.util.concurrent.ArrayBlockingQueue<MemorySegment>[] free =
                new java.util.concurrent.ArrayBlockingQueue[MAX_SHIFT - MIN_SHIFT + 1];

        Pool() {
            for (int i = 0; i < free.length; i++) {
                free[i] = new java.util.concurrent.ArrayBlockingQueue<>(PER_CLASS);
            }
        }

        /** Size class of {@code bytes}, or -1 when too large to pool. */
        static int sizeClass(long bytes) {
            long b = Math.max(bytes, 1L << MIN_SHIFT);
            if (b > 1L << MAX_SHIFT) {
                return -1;
            }
            int shift = 64 - Long.numberOfLeadingZeros(b - 1);
            return shift - MIN_SHIFT;
        }

        MemorySegment take(int cls) {
            MemorySegment m = free[cls].poll();
            return m != null ? m : Arena.ofAuto().allocate(1L << (cls + MIN_SHIFT), 64);
        }

        void give(MemorySegment m) {
            int cls = sizeClass(m.byteSize());
            if (cls >= 0 && m.byteSize() == 1L << (cls + MIN_SHIFT)) {
                free[cls].offer(m); // dropped (left to the GC) when the class is full
            }
        }
    }

    private MemorySegment allocate(long bytes) {
        int cls = pool == null ? -1 : Pool.sizeClass(bytes);
        if (cls < 0) {
            return Arena.ofAuto().allocate(Math.max(bytes, 1), 64).asSlice(0, bytes);
        }
        MemorySegment block = pool.take(cls);
        if (taken == null) {
            taken = new ArrayList<>(2);
        }
        taken.add(block);
        return block.asSlice(0, bytes);
    }

    /** Hands the pooled blocks back; to run once the operation succeeded, or null when none were taken. */
    Runnable releaser() {
        if (taken == null) {
            return null;
        }
        List<MemorySegment> list = taken;
        return () -> list.forEach(pool::give);
    }

    /**
     * Decides whether {@code send} is the in-place form of {@code recv}: the same memory as
     * recv's bytes starting at {@code slotOffsetBytes}. Any other overlap is an error.
     */
    static boolean inPlace(String coll, Buffer send, Buffer recv, long sendBytes, long slotOffsetBytes) {
        if (send == null || recv == null) {
            return false;
        }
        MemorySegment s = send.segment();
        MemorySegment r = recv.segment();
        // Before comparing addresses: freed memory is often handed out again, so a closed buffer can
        // sit at the very address of a live one and pass for the in-place form.
        requireAlive(coll, "send", s);
        requireAlive(coll, "recv", r);
        Optional<MemorySegment> overlap = s.asOverlappingSlice(r);
        if (overlap.isEmpty() || sendBytes == 0) {
            return false;
        }
        // Overlapping segments share one base (the same array, or native memory): addresses are comparable.
        long off = s.address() - r.address();
        if (off == slotOffsetBytes) {
            return true;
        }
        throw new IllegalArgumentException(coll + ": send and recv overlap without being in place: send starts "
                + off + " bytes into recv, while in place it must start at byte " + slotOffsetBytes
                + (slotOffsetBytes == 0 ? " (the same memory)" : " (this rank's slot)"));
    }

    /** An input buffer: used directly or copied now. */
    MemorySegment input(String coll, String name, Buffer b, long bytes) {
        MemorySegment seg = b.segment().asSlice(0, bytes);
        if (direct(coll, name, seg)) {
            return seg;
        }
        MemorySegment staged = allocate(bytes);
        MemorySegment.copy(seg, 0, staged, 0, bytes);
        return staged;
    }

    /** An output buffer (also an input when {@code copyIn}): used directly, or staged and copied back at completion. */
    MemorySegment output(String coll, String name, Buffer b, long bytes, boolean copyIn) {
        MemorySegment seg = b.segment().asSlice(0, bytes);
        if (seg.isReadOnly()) {
            throw new IllegalArgumentException(coll + ": " + name + " is read-only memory, but the operation writes its result there");
        }
        if (direct(coll, name, seg)) {
            return seg;
        }
        MemorySegment staged = allocate(bytes);
        if (copyIn) {
            MemorySegment.copy(seg, 0, staged, 0, bytes);
        }
        if (copyBack == null) {
            copyBack = new ArrayList<>(2);
        }
        copyBack.add(() -> MemorySegment.copy(staged, 0, seg, 0, bytes));
        return staged;
    }

    /** What the thread running the operation must run before completing it, or null. */
    Runnable finisher() {
        if (copyBack == null) {
            return null;
        }
        List<Runnable> list = copyBack;
        return () -> {
            for (Runnable r : list) {
                r.run();
            }
        };
    }

    private static void requireAlive(String coll, String name, MemorySegment seg) {
        if (!seg.scope().isAlive()) {
            throw new IllegalArgumentException(coll + ": " + name + " belongs to an arena that is already closed");
        }
    }

    private boolean direct(String coll, String name, MemorySegment seg) {
        requireAlive(coll, name, seg);
        if (!seg.isNative()) {
            return false;
        }
        if (!seg.isAccessibleBy(opThread)) {
            throw new IllegalArgumentException(coll + ": " + name + " is memory of a confined arena owned by another thread;"
                    + " jccl's operation thread moves the bytes, so allocate it with Arena.ofShared(), Arena.ofAuto() or"
                    + " Arena.global(), or pass a heap array");
        }
        return true;
    }
}
