package org.jccl.api;

import static org.jccl.api.ApiSupport.assertThrowsNaming;
import static org.jccl.api.ApiSupport.probeAllReduce;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.ErrorCode;
import org.jccl.Group;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.api.ApiSupport.Net;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The lifecycle promises of {@link Communicator}, {@link Work} and {@link Group}, over both
 * transports: close() and abort() are idempotent and safe in either order; calls after close()
 * are InvalidUsageException and after abort() ABORTED; abort() from another thread frees callers
 * blocked in a collective that can never complete; a Work's timed join gives up without harming
 * the operation; groups fuse point-to-point calls (self pairs included), nest, and carry
 * collectives and asynchronous handles with them.
 *
 * <p>Every test makes its own communicators, because most of them end those communicators.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ApiLifecycleTest {

    static final Duration STEP = Duration.ofSeconds(20);
    /** How long abort() may take to free a blocked caller (the task's bar: within 2 s). */
    static final long ABORT_BOUND_MS = 2_000;

    // -------------------------------------------------------------------------------- close

    @ParameterizedTest
    @EnumSource(Net.class)
    void closeIsIdempotentAndEveryLaterCallIsInvalidUsage(Net net) {
        List<Communicator> cs = net.init(2);
        try {
            Ranks.run(cs, STEP, comm -> {
                probeAllReduce(comm, 1); // connections exist, so close() has something to release
                comm.close();
                comm.close();
                int peer = 1 - comm.rank();
                List<Executable> calls = List.of(
                        () -> comm.allReduceAsync(Buffer.of(new float[4]), Buffer.of(new float[4]), ReduceOp.SUM),
                        () -> comm.allReduce(new float[4], ReduceOp.SUM),
                        () -> comm.broadcast(new int[4], 0),
                        () -> comm.allGatherAsync(Buffer.of(new int[1]), Buffer.of(new int[2])),
                        () -> comm.barrier(),
                        () -> comm.barrierAsync(),
                        () -> comm.sendAsync(Buffer.of(new int[1]), peer),
                        () -> comm.recv(Buffer.of(new int[1]), peer),
                        () -> comm.group(),
                        () -> comm.split(0, 0),
                        () -> comm.dup());
                for (Executable call : calls) {
                    InvalidUsageException e = assertThrowsNaming(InvalidUsageException.class, call, "closed");
                    assertEquals(ErrorCode.INVALID_USAGE, e.code());
                }
                comm.abort(); // abort after close: harmless
            });
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    /** close() "waits for the operations already issued": asynchronous work issued just before close() completes, correctly. */
    @ParameterizedTest
    @EnumSource(Net.class)
    void closeWaitsForOperationsAlreadyIssued(Net net) {
        List<Communicator> cs = net.init(3);
        try {
            Ranks.run(cs, STEP, comm -> {
                int r = comm.rank();
                int[] a = {r, 10 * r, 100 * r};
                int[] out = new int[3];
                Work w1 = comm.allReduceAsync(Buffer.of(a), Buffer.of(out), ReduceOp.SUM);
                long[] bc = {r == 2 ? 42 : -1};
                Work w2 = comm.broadcastAsync(Buffer.of(bc), Buffer.of(bc), 2);
                comm.close();
                assertTrue(w1.isDone() && w2.isDone(), "close() returned before the issued operations completed");
                w1.join();
                w2.join();
                assertArrayEquals(new int[] {3, 30, 300}, out);
                assertEquals(42, bc[0]);
            });
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    // -------------------------------------------------------------------------------- abort

    /**
     * Ranks 0 and 1 enter an all-reduce that rank 2 never calls: rank 0 through the blocking form
     * (which may run the operation on the caller's own thread), rank 1 through the asynchronous
     * form and join() (the operation thread runs it). Another thread aborts both communicators;
     * both callers must get ABORTED within 2 s. Then abort() again, close(), and later calls fail
     * with ABORTED too.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void abortFromAnotherThreadFreesCallersBlockedInACollective(Net net) throws Exception {
        List<Communicator> cs = net.init(3);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            CountDownLatch entered = new CountDownLatch(2);
            AtomicReference<Work> asyncWork = new AtomicReference<>();
            Future<Long> blocking = pool.submit(() -> {
                entered.countDown();
                JcclException e = assertThrows(JcclException.class, () -> cs.get(0).allReduce(new float[1000], ReduceOp.SUM));
                long at = System.nanoTime();
                assertEquals(ErrorCode.ABORTED, e.code(), e.toString());
                return at;
            });
            Future<Long> joined = pool.submit(() -> {
                Work w = cs.get(1).allReduceAsync(Buffer.of(new float[1000]), Buffer.of(new float[1000]), ReduceOp.SUM);
                asyncWork.set(w);
                entered.countDown();
                JcclException e = assertThrows(JcclException.class, w::join);
                long at = System.nanoTime();
                assertEquals(ErrorCode.ABORTED, e.code(), e.toString());
                return at;
            });
            assertTrue(entered.await(10, TimeUnit.SECONDS));
            Thread.sleep(300); // let both really block: rank 2's part never comes
            assertFalse(blocking.isDone() || joined.isDone(), "a collective completed without rank 2");
            assertFalse(asyncWork.get().isDone());

            long abortAt = System.nanoTime();
            cs.get(0).abort();
            cs.get(1).abort();
            long t0 = TimeUnit.NANOSECONDS.toMillis(get(blocking) - abortAt);
            long t1 = TimeUnit.NANOSECONDS.toMillis(get(joined) - abortAt);
            assertTrue(t0 < ABORT_BOUND_MS, "the blocking caller was freed " + t0 + " ms after abort()");
            assertTrue(t1 < ABORT_BOUND_MS, "the joining caller was freed " + t1 + " ms after abort()");
            assertTrue(asyncWork.get().isDone(), "a failed Work reports done");

            for (Communicator c : cs.subList(0, 2)) {
                c.abort(); // idempotent
                JcclException later = assertThrows(JcclException.class, () -> c.allReduce(new int[1], ReduceOp.SUM));
                assertEquals(ErrorCode.ABORTED, later.code(), later.toString());
                JcclException laterGroup = assertThrows(JcclException.class, c::group);
                assertEquals(ErrorCode.ABORTED, laterGroup.code(), laterGroup.toString());
                c.close(); // safe after abort
                c.close();
            }
            cs.get(2).close(); // the rank that never called: its communicator closes normally
        } finally {
            pool.shutdownNow();
            ApiSupport.abortAll(cs);
        }
    }

    /** A group whose close() waits for a receive that never comes is freed by abort() from another thread, with ABORTED. */
    @ParameterizedTest
    @EnumSource(Net.class)
    void abortFreesACallerWaitingInGroupClose(Net net) throws Exception {
        List<Communicator> cs = net.init(2);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            CountDownLatch recorded = new CountDownLatch(1);
            Future<Long> closing = pool.submit(() -> {
                Group g = cs.get(0).group();
                cs.get(0).recv(Buffer.of(new int[16]), 1);
                cs.get(0).send(Buffer.of(new int[16]), 1);
                recorded.countDown();
                JcclException e = assertThrows(JcclException.class, g::close);
                long at = System.nanoTime();
                assertEquals(ErrorCode.ABORTED, e.code(), e.toString());
                return at;
            });
            assertTrue(recorded.await(10, TimeUnit.SECONDS));
            Thread.sleep(300); // rank 1 never posts its side
            assertFalse(closing.isDone(), "the group completed without rank 1");
            long abortAt = System.nanoTime();
            cs.get(0).abort();
            long ms = TimeUnit.NANOSECONDS.toMillis(get(closing) - abortAt);
            assertTrue(ms < ABORT_BOUND_MS, "group close() was freed " + ms + " ms after abort()");
            cs.get(0).close();
            cs.get(1).close();
        } finally {
            pool.shutdownNow();
            ApiSupport.abortAll(cs);
        }
    }

    /** abort() fails every operation still queued, not only the one running, and each Work then reports done. */
    @ParameterizedTest
    @EnumSource(Net.class)
    void abortFailsEveryPendingOperation(Net net) {
        List<Communicator> cs = net.init(2);
        try {
            Communicator c = cs.get(0);
            List<Work> works = new ArrayList<>();
            works.add(c.allReduceAsync(Buffer.of(new int[8]), Buffer.of(new int[8]), ReduceOp.SUM));
            works.add(c.broadcastAsync(Buffer.of(new double[8]), Buffer.of(new double[8]), 0));
            works.add(c.barrierAsync());
            works.add(c.sendAsync(Buffer.of(new byte[8]), 1));
            for (Work w : works) {
                assertFalse(w.join(Duration.ofMillis(20)), "nothing can complete: rank 1 never calls");
            }
            long t = System.nanoTime();
            c.abort();
            for (Work w : works) {
                JcclException e = assertThrows(JcclException.class, () -> w.join(Duration.ofSeconds(5)));
                assertEquals(ErrorCode.ABORTED, e.code(), e.toString());
                assertTrue(w.isDone());
            }
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t);
            assertTrue(ms < ABORT_BOUND_MS, "pending operations failed " + ms + " ms after abort()");
            cs.get(1).close();
            c.close();
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    // -------------------------------------------------------------------------------- Work

    /**
     * Work.join(Duration): "A timeout here is not a failure of the operation, which goes on; the
     * communicator stays usable." Rank 0 times out (and join(ZERO) returns at once) while the others
     * are held back; once they join, the same Work completes with the right result and the
     * communicator runs the next collective.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void timedJoinGivesUpWithoutHarmingTheOperation(Net net) {
        List<Communicator> cs = net.init(3);
        CountDownLatch goOn = new CountDownLatch(1);
        try {
            Ranks.run(cs, STEP, comm -> {
                int r = comm.rank();
                double[] in = {r + 0.5, -r, 1e6 * r};
                double[] out = new double[3];
                if (r == 0) {
                    Work w = comm.allReduceAsync(Buffer.of(in), Buffer.of(out), ReduceOp.SUM);
                    long t = System.nanoTime();
                    assertFalse(w.join(Duration.ZERO));
                    assertFalse(w.join(Duration.ofMillis(200)));
                    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t);
                    assertTrue(ms >= 190 && ms < 2_000, "join(200 ms) returned after " + ms + " ms");
                    assertFalse(w.isDone());
                    goOn.countDown();
                    assertTrue(w.join(Duration.ofSeconds(10)));
                    assertTrue(w.isDone());
                    w.join(); // joining again returns at once, without failure
                } else {
                    assertTrue(goOn.await(10, TimeUnit.SECONDS));
                    comm.allReduce(Buffer.of(in), Buffer.of(out), ReduceOp.SUM);
                }
                assertArrayEquals(new double[] {0.5 + 1.5 + 2.5, -3, 3e6}, out, "rank " + r);
                probeAllReduce(comm, 2);
            });
            ApiSupport.closeAll(cs);
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    // -------------------------------------------------------------------------------- groups

    /**
     * A ring exchange plus a send to self and a receive from self, all in one group, through the
     * blocking forms: inside a group they must return at once (else the ring would deadlock) and
     * the data must be there after close().
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void groupFusesSendsAndReceivesIncludingSelfPairs(Net net) {
        List<Communicator> cs = net.init(3);
        try {
            Ranks.run(cs, STEP, comm -> {
                int r = comm.rank();
                int n = comm.size();
                int right = (r + 1) % n;
                int left = (r + n - 1) % n;
                long[] toRight = {r, 100 + r};
                long[] toSelf = {1000 + r, 2000 + r, 3000 + r};
                long[] fromLeft = {-1, -1};
                long[] fromSelf = {-1, -1, -1};
                try (Group g = comm.group()) {
                    comm.send(Buffer.of(toRight), right);
                    comm.recv(Buffer.of(fromSelf), r);
                    comm.send(Buffer.of(toSelf), r);
                    comm.recv(Buffer.of(fromLeft), left);
                }
                assertArrayEquals(new long[] {left, 100 + left}, fromLeft, "rank " + r + " from its left neighbour");
                assertArrayEquals(toSelf, fromSelf, "rank " + r + " from itself");
                probeAllReduce(comm, 3);
            });
            ApiSupport.closeAll(cs);
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    /**
     * Nested groups: only the outermost close() runs the batch, so after the inner close() the
     * asynchronous handles recorded so far are not done; the outer group also carries a collective,
     * and every handle completes with the outer close().
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void nestedGroupsRunAtTheOutermostCloseAndTheirWorksCompleteWithIt(Net net) {
        List<Communicator> cs = net.init(3);
        try {
            Ranks.run(cs, STEP, comm -> {
                int r = comm.rank();
                int n = comm.size();
                int right = (r + 1) % n;
                int left = (r + n - 1) % n;
                float[] got = {-1f, -1f};
                int[] sum = {r, 1};
                Work send;
                Work recv;
                Work reduce;
                try (Group outer = comm.group()) {
                    try (Group inner = comm.group()) {
                        send = comm.sendAsync(Buffer.of(new float[] {r, r * 0.5f}), right);
                        recv = comm.recvAsync(Buffer.of(got), left);
                    }
                    assertFalse(send.isDone() || recv.isDone(), "the inner close() ran the batch");
                    assertArrayEquals(new float[] {-1f, -1f}, got, "data arrived before the outer close()");
                    reduce = comm.allReduceAsync(Buffer.of(sum), Buffer.of(sum), ReduceOp.SUM);
                    assertFalse(reduce.isDone(), "a collective inside a group ran before close()");
                }
                assertTrue(send.isDone() && recv.isDone() && reduce.isDone(), "works of the group are done after its close()");
                send.join();
                recv.join();
                reduce.join();
                assertArrayEquals(new float[] {left, left * 0.5f}, got, "rank " + r);
                assertArrayEquals(new int[] {0 + 1 + 2, 3}, sum, "rank " + r + ": allReduce inside the group");
                probeAllReduce(comm, 4);
            });
            ApiSupport.closeAll(cs);
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    /** A group holding only collectives (NCCL allows any mix): each gets its own right result. */
    @ParameterizedTest
    @EnumSource(Net.class)
    void collectivesInsideAGroup(Net net) {
        List<Communicator> cs = net.init(3);
        try {
            Ranks.run(cs, STEP, comm -> {
                int r = comm.rank();
                int[] a = {r + 1, 10};
                long[] b = {r == 1 ? 77 : 0, r == 1 ? 78 : 0};
                double[] gathered = new double[3];
                try (Group g = comm.group()) {
                    comm.allReduce(Buffer.of(a), ReduceOp.MAX);
                    comm.broadcast(Buffer.of(b), 1);
                    comm.allGather(Buffer.of(new double[] {r * 1.25}), Buffer.of(gathered));
                }
                assertArrayEquals(new int[] {3, 10}, a, "rank " + r + ": allReduce");
                assertArrayEquals(new long[] {77, 78}, b, "rank " + r + ": broadcast");
                assertArrayEquals(new double[] {0, 1.25, 2.5}, gathered, "rank " + r + ": allGather");
            });
            ApiSupport.closeAll(cs);
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    /**
     * A bad call inside a group is refused at the call, like outside one, and is not recorded: the
     * rank's other calls in the group still run at close() and match the other ranks' calls.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void aBadCallInsideAGroupIsRefusedAndTheGroupStillRuns(Net net) {
        List<Communicator> cs = net.init(3);
        try {
            Ranks.run(cs, STEP, comm -> {
                int r = comm.rank();
                int right = (r + 1) % 3;
                int left = (r + 2) % 3;
                short[] got = {-1};
                try (Group g = comm.group()) {
                    comm.send(Buffer.of(new short[] {(short) (10 + r)}, org.jccl.DataType.BFLOAT16), right);
                    if (r == 1) {
                        assertThrowsNaming(IllegalArgumentException.class, () -> comm.send(Buffer.of(new int[2]), 3),
                                "send: peer 3 is outside [0, 3)");
                        assertThrowsNaming(IllegalArgumentException.class,
                                () -> comm.allReduce(Buffer.of(new int[2]), Buffer.of(new int[1]), ReduceOp.SUM),
                                "allReduce: recv holds 1 elements but 2 are needed");
                    }
                    comm.recv(Buffer.of(got, org.jccl.DataType.BFLOAT16), left);
                }
                assertEquals(10 + left, got[0], "rank " + r + " from its left neighbour");
                probeAllReduce(comm, 6);
            });
            ApiSupport.closeAll(cs);
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    /**
     * A group belongs to the thread that opened it (ErrorCode.INVALID_USAGE: "wrong thread in a
     * group"): another thread's close() is refused and runs nothing; the owner's close() then
     * runs the batch.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void aGroupIsClosedOnlyByItsOwnThread(Net net) {
        List<Communicator> cs = net.init(2);
        try {
            Ranks.run(cs, STEP, comm -> {
                int r = comm.rank();
                int peer = 1 - r;
                int[] got = {-1};
                Group g = comm.group();
                Work s = comm.sendAsync(Buffer.of(new int[] {50 + r}), peer);
                comm.recv(Buffer.of(got), peer);
                AtomicReference<Throwable> other = new AtomicReference<>();
                Thread t = new Thread(() -> {
                    try {
                        g.close();
                    } catch (Throwable e) {
                        other.set(e);
                    }
                });
                t.start();
                t.join(10_000);
                assertInstanceOf(InvalidUsageException.class, other.get(), "close() from another thread");
                assertTrue(other.get().getMessage().contains("thread that opened it"), other.get().getMessage());
                assertFalse(s.isDone(), "the refused close() ran the batch");
                g.close();
                s.join();
                assertEquals(50 + peer, got[0]);
                probeAllReduce(comm, 5);
            });
            ApiSupport.closeAll(cs);
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    private static long get(Future<Long> f) throws Exception {
        try {
            Long v = f.get(10, TimeUnit.SECONDS);
            assertNotNull(v);
            return v;
        } catch (ExecutionException e) {
            if (e.getCause() instanceof AssertionError ae) {
                throw ae;
            }
            throw e;
        }
    }
}
