package org.jccl.cuda.internal;

import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;

/**
 * The exchange of the ranks of one process (one rank per GPU, any number of threads): mailboxes
 * in Java memory, published with release stores and read with acquire loads. A rank may run up to
 * {@link #DEPTH} operations ahead of the slowest before it waits for it.
 */
public final class InProcessExchange implements Exchange {
    static final int DEPTH = 256;
    private final int n;
    private final long timeoutNs;
    // collectives: [slot][rank] -> tag (epoch + 1), in, out
    private final AtomicLongArray collTag;
    private final long[] collIn;
    private final long[] collOut;
    private final long[] collGuard;
    private final AtomicLongArray collConsumed; // [rank]: last epoch resolved + 1
    // receives: [src][dst][slot] -> tag (seq + 1), address, bytes
    private final AtomicLongArray recvTag;
    private final long[] recvAddr;
    private final long[] recvBytes;
    private final AtomicLongArray recvConsumed; // [src][dst]: last seq resolved by the sender + 1
    // one-shot notes: [rank][epoch % NOTES] -> epoch (0: none), guard word
    static final int NOTES = 8;
    private final AtomicLongArray noteEpoch;
    private final long[] noteGuard;
    /** Per rank: what its waits ask when they last (Exchange#watch), or null. */
    private final java.util.concurrent.atomic.AtomicReferenceArray<java.util.function.Supplier<RuntimeException>> watchers;
    private volatile boolean aborted;

    public InProcessExchange(int n, long timeoutNs) {
        this.n = n;
        this.timeoutNs = timeoutNs;
        this.collTag = new AtomicLongArray(DEPTH * n);
        this.collIn = new long[DEPTH * n];
        this.collOut = new long[DEPTH * n];
        this.collGuard = new long[DEPTH * n];
        this.collConsumed = new AtomicLongArray(n);
        this.recvTag = new AtomicLongArray(n * n * DEPTH);
        this.recvAddr = new long[n * n * DEPTH];
        this.recvBytes = new long[n * n * DEPTH];
        this.recvConsumed = new AtomicLongArray(n * n);
        this.noteEpoch = new AtomicLongArray(n * NOTES);
        this.noteGuard = new long[n * NOTES];
        this.watchers = new java.util.concurrent.atomic.AtomicReferenceArray<>(n);
    }

    @Override
    public int size() {
        return n;
    }

    @Override
    public void publishCollective(int rank, long epoch, long in, long out, long guard) {
        // The slot is free once every rank has resolved its previous occupant. (Operations that
        // exchange nothing skip epochs, so the occupant's epoch is read from the slot itself.)
        int i = (int) (epoch % DEPTH) * n + rank;
        long previous = collTag.get(i); // epoch + 1 of the previous occupant, 0 if none
        for (int q = 0; q < n; q++) {
            final int peer = q;
            await(() -> collConsumed.get(peer) >= previous, () -> "rank " + rank + " waits for rank " + peer
                    + " to take part in operation #" + (previous - 1), rank, null);
        }
        collIn[i] = in;
        collOut[i] = out;
        collGuard[i] = guard;
        collTag.set(i, epoch + 1); // volatile store: releases the plain stores above
    }

    @Override
    public long[] resolveCollective(int rank, long epoch) {
        long[] r = new long[2 * n];
        int base = (int) (epoch % DEPTH) * n;
        org.jccl.InvalidUsageException mismatch = null;
        long mine = collGuard[base + rank];
        for (int q = 0; q < n; q++) {
            final int i = base + q;
            final int peer = q;
            try {
                await(() -> collTag.get(i) == epoch + 1, () -> "rank " + rank + " waits for rank " + peer + " to call collective #" + epoch,
                        rank, () -> {
                            // A peer that ran this operation as a one-shot all-reduce publishes no record: its note says so.
                            long[] note = oneShot(peer, epoch);
                            return note == null ? null : Exchange.oneShotPeer(rank, epoch, peer, note[1], mine);
                        });
            } catch (JcclException x) {
                if (x.code() == ErrorCode.MISMATCH) {
                    collConsumed.set(rank, epoch + 1); // as below: the others must not wait for this rank
                }
                throw x;
            }
            r[2 * q] = collIn[i];
            r[2 * q + 1] = collOut[i];
            if (mismatch == null && q != rank) {
                mismatch = Exchange.mismatch(rank, epoch, q, collGuard[i], collGuard[base + rank]);
            }
        }
        // Consumed either way: the peers, which find the same mismatch, must not wait for this rank.
        collConsumed.set(rank, epoch + 1);
        if (mismatch != null) {
            throw mismatch;
        }
        return r;
    }

    @Override
    public void noteOneShot(int rank, long epoch, long guard) {
        int i = rank * NOTES + (int) (epoch % NOTES);
        noteEpoch.setRelease(i, 0); // the pair is being rewritten (a sequence lock: 0, the guard, the epoch)
        java.lang.invoke.VarHandle.storeStoreFence();
        noteGuard[i] = guard;
        noteEpoch.setRelease(i, epoch);
    }

    /**
     * Whether rank {@code q} ran operation {@code epoch} as a one-shot all-reduce (it noted that one or
     * a later one): null if not; else {epoch, its guard word or 0 where its note was overwritten}.
     * Called only while {@code q}'s record of {@code epoch} is missing: a rank that noted a later
     * one-shot has passed {@code epoch} without publishing, so its call there was a one-shot too.
     */
    long[] oneShot(int q, long epoch) {
        long newest = 0;
        for (int k = 0; k < NOTES; k++) {
            newest = Math.max(newest, noteEpoch.getAcquire(q * NOTES + k));
        }
        if (newest < epoch) {
            return null;
        }
        int i = q * NOTES + (int) (epoch % NOTES);
        long e1 = noteEpoch.getAcquire(i);
        long g = noteGuard[i];
        java.lang.invoke.VarHandle.loadLoadFence();
        long e2 = noteEpoch.getAcquire(i);
        return new long[] {epoch, e1 == epoch && e2 == epoch ? g : 0};
    }

    @Override
    public void watch(int rank, java.util.function.Supplier<RuntimeException> check) {
        if (rank < watchers.length()) {
            watchers.set(rank, check);
        }
    }

    @Override
    public void publishRecv(int rank, int src, long seq, long address, long bytes) {
        int pair = src * n + rank;
        await(() -> recvConsumed.get(pair) > seq - DEPTH, () -> "rank " + rank + " waits for rank " + src + " to send", rank, null);
        int i = pair * DEPTH + (int) (seq % DEPTH);
        recvAddr[i] = address;
        recvBytes[i] = bytes;
        recvTag.set(i, seq + 1);
    }

    @Override
    public long[] resolveSend(int rank, int dst, long seq) {
        int pair = rank * n + dst;
        int i = pair * DEPTH + (int) (seq % DEPTH);
        await(() -> recvTag.get(i) == seq + 1, () -> "rank " + rank + " waits for rank " + dst + " to post the matching recv", rank, null);
        long[] r = {recvAddr[i], recvBytes[i]};
        recvConsumed.set(pair, seq + 1);
        return r;
    }

    private interface Cond {
        boolean ok();
    }

    /**
     * Waits until {@code c} holds. Once the first spins are over, every round also asks {@code check}
     * (may be null) and the rank's watcher: an exception from either ends the wait, unless {@code c}
     * holds by then (a peer publishes a note after its earlier records, so a check that saw the note
     * and then finds the record published must not fail).
     */
    private void await(Cond c, java.util.function.Supplier<String> what, int rank, java.util.function.Supplier<RuntimeException> check) {
        if (c.ok()) {
            return;
        }
        long start = System.nanoTime();
        int spins = 0;
        while (!c.ok()) {
            if (aborted) {
                throw new JcclException(ErrorCode.ABORTED, "rank " + rank + ": the GPU communicator was aborted while " + what.get());
            }
            spins++;
            if (spins >= 2_000 && (spins & 127) == 0) {
                RuntimeException stop = check == null ? null : check.get();
                java.util.function.Supplier<RuntimeException> w = rank < watchers.length() ? watchers.get(rank) : null;
                stop = stop != null ? stop : w == null ? null : w.get();
                if (stop != null && !c.ok()) { // (the evidence of a check is published after what c waits for)
                    throw stop;
                }
            }
            if (spins < 20_000) {
                Thread.onSpinWait();
            } else if (spins < 40_000) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(20_000);
                if (System.nanoTime() - start > timeoutNs) {
                    throw new JcclTimeoutException("rank " + rank + ": timed out after " + timeoutNs / 1_000_000_000L + " s: " + what.get()
                            + " (JCCL_CUDA_WAIT_TIMEOUT). With one thread driving several GPUs, wrap the calls of all ranks in"
                            + " groupStart()/groupEnd().");
                }
            }
        }
    }

    @Override
    public void abort() {
        aborted = true;
    }

    /** Shared by the communicators of one createAll: closing one must not stop the others. */
    @Override
    public void close() {
    }
}
