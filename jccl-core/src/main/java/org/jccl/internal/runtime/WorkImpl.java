package org.jccl.internal.runtime;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.Work;

/**
 * The {@link Work} handle of one operation. Completed exactly once by the operation thread (or by
 * an abort); any thread may wait on it.
 */
final class WorkImpl implements Work {
    private final CountDownLatch latch = new CountDownLatch(1);
    private volatile JcclException failure;
    private volatile boolean done;
    /** The communicator that queued this operation, whose queue a waiting thread may help run; or null. */
    volatile CommunicatorImpl owner;

    void complete() {
        done = true;
        latch.countDown();
    }

    void fail(JcclException e) {
        failure = e;
        done = true;
        latch.countDown();
    }

    @Override
    public void join() {
        CommunicatorImpl c = owner;
        if (c != null && !done) {
            c.help(this);
        }
        boolean interrupted = false;
        while (true) {
            try {
                latch.await();
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        rethrow();
    }

    @Override
    public boolean join(Duration timeout) {
        try {
            if (!latch.await(Math.max(0, timeout.toNanos()), TimeUnit.NANOSECONDS)) {
                return false;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new JcclException(ErrorCode.ABORTED, "interrupted while waiting for a jccl operation", e);
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
