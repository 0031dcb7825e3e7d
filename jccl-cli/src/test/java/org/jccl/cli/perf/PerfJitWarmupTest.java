package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The one-off JIT warm-up runs the measurement procedure itself: every size of the sweep up to
 * {@link Benchmark#JIT_WARMUP_MAX_BYTES}, out of place and in place, with the --timing median
 * barriers before the operations, for at least --jit-warmup and at most {@link
 * Benchmark#JIT_WARMUP_MAX_FACTOR} times it.
 */
@Timeout(60)
class PerfJitWarmupTest {

    private static PerfOptions options(long min, long max, int jitMs, boolean median) {
        PerfTesting.Opts m = new PerfTesting.Opts();
        return new PerfOptions(m.collective, min, max, m.step, m.factor, 3, 1, 1, m.ops, m.types, m.root, m.average,
                m.blocking, null, -1, List.of("all_reduce"), jitMs, median);
    }

    /** Runs {@link Benchmark#jitWarmup} on every rank of a fake cluster; returns the events and the wall time. */
    private static List<String> warmUp(PerfOptions o, long[] wallNanos) throws Exception {
        FakeCluster cluster = new FakeCluster(2);
        List<String> events = Collections.synchronizedList(new ArrayList<>());
        cluster.trace = events::add;
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            long t0 = System.nanoTime();
            List<Future<?>> f = new ArrayList<>();
            for (Communicator c : cluster.comms()) {
                f.add(pool.submit(() -> {
                    try (Benchmark b = new Benchmark(c, o)) {
                        b.jitWarmup(DataType.FLOAT32, ReduceOp.SUM, 0);
                    }
                    return null;
                }));
            }
            for (Future<?> x : f) {
                x.get(50, TimeUnit.SECONDS);
            }
            wallNanos[0] = System.nanoTime() - t0;
        } finally {
            pool.shutdownNow();
        }
        return events;
    }

    @Test
    void everySweepSizeUpToTheCapOutOfPlaceAndInPlace() throws Exception {
        long[] wall = new long[1];
        // 8 B .. 4 MiB by 4: 8, 32, ..., 1 MiB warmed; 4 MiB is above the cap.
        List<String> events = warmUp(options(8, 4 << 20, 300, true), wall);
        for (long size = 8; size <= 4 << 20; size *= 4) {
            for (String variant : new String[] {"oop", "ip"}) {
                String e = "0 allReduce " + size + " " + variant + " native";
                boolean expected = size <= Benchmark.JIT_WARMUP_MAX_BYTES;
                assertEquals(expected, events.contains(e), e + " in the warm-up: " + expected);
            }
        }
        assertTrue(wall[0] >= 300_000_000L, "warm-up shorter than --jit-warmup: " + wall[0] / 1e6 + " ms");
        assertTrue(wall[0] < 300L * Benchmark.JIT_WARMUP_MAX_FACTOR * 1_000_000L + 20_000_000_000L,
                "warm-up far past its cap: " + wall[0] / 1e6 + " ms");
    }

    @Test
    void medianTimingPutsABarrierBeforeEveryTimedOperation() throws Exception {
        long[] wall = new long[1];
        List<String> events = warmUp(options(8, 8, 100, true), wall);
        List<String> rank0 = events.stream().filter(e -> e.startsWith("0 ")).toList();
        int timed = 0;
        for (int i = 1; i < rank0.size(); i++) {
            // Native 8-byte operations preceded by a barrier: the timed ones of --timing median.
            if (rank0.get(i).startsWith("0 allReduce 8 ") && rank0.get(i).endsWith("native")
                    && rank0.get(i - 1).equals("0 barrier")) {
                timed++;
            }
        }
        assertTrue(timed >= 8, "barrier-then-operation pairs in the warm-up: " + timed + " of " + rank0.size() + " events");
        // The measurement's other calls ran too: the times combined across ranks (heap double) and the checks (heap long).
        assertTrue(rank0.contains("0 allReduce 8 ip heap"), "heap all-reduces of the combination and the checks: "
                + rank0.subList(0, Math.min(12, rank0.size())));
    }

    @Test
    void compilationWatchSeesACompilationAndThenQuiet() throws Exception {
        Benchmark.CompilationWatch w = new Benchmark.CompilationWatch();
        long now = System.nanoTime();
        assertTrue(w.compiledWithin(now, 1_000_000_000L), "just created: counts as compiling for the window");
        assertTrue(!w.compiledWithin(now + 2_000_000_000L, 1_000_000_000L) || java.lang.management.ManagementFactory
                .getCompilationMXBean().getTotalCompilationTime() > 0, "quiet once the window has passed");
    }
}
