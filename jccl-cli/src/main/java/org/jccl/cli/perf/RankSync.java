package org.jccl.cli.perf;

import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import org.jccl.Communicator;
import org.jccl.ReduceOp;

/**
 * Barriers and reductions over every rank of a GPU benchmark: the ranks of this process (one
 * thread each) meet at a {@link CyclicBarrier}, and the last thread to arrive combines their values
 * and, when the job spans several processes, combines the result with the other processes through
 * the host {@link Communicator} (one call per process, on whichever thread arrived last). Every
 * thread of every process gets the same result.
 *
 * <p>All local threads must call the same methods in the same order, like collectives.
 *
 * <p>Failure: a thread that fails calls {@link #fail()}, which breaks the barrier; threads waiting
 * there, and any that arrive later, throw {@link Aborted}.
 */
final class RankSync {

    /** How a value combines across ranks. */
    enum Reduction {
        /** The value of global rank 0. */
        RANK0,
        SUM,
        MEAN,
        MIN,
        MAX
    }

    /** Thrown by a thread that stopped because another rank failed; not a cause worth reporting. */
    static final class Aborted extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Aborted(String message) {
            super(message);
        }
    }

    private final int parties;
    private final Communicator host;
    private final int totalRanks;
    private final int rank0Local;
    private final CyclicBarrier barrier;
    private final double[] doubles;
    private final long[] longs;
    private volatile boolean failed;
    private final java.util.concurrent.atomic.AtomicLong spinArrivals = new java.util.concurrent.atomic.AtomicLong();

    // Written by every thread before await (all the same value), read by the barrier action.
    private volatile Reduction reduction;
    private volatile boolean isLong;
    private volatile boolean plainBarrier;
    // Written by the barrier action, read after await (the barrier orders them).
    private double doubleResult;
    private long longResult;

    /**
     * @param parties ranks (threads) in this process
     * @param host the communicator between processes, or null when this process is the whole job
     * @param totalRanks ranks in the whole job
     * @param rank0Local index (among this process's ranks) of global rank 0, or -1 when another process has it
     */
    RankSync(int parties, Communicator host, int totalRanks, int rank0Local) {
        this.parties = parties;
        this.host = host;
        this.totalRanks = totalRanks;
        this.rank0Local = rank0Local;
        this.doubles = new double[parties];
        this.longs = new long[parties];
        this.barrier = new CyclicBarrier(parties, this::combine);
    }

    /** Ranks in the whole job. */
    int totalRanks() {
        return totalRanks;
    }

    /** Waits until every rank of the job has arrived. */
    /**
     * A busy-waiting barrier of this process's threads only, right before a timed loop: a parking
     * barrier releases its threads tens of microseconds apart, which a 20-operation loop of
     * microsecond operations would count (one thread issuing every GPU's calls, as nccl-tests does,
     * has no such skew). Gives up spinning after a second (then yields) so a stuck peer costs no core.
     */
    void spinBarrier() {
        if (parties == 1) {
            return;
        }
        long ticket = spinArrivals.incrementAndGet();
        long target = ((ticket - 1) / parties + 1) * parties;
        long deadline = System.nanoTime() + 1_000_000_000L;
        while (spinArrivals.get() < target) {
            if (failed) {
                throw new Aborted("another rank failed");
            }
            if (System.nanoTime() < deadline) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    void barrier(int local) {
        plainBarrier = true;
        await();
    }

    /** {@code value} combined over every rank of the job. */
    double reduce(int local, double value, Reduction r) {
        doubles[local] = value;
        reduction = r;
        isLong = false;
        plainBarrier = false;
        await();
        return doubleResult;
    }

    /** {@code value} combined over every rank of the job (MEAN rounds toward zero). */
    long reduce(int local, long value, Reduction r) {
        longs[local] = value;
        reduction = r;
        isLong = true;
        plainBarrier = false;
        await();
        return longResult;
    }

    /** Breaks the barrier: every thread waiting, or arriving later, throws {@link Aborted}. */
    void fail() {
        failed = true;
        barrier.reset();
    }

    private void await() {
        if (failed) {
            throw new Aborted("stopped: another rank failed");
        }
        try {
            barrier.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Aborted("stopped: interrupted because another rank failed");
        } catch (BrokenBarrierException e) {
            throw new Aborted("stopped: another rank failed");
        }
    }

    /** The barrier action: runs on the last thread to arrive, before any is released. */
    private void combine() {
        if (failed) {
            return;
        }
        if (plainBarrier) {
            if (host != null) {
                host.barrier();
            }
            return;
        }
        Reduction r = reduction;
        if (isLong) {
            long v = switch (r) {
                case RANK0 -> rank0Local >= 0 ? longs[rank0Local] : 0;
                case SUM, MEAN -> {
                    long s = 0;
                    for (long x : longs) {
                        s += x;
                    }
                    yield s;
                }
                case MIN -> java.util.Arrays.stream(longs).min().orElseThrow();
                case MAX -> java.util.Arrays.stream(longs).max().orElseThrow();
            };
            if (host != null) {
                long[] a = {v};
                host.allReduce(a, hostOp(r));
                v = a[0];
            }
            longResult = r == Reduction.MEAN ? v / totalRanks : v;
        } else {
            double v = switch (r) {
                case RANK0 -> rank0Local >= 0 ? doubles[rank0Local] : 0;
                case SUM, MEAN -> {
                    double s = 0;
                    for (double x : doubles) {
                        s += x;
                    }
                    yield s;
                }
                case MIN -> java.util.Arrays.stream(doubles).min().orElseThrow();
                case MAX -> java.util.Arrays.stream(doubles).max().orElseThrow();
            };
            if (host != null) {
                double[] a = {v};
                host.allReduce(a, hostOp(r));
                v = a[0];
            }
            doubleResult = r == Reduction.MEAN ? v / totalRanks : v;
        }
    }

    /** Across processes: rank 0's value is a sum in which only its process contributes. */
    private static ReduceOp hostOp(Reduction r) {
        return switch (r) {
            case RANK0, SUM, MEAN -> ReduceOp.SUM;
            case MIN -> ReduceOp.MIN;
            case MAX -> ReduceOp.MAX;
        };
    }

    /** The combination -a asks for: 0 rank 0's, 1 mean, 2 min, 3 max. */
    static Reduction forAverage(int average) {
        return switch (average) {
            case 0 -> Reduction.RANK0;
            case 1 -> Reduction.MEAN;
            case 2 -> Reduction.MIN;
            default -> Reduction.MAX;
        };
    }

    int parties() {
        return parties;
    }
}
