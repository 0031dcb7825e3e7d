package org.jccl.internal.runtime;

import java.util.concurrent.locks.LockSupport;

/**
 * The one idle strategy of every wait loop of the runtime: what a thread does each time it polls and
 * finds nothing to do. Modelled on Agrona's {@code BackoffIdleStrategy} (spin, then yield, then park
 * in doubling steps), with the phases timed rather than counted: one poll of a TCP connection is a
 * system call and one of the shared segment a load, so a count would mean very different waits.
 * (Agrona itself is not used: its strategy counts, and a jar for one class is not worth it.)
 *
 * <ol>
 * <li><b>Spin</b> for {@code spinNanos} ({@code JCCL_IDLE_SPIN_US}): a peer a few microseconds behind
 *     is seen at once. PAUSE ({@link Thread#onSpinWait}) after the first {@code hotNanos} of pure
 *     polling. When this host has more ranks than CPUs ({@code oversubscribed}), every step yields
 *     instead: the peer we wait for may be waiting for our core. Otherwise a yield every
 *     {@code spinYieldNanos} ({@code JCCL_IDLE_SPIN_YIELD_US}, off by default).</li>
 * <li><b>Yield</b> for {@code yieldNanos} ({@code JCCL_IDLE_YIELD_US}).</li>
 * <li><b>Park</b> through the {@link Parker}: {@code minParkNanos}, doubling up to {@code maxParkNanos}
 *     (the selector of the connections, which sockets and {@code wake()} end early; or a timed park
 *     where nothing can ring the waiter awake).</li>
 * </ol>
 *
 * <p>One instance per waiting thread, reused across waits ({@link #reset} at the start of each); not
 * thread safe. Used by the waits of {@link OpContext} (connections, shared segment, the hub's
 * verdict) and by the exit hook's wait for held ring confirmations.
 */
final class Backoff {

    /** How the park phase waits. */
    @FunctionalInterface
    interface Parker {
        /** Waits at most {@code nanos} (may return early). */
        void park(long nanos);
    }

    /** A plain timed park. */
    static final Parker PARK = LockSupport::parkNanos;

    private final long spinNanos;
    private final long yieldNanos;
    private final long spinYieldNanos;
    private final long hotNanos;
    private final boolean oversubscribed;
    private final long minParkNanos;
    private final long maxParkNanos;
    private final Parker parker;

    private long start;
    private long lastYield;
    private long park;

    /**
     * @param spinNanos length of the spin phase
     * @param yieldNanos length of the yield phase
     * @param spinYieldNanos while spinning, yield once every this long (0: never)
     * @param hotNanos pure polling, without PAUSE, at the start of the spin phase
     * @param oversubscribed more ranks on this host than CPUs: every spin step yields
     * @param minParkNanos first park
     * @param maxParkNanos longest park
     * @param parker how to park
     */
    Backoff(long spinNanos, long yieldNanos, long spinYieldNanos, long hotNanos, boolean oversubscribed, long minParkNanos,
            long maxParkNanos, Parker parker) {
        this.spinNanos = spinNanos;
        this.yieldNanos = yieldNanos;
        this.spinYieldNanos = spinYieldNanos == 0 ? Long.MAX_VALUE : spinYieldNanos;
        this.hotNanos = hotNanos;
        this.oversubscribed = oversubscribed;
        this.minParkNanos = minParkNanos;
        this.maxParkNanos = Math.max(minParkNanos, maxParkNanos);
        this.parker = parker;
    }

    /** A wait of fixed-length parks only (no spin, no yield): for waits of milliseconds on another thread's doing. */
    static Backoff parkingEvery(long nanos) {
        return new Backoff(0, 0, 0, 0, false, nanos, nanos, PARK);
    }

    /** Starts a wait at {@code now} (System.nanoTime). */
    void reset(long now) {
        start = now;
        lastYield = now;
        park = minParkNanos;
    }

    /** How long the current wait has lasted at {@code now}. */
    long waited(long now) {
        return now - start;
    }

    /** Whether the wait is past its spin phase at {@code now} (it yields or parks from here on). */
    boolean pastSpin(long now) {
        return now - start >= spinNanos;
    }

    /** One idle step of the wait started by {@link #reset}, at {@code now}. */
    void idle(long now) {
        long waited = now - start;
        if (waited < spinNanos) {
            if (oversubscribed || now - lastYield >= spinYieldNanos) {
                lastYield = now;
                Thread.yield();
            } else if (waited >= hotNanos) {
                Thread.onSpinWait();
            }
        } else if (waited < spinNanos + yieldNanos) {
            Thread.yield();
        } else {
            parker.park(park);
            park = Math.min(maxParkNanos, park * 2);
        }
    }
}
