package org.jccl.internal.runtime;

import java.io.IOException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntSupplier;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.internal.log.Log;
import org.jccl.internal.util.ResourceLimits;
import org.jccl.spi.Connection;

/**
 * A communicator's open connections, by peer, and the {@link Selector} a waiting thread blocks in
 * when none of them has anything to do: sockets wake it when bytes arrive, the in-JVM transport and
 * abort() through {@link #wake()}. Used by the thread running operations, except {@link #wake()}.
 */
final class Links {
    private final int rank;
    private final Connection[] byPeer;
    /** The open connections, in the order they were opened (progress goes round them). */
    final List<Connection> open = new ArrayList<>();
    private Selector selector;
    /** Set while the running thread is (about to be) blocked in the selector; see {@link #wake()}. */
    private volatile boolean sleeping;

    Links(int rank, int size) {
        this.rank = rank;
        this.byPeer = new Connection[size];
    }

    /** The connection to {@code peer}, or null before the first use. */
    Connection get(int peer) {
        return byPeer[peer];
    }

    /** Records the new connection to {@code peer} and watches its channels. */
    void add(int peer, Connection c) {
        byPeer[peer] = c;
        open.add(c);
        SelectableChannel[] chans = c.channels();
        if (chans.length == 0) {
            return;
        }
        try {
            Selector sel = selector();
            for (SelectableChannel ch : chans) {
                ch.register(sel, SelectionKey.OP_READ);
            }
        } catch (ClosedChannelException e) {
            // The connection already failed; its next progress() reports it.
        } catch (IOException e) {
            throw new JcclException(ErrorCode.RESOURCE, "rank " + rank + ": cannot watch the connection to rank " + c.peer() + ": " + e
                    + (ResourceLimits.outOfFileDescriptors(e) ? "; " + ResourceLimits.openFilesAdvice() : ""), e);
        }
    }

    /**
     * Blocks until a watched channel is readable, {@link #wake()} is called, or {@code nanos} (at
     * least a millisecond) pass. The flag is raised before a last look ({@code progress}, then
     * {@code armWakeFds}: the transports that signal work through a file descriptor re-arm it, or say
     * they have work), so a wake() racing with the decision to block is never lost (a wakeup before
     * select() makes select() return at once).
     */
    void block(long nanos, IntSupplier progress, java.util.function.BooleanSupplier armWakeFds) {
        sleeping = true;
        try {
            if (progress.getAsInt() > 0 || !armWakeFds.getAsBoolean()) {
                return;
            }
            selector().select(Math.max(1, nanos / 1_000_000));
            selector.selectedKeys().clear();
        } catch (IOException e) {
            throw new JcclException(ErrorCode.RESOURCE, "rank " + rank + ": waiting for network activity failed: " + e
                    + (ResourceLimits.outOfFileDescriptors(e) ? "; " + ResourceLimits.openFilesAdvice() : ""), e);
        } finally {
            sleeping = false;
        }
    }

    /** Wakes the thread blocked in {@link #block}, if any; any thread. Cheap (a volatile read) when none is. */
    void wake() {
        if (sleeping) {
            Selector s = selector;
            if (s != null) {
                s.wakeup();
            }
        }
    }

    private Selector selector() throws IOException {
        if (selector == null) {
            selector = Selector.open();
        }
        return selector;
    }

    /** Closes every connection and the selector. */
    void close() {
        for (Connection c : open) {
            try {
                c.close();
            } catch (RuntimeException e) {
                Log.trace(Log.Subsys.NET, rank, "closing connection to rank " + c.peer() + ": " + e);
            }
        }
        open.clear();
        java.util.Arrays.fill(byPeer, null);
        if (selector != null) {
            try {
                selector.close();
            } catch (IOException e) {
                Log.trace(Log.Subsys.NET, rank, "closing the selector: " + e);
            }
            selector = null;
        }
    }
}
