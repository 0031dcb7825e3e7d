package org.jccl;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * A typed view of the memory a collective reads or writes: {@code count} elements of {@code type}
 * starting at the beginning of {@link #segment()}.
 *
 * <p>Made from a native {@link MemorySegment} (zero copy), a heap array, or a {@link ByteBuffer}.
 * Multi-byte elements are always read in the platform's native byte order (little-endian on x86
 * and arm64), whatever {@link ByteBuffer#order()} says: collectives move raw elements.
 *
 * <p>Heap memory is never handed to asynchronous I/O: jccl copies heap buffers into native staging
 * memory when an operation starts and copies results back before the operation completes.
 */
public interface Buffer {

    /** Element type. */
    DataType type();

    /** Number of elements. */
    long count();

    /** The memory, exactly {@code count() * type().size()} bytes long. */
    MemorySegment segment();

    /** Bytes covered by this buffer. */
    default long byteSize() {
        return type().bytes(count());
    }

    /** A view of {@code count} elements starting at element {@code offset}. */
    default Buffer slice(long offset, long count) {
        if (offset < 0 || count < 0 || offset > count() - count) {
            throw new IllegalArgumentException("slice [" + offset + ", " + offset + "+" + count + ") is outside a buffer of "
                    + count() + " elements");
        }
        int s = type().size();
        return new HostBuffer(segment().asSlice(offset * s, count * s), count, type());
    }

    /** {@code count} elements of {@code type} at the start of {@code segment}. */
    static Buffer of(MemorySegment segment, long count, DataType type) {
        Objects.requireNonNull(segment, "segment");
        Objects.requireNonNull(type, "type");
        if (count < 0) {
            throw new IllegalArgumentException("count must be >= 0, got " + count);
        }
        long need = type.bytes(count);
        if (segment.byteSize() < need) {
            throw new IllegalArgumentException("segment of " + segment.byteSize() + " bytes is too small for " + count + " x "
                    + type.ncclName() + " (" + need + " bytes)");
        }
        return new HostBuffer(segment.asSlice(0, need), count, type);
    }

    /** The whole segment as elements of {@code type}; its size must be a multiple of the element size. */
    static Buffer of(MemorySegment segment, DataType type) {
        Objects.requireNonNull(segment, "segment");
        Objects.requireNonNull(type, "type");
        if (segment.byteSize() % type.size() != 0) {
            throw new IllegalArgumentException("segment of " + segment.byteSize() + " bytes is not a whole number of "
                    + type.ncclName() + " elements (" + type.size() + " bytes each)");
        }
        return new HostBuffer(segment, segment.byteSize() / type.size(), type);
    }

    /** The bytes between {@code buffer}'s position and limit, as elements of {@code type}. */
    static Buffer of(ByteBuffer buffer, DataType type) {
        Objects.requireNonNull(buffer, "buffer");
        if (buffer.isReadOnly()) {
            throw new IllegalArgumentException("read-only ByteBuffers cannot be used: collectives may write into them");
        }
        return of(MemorySegment.ofBuffer(buffer), type);
    }

    static Buffer of(byte[] array) {
        return of(array, DataType.INT8);
    }

    /** A byte array as {@link DataType#INT8} or {@link DataType#UINT8}. */
    static Buffer of(byte[] array, DataType type) {
        requireType(type, DataType.INT8, DataType.UINT8);
        return new HostBuffer(MemorySegment.ofArray(Objects.requireNonNull(array, "array")), array.length, type);
    }

    /** A short array as {@link DataType#FLOAT16} or {@link DataType#BFLOAT16} bit patterns. */
    static Buffer of(short[] array, DataType type) {
        requireType(type, DataType.FLOAT16, DataType.BFLOAT16);
        return new HostBuffer(MemorySegment.ofArray(Objects.requireNonNull(array, "array")), array.length, type);
    }

    static Buffer of(int[] array) {
        return of(array, DataType.INT32);
    }

    /** An int array as {@link DataType#INT32} or {@link DataType#UINT32}. */
    static Buffer of(int[] array, DataType type) {
        requireType(type, DataType.INT32, DataType.UINT32);
        return new HostBuffer(MemorySegment.ofArray(Objects.requireNonNull(array, "array")), array.length, type);
    }

    static Buffer of(long[] array) {
        return of(array, DataType.INT64);
    }

    /** A long array as {@link DataType#INT64} or {@link DataType#UINT64}. */
    static Buffer of(long[] array, DataType type) {
        requireType(type, DataType.INT64, DataType.UINT64);
        return new HostBuffer(MemorySegment.ofArray(Objects.requireNonNull(array, "array")), array.length, type);
    }

    static Buffer of(float[] array) {
        return new HostBuffer(MemorySegment.ofArray(Objects.requireNonNull(array, "array")), array.length, DataType.FLOAT32);
    }

    static Buffer of(double[] array) {
        return new HostBuffer(MemorySegment.ofArray(Objects.requireNonNull(array, "array")), array.length, DataType.FLOAT64);
    }

    private static void requireType(DataType type, DataType a, DataType b) {
        Objects.requireNonNull(type, "type");
        if (type != a && type != b) {
            throw new IllegalArgumentException("this array type holds " + a + " or " + b + ", not " + type);
        }
    }
}
