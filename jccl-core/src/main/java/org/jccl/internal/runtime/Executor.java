package org.jccl.internal.runtime;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Runs a communicator's operations one at a time, in issue order, on whichever thread is at hand:
 * the caller runs its own operations, and the communicator's operation thread runs only those that
 * nobody else started in time.
 *
 * <ul>
 * <li><b>Inline.</b> A blocking call made while nothing is pending runs on the caller's thread.</li>
 * <li><b>Joiner runs.</b> A thread that waits for a {@code Work} ({@link #join}) runs the queued
 *     operations itself, oldest first, until its own is done; while another thread runs one, it
 *     blocks on the execution lock (no CPU) and then goes on with the queue.</li>
 * <li><b>Bounded.</b> An asynchronous call that finds {@link #maxInFlight} operations issued and not
 *     finished runs the oldest queued one itself (or waits for the thread running one) until there is
 *     room, as a full CUDA launch queue holds back the launching thread: a caller that issues faster
 *     than operations complete keeps a flat heap.</li>
 * <li><b>The operation thread</b> is the progress engine of last resort: it starts a queued operation
 *     once it has waited {@link #delayNanos} without anyone starting it (the caller computes instead
 *     of joining: communication then overlaps computation), and from then on runs the queue until it
 *     is empty. For {@link #WATCH_NANOS} after an asynchronous call it looks at the queue every
 *     {@link #delayNanos} by itself; otherwise (idle, or a delay under {@link #MIN_WATCH_NANOS}) an
 *     asynchronous call wakes it: at most one wake-up per burst of calls, none per operation, and no
 *     clock read on the call's path. Idle, it wakes every {@code idleTickNanos} for
 *     {@link Host#idleTick}.</li>
 * </ul>
 *
 * <p>Why: on a host with fewer cores than busy threads (4 ranks on 2 cores), handing each
 * operation to a second thread of the same rank puts two runnable threads where one suffices,
 * and a rank that spins while the thread it waits for has no core loses a scheduler time slice.
 * Here at most one thread per rank runs operations at any time, and a waiting caller is that
 * thread whenever it can be.
 *
 * <p>Order: operations get their sequence number and enter the queue under {@code submitLock};
 * they leave it, and run, only under {@code execLock}, oldest first; an operation runs inline only
 * when nothing else is pending. Hence operations run in issue order, whoever runs them.
 */
final class Executor {

    /** What the executor needs from its communicator. */
    interface Host {
        /** Throws when no operation may be issued any more (aborted, closed); called under the submission lock. */
        void ensureUsable();

        /**
         * An operation got its sequence number; {@code inline}: it runs now on the issuing thread (flight
         * recorder). Returns the clock (System.nanoTime) if it read it, else 0.
         */
        long issued(Op op, boolean inline);

        /** Runs {@code op} to completion or failure, completing its Work; the caller holds the execution lock. */
        void execute(Op op);

        /**
         * Runs consecutive queued sends and receives ({@link P2pOp}) in issue order, completing each Work in
         * that order, with all of their messages posted before the first is waited for (see {@link #runHead}).
         * Default: one after the other.
         */
        default void executeBatch(java.util.List<Op> ops) {
            for (Op op : ops) {
                execute(op);
            }
        }

        /** Fails a queued operation that will not run (abort, close). */
        void discard(Op op);

        /** Whether the communicator was aborted: the operation thread ends after the running operation. */
        boolean aborted();

        /** The operation thread found nothing to do for a tick; holds the execution lock. Returns true to end the thread. */
        boolean idleTick();

        /** close() reached the operation thread, after every operation issued before it; holds the execution lock. */
        void drainAtClose();

        /** The operation thread ends: releases connections and scratch memory; holds the execution lock. */
        void released();
    }

    private final Host host;
    private final int maxInFlight;
    private final long delayNanos;
    private final long idleTickNanos;
    private final ConcurrentLinkedQueue<Op> queue = new ConcurrentLinkedQueue<>();
    private final Object submitLock = new Object();
    private final ReentrantLock execLock = new ReentrantLock();
    /** Operations issued and not finished: incremented under submitLock, decremented by whoever ran one, after the lock. */
    private final AtomicInteger pending = new AtomicInteger();
    /** Most operations ever pending at once (for tests of the bound). */
    private final AtomicInteger highWater = new AtomicInteger();
    private long nextSeq;
    private final Thread opThread;
    /** The operation thread sleeps without a wake-up of its own before an idle tick: an asynchronous call must wake it. */
    private volatile boolean asleep;
    /** close() queued its stop request: every queued operation is due at once. */
    private volatile boolean stopping;
    /**
     * An asynchronous operation was queued since the operation thread last looked: for {@link #WATCH_NANOS}
     * after it saw one, the operation thread looks at the queue every {@link #delayNanos} by itself, so that
     * the calls of a program that issues asynchronous operations never pay for waking it (nor read the clock).
     */
    private volatile boolean asyncIssued;
    /** How long the operation thread keeps looking at the queue by itself after an asynchronous call. */
    static final long WATCH_NANOS = 100_000_000L;
    /**
     * Shortest period of those looks: a timed park and wake-up costs 14-18 us of CPU on the 2-core test VM, so
     * looking every 50 us would cost a tenth of a core. Below it the operation thread does not look by itself
     * and an asynchronous call wakes it when it sleeps (one wake-up per burst).
     */
    static final long MIN_WATCH_NANOS = 200_000L;
    /** Period of the operation thread's own looks while watching, 0: it does not watch. */
    private final long watchNanos;
    /** Another communicator's thread waits in an operation and asked for this queue to run now ({@link #nudgeLate}). */
    private volatile boolean nudged;
    /** Every running executor of this JVM, for {@link #nudgeLate}. */
    private static final java.util.Set<Executor> LIVE = java.util.concurrent.ConcurrentHashMap.newKeySet();

    Executor(Host host, String threadName, int maxInFlight, long delayNanos, long idleTickNanos) {
        this.host = host;
        this.maxInFlight = maxInFlight;
        this.delayNanos = delayNanos;
        this.idleTickNanos = idleTickNanos;
        this.watchNanos = delayNanos >= MIN_WATCH_NANOS ? delayNanos : 0;
        this.opThread = new Thread(this::opLoop, threadName);
        this.opThread.setDaemon(true);
    }

    void start() {
        LIVE.add(this);
        opThread.start();
    }

    /**
     * A thread waits inside an operation (it has found nothing to do for a while): when its peers are ranks of
     * this JVM driven by the same thread (one thread issues to several communicators and then joins them one by
     * one, as jccl-cuda's staged group does), their operations sit queued until their operation threads'
     * delay passes. Wakes the operation thread of every communicator whose queue's head has waited at least
     * {@code olderThanNanos} with nobody running it, to run it now. Costs a look at each live communicator.
     */
    static void nudgeLate(long olderThanNanos) {
        long now = System.nanoTime();
        for (Executor e : LIVE) {
            Op head = e.queue.peek();
            if (head != null && !e.execLock.isLocked() && (head.queuedAt == 0 || now - head.queuedAt >= olderThanNanos) && !e.nudged) {
                e.nudged = true;
                LockSupport.unpark(e.opThread);
            }
        }
    }

    Thread opThread() {
        return opThread;
    }

    /** The submission lock: state that must change atomically with issuing (abort, close) is guarded by it. */
    Object submitLock() {
        return submitLock;
    }

    /** Operations issued and not finished now. */
    int pending() {
        return pending.get();
    }

    /** The most operations that were ever issued and not finished at once. */
    int highWater() {
        return highWater.get();
    }

    int maxInFlight() {
        return maxInFlight;
    }

    /** Whether the calling thread is running an operation (holds the execution lock). */
    boolean runningHere() {
        return execLock.isHeldByCurrentThread();
    }

    /** Tries the execution lock for the control plane's exit hook (no operation may run meanwhile). */
    boolean tryLock(long millis) throws InterruptedException {
        return execLock.tryLock(millis, TimeUnit.MILLISECONDS);
    }

    void unlock() {
        execLock.unlock();
    }

    // ------------------------------------------------------------------------------------------ issuing

    /**
     * Issues {@code op}: runs it at once on this thread when {@code mayRunInline} and nothing else is
     * pending, else queues it (after making room under the in-flight bound).
     */
    WorkImpl issue(Op op, boolean mayRunInline) {
        boolean inline;
        // The operation thread, or a thread running an operation, must not wait for room: it would wait for itself.
        boolean bounded = Thread.currentThread() != opThread && !execLock.isHeldByCurrentThread();
        while (true) {
            synchronized (submitLock) {
                host.ensureUsable();
                int p = pending.get();
                if (p < maxInFlight || !bounded) {
                    op.seq = nextSeq++;
                    if (op instanceof FusedOp f) {
                        for (Op o : f.ops()) {
                            o.seq = op.seq;
                        }
                    }
                    // The execution lock is only tried, and here under the submission lock: were it taken after this
                    // block, an operation issued next by another thread could be run first. With nothing else pending
                    // it is free (runners release it before counting their operation finished), except while the
                    // operation thread looks at ring confirmations or closes: then the call queues.
                    p = pending.incrementAndGet();
                    if (p > highWater.get()) {
                        highWater.set(p); // under submitLock: the only writer
                    }
                    inline = p == 1 && mayRunInline && Thread.currentThread() != opThread && execLock.tryLock();
                    op.startedAtIssue = inline;
                    op.work.owner = this;
                    // A small operation reads no clock here (FlightRecorder's class comment): 0, and the operation
                    // thread then times its wait in the queue from when it first sees it.
                    op.queuedAt = host.issued(op, inline);
                    if (!inline) {
                        queue.add(op);
                        if (!mayRunInline) {
                            // A blocking call joins at once (and runs the queue itself): only an asynchronous one needs
                            // the operation thread, should its caller not come back in time.
                            if (!asyncIssued) {
                                asyncIssued = true;
                            }
                            if (asleep) {
                                LockSupport.unpark(opThread);
                            }
                        }
                    }
                    break;
                }
            }
            makeRoom();
        }
        if (inline) {
            try {
                host.execute(op);
            } finally {
                execLock.unlock();
                pending.decrementAndGet();
            }
        }
        return op.work;
    }

    /**
     * The in-flight bound is reached: runs the oldest queued operation on this thread, or waits (blocked
     * on the execution lock, no CPU) while another thread runs one.
     */
    private void makeRoom() {
        execLock.lock();
        try {
            if (pending.get() >= maxInFlight) {
                runHead();
            }
        } finally {
            execLock.unlock();
        }
    }

    // ------------------------------------------------------------------------------------------ running

    /**
     * Most queued sends and receives run as one batch (posted together): enough for a stream's window
     * (ucx_perftest's tag_bw keeps 32 in flight) without holding more than this many requests at once.
     */
    static final int MAX_P2P_BATCH = 64;

    /**
     * Runs the queue's head (the caller holds the execution lock); false when the queue is empty. A send or
     * receive followed in the queue by more of them runs with them as one batch ({@link Host#executeBatch}).
     * Run one after the other, each waited for before the next was posted, a stream of asynchronous sends to
     * a peer moved one message per round trip (64 KiB at 0.6x of ucx_perftest's tag_bw over UCX's shared
     * memory, 0.4x over its tcp).
     */
    private boolean runHead() {
        Op head = queue.poll();
        if (head == null) {
            return false;
        }
        if (head instanceof P2pOp && queue.peek() instanceof P2pOp) {
            java.util.List<Op> batch = new java.util.ArrayList<>();
            batch.add(head);
            // Only the holder of the execution lock takes from the queue: what peek saw is what poll returns.
            while (batch.size() < MAX_P2P_BATCH && queue.peek() instanceof P2pOp) {
                batch.add(queue.poll());
            }
            try {
                host.executeBatch(batch);
            } finally {
                pending.addAndGet(-batch.size());
            }
            return true;
        }
        try {
            host.execute(head);
        } finally {
            pending.decrementAndGet();
        }
        return true;
    }

    /**
     * Called by a thread about to wait for {@code w}: runs queued operations, oldest first, until
     * {@code w} is done; while another thread runs one it waits for the execution lock. Returns when
     * {@code w} is done, or when it is not in the queue (an operation of a group still open: then
     * the caller waits for its completion).
     */
    void join(WorkImpl w) {
        if (Thread.currentThread() == opThread || execLock.isHeldByCurrentThread()) {
            return;
        }
        while (!w.isDone()) {
            execLock.lock();
            try {
                while (!w.isDone()) {
                    if (!runHead()) {
                        return;
                    }
                }
            } finally {
                execLock.unlock();
            }
        }
    }

    // ------------------------------------------------------------------------------------------ the operation thread

    private void opLoop() {
        try {
            long nextTick = System.nanoTime() + idleTickNanos;
            long lastAsyncSeen = nextTick - idleTickNanos - 2 * WATCH_NANOS;
            Op seenHead = null;
            long seenAt = 0;
            while (true) {
                if (host.aborted()) {
                    failQueued();
                    break;
                }
                Op head = queue.peek();
                long now = System.nanoTime();
                if (head == null && stopping) {
                    closeNow();
                    break;
                }
                if (asyncIssued) {
                    asyncIssued = false;
                    lastAsyncSeen = now;
                }
                boolean watching = watchNanos > 0 && now - lastAsyncSeen < WATCH_NANOS;
                long due;
                if (head == null) {
                    seenHead = null;
                    due = watching ? Math.min(nextTick, now + watchNanos) : nextTick;
                } else if (stopping || nudged || delayNanos == 0) {
                    due = now;
                } else {
                    if (head != seenHead) {
                        seenHead = head;
                        seenAt = head.queuedAt != 0 ? head.queuedAt : now;
                    }
                    due = seenAt + delayNanos;
                }
                if (now - due >= 0) {
                    if (head == null) {
                        nextTick = now + idleTickNanos;
                        if (idle()) {
                            break;
                        }
                    } else {
                        nudged = false;
                        runQueue();
                        nextTick = System.nanoTime() + idleTickNanos;
                    }
                    continue;
                }
                if (head == null && !watching) {
                    // Asleep until the idle tick: say so, then look again. An asynchronous call that raced with the look
                    // above either is seen now or sees the flag (and wakes this thread).
                    asleep = true;
                    if (queue.peek() != null || asyncIssued || host.aborted() || stopping) {
                        asleep = false;
                        continue;
                    }
                }
                LockSupport.parkNanos(this, due - now);
                asleep = false;
                if (Thread.interrupted() && !host.aborted()) {
                    continue;
                }
            }
        } finally {
            LIVE.remove(this);
            execLock.lock();
            try {
                host.released();
            } finally {
                execLock.unlock();
            }
        }
    }

    /** Runs queued operations until the queue is empty or the communicator is aborted. */
    private void runQueue() {
        execLock.lock();
        try {
            while (!host.aborted() && runHead()) {
                // run on: once late, the queue is the operation thread's until it is empty
            }
        } finally {
            execLock.unlock();
        }
    }

    /** One idle tick, unless someone runs (then there is no idleness to look after). */
    private boolean idle() {
        if (!execLock.tryLock()) {
            return false;
        }
        try {
            return host.idleTick();
        } finally {
            execLock.unlock();
        }
    }

    private void closeNow() {
        execLock.lock();
        try {
            host.drainAtClose();
        } finally {
            execLock.unlock();
        }
    }

    // ------------------------------------------------------------------------------------------ stopping

    /** close() (no operation can be issued any more): the operation thread runs what is queued, then ends. */
    void requestStop() {
        stopping = true;
        LockSupport.unpark(opThread);
    }

    /** abort(): wakes the operation thread, which fails what is queued and ends after the running operation. */
    void interrupt() {
        if (Thread.currentThread() != opThread) {
            opThread.interrupt();
            LockSupport.unpark(opThread);
        }
    }

    /** Waits for the operation thread to end (close). Returns false when interrupted first. */
    boolean awaitStopped() {
        try {
            opThread.join();
            return true;
        } catch (InterruptedException e) {
            return false;
        }
    }

    /** Waits up to {@code millis} for the operation thread to end (abort). */
    void awaitStopped(long millis) {
        try {
            opThread.join(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    boolean stopped() {
        return !opThread.isAlive();
    }

    /** Fails every queued operation (they will not run); any thread. */
    void failQueued() {
        Op op;
        while ((op = queue.poll()) != null) {
            pending.decrementAndGet();
            host.discard(op);
        }
    }
}
