package org.jccl;

import java.lang.foreign.MemorySegment;

/** A {@link Buffer} over host memory (native or heap). Made through {@code Buffer.of(...)}. */
record HostBuffer(MemorySegment segment, long count, DataType type) implements Buffer {
    @Override
    public String toString() {
        return count + " x " + type.ncclName() + (segment.isNative() ? " @0x" + Long.toHexString(segment.address()) : " (heap)");
    }
}
