package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.PeerFailedException;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.internal.tune.AlgoSelector.Algo;
import org.jccl.internal.tune.AlgoSelector.Coll;
import org.jccl.internal.tune.Tuner;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The shared collective segment (algorithm {@code shared}) with ranks as threads of this JVM over
 * SHM: when it exists and is chosen, that its all-reduce is bit-identical on every rank and equal to
 * the rank-order sum, that it keeps its place among queued operations, and that a wait in it ends
 * when the communicator is aborted or a peer closes. Killed processes: jccl-cli's ShmProcessesTest
 * (its barrier goes through the segment). Each test uses its own JCCL_SHM_DIR.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SharedSegmentTest {
    private Path dir;

    @BeforeEach
    void makeDir() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-sharedtest-");
    }

    @AfterEach
    void removeDir() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.toList()) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(dir);
    }

    private Config shm(String collBuffer) {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DIR", dir.toString()).with("JCCL_SHM_CHUNK", "64K")
                .with("JCCL_SHM_SLOTS", "4").with("JCCL_SHM_COLL_BUFFER", collBuffer);
    }

    private List<String> files() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).toList();
        }
    }

    private static CommunicatorImpl impl(Communicator c) {
        return (CommunicatorImpl) c;
    }

    @Test
    void theTunerPicksTheSegmentWhenItExistsAndJcclAlgoExcludesIt() throws IOException {
        List<Communicator> cs = Jccl.initLocal(3, shm("64K"));
        try {
            assertEquals(List.of(), files(), "the segment's file is unlinked once every rank has mapped it");
            for (Communicator c : cs) {
                assertNotNull(SharedAreas.of(impl(c)));
                Tuner t = impl(c).tuner();
                for (long bytes : new long[] {8, 8 << 10, 1 << 20, 64L << 20}) {
                    assertEquals(Algo.SHARED, t.choose(Coll.ALLREDUCE, bytes, Algo.RD, Algo.RABENSEIFNER, Algo.RING, Algo.SHARED), "" + bytes);
                }
            }
        } finally {
            cs.forEach(Communicator::close);
        }
        assertEquals(List.of(), files());
        List<Communicator> none = Jccl.initLocal(2, shm("0"));
        try {
            assertNull(SharedAreas.of(impl(none.get(0))));
            assertTrue(!impl(none.get(0)).tuner().sharedAvailable());
        } finally {
            none.forEach(Communicator::close);
        }
        List<Communicator> excluded = Jccl.initLocal(2, shm("64K").with("JCCL_ALGO", "allreduce:^shared"));
        try {
            assertEquals(Algo.RD, impl(excluded.get(0)).tuner().choose(Coll.ALLREDUCE, 8, Algo.RD, Algo.RABENSEIFNER, Algo.RING,
                    Algo.SHARED));
            Ranks.run(excluded, Duration.ofSeconds(60), c -> {
                float[] v = {c.rank() + 1f};
                c.allReduce(Buffer.of(v), ReduceOp.SUM);
                assertEquals(3f, v[0]);
            });
        } finally {
            excluded.forEach(Communicator::close);
        }
    }

    /** Rank r's input: the same pseudo-random floats wherever they are computed. */
    private static float[] input(int rank, int count) {
        Random rnd = new Random(1234L * (rank + 1) + count);
        float[] x = new float[count];
        for (int i = 0; i < count; i++) {
            x[i] = (float) (rnd.nextGaussian() * Math.pow(10, rnd.nextInt(7) - 3));
        }
        return x;
    }

    @Test
    void allReduceIsBitIdenticalOnEveryRankAndSumsInRankOrder() {
        // 8 KiB per rank: two hot regions of 1 KiB and a ring of 6 KiB, rounds of at most 3 KiB (768 floats),
        // so the larger counts take many two-step rounds around the ring.
        for (int n : new int[] {2, 3, 4, 5}) {
            List<Communicator> cs = Jccl.initLocal(n, shm("8K").with("JCCL_ALGO", "allreduce:shared"));
            try {
                Ranks.run(cs, Duration.ofSeconds(90), c -> {
                    for (int count : new int[] {1, 3, 100, 1023, 1024, 1025, 5000, 100_003}) {
                        float[] want = input(0, count);
                        for (int q = 1; q < n; q++) {
                            float[] x = input(q, count);
                            for (int i = 0; i < count; i++) {
                                want[i] += x[i];
                            }
                        }
                        for (boolean inPlace : new boolean[] {false, true}) {
                            float[] in = input(c.rank(), count);
                            float[] out = inPlace ? in : new float[count];
                            c.allReduce(Buffer.of(in), Buffer.of(out), ReduceOp.SUM);
                            for (int i = 0; i < count; i++) {
                                if (Float.floatToRawIntBits(out[i]) != Float.floatToRawIntBits(want[i])) {
                                    throw new AssertionError("n=" + n + " count=" + count + (inPlace ? " in place" : "") + " rank " + c.rank()
                                            + ": element " + i + " is " + out[i] + ", the rank-order sum is " + want[i]);
                                }
                            }
                        }
                    }
                });
            } finally {
                cs.forEach(Communicator::close);
            }
        }
    }

    @Test
    void mixedSizesAroundTheRingStayCorrectOnEveryRank() {
        // 64 KiB per rank: hot regions of 8 KiB, a ring of 48 KiB, rounds of up to half of it (24 KiB),
        // so rounds of changing sizes wrap onto the previous round's region and need fence rounds.
        // The same pseudo-random sequence of collectives and sizes on every rank. Rank 0 is told of two
        // slow copies at operation 50, so operations go far (rounds of the far mode's size), and back
        // near once every rank has slept past the far mode's hold at operation 250: every rank must
        // run every operation in the same mode.
        for (int n : new int[] {2, 3}) {
            List<Communicator> cs = Jccl.initLocal(n, shm("64K").with("JCCL_SHM_COLL_SLOT", "20K")
                    .with("JCCL_ALGO", "allreduce:shared;allgather:shared;reducescatter:shared"));
            boolean[][] modes = new boolean[n][400];
            try {
                assertEquals(24 << 10, SharedAreas.of(impl(cs.get(0))).nearSlotBytes());
                Ranks.run(cs, Duration.ofSeconds(90), c -> {
                    Random ops = new Random(99);
                    org.jccl.internal.transport.shm.ShmCollArea area = SharedAreas.of(impl(c));
                    for (int i = 0; i < 400; i++) {
                        if (i == 50 && c.rank() == 0) {
                            area.copiedIn(1 << 20, 1_000_000);
                            area.copiedIn(1 << 20, 1_000_000);
                        }
                        if (i == 250) {
                            Thread.sleep(org.jccl.internal.transport.shm.ShmCollArea.FAR_HOLD_NANOS / 1_000_000 + 100);
                        }
                        int kind = ops.nextInt(4);
                        int count = switch (ops.nextInt(3)) {
                            case 0 -> 1 + ops.nextInt(40);
                            case 1 -> 1 + ops.nextInt(3000);
                            default -> 1 + ops.nextInt(20_000);
                        };
                        String what = "n=" + n + " op " + i + " count " + count + " rank " + c.rank();
                        switch (kind) {
                            case 0, 1 -> {
                                float[] want = input(0, count);
                                for (int q = 1; q < n; q++) {
                                    float[] x = input(q, count);
                                    for (int e = 0; e < count; e++) {
                                        want[e] += x[e];
                                    }
                                }
                                float[] in = input(c.rank(), count);
                                float[] out = kind == 1 ? in : new float[count];
                                c.allReduce(Buffer.of(in), Buffer.of(out), ReduceOp.SUM);
                                for (int e = 0; e < count; e++) {
                                    if (Float.floatToRawIntBits(out[e]) != Float.floatToRawIntBits(want[e])) {
                                        throw new AssertionError(what + " all-reduce: element " + e + " is " + out[e] + ", the rank-order sum is "
                                                + want[e]);
                                    }
                                }
                            }
                            case 2 -> {
                                int[] mine = new int[count];
                                for (int e = 0; e < count; e++) {
                                    mine[e] = c.rank() * 1_000_003 + e * 7 + i;
                                }
                                int[] all = new int[count * n];
                                c.allGather(Buffer.of(mine), Buffer.of(all));
                                for (int q = 0; q < n; q++) {
                                    for (int e = 0; e < count; e++) {
                                        assertEquals(q * 1_000_003 + e * 7 + i, all[q * count + e], what + " all-gather: block " + q + " element " + e);
                                    }
                                }
                            }
                            default -> {
                                int[] send = new int[count * n];
                                for (int e = 0; e < send.length; e++) {
                                    send[e] = (c.rank() + 1) * (e + i);
                                }
                                int[] got = new int[count];
                                c.reduceScatter(Buffer.of(send), Buffer.of(got), ReduceOp.SUM);
                                int ranksSum = n * (n + 1) / 2;
                                for (int e = 0; e < count; e++) {
                                    assertEquals(ranksSum * (c.rank() * count + e + i), got[e], what + " reduce-scatter: element " + e);
                                }
                            }
                        }
                        modes[c.rank()][i] = area.far();
                    }
                });
                for (int q = 1; q < n; q++) {
                    assertTrue(java.util.Arrays.equals(modes[0], modes[q]), "rank " + q + " ran operations in other modes than rank 0");
                }
                assertEquals(1, SharedAreas.of(impl(cs.get(0))).farSwitches());
                assertTrue(!modes[0][50] && modes[0][51] && !modes[0][251], java.util.Arrays.toString(modes[0]));
            } finally {
                cs.forEach(Communicator::close);
            }
        }
    }

    @Test
    void sharedOperationsKeepTheirPlaceAmongQueuedOnes() {
        List<Communicator> cs = Jccl.initLocal(3, shm("8K"));
        try {
            Ranks.run(cs, Duration.ofSeconds(60), c -> {
                int n = c.size();
                for (int iter = 0; iter < 20; iter++) {
                    float[] a = {c.rank() + iter};
                    float[] gathered = new float[n * 700];
                    float[] mine = new float[700];
                    java.util.Arrays.fill(mine, c.rank() * 10 + iter);
                    float[] b = new float[3000];
                    java.util.Arrays.fill(b, c.rank() + 1);
                    float[] bc = new float[500];
                    if (c.rank() == 1) {
                        java.util.Arrays.fill(bc, 42 + iter);
                    }
                    List<Work> ws = new ArrayList<>();
                    ws.add(c.allReduceAsync(Buffer.of(a), Buffer.of(a), ReduceOp.SUM));
                    ws.add(c.allGatherAsync(Buffer.of(mine), Buffer.of(gathered)));
                    ws.add(c.barrierAsync());
                    ws.add(c.allReduceAsync(Buffer.of(b), Buffer.of(b), ReduceOp.MAX));
                    ws.add(c.broadcastAsync(Buffer.of(bc), Buffer.of(bc), 1));
                    for (Work w : ws) {
                        w.join();
                    }
                    assertEquals(3 * iter + 3f, a[0]);
                    for (int q = 0; q < n; q++) {
                        assertEquals(q * 10 + iter, gathered[q * 700 + 699]);
                    }
                    assertEquals(3f, b[2999]);
                    assertEquals(42f + iter, bc[499]);
                }
            });
        } finally {
            cs.forEach(Communicator::close);
        }
    }

    @Test
    void abortEndsAWaitInTheSegment() throws Exception {
        List<Communicator> cs = Jccl.initLocal(2, shm("64K"));
        try {
            Thread aborter = new Thread(() -> {
                try {
                    Thread.sleep(300);
                } catch (InterruptedException e) {
                    return;
                }
                cs.get(0).abort();
            });
            aborter.start();
            long t0 = System.nanoTime();
            // Rank 1 never joins: rank 0 waits in the segment until abort() ends it.
            JcclException e = assertThrows(JcclException.class, () -> cs.get(0).allReduce(Buffer.of(new float[16]), ReduceOp.SUM));
            assertEquals(ErrorCode.ABORTED, e.code(), e.toString());
            assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(10), "abort took too long");
            aborter.join();
        } finally {
            cs.forEach(Communicator::abort);
        }
    }

    @Test
    void aPeerThatClosedFailsTheWaitInTheSegment() {
        List<Communicator> cs = Jccl.initLocal(2, shm("64K"));
        try {
            cs.get(1).close();
            JcclException e = assertThrows(JcclException.class, () -> cs.get(0).allReduce(Buffer.of(new float[2]), ReduceOp.SUM));
            assertTrue(e instanceof PeerFailedException, e.toString());
            assertTrue(e.getMessage().contains("SHM connection to rank 1 (") && e.getMessage().contains("closed by the peer"),
                    e.getMessage());
        } finally {
            cs.forEach(Communicator::abort);
        }
    }
}
