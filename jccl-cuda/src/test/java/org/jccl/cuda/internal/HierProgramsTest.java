package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The hierarchical collectives ({@link HierPrograms}) and their pipeline on host memory, without a
 * GPU: ranks are threads, each with a {@link HostMemoryDevice} over a real host communicator of its
 * host's ranks, its cross-host group's and the whole group's (in-JVM transport), split by {@link
 * HostSplit} from host identities. Every collective in every shape (2x2, hosts interleaved, 4x1,
 * uneven 2+1 and 3+1) against the result computed here, with odd counts, tiny steps (many steps,
 * slots reused) and int32 / float32 / bfloat16.
 */
@Timeout(120)
class HierProgramsTest {

    /** The shapes: host identity of each rank. */
    private static final String[][] SHAPES = {
        {"a", "a", "b", "b"},      // 2 hosts x 2
        {"a", "b", "a", "b"},      // 2 x 2, hosts interleaved in rank order
        {"a", "b", "c", "d"},      // 4 hosts x 1
        {"a", "a", "b"},           // uneven 2 + 1
        {"b", "a", "a", "a"},      // uneven 1 + 3, the lone host first
    };

    private interface Body {
        void run(int rank, HierPrograms p, Arena arena, HostMemoryDevice dev) throws Exception;
    }

    /** Runs {@code body} on every rank of {@code keys}, each with its programs (step {@code chunk} bytes, {@code slots} slots). */
    private static void ranks(String[] keys, long chunk, int slots, long wholeMax, Body body) throws Exception {
        int n = keys.length;
        List<HostSplit> splits = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            splits.add(HostSplit.of(r, List.of(keys)));
        }
        HostSplit s0 = splits.get(0);
        Config cfg = Config.defaults();
        List<List<Communicator>> locals = new ArrayList<>();
        for (int h = 0; h < s0.hosts(); h++) {
            locals.add(Jccl.initLocal(s0.members(h).length, cfg));
        }
        int maxLocal = 0;
        for (int h = 0; h < s0.hosts(); h++) {
            maxLocal = Math.max(maxLocal, s0.members(h).length);
        }
        List<List<Communicator>> crosses = new ArrayList<>();
        for (int i = 0; i < maxLocal; i++) {
            int hostsWithI = 0;
            for (int h = 0; h < s0.hosts(); h++) {
                hostsWithI += s0.members(h).length > i ? 1 : 0;
            }
            crosses.add(Jccl.initLocal(hostsWithI, cfg));
        }
        List<Communicator> all = Jccl.initLocal(n, cfg);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                fs.add(pool.submit(() -> {
                    HostSplit s = splits.get(rank);
                    assertEquals(s.crossGroup()[crossRank(s)], rank, "cross-host rank = position by host");
                    Communicator cross = crosses.get(s.myLocal()).get(crossRank(s));
                    Communicator local = locals.get(s.myHost()).get(s.myLocal());
                    HostMemoryDevice dev = new HostMemoryDevice(local);
                    HierPrograms p = new HierPrograms(dev, s, cross, s.myLocal() == 0 ? cross : null, all.get(rank), chunk, slots, wholeMax);
                    try (Arena arena = Arena.ofConfined()) {
                        body.run(rank, p, arena, dev);
                    } finally {
                        dev.close();
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get(100, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
            for (List<Communicator> l : locals) {
                l.forEach(Communicator::close);
            }
            for (List<Communicator> l : crosses) {
                l.forEach(Communicator::close);
            }
            all.forEach(Communicator::close);
        }
    }

    /**
     * A peer that fails in a cross-host leg is named in the whole communicator's numbering, not its
     * cross-host group's (the first GPU run named world rank 3 "rank 1"). Hosts interleaved (a: 0, 2;
     * b: 1, 3), so the cross-host group of local index 1 is [2, 3], where rank 3 is "rank 1". Rank 3 aborts
     * its cross-host communicator instead of running; rank 2's all-reduce must fail naming rank 3; every
     * rank that fails aborts its parts (as HierCommunicator does), so nobody hangs.
     */
    @Test
    void aFailedCrossHostPeerIsNamedByItsWorldRank() throws Exception {
        String[] keys = {"a", "b", "a", "b"};
        int n = keys.length;
        Config cfg = Config.defaults();
        List<Communicator> localA = Jccl.initLocal(2, cfg);
        List<Communicator> localB = Jccl.initLocal(2, cfg);
        List<Communicator> cross0 = Jccl.initLocal(2, cfg);
        List<Communicator> cross1 = Jccl.initLocal(2, cfg);
        List<Communicator> all = Jccl.initLocal(n, cfg);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        String[] messages = new String[n];
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                fs.add(pool.submit(() -> {
                    HostSplit s = HostSplit.of(rank, List.of(keys));
                    Communicator local = (s.myHost() == 0 ? localA : localB).get(s.myLocal());
                    Communicator cross = (s.myLocal() == 0 ? cross0 : cross1).get(crossRank(s));
                    Communicator[] parts = {local, cross, all.get(rank)};
                    if (rank == 3) {
                        cross.abort();
                        local.abort();
                        return null;
                    }
                    HostMemoryDevice dev = new HostMemoryDevice(local);
                    HierPrograms p = new HierPrograms(dev, s, cross, s.myLocal() == 0 ? cross : null, all.get(rank), 4096, 2, 0);
                    try (Arena arena = Arena.ofConfined()) {
                        long count = 1 << 14;
                        MemorySegment send = fill(arena, DataType.FLOAT32, count, k -> value(rank, k));
                        MemorySegment recv = arena.allocate(4 * count, 256);
                        for (int it = 0; it < 1000; it++) {
                            p.allReduce(send.address(), recv.address(), count, DataType.FLOAT32, ReduceOp.SUM);
                        }
                    } catch (org.jccl.JcclException e) {
                        messages[rank] = e.getMessage();
                        for (Communicator c : parts) {
                            c.abort();
                        }
                    } finally {
                        dev.close();
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
            for (List<Communicator> l : List.of(localA, localB, cross0, cross1, all)) {
                l.forEach(Communicator::close);
            }
        }
        String m = messages[2];
        assertTrue(m != null, "rank 2's all-reduce must fail: its cross-host peer, rank 3, aborted");
        assertTrue(m.contains("rank 3"), m);
        // In the cross-host group [2, 3], rank 2 is "rank 0" and rank 3 "rank 1": neither may appear.
        assertTrue(!java.util.regex.Pattern.compile("\\brank [01]\\b(?! of )").matcher(m).find(), m);
        System.out.println("rank 2: " + m);
    }

    /** The position of a rank in its cross-host group (the hosts that have its local index, by host index). */
    private static int crossRank(HostSplit s) {
        int[] g = s.crossGroup();
        for (int k = 0; k < g.length; k++) {
            if (g[k] == s.rank()) {
                return k;
            }
        }
        throw new AssertionError();
    }

    /** Small integers (exact in every type, sums of a few ranks included). */
    private static int value(int rank, long k) {
        return (int) ((rank * 7 + k * 3) % 13) - 6;
    }

    private static MemorySegment fill(Arena a, DataType t, long count, java.util.function.LongToIntFunction v) {
        MemorySegment m = a.allocate(Math.max(1, t.bytes(count)), 256);
        for (long k = 0; k < count; k++) {
            put(m, t, k, v.applyAsInt(k));
        }
        return m;
    }

    private static void put(MemorySegment m, DataType t, long k, int v) {
        switch (t) {
            case INT32 -> m.setAtIndex(ValueLayout.JAVA_INT, k, v);
            case FLOAT32 -> m.setAtIndex(ValueLayout.JAVA_FLOAT, k, v);
            case BFLOAT16 -> m.setAtIndex(ValueLayout.JAVA_SHORT, k, (short) (Float.floatToRawIntBits(v) >>> 16));
            default -> throw new AssertionError(t);
        }
    }

    private static int get(MemorySegment m, DataType t, long k) {
        return switch (t) {
            case INT32 -> m.getAtIndex(ValueLayout.JAVA_INT, k);
            case FLOAT32 -> (int) m.getAtIndex(ValueLayout.JAVA_FLOAT, k);
            case BFLOAT16 -> (int) Float.intBitsToFloat((m.getAtIndex(ValueLayout.JAVA_SHORT, k) & 0xffff) << 16);
            default -> throw new AssertionError(t);
        };
    }

    private static void check(String what, MemorySegment m, DataType t, long count, java.util.function.LongToIntFunction expected) {
        for (long k = 0; k < count; k++) {
            int e = expected.applyAsInt(k);
            int g = get(m, t, k);
            if (e != g) {
                throw new AssertionError(what + ": element " + k + " is " + g + ", expected " + e);
            }
        }
    }

    private static int sumAt(int n, long k) {
        int s = 0;
        for (int q = 0; q < n; q++) {
            s += value(q, k);
        }
        return s;
    }

    /** Counts: tiny, odd, around a step boundary (steps of 4 KiB: 1024 int32), several steps. */
    private static final long[] COUNTS = {1, 3, 1023, 1024 * 2 + 5, 10_000};

    @Test
    void allReduceEveryShapeAndForm() throws Exception {
        for (String[] keys : SHAPES) {
            for (long wholeMax : new long[] {0, 1 << 20}) {
                for (boolean inPlace : new boolean[] {false, true}) {
                    int n = keys.length;
                    String shape = String.join(",", keys) + " wholeMax " + wholeMax + (inPlace ? " in place" : "");
                    ranks(keys, 4096, 2, wholeMax, (rank, p, a, dev) -> {
                        for (long count : COUNTS) {
                            MemorySegment send = fill(a, DataType.INT32, count, k -> value(rank, k));
                            MemorySegment recv = inPlace ? send : a.allocate(count * 4, 256);
                            p.allReduce(send.address(), recv.address(), count, DataType.INT32, ReduceOp.SUM);
                            check(shape + " rank " + rank + " count " + count, recv, DataType.INT32, count, k -> sumAt(n, k));
                        }
                    });
                }
            }
        }
    }

    @Test
    void allReduceTypesAndSlots() throws Exception {
        for (DataType t : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16}) {
            for (int slots : new int[] {1, 3}) {
                String[] keys = SHAPES[0];
                ranks(keys, 4096, slots, 0, (rank, p, a, dev) -> {
                    long count = 4097;
                    MemorySegment send = fill(a, t, count, k -> value(rank, k));
                    MemorySegment recv = a.allocate(t.bytes(count), 256);
                    p.allReduce(send.address(), recv.address(), count, t, ReduceOp.SUM);
                    check(t + " slots " + slots, recv, t, count, k -> sumAt(4, k));
                    // MAX too: the op travels to every stage
                    p.allReduce(send.address(), recv.address(), count, t, ReduceOp.MAX);
                    check(t + " max", recv, t, count, k -> {
                        int m = Integer.MIN_VALUE;
                        for (int q = 0; q < 4; q++) {
                            m = Math.max(m, value(q, k));
                        }
                        return m;
                    });
                });
            }
        }
    }

    @Test
    void reduceScatterAllGatherAllToAll() throws Exception {
        for (String[] keys : SHAPES) {
            int n = keys.length;
            String shape = String.join(",", keys);
            ranks(keys, 4096, 2, 0, (rank, p, a, dev) -> {
                for (long c : new long[] {1, 7, 700, 1500}) {
                    MemorySegment rsIn = fill(a, DataType.INT32, c * n, k -> value(rank, k));
                    MemorySegment rsOut = a.allocate(c * 4, 256);
                    p.reduceScatter(rsIn.address(), rsOut.address(), c, DataType.INT32, ReduceOp.SUM);
                    check(shape + " reduceScatter rank " + rank + " count " + c, rsOut, DataType.INT32, c, k -> sumAt(n, rank * c + k));

                    MemorySegment agIn = fill(a, DataType.INT32, c, k -> value(rank, k) * 100 + rank);
                    MemorySegment agOut = a.allocate(c * n * 4, 256);
                    p.allGather(agIn.address(), agOut.address(), c, DataType.INT32);
                    check(shape + " allGather rank " + rank + " count " + c, agOut, DataType.INT32, c * n,
                            k -> value((int) (k / c), k % c) * 100 + (int) (k / c));

                    MemorySegment aaIn = fill(a, DataType.INT32, c * n, k -> rank * 1000 + (int) (k % 997));
                    MemorySegment aaOut = a.allocate(c * n * 4, 256);
                    p.allToAll(aaIn.address(), aaOut.address(), c, DataType.INT32);
                    // block g of rank r's result is block r of rank g's input
                    check(shape + " allToAll rank " + rank + " count " + c, aaOut, DataType.INT32, c * n,
                            k -> (int) (k / c) * 1000 + (int) ((rank * c + k % c) % 997));
                }
            });
        }
    }

    @Test
    void broadcastAndReduceFromEveryRoot() throws Exception {
        for (String[] keys : SHAPES) {
            int n = keys.length;
            String shape = String.join(",", keys);
            ranks(keys, 4096, 2, 0, (rank, p, a, dev) -> {
                for (int root = 0; root < n; root++) {
                    int rt = root;
                    for (long c : new long[] {5, 3000}) {
                        MemorySegment in = fill(a, DataType.INT32, c, k -> value(rank, k));
                        MemorySegment out = a.allocate(c * 4, 256);
                        p.broadcast(rank == root ? in.address() : 0, out.address(), c, DataType.INT32, root);
                        check(shape + " broadcast root " + root + " rank " + rank, out, DataType.INT32, c, k -> value(rt, k));
                        MemorySegment red = a.allocate(c * 4, 256);
                        red.fill((byte) 0x55);
                        p.reduce(in.address(), rank == root ? red.address() : 0, c, DataType.INT32, ReduceOp.SUM, root);
                        if (rank == root) {
                            check(shape + " reduce root " + root, red, DataType.INT32, c, k -> sumAt(n, k));
                        } else {
                            assertEquals(0x55555555, red.get(ValueLayout.JAVA_INT, 0), "a non-root's buffer is left alone");
                        }
                    }
                }
            });
        }
    }

    @Test
    void pipelineKeepsSlotsInFlight() throws Exception {
        // 2 x 2, slice form, 3 slots, steps of 4 KiB: the first three steps are copied out before the first crosses hosts,
        // and every started step's leg is queued before the thread waits for the oldest.
        ranks(SHAPES[0], 4096, 3, 0, (rank, p, a, dev) -> {
            long count = 1024 * 8;
            MemorySegment send = fill(a, DataType.INT32, count, k -> value(rank, k));
            MemorySegment recv = a.allocate(count * 4, 256);
            dev.trace.clear();
            p.allReduce(send.address(), recv.address(), count, DataType.INT32, ReduceOp.SUM);
            check("pipelined", recv, DataType.INT32, count, k -> sumAt(4, k));
            List<String> t = dev.trace;
            // the three legs are queued (each after its await) before the first is joined and copied in; slot 0 is reused
            // only after its release, and its next leg queued before step 1's copies in
            assertEquals(List.of("out0", "out1", "out2", "await0", "await1", "await2", "in0", "release0", "out0", "await0", "in1"),
                    t.subList(0, 11), "three steps out and their legs queued before the first copy in: " + t);
            assertTrue(t.size() > 11);
        });
    }
}
