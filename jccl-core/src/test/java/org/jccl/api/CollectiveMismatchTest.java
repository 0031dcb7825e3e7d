package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * JCCL_CHECK=1: ranks that call different collectives at the same point of their sequence — another
 * collective, size, data type, reduction op or root — get an error that names the ranks and what
 * differs, over every transport ranks of one JVM can use (in-JVM, TCP on loopback, SHM with its
 * shared collective segment), instead of a hang or a silently wrong result (float vs int32 of the
 * same size would otherwise "succeed").
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CollectiveMismatchTest {

    static final Duration STEP = Duration.ofSeconds(30);

    static Config config(String transport) {
        Config base = Config.defaults().with("JCCL_CHECK", "1").with("JCCL_INIT_TIMEOUT", "30");
        return switch (transport) {
            case "LOCAL" -> base;
            case "TCP" -> base.with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo");
            case "SHM" -> base.with("JCCL_LOCAL_DISABLE", "1");
            default -> throw new IllegalArgumentException(transport);
        };
    }

    /**
     * One kind of mismatch: what the deviating rank 1 calls as collective #1, the difference as rank 1
     * words it (its predecessor's value first), and how its call is described.
     */
    enum Kind {
        COLLECTIVE("collective broadcast vs allReduce", "called allReduce (collective #1, 32 B float sum)"),
        OP("reduction op sum vs max", "called allReduce (collective #1, 32 B float max)"),
        COUNT("size 32 B vs 16 B", "called allReduce (collective #1, 16 B float sum)"),
        DTYPE("data type float vs int32", "called allReduce (collective #1, 32 B int32 sum)"),
        ROOT("root 0 vs 1", "called broadcast (collective #1, 32 B float root 1)");

        final String difference;
        final String deviantCall;

        Kind(String difference, String deviantCall) {
            this.difference = difference;
            this.deviantCall = deviantCall;
        }
    }

    static Stream<Arguments> cases() {
        return Stream.of("LOCAL", "TCP", "SHM").flatMap(t -> Stream.of(Kind.values()).map(k -> Arguments.of(t, k)));
    }

    /** What every rank runs first (collective #0) and then, except the deviant, as collective #1. */
    /** The call every rank but rank 1 makes; returns its result, which must be right whenever the call returns. */
    static float[] agreed(Communicator c, Kind kind) {
        float[] x = new float[8];
        java.util.Arrays.fill(x, c.rank() + 1);
        if (kind == Kind.ROOT || kind == Kind.COLLECTIVE) {
            c.broadcast(Buffer.of(x), 0);
        } else {
            c.allReduce(Buffer.of(x), ReduceOp.SUM);
        }
        return x;
    }

    static float expected(Kind kind) {
        return kind == Kind.ROOT || kind == Kind.COLLECTIVE ? 1f : 6f;
    }

    static void deviant(Communicator c, Kind kind) {
        switch (kind) {
            case COLLECTIVE -> c.allReduce(Buffer.of(new float[8]), ReduceOp.SUM);
            case OP -> c.allReduce(Buffer.of(new float[8]), ReduceOp.MAX);
            case COUNT -> c.allReduce(Buffer.of(new float[4]), ReduceOp.SUM);
            case DTYPE -> c.allReduce(Buffer.of(new int[8]), ReduceOp.SUM);
            case ROOT -> c.broadcast(Buffer.of(new float[8]), 1);
        }
    }

    /**
     * Three ranks; rank 1 deviates at collective #1. Each rank compares itself with its predecessor in
     * the ring, so rank 1 (which sees rank 0) and rank 2 (which sees rank 1) report MISMATCH with both
     * calls and the difference; rank 0 sees the failure of the communicator. No rank hangs.
     */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("cases")
    void mismatchIsReportedNamingTheRanksAndWhatDiffers(String transport, Kind kind) {
        List<Communicator> cs = Jccl.initLocal(3, config(transport));
        ConcurrentHashMap<Integer, JcclException> errors = new ConcurrentHashMap<>();
        ConcurrentHashMap<Integer, float[]> results = new ConcurrentHashMap<>();
        try {
            Ranks.run(cs, STEP, c -> {
                float[] first = {c.rank() + 1f};
                c.allReduce(Buffer.of(first), ReduceOp.SUM); // collective #0 agrees everywhere and works
                assertArrayEquals(new float[] {6f}, first);
                try {
                    if (c.rank() == 1) {
                        deviant(c, kind);
                    } else {
                        results.put(c.rank(), agreed(c, kind));
                    }
                } catch (JcclException e) {
                    errors.put(c.rank(), e);
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
        String mine = kind == Kind.ROOT || kind == Kind.COLLECTIVE ? "called broadcast (collective #1, 32 B float root 0)"
                : "called allReduce (collective #1, 32 B float sum)";
        // rank 1 sees rank 0's agreed call, unless another rank's report of the mismatch (on the control channel;
        // the ranks whose operations then fail abort every rank, so that none waits forever) tore the communicator
        // down before rank 0's call reached rank 1: then rank 1 fails as a consequence, with that report
        // (which rank called what, and how the calls differ), never with only "a link closed"
        JcclException e1 = errors.get(1);
        assertNotNull(e1, "rank 1 called a different collective and got no error");
        if (e1.getMessage().contains("but rank 1 ")) {
            assertMismatch(e1, "rank 1: ", "rank 0 (", mine, "but rank 1 " + kind.deviantCall,
                    "differ in " + kind.difference);
        } else {
            assertReported(e1, "rank 1: ", kind);
        }
        // rank 2 sees rank 1's deviant call, unless a report of the same mismatch by another rank (rank 0 sees
        // rank 1's signature directly in some algorithms) reached rank 2 on the control channel first: then it
        // fails with that report, which names rank 1's deviant call and how it differs
        JcclException e2 = errors.get(2);
        assertNotNull(e2, "rank 2 got no error although its predecessor rank 1 deviated");
        if (e2.getMessage().contains(" reported: rank ")) {
            assertReported(e2, "rank 2: ", kind);
        } else {
            assertMismatch(e2, "rank 2: ", "rank 1 (", kind.deviantCall, "but rank 2 " + mine, "differ in " + reversed(kind.difference));
        }
        // rank 2's call ran and failed (counted), or the report aborted rank 2's communicator before rank 2
        // made the call, which was then refused without running: not counted (CommStats counts calls that ran)
        String call2 = kind == Kind.ROOT || kind == Kind.COLLECTIVE ? "broadcast" : "allReduce";
        long ran2 = e2.getMessage().contains("cannot be used: it was aborted") ? 0 : 1;
        assertEquals(ran2, cs.get(2).stats().errors(), e2.getMessage() + " / " + cs.get(2).stats());
        assertEquals(ran2, cs.get(2).stats().collective(call2).errors(), e2.getMessage() + " / " + cs.get(2).stats());
        assertEquals(ran2 + (call2.equals("allReduce") ? 1 : 0), cs.get(2).stats().collective(call2).operations(),
                e2.getMessage() + " / " + cs.get(2).stats());
        // rank 0 agrees with its predecessor (rank 2): it either fails because the others gave up, with the
        // report of the rank that found the mismatch, or, when it received nothing from them (the root of a
        // broadcast), returns the right result; never a wrong one
        JcclException e0 = errors.get(0);
        if (e0 != null && e0.getMessage().contains("but rank 0 ")) {
            assertMismatch(e0, "rank 0: ", "rank 1 (", kind.deviantCall, "but rank 0 " + mine, "differ in " + reversed(kind.difference));
        } else if (e0 != null) {
            assertReported(e0, "rank 0: ", kind);
        } else {
            float[] want = new float[8];
            java.util.Arrays.fill(want, expected(kind));
            assertArrayEquals(want, results.get(0), "rank 0 returned a result mixed with the deviant call's data");
        }
    }

    /** "a vs b" as the other rank words it: "b vs a". */
    static String reversed(String difference) {
        int vs = difference.lastIndexOf(" vs ");
        int sp = difference.lastIndexOf(' ', vs - 1);
        String head = difference.substring(0, sp + 1);
        String a = difference.substring(sp + 1, vs);
        String b = difference.substring(vs + 4);
        if (difference.startsWith("size")) {
            return "size 16 B vs 32 B";
        }
        return head + b + " vs " + a;
    }

    /**
     * A failure as the consequence of another rank's report (rank 1's own, rank 0's or rank 2's): MISMATCH
     * with that report, which names the reporter, rank 1's deviant call and the difference (worded from the
     * reporter's side: "rank 1 called X but rank k called Y" or "rank 0 called Y but rank 1 called X").
     */
    static void assertReported(JcclException e, String prefix, Kind kind) {
        assertMismatch(e, prefix, " reported: rank ", kind.deviantCall);
        String m = e.getMessage();
        assertTrue(m.contains("differ in " + kind.difference) || m.contains("differ in " + reversed(kind.difference)), m);
    }

    static void assertMismatch(JcclException e, String... fragments) {
        assertEquals(ErrorCode.MISMATCH, e.code(), e.toString());
        assertTrue(e instanceof InvalidUsageException, e.toString());
        String m = e.getMessage();
        for (String f : fragments) {
            assertTrue(m.contains(f), "message lacks \"" + f + "\": " + m);
        }
        assertTrue(m.contains("mismatched collective calls") && m.contains("same order"), m);
    }

    /** With the check on, matching calls of every collective still give the right results (the signature is not taken for data). */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    void matchingCallsWorkWithTheCheckOn(String transport) {
        List<Communicator> cs = Jccl.initLocal(3, config(transport));
        try {
            Ranks.run(cs, STEP, c -> {
                int r = c.rank();
                int n = c.size();
                for (int round = 0; round < 3; round++) {
                    int[] x = {r, 10 * r};
                    c.allReduce(Buffer.of(x), ReduceOp.SUM);
                    assertArrayEquals(new int[] {3, 30}, x);
                    double[] b = {r == 2 ? 7.5 : 0};
                    c.broadcast(Buffer.of(b), 2);
                    assertEquals(7.5, b[0]);
                    long[] g = new long[n];
                    c.allGather(Buffer.of(new long[] {r * 3L}), Buffer.of(g));
                    assertArrayEquals(new long[] {0, 3, 6}, g);
                    int[] rs = new int[1];
                    c.reduceScatter(Buffer.of(new int[] {1, 2, 3}), Buffer.of(rs), ReduceOp.SUM);
                    assertEquals(3 * (r + 1), rs[0]);
                    int[] a2a = new int[n];
                    c.allToAll(Buffer.of(new int[] {r, r + 10, r + 20}), Buffer.of(a2a));
                    assertArrayEquals(new int[] {10 * r, 10 * r + 1, 10 * r + 2}, a2a);
                    c.barrier();
                    int[] red = new int[1];
                    c.reduce(Buffer.of(new int[] {r + 1}), Buffer.of(red), ReduceOp.PROD, 1);
                    if (r == 1) {
                        assertEquals(6, red[0]);
                    }
                    // point-to-point calls between collectives do not count as collectives
                    if (r == 0) {
                        c.send(Buffer.of(new int[] {42}), 1);
                    } else if (r == 1) {
                        int[] got = new int[1];
                        c.recv(Buffer.of(got), 0);
                        assertEquals(42, got[0]);
                    }
                }
            });
            cs.forEach(Communicator::close);
        } finally {
            cs.forEach(Communicator::abort);
        }
    }
}
