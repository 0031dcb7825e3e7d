package org.jccl.internal.runtime;

import java.util.concurrent.locks.LockSupport;
import org.jccl.internal.log.Log;
import org.jccl.internal.util.Poll;

/**
 * Wakes a communicator's idle operation thread when an endpoint's wake file descriptor becomes
 * readable ({@code Endpoint#wakeFd}: UCX's worker event fd), since a Java selector cannot wait on a
 * raw descriptor. One daemon thread per such endpoint; it only polls the descriptor (poll(2)), never
 * calls the transport.
 *
 * <p>The protocol, which makes every event wake the waiting thread once and never spins: the thread
 * running the communicator's operations (a caller or the operation thread), about to block, calls
 * {@code Endpoint#armWakeFd} and, when that succeeds,
 * {@link #armed()}. The watcher then polls; when the descriptor is readable it disarms itself and runs
 * the wake action, and polls again only after the next {@link #armed()} (a readable descriptor stays
 * readable until the transport drains it in its progress, so polling it again at once would spin).
 *
 * <p>Threading: {@link #armed()} and {@link #close()} from the thread running the communicator's
 * operations, under the execution lock (close also from any thread that closes the communicator);
 * the watcher is this class's own thread.
 */
final class FdWaker implements AutoCloseable {
    /** How long one poll waits, so that close() is noticed within it. */
    static final int POLL_MILLIS = 100;

    private final int fd;
    private final Runnable wake;
    private final Thread watcher;
    private volatile boolean armed;
    private volatile boolean closed;
    /** How many times the descriptor woke the waiting thread (tests, TRACE). */
    private volatile long wakeups;

    /**
     * @param name for the thread's name and messages ("UCX")
     * @param fd the endpoint's wake descriptor
     * @param wake what wakes the thread waiting in the operation context (the transport context's wakeup)
     * @throws IllegalStateException when poll(2) cannot be called (native access denied), naming the fix
     */
    FdWaker(String name, String comm, int rank, int fd, Runnable wake) {
        if (!Poll.available()) {
            throw new IllegalStateException("the " + name + " transport signals work through a file descriptor, which jccl waits on"
                    + " with poll(2), and " + Poll.unavailableReason());
        }
        this.fd = fd;
        this.wake = wake;
        this.watcher = new Thread(() -> watch(name, rank), "jccl-fd-" + name + "-" + comm + "-r" + rank);
        this.watcher.setDaemon(true);
        this.watcher.start();
    }

    /** The operation thread armed the endpoint and is about to block: watch for the next event. */
    void armed() {
        if (!armed) {
            armed = true;
            LockSupport.unpark(watcher);
        }
    }

    long wakeups() {
        return wakeups;
    }

    private void watch(String name, int rank) {
        while (!closed) {
            if (!armed) {
                LockSupport.parkNanos(this, POLL_MILLIS * 1_000_000L);
                continue;
            }
            boolean readable;
            try {
                readable = Poll.readable(fd, POLL_MILLIS);
            } catch (IllegalStateException e) {
                if (!closed) {
                    // The descriptor broke under a live communicator: wake the waiting thread so the transport's
                    // own progress finds and reports the failure; stop watching a descriptor that cannot be waited on.
                    Log.warn(Log.Subsys.NET, rank, "stopped waiting on the " + name + " transport's wake descriptor: " + e.getMessage()
                            + "; idle waits fall back to the runtime's timed polling");
                    wake.run();
                }
                return;
            }
            if (readable && !closed) {
                armed = false;
                wakeups++;
                wake.run();
            }
        }
    }

    /** Stops the watcher within one poll interval; the descriptor stays the transport's. Idempotent. */
    @Override
    public void close() {
        closed = true;
        LockSupport.unpark(watcher);
        if (Thread.currentThread() != watcher) {
            try {
                watcher.join(POLL_MILLIS * 5L);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
