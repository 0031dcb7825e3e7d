package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.api.ApiSupport.Net;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@link Communicator#split} and {@link Communicator#dup} over both transports with 4 ranks: who
 * lands in which child and at which rank (by color, then key, then parent rank), NOCOLOR, splits
 * of splits, and that children are communicators of their own: operations on parent and children
 * interleave freely, and closing one leaves the others working.
 *
 * <p>Membership and order are checked through the children themselves (an allGather of the
 * parent ranks), not only through rank() and size().
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ApiSplitTest {

    static final int N = 4;
    static final Duration STEP = Duration.ofSeconds(20);

    /** The parent ranks of a communicator's members, in its rank order, as the members see them. */
    private static int[] members(Communicator child, int parentRank) {
        int[] all = new int[child.size()];
        child.allGather(Buffer.of(new int[] {parentRank}), Buffer.of(all));
        return all;
    }

    /** Sum over the members of (parent rank + 1), by an all-reduce on {@code c}. */
    private static int sumOfParentRanksPlusOne(Communicator c, int parentRank) {
        int[] v = {parentRank + 1};
        c.allReduce(v, ReduceOp.SUM);
        return v[0];
    }

    private static void withComms(Net net, Ranks.Body body) {
        List<Communicator> cs = net.init(N);
        try {
            Ranks.run(cs, STEP, body);
            ApiSupport.closeAll(cs);
        } finally {
            ApiSupport.abortAll(cs);
        }
    }

    @ParameterizedTest
    @EnumSource(Net.class)
    void splitByColorEvenAndOddRanks(Net net) {
        withComms(net, comm -> {
            int r = comm.rank();
            try (Communicator child = comm.split(r % 2, r)) {
                assertNotNull(child);
                assertEquals(2, child.size());
                assertEquals(r / 2, child.rank());
                assertArrayEquals(r % 2 == 0 ? new int[] {0, 2} : new int[] {1, 3}, members(child, r));
                assertEquals(r % 2 == 0 ? 1 + 3 : 2 + 4, sumOfParentRanksPlusOne(child, r));
            }
            assertEquals(10, sumOfParentRanksPlusOne(comm, r));
        });
    }

    @ParameterizedTest
    @EnumSource(Net.class)
    void keysOrderTheChildRanksAndTiesKeepTheParentOrder(Net net) {
        withComms(net, comm -> {
            int r = comm.rank();
            try (Communicator reversed = comm.split(0, N - r);
                 Communicator tied = comm.split(0, 7);
                 Communicator mixed = comm.split(0, r % 2 == 0 ? 1 : 0)) {
                assertEquals(N - 1 - r, reversed.rank());
                assertArrayEquals(new int[] {3, 2, 1, 0}, members(reversed, r));
                assertEquals(r, tied.rank());
                assertArrayEquals(new int[] {0, 1, 2, 3}, members(tied, r));
                // Key 0 first (ranks 1, 3), then key 1 (ranks 0, 2), each in parent order.
                assertArrayEquals(new int[] {1, 3, 0, 2}, members(mixed, r));
                // A broadcast from child rank 0 comes from the member ordered first.
                int[] b = {r};
                reversed.broadcast(b, 0);
                assertEquals(3, b[0]);
            }
        });
    }

    @ParameterizedTest
    @EnumSource(Net.class)
    void splitNoColorGivesNullAndTheOthersAChild(Net net) {
        withComms(net, comm -> {
            int r = comm.rank();
            boolean out = r == 0 || r == 3;
            Communicator child = comm.split(out ? Communicator.SPLIT_NOCOLOR : 1234, 0);
            if (out) {
                assertNull(child);
            } else {
                try (child) {
                    assertNotNull(child);
                    assertEquals(2, child.size());
                    assertArrayEquals(new int[] {1, 2}, members(child, r));
                    assertEquals(2 + 3, sumOfParentRanksPlusOne(child, r));
                }
            }
            assertEquals(10, sumOfParentRanksPlusOne(comm, r));
        });
    }

    /** Unequal groups, then a split of a child, then a dup of the grandchild. */
    @ParameterizedTest
    @EnumSource(Net.class)
    void splitOfASplit(Net net) {
        withComms(net, comm -> {
            int r = comm.rank();
            try (Communicator child = comm.split(r < 3 ? 0 : 1, 0)) {
                assertEquals(r < 3 ? 3 : 1, child.size());
                if (r == 3) {
                    assertEquals(4, sumOfParentRanksPlusOne(child, r), "a communicator of one rank reduces to its own value");
                    Communicator none = child.split(Communicator.SPLIT_NOCOLOR, 0);
                    assertNull(none);
                    return;
                }
                // child = parent ranks {0,1,2}; split by child-rank parity: {0,2} and {1}.
                try (Communicator grand = child.split(child.rank() % 2, -child.rank());
                     Communicator grandDup = grand.dup()) {
                    if (r == 1) {
                        assertEquals(1, grand.size());
                        assertEquals(2, sumOfParentRanksPlusOne(grand, r));
                    } else {
                        assertEquals(2, grand.size());
                        assertArrayEquals(new int[] {2, 0}, members(grand, r), "negated keys reverse the order");
                        assertEquals(1 + 3, sumOfParentRanksPlusOne(grand, r));
                        assertArrayEquals(new int[] {2, 0}, members(grandDup, r), "dup keeps the ranks");
                    }
                }
                assertEquals(1 + 2 + 3, sumOfParentRanksPlusOne(child, r));
            }
        });
    }

    /**
     * Operations on the parent, a dup and a split, issued asynchronously so that they are in flight
     * together, interleaved differently on even and odd ranks (each communicator has its own order
     * of operations, so only the order within one communicator has to agree across ranks).
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void collectivesOnParentAndChildrenInterleave(Net net) {
        withComms(net, comm -> {
            int r = comm.rank();
            try (Communicator dup = comm.dup(); Communicator half = comm.split(r % 2, r)) {
                assertEquals(r, dup.rank());
                for (int round = 0; round < 20; round++) {
                    long[] p = {r + round};
                    long[] d = new long[N];
                    double[] h = {r * 0.25 + round};
                    int[] pb = {r == round % N ? 1000 + round : -1};
                    List<Work> works = new ArrayList<>();
                    if (r % 2 == 0) {
                        works.add(comm.allReduceAsync(Buffer.of(p), Buffer.of(p), ReduceOp.SUM));
                        works.add(dup.allGatherAsync(Buffer.of(new long[] {10L * r + round}), Buffer.of(d)));
                        works.add(half.allReduceAsync(Buffer.of(h), Buffer.of(h), ReduceOp.MAX));
                        works.add(comm.broadcastAsync(Buffer.of(pb), Buffer.of(pb), round % N));
                    } else {
                        works.add(half.allReduceAsync(Buffer.of(h), Buffer.of(h), ReduceOp.MAX));
                        works.add(dup.allGatherAsync(Buffer.of(new long[] {10L * r + round}), Buffer.of(d)));
                        works.add(comm.allReduceAsync(Buffer.of(p), Buffer.of(p), ReduceOp.SUM));
                        works.add(comm.broadcastAsync(Buffer.of(pb), Buffer.of(pb), round % N));
                    }
                    for (Work w : works) {
                        w.join();
                    }
                    assertEquals(6 + 4L * round, p[0], "parent allReduce, round " + round);
                    assertArrayEquals(new long[] {round, 10 + round, 20 + round, 30 + round}, d, "dup allGather, round " + round);
                    assertEquals((r % 2 == 0 ? 2 : 3) * 0.25 + round, h[0], "split allReduce, round " + round);
                    assertEquals(1000 + round, pb[0], "parent broadcast, round " + round);
                }
            }
        });
    }

    @ParameterizedTest
    @EnumSource(Net.class)
    void closingOrAbortingAChildLeavesTheParentWorking(Net net) {
        withComms(net, comm -> {
            int r = comm.rank();
            Communicator closed = comm.dup();
            Communicator aborted = comm.split(r % 2, 0);
            assertEquals(10, sumOfParentRanksPlusOne(closed, r));
            closed.close();
            aborted.abort();
            assertEquals(10, sumOfParentRanksPlusOne(comm, r));
            ApiSupport.probeAllReduce(comm, 11);
            try (Communicator again = comm.split(0, r)) {
                assertEquals(10, sumOfParentRanksPlusOne(again, r), "the parent still splits");
            }
            aborted.close();
        });
    }

    /** dup() is "a new communicator over the same ranks, with its own connections": it outlives its parent. */
    @ParameterizedTest
    @EnumSource(Net.class)
    void aChildOutlivesItsParent(Net net) {
        List<Communicator> parents = net.init(N);
        Map<Integer, Communicator> children = new ConcurrentHashMap<>();
        try {
            Ranks.run(parents, STEP, comm -> {
                Communicator child = comm.dup();
                children.put(comm.rank(), child);
                comm.close();
            });
            List<Communicator> cs = new ArrayList<>();
            for (int r = 0; r < N; r++) {
                cs.add(children.get(r));
            }
            Ranks.run(cs, STEP, child -> {
                ApiSupport.probeAllReduce(child, 12);
                try (Communicator grand = child.split(child.rank() / 2, 0)) {
                    assertEquals(child.rank() < 2 ? 3 : 7, sumOfParentRanksPlusOne(grand, child.rank()));
                }
                child.close();
            });
        } finally {
            ApiSupport.abortAll(parents);
            children.values().forEach(Communicator::abort);
        }
    }
}
