package org.jccl.internal.runtime;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.Work;

/**
 * The {@link Work} handle of one operation. Completed exactly once by the thread that ran it (or by
 * an abort); any thread may wait on it.
 */
final class WorkImpl implements Work {
    private static final VarHandle WAIT_LOCK;

    static {
        try {
            WAIT_LOCK = MethodHandles.lookup().findVarHandle(WorkImpl.class, "waitLock", Object.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private volatile JcclException failure;
    private volatile boolean done;
    /**
     * The monitor blocked joiners wait on, installed by the first of them (private: a caller that
     * synchronizes on its Work handle cannot delay the thread completing it). With {@link #done} it
     * forms a store-then-load pair on each side: complete() writes done and then reads this field,
     * a joiner installs it and then reads done, so one of the two always sees the other and no
     * wake-up is lost. An operation that completes before anyone waits (the inline case) costs a
     * volatile store and load: no latch, no lock, no allocation.
     */
    private volatile Object waitLock;
    /**
     * The executor that queued this operation, whose queue a waiting thread runs (Executor#join); or
     * null. Set before the operation is published (queued or returned); a plain field, as a thread
     * that reads it stale only skips running the queue.
     */
    Executor owner;

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
        Object lock = waitLock;
        if (lock != null) {
            synchronized (lock) {
                lock.notifyAll();
            }
        }
    }

    private Object waitLock() {
        Object lock = waitLock;
        if (lock == null) {
            Object mine = new Object();
            lock = WAIT_LOCK.compareAndSet(this, null, mine) ? mine : waitLock;
        }
        return lock;
    }

    @Override
    public void join() {
        if (!done) {
            Executor ex = owner;
            if (ex != null) {
                ex.join(this);
            }
            boolean interrupted = false;
            Object lock = waitLock();
            synchronized (lock) {
                while (!done) {
                    try {
                        lock.wait();
                    } catch (InterruptedException e) {
                        interrupted = true;
                    }
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
            Object lock = waitLock();
            synchronized (lock) {
                while (!done) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        return false;
                    }
                    try {
                        TimeUnit.NANOSECONDS.timedWait(lock, left);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new JcclException(ErrorCode.ABORTED, "interrupted while waiting for a jccl operation", e);
                    }
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
