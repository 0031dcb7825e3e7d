package org.jccl.internal.runtime;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.Work;

/**
 * The {@link Work} handle of one operation. Completed exactly once by the operation thread (or by
 * an abort); any thread may wait on it.
 */
final class WorkImpl implements Work {
    private volatile JcclException failure;
    private volatile boolean done;
    /**
     * Threads blocked in {@link #join} (changed under this object's monitor). With {@link #done} it
     * forms a store-then-load pair on each side: complete() writes done and then reads waiters, a
     * waiter counts itself and then reads done, so one of the two always sees the other and no
     * wake-up is lost. An operation that completes before anyone waits (the inline case) costs a
     * volatile store and load: no latch object, no lock.
     */
    private volatile int waiters;
    /**
     * The communicator that queued this operation, whose queue a waiting thread may help run; or
     * null. Set before the operation is published (queued or returned); a plain field, as a thread
     * that reads it stale only skips helping.
     */
    CommunicatorImpl owner;

    void complete() {
        done = true;
        wakeWaiters();
    }

    void fail(JcclException e) {
        failure = e;
        done = true;
        wakeWaiters();
    }

    private void wakeWaiters() {
        if (waiters != 0) {
            synchronized (this) {
                notifyAll();
            }
        }
    }

    @Override
    public void join() {
        if (!done) {
            CommunicatorImpl c = owner;
            if (c != null) {
                c.help(this);
            }
            boolean interrupted = false;
            synchronized (this) {
                waiters++;
                try {
                    while (!done) {
                        try {
                            wait();
                        } catch (InterruptedException e) {
                            interrupted = true;
                        }
                    }
                } finally {
                    waiters--;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        rethrow();
    }

    @Override
    public boolean join(Duration timeout) {
        if (!done) {
            long deadline = System.nanoTime() + Math.max(0, timeout.toNanos());
            synchronized (this) {
                waiters++;
                try {
                    while (!done) {
                        long left = deadline - System.nanoTime();
                        if (left <= 0) {
                            return false;
                        }
                        try {
                            TimeUnit.NANOSECONDS.timedWait(this, left);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            throw new JcclException(ErrorCode.ABORTED, "interrupted while waiting for a jccl operation", e);
                        }
                    }
                } finally {
                    waiters--;
                }
            }
        }
        rethrow();
        return true;
    }

    @Override
    public boolean isDone() {
        return done;
    }

    JcclException failure() {
        return failure;
    }

    private void rethrow() {
        JcclException f = failure;
        if (f != null) {
            throw f;
        }
    }
}
