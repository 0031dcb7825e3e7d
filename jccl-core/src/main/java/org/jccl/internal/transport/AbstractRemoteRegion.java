package org.jccl.internal.transport;

import org.jccl.spi.MemoryType;
import org.jccl.spi.RemoteRegion;

/**
 * A {@link RemoteRegion} of host memory: a peer's region as one connection of this rank sees it,
 * with what every transport's handle has in common (the connection that unpacked it, the owner, the
 * length, the open flag), so that each transport writes only its words and what closing releases.
 *
 * <p>{@link #close()} flips the flag under the handle's monitor, so exactly one caller, from any
 * thread, runs {@link #released()}; {@link #invalidate()} only flips it, for an endpoint that
 * releases everything at once itself.
 */
public abstract class AbstractRemoteRegion implements RemoteRegion {

    private final Object connection;
    private final int owner;
    private final long length;
    private volatile boolean open = true;

    /**
     * @param connection the connection that unpacked the key: the only one whose puts may use this handle
     * @param owner the rank that registered the region
     * @param length the region's length in bytes
     */
    protected AbstractRemoteRegion(Object connection, int owner, long length) {
        this.connection = connection;
        this.owner = owner;
        this.length = length;
    }

    /** Whether {@code c} is the connection that unpacked this handle. */
    public final boolean unpackedBy(Object c) {
        return connection == c;
    }

    @Override
    public final int owner() {
        return owner;
    }

    @Override
    public final long length() {
        return length;
    }

    @Override
    public MemoryType type() {
        return MemoryType.HOST;
    }

    @Override
    public final boolean isOpen() {
        return open;
    }

    /** Closes the handle: the first call runs {@link #released()}, later ones do nothing. Any thread. */
    @Override
    public final void close() {
        synchronized (this) {
            if (!open) {
                return;
            }
            open = false;
        }
        released();
    }

    /** Marks the handle closed without {@link #released()}: its endpoint is releasing everything itself. */
    public final void invalidate() {
        open = false;
    }

    /** Releases this rank's share of what the handle uses (a table entry, a mapping); runs once. */
    protected abstract void released();

    @Override
    public String toString() {
        return describe();
    }
}
