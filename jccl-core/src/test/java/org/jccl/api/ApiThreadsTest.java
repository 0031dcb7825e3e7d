package org.jccl.api;

import static org.jccl.api.ApiSupport.probeAllReduce;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Group;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.api.ApiSupport.Net;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The threading contract of {@link Communicator}: "A communicator may be used from several
 * threads: calls are serialised in the order they reach the communicator", while "the issue order
 * must agree across ranks". So two threads of one rank either use separate communicators (from
 * {@link Communicator#dup()}) freely, or share one and agree on the order of their calls; groups
 * belong to the thread that opened them; a Work may be joined by any thread.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ApiThreadsTest {

    static final int N = 3;
    static final Duration STEP = Duration.ofSeconds(30);
    static final long THREAD_WAIT_MS = 25_000;

    private final ApiSupport.Shared comms = new ApiSupport.Shared(N);

    /** Something a second thread of a rank does. */
    @FunctionalInterface
    interface Task {
        void run() throws Exception;
    }

    /** Runs {@code a} on this thread and {@code b} on a new one at the same time; rethrows the first failure of either. */
    private static void concurrently(String name, Task a, Task b) throws Exception {
        AtomicReference<Throwable> bFailure = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                b.run();
            } catch (Throwable e) {
                bFailure.set(e);
            }
        }, name);
        t.setDaemon(true);
        t.start();
        Throwable aFailure = null;
        try {
            a.run();
        } catch (Throwable e) {
            aFailure = e;
        }
        t.join(THREAD_WAIT_MS);
        if (aFailure != null) {
            if (bFailure.get() != null) {
                aFailure.addSuppressed(bFailure.get());
            }
            throw new AssertionError(aFailure);
        }
        if (t.isAlive()) {
            throw new AssertionError(name + " did not finish");
        }
        if (bFailure.get() != null) {
            throw new AssertionError(name + " failed: " + bFailure.get(), bFailure.get());
        }
    }

    /**
     * On every rank, thread A runs all-reduces on the communicator while thread B runs its own on
     * a dup, with no coordination between A and B: each communicator has its own order, so the
     * two streams may interleave in any way and every result must still be right.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void twoThreadsPerRankOnSeparateCommunicatorsFromDup(Net net) {
        int rounds = 150;
        comms.run(net, STEP, comm -> {
            int r = comm.rank();
            try (Communicator mine = comm.dup()) {
                concurrently("rank-" + r + "-B", () -> {
                    for (int i = 0; i < rounds; i++) {
                        int[] v = {r + i, -r, i * (r + 1)};
                        comm.allReduce(v, ReduceOp.SUM);
                        assertArrayEquals(new int[] {3 + 3 * i, -3, 6 * i}, v, "thread A, round " + i);
                    }
                }, () -> {
                    for (int i = 0; i < rounds; i++) {
                        double[] v = new double[1 + i % 300];
                        for (int k = 0; k < v.length; k++) {
                            v[k] = r * 0.5 + k + i;
                        }
                        mine.allReduce(v, ReduceOp.MAX);
                        for (int k = 0; k < v.length; k++) {
                            if (v[k] != 1.0 + k + i) {
                                assertEquals(1.0 + k + i, v[k], "thread B on the dup, round " + i + " element " + k);
                            }
                        }
                    }
                });
            }
            probeAllReduce(comm, 21);
        });
    }

    /**
     * Threads A and B of every rank share one communicator and take turns (A's call i, then B's
     * call i, then A's call i+1, ...), which is the same order on every rank. A issues
     * asynchronous calls and does not wait for them; B mixes asynchronous and blocking calls, so
     * blocking calls arrive while operations of the other thread are still pending. The rank's
     * own thread then joins every Work (issued by the other two threads) and checks every result.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void twoThreadsShareOneCommunicatorInAnAgreedOrder(Net net) {
        int rounds = 60;
        comms.run(net, STEP, comm -> {
            int r = comm.rank();
            Semaphore aTurn = new Semaphore(1);
            Semaphore bTurn = new Semaphore(0);
            List<Work> aWorks = new ArrayList<>();
            List<long[]> aOut = new ArrayList<>();
            List<Work> bWorks = new ArrayList<>();
            List<float[]> bOut = new ArrayList<>();
            concurrently("rank-" + r + "-B", () -> {
                for (int i = 0; i < rounds; i++) {
                    assertTrue(aTurn.tryAcquire(10, TimeUnit.SECONDS), "A's turn " + i);
                    long[] out = new long[64];
                    long[] in = new long[64];
                    for (int k = 0; k < in.length; k++) {
                        in[k] = 1000L * i + k + r;
                    }
                    aWorks.add(comm.allReduceAsync(Buffer.of(in), Buffer.of(out), ReduceOp.SUM));
                    aOut.add(out);
                    bTurn.release();
                }
            }, () -> {
                for (int i = 0; i < rounds; i++) {
                    assertTrue(bTurn.tryAcquire(10, TimeUnit.SECONDS), "B's turn " + i);
                    float[] v = new float[1 + i];
                    java.util.Arrays.fill(v, (r + 1) * (i + 1));
                    if (i % 4 == 0) {
                        comm.allReduce(v, ReduceOp.MIN);
                        bWorks.add(null);
                    } else {
                        bWorks.add(comm.allReduceAsync(Buffer.of(v), Buffer.of(v), ReduceOp.MIN));
                    }
                    bOut.add(v);
                    aTurn.release();
                }
            });
            for (int i = 0; i < rounds; i++) {
                aWorks.get(i).join();
                long[] out = aOut.get(i);
                for (int k = 0; k < out.length; k++) {
                    assertEquals(3000L * i + 3L * k + 3, out[k], "A's call " + i + " element " + k);
                }
                if (bWorks.get(i) != null) {
                    bWorks.get(i).join();
                }
                for (float x : bOut.get(i)) {
                    assertEquals(i + 1f, x, "B's call " + i);
                }
            }
            probeAllReduce(comm, 22);
        });
    }

    /**
     * Group Javadoc: while thread A has a group open, only A's calls are recorded; thread B's
     * all-reduce on the same communicator runs and completes at once (the group's calls are not
     * run by it), and A's group then runs at its close().
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void aGroupRecordsOnlyTheCallsOfItsOwnThread(Net net) {
        comms.run(net, STEP, comm -> {
            int r = comm.rank();
            int right = (r + 1) % N;
            int left = (r + N - 1) % N;
            CountDownLatch opened = new CountDownLatch(1);
            CountDownLatch bDone = new CountDownLatch(1);
            int[] fromLeft = {-1};
            concurrently("rank-" + r + "-B", () -> {
                Work s;
                Work v;
                try (Group g = comm.group()) {
                    s = comm.sendAsync(Buffer.of(new int[] {700 + r}), right);
                    v = comm.recvAsync(Buffer.of(fromLeft), left);
                    opened.countDown();
                    assertTrue(bDone.await(10, TimeUnit.SECONDS), "thread B's allReduce completed while the group was open");
                    assertFalse(s.isDone() || v.isDone(), "the recorded calls ran before close()");
                }
                s.join();
                v.join();
                assertEquals(700 + left, fromLeft[0]);
            }, () -> {
                assertTrue(opened.await(10, TimeUnit.SECONDS));
                int[] x = {r};
                comm.allReduce(x, ReduceOp.SUM);
                assertEquals(3, x[0], "thread B's allReduce during A's group");
                bDone.countDown();
            });
            probeAllReduce(comm, 23);
        });
    }

    @AfterAll
    void closeAll() {
        comms.closeAll();
    }
}
