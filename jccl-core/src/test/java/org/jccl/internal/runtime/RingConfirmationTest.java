package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The mismatch guard's ring confirmation, which no call waits for (OpContext, "the ring confirmation,
 * deferred"), over every transport ranks of one JVM use: the confirmations a rank may leave behind are
 * bounded (a root that broadcasts in a loop while its peer has not started runs at most {@link
 * RingConfirmations#MAX_CONFIRMATIONS} calls ahead, where without the guard it runs thousands ahead over TCP), every
 * result of a long run of them is right, a correct program's close() waits for its peers' confirmations
 * and returns normally, and a mismatch found after the calls returned aborts the communicator in the
 * background within a fraction of a second, with no further call.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RingConfirmationTest {
    static final Duration STEP = Duration.ofSeconds(60);

    static Config config(String transport) {
        Config base = Config.defaults().with("JCCL_INIT_TIMEOUT", "30");
        return switch (transport) {
            case "LOCAL" -> base;
            case "TCP" -> base.with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1");
            case "SHM" -> base.with("JCCL_LOCAL_DISABLE", "1");
            default -> throw new IllegalArgumentException(transport);
        };
    }

    /**
     * Rank 0 broadcasts {@code n} 8-byte messages (message i holds i) as the root while rank 1 sleeps before it
     * joins; returns how many broadcasts rank 0 had completed when rank 1 woke. Rank 1 checks every message.
     */
    private static int rootRunsAhead(Config cfg, int n) {
        List<Communicator> cs = Jccl.initLocal(2, cfg);
        AtomicInteger done = new AtomicInteger();
        AtomicInteger aheadWhenJoined = new AtomicInteger(-1);
        try {
            Ranks.run(cs, STEP, c -> {
                c.allReduce(new float[] {1f}, ReduceOp.SUM); // connections up on both ranks
                long[] x = new long[1];
                if (c.rank() == 0) {
                    for (int i = 0; i < n; i++) {
                        x[0] = i;
                        c.broadcast(x, 0);
                        done.incrementAndGet();
                    }
                } else {
                    Thread.sleep(1000);
                    aheadWhenJoined.set(done.get());
                    for (int i = 0; i < n; i++) {
                        x[0] = -1;
                        c.broadcast(x, 0);
                        if (x[0] != i) {
                            fail("broadcast " + i + " of " + n + " delivered " + x[0]);
                        }
                    }
                }
                c.barrier();
            });
            cs.forEach(Communicator::close);
        } finally {
            cs.forEach(Communicator::abort);
        }
        return aheadWhenJoined.get();
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    void outstandingConfirmationsAreBoundedAndEveryResultIsRight(String transport) {
        int ahead = rootRunsAhead(config(transport), 20_000);
        assertTrue(ahead >= 0 && ahead <= RingConfirmations.MAX_CONFIRMATIONS, "the root completed " + ahead + " broadcasts while its peer had"
                + " not started any: more than the " + RingConfirmations.MAX_CONFIRMATIONS + " calls whose confirmation may be outstanding");
        if (transport.equals("TCP")) {
            // What holds the root back is the bound: without the guard the same root runs far ahead (socket buffers).
            int unguarded = rootRunsAhead(config(transport).with("JCCL_CHECK", "none"), 20_000);
            assertTrue(unguarded > 10 * RingConfirmations.MAX_CONFIRMATIONS, "without the guard the root completed only " + unguarded
                    + " broadcasts ahead of its peer: this test would not see a missing bound");
        }
    }

    /**
     * A correct program that closes right after a rooted call whose peer is late: the root's close() waits for
     * the peer's confirmation (as its call would have) and returns normally; nothing is reported.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    void closeWaitsForALatePeersConfirmationAndReturnsNormally(String transport) {
        List<Communicator> cs = Jccl.initLocal(2, config(transport));
        AtomicBoolean peerCalled = new AtomicBoolean();
        try {
            Ranks.run(cs, STEP, c -> {
                c.allReduce(new float[] {1f}, ReduceOp.SUM);
                int[] x = {c.rank() == 0 ? 42 : 0};
                if (c.rank() == 1) {
                    Thread.sleep(500);
                    peerCalled.set(true);
                }
                c.broadcast(x, 0);
                assertEquals(42, x[0]);
                c.close();
                if (c.rank() == 0) {
                    assertTrue(peerCalled.get(), "the root's close() returned before its peer made the call it confirms");
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
        }
    }

    /**
     * A correct program whose leaf goes away right after a rooted call (it aborts, as a crash or an exit without
     * close() would, holding its confirmation of a call whose result it has): the root, whose call returned
     * with its own right result, closes normally; nothing it did failed. Only a MISMATCH makes close() throw.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"TCP", "SHM"})
    void aPeerThatLeavesAfterAReturnedRootedCallDoesNotFailTheRootsClose(String transport) {
        List<Communicator> cs = Jccl.initLocal(2, config(transport));
        try {
            Ranks.run(cs, STEP, c -> {
                c.allReduce(new float[] {1f}, ReduceOp.SUM);
                int[] x = {c.rank() == 0 ? 42 : 0};
                if (c.rank() == 0) {
                    c.broadcast(x, 0);
                    Thread.sleep(300); // the leaf has gone by now
                    c.close();
                } else {
                    c.broadcast(x, 0);
                    assertEquals(42, x[0]);
                    c.abort();
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
        }
    }

    /**
     * 4 ranks; ranks 0, 2 and 3 scatter from root 0 and close, rank 1 scatters from root 1 half a second later.
     * Rank 3 (a leaf whose ring predecessor agrees) may have closed normally by the time rank 1 connects to it
     * (no call before: the scatter opens the connections): rank 1 must not blame rank 3 for closing, but fail
     * with the MISMATCH of the two scatters (the hub compares every rank's word of the call), and so must rank
     * 2, whose ring predecessor is rank 1, in its close(). Without that comparison about 1 run in 7 here blamed
     * rank 3 (HierGuardTest met the same in a full build).
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"TCP", "SHM"})
    void aPeerThatClosedAfterItsCallIsNotBlamedForTheMismatch(String transport) {
        List<Communicator> cs = Jccl.initLocal(4, config(transport));
        Map<Integer, Throwable> errors = new ConcurrentHashMap<>();
        try {
            Ranks.run(cs, STEP, c -> {
                int r = c.rank();
                int[] send = new int[400];
                java.util.Arrays.fill(send, r + 1);
                int[] recv = new int[100];
                try {
                    if (r == 1) {
                        Thread.sleep(500);
                    }
                    c.scatter(Buffer.of(send), Buffer.of(recv), r == 1 ? 1 : 0);
                    c.close();
                } catch (JcclException e) {
                    errors.put(r, e);
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
        for (int r : new int[] {1, 2}) {
            Throwable e = errors.get(r);
            assertTrue(e instanceof JcclException je && je.code() == ErrorCode.MISMATCH, "rank " + r + ": " + e);
            assertTrue(e.getMessage().contains("scatter (400 x int32 root 0)") && e.getMessage().contains("scatter (400 x int32 root 1)"),
                    "rank " + r + ": " + e.getMessage());
        }
    }

    /**
     * Both ranks think they are the broadcast's root (each only sends): over TCP both return, their results
     * right. With no further call, the idle operation threads find the mismatch in the confirmations and
     * abort the communicator: a call 1.5 s later is refused at once, naming both calls. In memory (SHM, one
     * JVM) the confirmation is awaited at the end of the call, so there both calls fail themselves (checked).
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    void aMismatchFoundAfterTheCallsReturnedAbortsWithoutAnotherCall(String transport) {
        List<Communicator> cs = Jccl.initLocal(2, config(transport));
        Map<Integer, Throwable> inCall = new ConcurrentHashMap<>();
        Map<Integer, Throwable> later = new ConcurrentHashMap<>();
        try {
            Ranks.run(cs, STEP, c -> {
                c.allReduce(new float[] {1f}, ReduceOp.SUM);
                int[] x = {c.rank() + 10, c.rank() + 10};
                try {
                    c.broadcast(Buffer.of(x), c.rank());
                } catch (JcclException e) {
                    inCall.put(c.rank(), e);
                    return;
                }
                assertEquals(c.rank() + 10, x[1], "a root's broadcast changed its own data");
                Thread.sleep(1500);
                try {
                    c.barrier();
                    later.put(c.rank(), new AssertionError("the barrier 1.5 s after the mismatch returned"));
                } catch (JcclException e) {
                    later.put(c.rank(), e);
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
        for (int r = 0; r < 2; r++) {
            Throwable e = inCall.get(r);
            if (e == null) {
                e = later.get(r);
                assertTrue(e instanceof JcclException, "rank " + r + ": " + e);
                assertTrue(e.getMessage().contains("cannot be used: it was aborted"), "rank " + r + ": the mismatch was not found in the"
                        + " background, the barrier found it itself: " + e.getMessage());
                if (!transport.equals("TCP")) {
                    fail("rank " + r + " returned from its call over " + transport + ", where the confirmation is awaited: " + e);
                }
            } else if (transport.equals("TCP")) {
                fail("rank " + r + " failed in its call over TCP, where the confirmation is held: " + e);
            }
            JcclException je = (JcclException) e;
            assertEquals(ErrorCode.MISMATCH, je.code(), "rank " + r + ": " + je);
            String m = je.getMessage();
            assertTrue(m.contains("mismatched collective calls") && m.contains("broadcast (2 x int32 root 0)")
                    && m.contains("broadcast (2 x int32 root 1)"), "rank " + r + ": " + m);
        }
    }
}
