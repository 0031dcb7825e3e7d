package org.jccl.internal.transport.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * What every jccl shared-memory file starts with, whatever its layout (ShmRingDescriptor,
 * ShmCollDescriptor): a magic long at 0, written last with release semantics, and the layout's
 * version int at 8, within a first page of header. Each descriptor names its own magic and version
 * and checks its own geometry after {@link #identity}.
 */
final class ShmFileHeader {
    private ShmFileHeader() {
    }

    static final long MAGIC_OFFSET = 0;
    static final long VERSION_OFFSET = 8;
    static final long PAGE = 4096;

    /** Null when {@code s} holds a header page with {@code magic} and {@code version}, else what is wrong. */
    static String identity(MemorySegment s, long magic, int version) {
        if (s.byteSize() < PAGE) {
            return "file of " + s.byteSize() + " bytes is shorter than a header page";
        }
        long m = (long) ShmRingDescriptor.LONG.getAcquire(s, MAGIC_OFFSET);
        if (m != magic) {
            return "bad magic 0x" + Long.toHexString(m);
        }
        int v = s.get(ValueLayout.JAVA_INT, VERSION_OFFSET);
        if (v != version) {
            return "layout version " + v + " where this jccl speaks " + version + " (mixed jccl versions in one job)";
        }
        return null;
    }

    /** {@code v} rounded up to a multiple of {@code a}. */
    static long align(long v, long a) {
        return (v + a - 1) / a * a;
    }
}
