package org.jccl.api;

import static org.jccl.api.ApiSupport.assertThrowsNaming;
import static org.jccl.api.ApiSupport.probeAllReduce;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.api.ApiSupport.Net;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The promise of {@link Communicator}'s Javadoc: "Bad arguments throw IllegalArgumentException
 * before anything is sent and leave the communicator usable" (NullPointerException for nulls).
 *
 * <p>Each case makes one bad call on <em>one</em> rank only, the realistic failure (one worker with
 * a bug), through the asynchronous form so that the exception must come from the issuing call
 * itself rather than from a {@link org.jccl.Work} later. Meanwhile the other ranks go straight on
 * to a real all-reduce, and the bad rank follows them into it: had the bad call queued or sent
 * anything, that all-reduce would pair with it and fail, stall or sum the wrong data. Its sum is
 * checked on every rank. Messages must name the argument at fault, so the assertions read them.
 *
 * <p>The communicators of one transport are shared by all cases (a failure discards them), which
 * also shows that many rejected calls in a row leave no trace.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ApiBadInputTest {

    static final int N = 3;
    /** The rank that makes the bad call when the check is not root-specific. */
    static final int BAD = 1;
    /** The root of rooted cases; the bad call is made there when only the root checks the argument. */
    static final int R = 2;
    static final Duration STEP = Duration.ofSeconds(10);

    private final ApiSupport.Shared comms = new ApiSupport.Shared(N);

    /** One bad call. */
    @FunctionalInterface
    interface Call {
        void invoke(Communicator c, Mem m) throws Throwable;
    }

    /**
     * One bad call on {@code badRank}. {@code bug} names a known defect of the runtime (a key of the
     * disabled tests below) for the cases that fail today, and is null for the others.
     */
    record Case(String name, int badRank, String bug, Class<? extends Throwable> type, Call call, String... fragments) {
        Case withBug(String key) {
            return new Case(name, badRank, key, type, call, fragments);
        }

        @Override
        public String toString() {
            return name;
        }
    }

    /** Buffers for one bad call, made on the rank's own thread; confined arenas are closed afterwards. */
    static final class Mem implements AutoCloseable {
        private final List<Arena> arenas = new ArrayList<>();

        Buffer f(int n) {
            return Buffer.of(new float[n]);
        }

        Buffer i(int n) {
            return Buffer.of(new int[n]);
        }

        /** Native float memory any thread may access. */
        Buffer nat(int n) {
            return Buffer.of(Arena.ofAuto().allocate(4L * n, 64), DataType.FLOAT32);
        }

        /** Native float memory of a confined arena owned by the calling (rank) thread. */
        Buffer confined(int n) {
            Arena a = Arena.ofConfined();
            arenas.add(a);
            return Buffer.of(a.allocate(4L * n, 64), DataType.FLOAT32);
        }

        /** Native float memory whose arena is already closed when the call is made. */
        Buffer closedNative(int n) {
            Arena a = Arena.ofShared();
            Buffer b = Buffer.of(a.allocate(4L * n, 64), DataType.FLOAT32);
            a.close();
            return b;
        }

        /** A read-only view of native memory: the same bytes, but a collective must not write there. */
        Buffer readOnlyNative(int n) {
            return Buffer.of(Arena.ofAuto().allocate(4L * n, 64).asReadOnly(), DataType.FLOAT32);
        }

        /** A read-only view of a heap array. */
        Buffer readOnlyHeap(int n) {
            return Buffer.of(MemorySegment.ofArray(new float[n]).asReadOnly(), DataType.FLOAT32);
        }

        @Override
        public void close() {
            arenas.forEach(Arena::close);
        }
    }

    private static final Class<IllegalArgumentException> IAE = IllegalArgumentException.class;
    private static final Class<NullPointerException> NPE = NullPointerException.class;
    private static final ReduceOp SUM = ReduceOp.SUM;

    private static Case c(String name, Class<? extends Throwable> type, Call call, String... fragments) {
        return new Case(name, BAD, null, type, call, fragments);
    }

    private static Case atRoot(String name, Class<? extends Throwable> type, Call call, String... fragments) {
        return new Case(name, R, null, type, call, fragments);
    }

    static List<Case> allCases() {
        List<Case> l = new ArrayList<>();
        // ------------------------------------------------------------------------ allReduce
        l.add(c("allReduce null send", NPE, (c, m) -> c.allReduceAsync(null, m.f(4), SUM), "allReduce: send"));
        l.add(c("allReduce null recv", NPE, (c, m) -> c.allReduceAsync(m.f(4), null, SUM), "allReduce: recv"));
        l.add(c("allReduce null op", NPE, (c, m) -> c.allReduceAsync(m.f(4), m.f(4), null), "allReduce: op"));
        l.add(c("allReduce recv too small", IAE, (c, m) -> c.allReduceAsync(m.f(4), m.f(3), SUM),
                "allReduce: recv holds 3 elements but 4 are needed"));
        l.add(c("allReduce type mismatch", IAE, (c, m) -> c.allReduceAsync(m.f(4), m.i(4), SUM),
                "allReduce: send holds FLOAT32 but recv holds INT32"));
        l.add(c("allReduce partial overlap (heap)", IAE, (c, m) -> {
            Buffer a = m.f(8);
            c.allReduceAsync(a.slice(0, 4), a.slice(2, 4), SUM);
        }, "allReduce: send and recv overlap without being in place"));
        l.add(c("allReduce partial overlap (native)", IAE, (c, m) -> {
            Buffer a = m.nat(8);
            c.allReduceAsync(a.slice(1, 4), a.slice(0, 4), SUM);
        }, "allReduce: send and recv overlap without being in place"));
        l.add(c("allReduce confined-arena send", IAE, (c, m) -> c.allReduceAsync(m.confined(4), m.nat(4), SUM),
                "allReduce: send", "confined arena"));
        l.add(c("allReduce confined-arena recv", IAE, (c, m) -> c.allReduceAsync(m.nat(4), m.confined(4), SUM),
                "allReduce: recv", "confined arena"));
        l.add(c("allReduce confined-arena in place (blocking form)", IAE, (c, m) -> c.allReduce(m.confined(4), SUM),
                "allReduce", "confined arena"));
        l.add(c("allReduce read-only ByteBuffer", IAE,
                (c, m) -> c.allReduceAsync(m.f(4), Buffer.of(ByteBuffer.allocateDirect(16).asReadOnlyBuffer(), DataType.FLOAT32), SUM),
                "read-only ByteBuffer"));
        l.add(c("allReduce read-only native segment as recv", IAE, (c, m) -> c.allReduceAsync(m.nat(4), m.readOnlyNative(4), SUM),
                "recv", "read-only").withBug(READ_ONLY));
        l.add(c("allReduce read-only heap segment as recv", IAE, (c, m) -> c.allReduceAsync(m.f(4), m.readOnlyHeap(4), SUM),
                "recv", "read-only").withBug(READ_ONLY));
        l.add(c("allReduce segment of a closed arena", IAE, (c, m) -> c.allReduceAsync(m.closedNative(4), m.nat(4), SUM),
                "allReduce: send").withBug(CLOSED_ARENA));
        l.add(c("allReduce(float[]) null array", NPE, (c, m) -> c.allReduce((float[]) null, SUM), "array"));
        // ------------------------------------------------------------------------ broadcast
        l.add(c("broadcast null recv", NPE, (c, m) -> c.broadcastAsync(m.f(4), null, R), "recv"));
        l.add(atRoot("broadcast null send on the root", NPE, (c, m) -> c.broadcastAsync(null, m.f(4), R),
                "send (required on the root)"));
        l.add(c("broadcast root -1", IAE, (c, m) -> c.broadcastAsync(m.f(4), m.f(4), -1), "broadcast: root -1 is outside [0, 3)"));
        l.add(c("broadcast root == size", IAE, (c, m) -> c.broadcastAsync(m.f(4), m.f(4), N), "broadcast: root 3 is outside [0, 3)"));
        l.add(atRoot("broadcast type mismatch on the root", IAE, (c, m) -> c.broadcastAsync(m.i(4), m.f(4), R),
                "broadcast: send holds INT32 but recv holds FLOAT32"));
        l.add(atRoot("broadcast send too small on the root", IAE, (c, m) -> c.broadcastAsync(m.f(3), m.f(4), R),
                "broadcast: send holds 3 elements but 4 are needed"));
        l.add(atRoot("broadcast partial overlap on the root", IAE, (c, m) -> {
            Buffer a = m.f(8);
            c.broadcastAsync(a.slice(3, 4), a.slice(0, 4), R);
        }, "broadcast: send and recv overlap without being in place"));
        l.add(c("broadcast confined-arena recv", IAE, (c, m) -> c.broadcastAsync(null, m.confined(4), R),
                "broadcast: recv", "confined arena"));
        l.add(c("broadcast read-only recv", IAE, (c, m) -> c.broadcastAsync(null, m.readOnlyNative(4), R), "recv", "read-only").withBug(READ_ONLY));
        l.add(c("broadcast(int[]) root == size (blocking form)", IAE, (c, m) -> c.broadcast(new int[4], N),
                "broadcast: root 3 is outside [0, 3)"));
        // ------------------------------------------------------------------------ reduce
        l.add(c("reduce null send", NPE, (c, m) -> c.reduceAsync(null, m.f(4), SUM, R), "send"));
        l.add(c("reduce null op", NPE, (c, m) -> c.reduceAsync(m.f(4), m.f(4), null, R), "op"));
        l.add(atRoot("reduce null recv on the root", NPE, (c, m) -> c.reduceAsync(m.f(4), null, SUM, R),
                "recv (required on the root)"));
        l.add(c("reduce root -1", IAE, (c, m) -> c.reduceAsync(m.f(4), m.f(4), SUM, -1), "reduce: root -1 is outside [0, 3)"));
        l.add(c("reduce root == size", IAE, (c, m) -> c.reduceAsync(m.f(4), m.f(4), SUM, N), "reduce: root 3 is outside [0, 3)"));
        l.add(atRoot("reduce recv too small on the root", IAE, (c, m) -> c.reduceAsync(m.f(4), m.f(3), SUM, R),
                "reduce: recv holds 3 elements but 4 are needed"));
        l.add(atRoot("reduce type mismatch on the root", IAE, (c, m) -> c.reduceAsync(m.f(4), m.i(4), SUM, R),
                "reduce: send holds FLOAT32 but recv holds INT32"));
        l.add(atRoot("reduce partial overlap on the root", IAE, (c, m) -> {
            Buffer a = m.nat(8);
            c.reduceAsync(a.slice(0, 4), a.slice(1, 4), SUM, R);
        }, "reduce: send and recv overlap without being in place"));
        // ------------------------------------------------------------------------ allGather (2 per rank)
        l.add(c("allGather null send", NPE, (c, m) -> c.allGatherAsync(null, m.f(6)), "allGather: send"));
        l.add(c("allGather null recv", NPE, (c, m) -> c.allGatherAsync(m.f(2), null), "allGather: recv"));
        l.add(c("allGather recv too small", IAE, (c, m) -> c.allGatherAsync(m.f(2), m.f(5)),
                "allGather: recv holds 5 elements but 6 are needed"));
        l.add(c("allGather type mismatch", IAE, (c, m) -> c.allGatherAsync(m.i(2), m.f(6)),
                "allGather: send holds INT32 but recv holds FLOAT32"));
        l.add(c("allGather send is another rank's slot", IAE, (c, m) -> {
            Buffer a = m.f(6);
            c.allGatherAsync(a.slice(0, 2), a); // rank 1's slot is [2, 4)
        }, "allGather: send and recv overlap without being in place", "this rank's slot"));
        l.add(c("allGather confined-arena recv", IAE, (c, m) -> c.allGatherAsync(m.nat(2), m.confined(6)),
                "allGather: recv", "confined arena"));
        // ------------------------------------------------------------------------ reduceScatter (2 per rank)
        l.add(c("reduceScatter null send", NPE, (c, m) -> c.reduceScatterAsync(null, m.f(2), SUM), "reduceScatter: send"));
        l.add(c("reduceScatter null recv", NPE, (c, m) -> c.reduceScatterAsync(m.f(6), null, SUM), "reduceScatter: recv"));
        l.add(c("reduceScatter null op", NPE, (c, m) -> c.reduceScatterAsync(m.f(6), m.f(2), null), "reduceScatter: op"));
        l.add(c("reduceScatter send too small", IAE, (c, m) -> c.reduceScatterAsync(m.f(5), m.f(2), SUM),
                "reduceScatter: send holds 5 elements but 6 are needed"));
        l.add(c("reduceScatter type mismatch", IAE, (c, m) -> c.reduceScatterAsync(m.f(6), m.i(2), SUM),
                "reduceScatter: send holds FLOAT32 but recv holds INT32"));
        l.add(c("reduceScatter recv is another rank's slot", IAE, (c, m) -> {
            Buffer a = m.f(6);
            c.reduceScatterAsync(a, a.slice(4, 2), SUM); // rank 1's slot is [2, 4)
        }, "reduceScatter: send and recv overlap without being in place"));
        // ------------------------------------------------------------------------ allToAll
        l.add(c("allToAll null send", NPE, (c, m) -> c.allToAllAsync(null, m.f(6)), "allToAll: send"));
        l.add(c("allToAll null recv", NPE, (c, m) -> c.allToAllAsync(m.f(6), null), "allToAll: recv"));
        l.add(c("allToAll count not divisible by size", IAE, (c, m) -> c.allToAllAsync(m.f(4), m.f(4)),
                "allToAll: send holds 4 elements, not a multiple of the 3 ranks"));
        l.add(c("allToAll recv too small", IAE, (c, m) -> c.allToAllAsync(m.f(6), m.f(5)),
                "allToAll: recv holds 5 elements but 6 are needed"));
        l.add(c("allToAll type mismatch", IAE, (c, m) -> c.allToAllAsync(m.f(6), m.i(6)),
                "allToAll: send holds FLOAT32 but recv holds INT32"));
        l.add(c("allToAll partial overlap", IAE, (c, m) -> {
            Buffer a = m.f(12);
            c.allToAllAsync(a.slice(0, 6), a.slice(3, 6));
        }, "allToAll: send and recv overlap without being in place"));
        // ------------------------------------------------------------------------ allToAllv (2 per peer)
        l.add(c("allToAllv null send", NPE, (c, m) -> v(c, null, C, D, m.f(6), C, D), "allToAllv: send"));
        l.add(c("allToAllv null recv", NPE, (c, m) -> v(c, m.f(6), C, D, null, C, D), "allToAllv: recv"));
        l.add(c("allToAllv null sendCounts", NPE, (c, m) -> v(c, m.f(6), null, D, m.f(6), C, D), "allToAllv: sendCounts"));
        l.add(c("allToAllv null sendDispls", NPE, (c, m) -> v(c, m.f(6), C, null, m.f(6), C, D), "allToAllv: sendDispls"));
        l.add(c("allToAllv null recvCounts", NPE, (c, m) -> v(c, m.f(6), C, D, m.f(6), null, D), "allToAllv: recvCounts"));
        l.add(c("allToAllv null recvDispls", NPE, (c, m) -> v(c, m.f(6), C, D, m.f(6), C, null), "allToAllv: recvDispls"));
        l.add(c("allToAllv sendCounts too short", IAE, (c, m) -> v(c, m.f(6), new long[] {2, 2}, D, m.f(6), C, D),
                "allToAllv: sendCounts and sendDispls must have 3 entries (one per rank), got 2 and 3"));
        l.add(c("allToAllv recvDispls too long", IAE, (c, m) -> v(c, m.f(6), C, D, m.f(6), C, new long[] {0, 2, 4, 6}),
                "allToAllv: recvCounts and recvDispls must have 3 entries (one per rank), got 3 and 4"));
        l.add(c("allToAllv negative send count", IAE, (c, m) -> v(c, m.f(6), new long[] {2, -1, 2}, D, m.f(6), C, D),
                "allToAllv: sendCounts[1]=-1"));
        l.add(c("allToAllv negative recv displacement", IAE, (c, m) -> v(c, m.f(6), C, D, m.f(6), C, new long[] {0, -2, 4}),
                "recvDispls[1]=-2"));
        l.add(c("allToAllv send block outside send", IAE, (c, m) -> v(c, m.f(6), C, new long[] {0, 2, 5}, m.f(6), C, D),
                "allToAllv: send block 2 [5, 7) is outside send (6 elements)"));
        l.add(c("allToAllv recv block outside recv", IAE, (c, m) -> v(c, m.f(6), C, D, m.f(5), C, D),
                "allToAllv: recv block 2 [4, 6) is outside recv (5 elements)"));
        l.add(c("allToAllv send displacement that overflows", IAE,
                (c, m) -> v(c, m.f(6), C, new long[] {0, 2, Long.MAX_VALUE}, m.f(6), C, D), "send block 2", "outside send").withBug(OVERFLOW));
        l.add(c("allToAllv recv count that overflows", IAE,
                (c, m) -> v(c, m.f(6), C, D, m.f(6), new long[] {2, 2, Long.MAX_VALUE}, D), "recv block 2", "outside recv").withBug(OVERFLOW));
        l.add(c("allToAllv send and recv overlap", IAE, (c, m) -> {
            Buffer a = m.f(6);
            v(c, a, C, D, a, C, D);
        }, "allToAllv: send and recv overlap"));
        l.add(c("allToAllv count to itself disagrees", IAE, (c, m) -> v(c, m.f(6), C, D, m.f(6), new long[] {2, 1, 2}, D),
                "allToAllv: this rank sends itself 2 elements but receives 1 from itself"));
        l.add(c("allToAllv type mismatch", IAE, (c, m) -> v(c, m.f(6), C, D, m.i(6), C, D),
                "allToAllv: send holds FLOAT32 but recv holds INT32"));
        // ------------------------------------------------------------------------ gather (2 per rank)
        l.add(c("gather null send", NPE, (c, m) -> c.gatherAsync(null, m.f(6), R), "send"));
        l.add(atRoot("gather null recv on the root", NPE, (c, m) -> c.gatherAsync(m.f(2), null, R), "recv (required on the root)"));
        l.add(c("gather root -1", IAE, (c, m) -> c.gatherAsync(m.f(2), m.f(6), -1), "gather: root -1 is outside [0, 3)"));
        l.add(c("gather root == size", IAE, (c, m) -> c.gatherAsync(m.f(2), m.f(6), N), "gather: root 3 is outside [0, 3)"));
        l.add(atRoot("gather recv too small on the root", IAE, (c, m) -> c.gatherAsync(m.f(2), m.f(5), R),
                "gather: recv holds 5 elements but 6 are needed"));
        l.add(atRoot("gather type mismatch on the root", IAE, (c, m) -> c.gatherAsync(m.f(2), m.i(6), R),
                "gather: send holds FLOAT32 but recv holds INT32"));
        l.add(atRoot("gather send is another rank's slot on the root", IAE, (c, m) -> {
            Buffer a = m.f(6);
            c.gatherAsync(a.slice(0, 2), a, R); // the root's slot is [4, 6)
        }, "gather: send and recv overlap without being in place"));
        // ------------------------------------------------------------------------ scatter (2 per rank)
        l.add(c("scatter null recv", NPE, (c, m) -> c.scatterAsync(m.f(6), null, R), "recv"));
        l.add(atRoot("scatter null send on the root", NPE, (c, m) -> c.scatterAsync(null, m.f(2), R), "send (required on the root)"));
        l.add(c("scatter root -1", IAE, (c, m) -> c.scatterAsync(m.f(6), m.f(2), -1), "scatter: root -1 is outside [0, 3)"));
        l.add(c("scatter root == size", IAE, (c, m) -> c.scatterAsync(m.f(6), m.f(2), N), "scatter: root 3 is outside [0, 3)"));
        l.add(atRoot("scatter send too small on the root", IAE, (c, m) -> c.scatterAsync(m.f(5), m.f(2), R),
                "scatter: send holds 5 elements but 6 are needed"));
        l.add(atRoot("scatter type mismatch on the root", IAE, (c, m) -> c.scatterAsync(m.i(6), m.f(2), R),
                "scatter: send holds INT32 but recv holds FLOAT32"));
        l.add(atRoot("scatter recv is another rank's slot on the root", IAE, (c, m) -> {
            Buffer a = m.f(6);
            c.scatterAsync(a, a.slice(0, 2), R); // the root's slot is [4, 6)
        }, "scatter: send and recv overlap without being in place"));
        // ------------------------------------------------------------------------ send / recv
        l.add(c("send null buf", NPE, (c, m) -> c.sendAsync(null, 0), "buf"));
        l.add(c("recv null buf", NPE, (c, m) -> c.recvAsync(null, 0), "buf"));
        l.add(c("send peer -1", IAE, (c, m) -> c.sendAsync(m.f(4), -1), "send: peer -1 is outside [0, 3)"));
        l.add(c("recv peer == size", IAE, (c, m) -> c.recvAsync(m.f(4), N), "recv: peer 3 is outside [0, 3)"));
        l.add(c("send to itself outside a group", IAE, (c, m) -> c.sendAsync(m.f(4), BAD), "send: peer is this rank (1)", "group"));
        l.add(c("recv from itself outside a group (blocking form)", IAE, (c, m) -> c.recv(m.f(4), BAD),
                "recv: peer is this rank (1)", "group"));
        l.add(c("send confined-arena buf", IAE, (c, m) -> c.sendAsync(m.confined(4), 0), "send: buf", "confined arena"));
        l.add(c("recv into a read-only buf", IAE, (c, m) -> c.recvAsync(m.readOnlyNative(4), 0), "buf", "read-only").withBug(READ_ONLY));
        // ------------------------------------------------------------------------ split
        l.add(c("split color below SPLIT_NOCOLOR", IAE, (c, m) -> c.split(-2, 0), "split: color must be >= 0 or SPLIT_NOCOLOR"));
        return l;
    }

    /** Well-formed allToAllv counts and displacements for 3 ranks, 2 elements per peer. */
    private static final long[] C = {2, 2, 2};
    private static final long[] D = {0, 2, 4};

    private static void v(Communicator c, Buffer s, long[] sc, long[] sd, Buffer r, long[] rc, long[] rd) {
        c.allToAllvAsync(s, sc, sd, r, rc, rd);
    }

    /** Keys of {@link Case#bug()}: the runtime defects the disabled tests below pin down. */
    static final String READ_ONLY = "READ_ONLY";
    static final String CLOSED_ARENA = "CLOSED_ARENA";
    static final String OVERFLOW = "OVERFLOW";

    private static Stream<Arguments> casesTagged(String bug) {
        List<Arguments> args = new ArrayList<>();
        for (Net net : Net.values()) {
            for (Case k : allCases()) {
                if (Objects.equals(k.bug(), bug)) {
                    args.add(Arguments.of(net, k));
                }
            }
        }
        return args.stream();
    }

    static Stream<Arguments> cases() {
        return casesTagged(null);
    }

    static Stream<Arguments> readOnlyCases() {
        return casesTagged(READ_ONLY);
    }

    static Stream<Arguments> closedArenaCases() {
        return casesTagged(CLOSED_ARENA);
    }

    static Stream<Arguments> overflowCases() {
        return casesTagged(OVERFLOW);
    }

    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("cases")
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void badCallFailsOnItsRankAloneAndTheCommunicatorStillWorks(Net net, Case k) {
        check(net, k);
    }

    /**
     * A read-only view ({@code MemorySegment.asReadOnly()}, or {@code MemorySegment.ofBuffer} of a
     * read-only ByteBuffer) passed where jccl writes. Today the call is accepted; the write then
     * fails on the operation thread ("Attempt to write a read-only segment"), that rank's
     * communicator is aborted as INTERNAL and its peers fail with PEER_FAILED. {@code Buffer.of(ByteBuffer)}
     * already refuses read-only buffers for this reason; a segment must be refused the same way.
     */
    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("readOnlyCases")
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void readOnlyOutputIsRejectedBeforeAnythingIsSent(Net net, Case k) {
        check(net, k);
    }

    /**
     * Native memory of an arena that is already closed. Today the call is accepted and the
     * operation thread fails with "IllegalStateException: Already closed", aborting the communicator.
     */
    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("closedArenaCases")
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void closedArenaIsRejectedBeforeAnythingIsSent(Net net, Case k) {
        check(net, k);
    }

    /**
     * allToAllv blocks whose end ({@code displ + count}) overflows a long pass the bounds check
     * ({@code displs[i] + counts[i] > b.count()} is false for a negative sum). Today the call is
     * queued, data is sent to the peers (they see a message of the wrong size) and the operation
     * thread fails with IndexOutOfBoundsException.
     */
    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("overflowCases")
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void overflowingAllToAllvBlockIsRejectedBeforeAnythingIsSent(Net net, Case k) {
        check(net, k);
    }

    private void check(Net net, Case k) {
        int salt = k.name().hashCode() & 0xFFFF;
        comms.run(net, STEP, comm -> {
            if (comm.rank() == k.badRank()) {
                try (Mem m = new Mem()) {
                    assertThrowsNaming(k.type(), () -> k.call().invoke(comm, m), k.fragments());
                }
            }
            probeAllReduce(comm, salt);
        });
    }

    @AfterAll
    void closeAll() {
        comms.closeAll();
    }
}
