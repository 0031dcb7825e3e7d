package org.jccl.internal.runtime;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.jccl.Buffer;

/**
 * Turns the caller's buffers into memory the operation thread may use, on the caller's thread,
 * before the operation is queued. Native memory the operation thread can access is used as is
 * (zero copy). Heap memory is copied into native staging memory now (inputs) and copied back by
 * the operation thread before the operation completes (outputs): heap arrays are never handed to
 * socket I/O, and an asynchronous call sees its inputs as they were when it was issued.
 */
final class Staging {
    private final Thread opThread;
    private List<Runnable> copyBack;

    Staging(Thread opThread) {
        this.opThread = opThread;
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
        MemorySegment staged = Arena.ofAuto().allocate(Math.max(bytes, 1), 64).asSlice(0, bytes);
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
        MemorySegment staged = Arena.ofAuto().allocate(Math.max(bytes, 1), 64).asSlice(0, bytes);
        if (copyIn) {
            MemorySegment.copy(seg, 0, staged, 0, bytes);
        }
        if (copyBack == null) {
            copyBack = new ArrayList<>(2);
        }
        copyBack.add(() -> MemorySegment.copy(staged, 0, seg, 0, bytes));
        return staged;
    }

    /** What the operation thread must run before completing the operation, or null. */
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
