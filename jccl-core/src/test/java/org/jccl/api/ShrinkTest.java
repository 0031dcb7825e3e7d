package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Communicator.shrink: 4 ranks (threads of this JVM), one of them dies in the middle of an
 * all-reduce (its communicator is aborted: every connection to it closes, as when its process is
 * killed), the 3 survivors see the failure, shrink without it, and finish an all-reduce with the
 * right sum on the new communicator; over the in-JVM transport, TCP and SHM, killing rank 0 (whose
 * port the new root cannot reuse: the next survivor's is used) or a middle rank.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShrinkTest {

    static Stream<Arguments> cases() {
        return Stream.of("LOCAL", "TCP", "SHM").flatMap(t -> Stream.of(Arguments.of(t, 0), Arguments.of(t, 2)));
    }

    @ParameterizedTest(name = "{0}, rank {1} dies")
    @MethodSource("cases")
    void survivorsShrinkAndFinishAnAllReduce(String transport, int dead) {
        List<Communicator> cs = Jccl.initLocal(4, AbortReleasesResourcesTest.config(transport));
        ConcurrentHashMap<Integer, Communicator> children = new ConcurrentHashMap<>();
        try {
            Ranks.run(cs, Duration.ofSeconds(60), c -> {
                int r = c.rank();
                long[] warm = {r};
                c.allReduce(Buffer.of(warm), ReduceOp.SUM);
                assertArrayEquals(new long[] {6}, warm);
                if (r == dead) {
                    Thread.sleep(300); // the others are inside the all-reduce by now
                    c.abort();         // "killed": its connections close under the survivors
                    return;
                }
                JcclException e = assertThrows(JcclException.class, () -> c.allReduce(new float[100_000], ReduceOp.SUM));
                assertTrue(e.code() == ErrorCode.PEER_FAILED || e.code() == ErrorCode.ABORTED, e.toString());
                Communicator child = c.shrink(dead);
                children.put(r, child);
                assertEquals(3, child.size());
                assertEquals(r < dead ? r : r - 1, child.rank(), "new ranks are dense, ordered by old rank");
                double[] x = new double[1000];
                for (int i = 0; i < x.length; i++) {
                    x[i] = (r + 1) * 1000.0 + i;
                }
                child.allReduce(Buffer.of(x), ReduceOp.SUM);
                for (int i = 0; i < x.length; i++) {
                    double want = 0;
                    for (int q = 0; q < 4; q++) {
                        if (q != dead) {
                            want += (q + 1) * 1000.0 + i;
                        }
                    }
                    assertEquals(want, x[i], "old rank " + r + " element " + i);
                }
                // the old communicator stays ended (shrink aborted it; its error keeps the peer failure as the cause)
                JcclException later = assertThrows(JcclException.class, () -> c.allReduce(new int[1], ReduceOp.SUM));
                assertTrue(later.code() == ErrorCode.ABORTED || later.code() == ErrorCode.PEER_FAILED, later.toString());
            });
            children.values().forEach(Communicator::close);
        } finally {
            children.values().forEach(Communicator::abort);
            cs.forEach(Communicator::abort);
        }
    }

    static Stream<String> transports() {
        return Stream.of("LOCAL", "TCP", "SHM");
    }

    /**
     * Two failures one after the other: 5 ranks, rank 4 dies, the 4 survivors shrink; then old rank 1
     * (rank 1 of the shrunk communicator) dies, and the 3 left shrink the shrunk communicator again
     * and finish an all-reduce with the right sum.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("transports")
    void aShrunkCommunicatorShrinksAgainAfterASecondFailure(String transport) {
        List<Communicator> cs = Jccl.initLocal(5, AbortReleasesResourcesTest.config(transport));
        ConcurrentHashMap<Integer, Communicator> children = new ConcurrentHashMap<>();
        ConcurrentHashMap<Integer, Communicator> grandchildren = new ConcurrentHashMap<>();
        try {
            Ranks.run(cs, Duration.ofSeconds(90), c -> {
                int r = c.rank();
                long[] warm = {r};
                c.allReduce(Buffer.of(warm), ReduceOp.SUM);
                assertArrayEquals(new long[] {10}, warm);
                if (r == 4) {
                    Thread.sleep(300);
                    c.abort(); // the first failure
                    return;
                }
                assertThrows(JcclException.class, () -> c.allReduce(new float[100_000], ReduceOp.SUM));
                Communicator child = c.shrink(4);
                children.put(r, child);
                assertEquals(4, child.size());
                assertEquals(r, child.rank());
                long[] mid = {r + 1};
                child.allReduce(Buffer.of(mid), ReduceOp.SUM);
                assertArrayEquals(new long[] {1 + 2 + 3 + 4}, mid, "old rank " + r + " on the first shrunk communicator");
                if (r == 1) {
                    Thread.sleep(300);
                    child.abort(); // the second failure, on the shrunk communicator
                    return;
                }
                JcclException e = assertThrows(JcclException.class, () -> child.allReduce(new float[100_000], ReduceOp.SUM));
                assertTrue(e.code() == ErrorCode.PEER_FAILED || e.code() == ErrorCode.ABORTED, e.toString());
                Communicator grandchild = child.shrink(1);
                grandchildren.put(r, grandchild);
                assertEquals(3, grandchild.size());
                assertEquals(r == 0 ? 0 : r - 1, grandchild.rank(), "old ranks 0, 2, 3 become 0, 1, 2");
                double[] x = new double[1000];
                for (int i = 0; i < x.length; i++) {
                    x[i] = (r + 1) * 1000.0 + i;
                }
                grandchild.allReduce(Buffer.of(x), ReduceOp.SUM);
                for (int i = 0; i < x.length; i++) {
                    double want = (1 + 3 + 4) * 1000.0 + 3 * i; // old ranks 0, 2 and 3
                    assertEquals(want, x[i], "old rank " + r + " element " + i);
                }
            });
            grandchildren.values().forEach(Communicator::close);
        } finally {
            grandchildren.values().forEach(Communicator::abort);
            children.values().forEach(Communicator::abort);
            cs.forEach(Communicator::abort);
        }
    }

    @Test
    void badArgumentsAreRefusedBeforeAnythingHappens() {
        List<Communicator> cs = Jccl.initLocal(2, AbortReleasesResourcesTest.config("LOCAL"));
        try {
            Communicator c = cs.get(0);
            assertThrows(IllegalArgumentException.class, () -> c.shrink(0), "shrink: rank 0 excludes itself");
            IllegalArgumentException out = assertThrows(IllegalArgumentException.class, () -> c.shrink(5));
            assertTrue(out.getMessage().contains("rank 5 is outside [0, 2)"), out.getMessage());
            IllegalArgumentException twice = assertThrows(IllegalArgumentException.class, () -> c.shrink(1, 1));
            assertTrue(twice.getMessage().contains("rank 1 is listed twice"), twice.getMessage());
            Ranks.run(cs, Duration.ofSeconds(30), comm -> ApiSupport.probeAllReduce(comm, 1)); // still usable
            cs.forEach(Communicator::close);
        } finally {
            cs.forEach(Communicator::abort);
        }
    }
}
