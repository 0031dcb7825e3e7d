package org.jccl.cuda;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import org.jccl.DataType;
import org.jccl.cuda.internal.CudaDriver;

/**
 * A typed view of GPU memory: {@code count} elements of {@code type} at device address {@link
 * #address()} on {@link #device()}. Made by {@link CudaDevice#allocate} (which owns the memory and
 * frees it on {@link #close()}), by {@link #wrap} over memory allocated elsewhere (a PyTorch
 * tensor's {@code data_ptr()}), or by {@link #slice}. The CPU must never dereference the address.
 */
public final class DeviceBuffer implements AutoCloseable {
    private final CudaDevice device;
    private final long address;
    private final long count;
    private final DataType type;
    private final boolean owner;
    private volatile boolean freed;

    DeviceBuffer(CudaDevice device, long address, long count, DataType type, boolean owner) {
        this.device = device;
        this.address = address;
        this.count = count;
        this.type = type;
        this.owner = owner;
    }

    /** A view of device memory jccl does not own (it is never freed by jccl). */
    public static DeviceBuffer wrap(CudaDevice device, long address, long count, DataType type) {
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(type, "type");
        if (address == 0) {
            throw new IllegalArgumentException("device address is null");
        }
        if (count < 0) {
            throw new IllegalArgumentException("count must be >= 0, got " + count);
        }
        if (address % type.size() != 0) {
            throw new IllegalArgumentException("device address 0x" + Long.toHexString(address) + " is not aligned to "
                    + type.ncclName() + " (" + type.size() + " bytes)");
        }
        return new DeviceBuffer(device, address, count, type, false);
    }

    public CudaDevice device() {
        return device;
    }

    /** Device address of element 0. */
    public long address() {
        return address;
    }

    public long count() {
        return count;
    }

    public DataType type() {
        return type;
    }

    public long byteSize() {
        return type.bytes(count);
    }

    /** A view of {@code count} elements from element {@code offset}; it does not own the memory. */
    public DeviceBuffer slice(long offset, long count) {
        if (offset < 0 || count < 0 || offset > this.count - count) {
            throw new IllegalArgumentException("slice [" + offset + ", " + offset + "+" + count + ") is outside a device buffer of "
                    + this.count + " elements");
        }
        return new DeviceBuffer(device, address + type.bytes(offset), count, type, false);
    }

    /** The same memory seen as {@code count} elements of another type (it must fit). */
    public DeviceBuffer as(DataType other, long count) {
        if (other.bytes(count) > byteSize()) {
            throw new IllegalArgumentException(count + " x " + other.ncclName() + " do not fit in " + byteSize() + " bytes");
        }
        return new DeviceBuffer(device, address, count, other, false);
    }

    /** Copies {@code byteSize()} bytes from host memory into this buffer and waits. */
    public void copyFrom(MemorySegment host) {
        if (host.byteSize() < byteSize()) {
            throw new IllegalArgumentException("host segment of " + host.byteSize() + " bytes is smaller than " + byteSize());
        }
        device.makeCurrent();
        CudaDriver.memcpyHtoD(address, host, byteSize());
    }

    /** Copies this buffer into host memory and waits. */
    public void copyTo(MemorySegment host) {
        if (host.byteSize() < byteSize()) {
            throw new IllegalArgumentException("host segment of " + host.byteSize() + " bytes is smaller than " + byteSize());
        }
        device.makeCurrent();
        CudaDriver.memcpyDtoH(host, address, byteSize());
    }

    /** Sets every byte to {@code value} on {@code stream}. */
    public void fill(byte value, CudaStream stream) {
        device.makeCurrent();
        CudaDriver.memsetD8Async(address, value, byteSize(), stream.handle());
    }

    /** Frees the memory if this buffer owns it (waits for the device first); views do nothing. */
    @Override
    public void close() {
        if (owner && !freed) {
            freed = true;
            device.makeCurrent();
            CudaDriver.memFree(address);
        }
    }

    @Override
    public String toString() {
        return count + " x " + type.ncclName() + " at 0x" + Long.toHexString(address) + " on GPU " + device.ordinal();
    }
}
