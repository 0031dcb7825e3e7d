package org.jccl.internal.transport;

import java.lang.foreign.MemorySegment;
import org.jccl.spi.MemoryType;
import org.jccl.spi.RegisteredRegion;

/**
 * A {@link RegisteredRegion} of host memory this process addresses: what every transport's region
 * handle has in common, so that each transport writes only its key, its words and what
 * deregistering releases (a registry entry, a file, an arena).
 *
 * <p>The region is open from construction until the first {@link #close()}, which flips the flag
 * under the region's monitor (so exactly one caller, from any thread, runs {@link #deregistered()})
 * and is a no-op afterwards. {@link #segment()} and {@link #packedKey()} refuse a closed region with
 * "{@code <describe()> is deregistered}".
 */
public abstract class AbstractRegisteredRegion implements RegisteredRegion {

    /** The region's bytes, {@link #length()} of them. */
    protected final MemorySegment data;
    private volatile boolean open = true;

    protected AbstractRegisteredRegion(MemorySegment data) {
        this.data = data;
    }

    @Override
    public final long address() {
        return data.address();
    }

    @Override
    public final long length() {
        return data.byteSize();
    }

    @Override
    public MemoryType type() {
        return MemoryType.HOST;
    }

    @Override
    public final MemorySegment segment() {
        requireOpen();
        return data;
    }

    @Override
    public final byte[] packedKey() {
        requireOpen();
        return packKey();
    }

    /** The transport's remote key of this (open) region, a fresh array. */
    protected abstract byte[] packKey();

    private void requireOpen() {
        if (!open) {
            throw new IllegalStateException(describe() + " is deregistered");
        }
    }

    @Override
    public final boolean isOpen() {
        return open;
    }

    /** Deregisters the region: the first call runs {@link #deregistered()}, later ones do nothing. Any thread. */
    @Override
    public final void close() {
        synchronized (this) {
            if (!open) {
                return;
            }
            open = false;
        }
        deregistered();
    }

    /** Releases what the region holds; runs once, after {@link #isOpen()} turned false. */
    protected abstract void deregistered();

    @Override
    public String toString() {
        return describe();
    }
}
