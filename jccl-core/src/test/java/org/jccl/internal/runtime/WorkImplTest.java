package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Work handle without a latch: every joiner wakes, timed joins time out, and a caller's lock on the handle delays nobody. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class WorkImplTest {

    @Test
    void everyBlockedJoinerWakesWhenTheWorkCompletes() throws Exception {
        WorkImpl w = new WorkImpl();
        int n = 4;
        CountDownLatch started = new CountDownLatch(n);
        CountDownLatch returned = new CountDownLatch(n);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Thread t = Thread.ofPlatform().start(() -> {
                started.countDown();
                w.join();
                returned.countDown();
            });
            threads.add(t);
        }
        assertTrue(started.await(10, TimeUnit.SECONDS));
        // they are (or are about to be) blocked: none may return before completion
        assertFalse(returned.await(100, TimeUnit.MILLISECONDS), "a joiner returned before the work completed");
        w.complete();
        assertTrue(returned.await(10, TimeUnit.SECONDS), "a blocked joiner was not woken");
        for (Thread t : threads) {
            t.join(10_000);
        }
        assertTrue(w.isDone());
    }

    @Test
    void aTimedJoinTimesOutThenSeesTheFailure() {
        WorkImpl w = new WorkImpl();
        long t0 = System.nanoTime();
        assertFalse(w.join(Duration.ofMillis(50)));
        assertTrue(System.nanoTime() - t0 >= 45_000_000L, "returned before its timeout");
        JcclException cause = new JcclException(ErrorCode.ABORTED, "boom");
        Thread.ofPlatform().start(() -> {
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            w.fail(cause);
        });
        assertSame(cause, assertThrows(JcclException.class, () -> w.join(Duration.ofSeconds(10))));
        assertSame(cause, assertThrows(JcclException.class, w::join), "a join after the failure rethrows it");
    }

    @Test
    void aCallerHoldingTheHandlesMonitorDoesNotDelayItsCompletion() throws Exception {
        WorkImpl w = new WorkImpl();
        Thread joiner = Thread.ofPlatform().start(w::join);
        while (joiner.getState() != Thread.State.WAITING) {
            Thread.onSpinWait();
        }
        synchronized (w) {
            Thread completer = Thread.ofPlatform().start(w::complete);
            completer.join(5_000);
            assertFalse(completer.isAlive(), "completing waited for the caller's lock on the Work handle");
        }
        joiner.join(5_000);
        assertFalse(joiner.isAlive());
    }
}
