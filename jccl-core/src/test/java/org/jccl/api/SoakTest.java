package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Soak: many small all-reduces on 4 ranks (threads of this JVM) with open file descriptors, live
 * threads and the heap after GC flat: measured after a warm-up and again at the end, each within a
 * fixed bound (fds and threads: not one more; heap: at most 16 MiB more, where a per-operation leak
 * of even 200 bytes over 100,000 operations would show). CI runs 20,000 iterations over SHM and 5,000 over TCP;
 * {@code -Djccl.soak.iterations=100000} runs the count (docs/PERFORMANCE.md has a recorded run).
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class SoakTest {

    /** Iterations after the warm-up; CI: 20,000 over SHM, 5,000 over TCP (4 ranks on 2 loaded cores: about 2 ms each). */
    static int iterations(String transport) {
        return Integer.getInteger("jccl.soak.iterations", transport.equals("TCP") ? 5_000 : 20_000);
    }
    static final int WARMUP = 2_000;
    static final long HEAP_SLACK = 16L << 20;

    record Sample(int fds, int threads, long heap) {
        @Override
        public String toString() {
            return fds + " fds, " + threads + " threads, " + (heap >> 10) + " KiB heap";
        }
    }

    static Sample sample() throws Exception {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(20);
        }
        long heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
        return new Sample(AbortReleasesResourcesTest.openFds(), Thread.activeCount(), heap);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"TCP", "SHM"})
    void smallAllReducesKeepFdsThreadsAndHeapFlat(String transport) throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(System.getProperty("jccl.soak.transports", transport).contains(transport),
                "-Djccl.soak.transports leaves " + transport + " out");
        int iterations = iterations(transport);
        List<Communicator> cs = Jccl.initLocal(4, AbortReleasesResourcesTest.config(transport));
        try {
            Sample[] before = new Sample[1];
            java.util.concurrent.CyclicBarrier gate = new java.util.concurrent.CyclicBarrier(4, () -> {
                try {
                    before[0] = sample();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            long t0 = System.nanoTime();
            Ranks.run(cs, Duration.ofSeconds(540), c -> {
                int r = c.rank();
                int[] x = new int[2];
                for (int i = 0; i < WARMUP + iterations; i++) {
                    if (i == WARMUP) {
                        gate.await(60, TimeUnit.SECONDS); // every rank idle while the baseline is taken
                    }
                    x[0] = r;
                    x[1] = i;
                    c.allReduce(Buffer.of(x), ReduceOp.SUM);
                    if (x[0] != 6 || x[1] != 4 * i) {
                        assertEquals(6, x[0], "iteration " + i);
                        assertEquals(4 * i, x[1], "iteration " + i);
                    }
                }
            });
            double secs = (System.nanoTime() - t0) / 1e9;
            Sample after = sample();
            System.out.printf("soak %s: %d all-reduces of 8 B on 4 ranks in %.1f s; before %s, after %s%n", transport,
                    WARMUP + iterations, secs, before[0], after);
            assertTrue(after.fds() <= before[0].fds(), transport + ": open fds grew: before " + before[0] + ", after " + after);
            assertTrue(after.threads() <= before[0].threads(), transport + ": threads grew: before " + before[0] + ", after " + after);
            assertTrue(after.heap() <= before[0].heap() + HEAP_SLACK, transport + ": heap after GC grew by more than "
                    + (HEAP_SLACK >> 20) + " MiB: before " + before[0] + ", after " + after);
            cs.forEach(Communicator::close);
        } finally {
            cs.forEach(Communicator::abort);
        }
    }
}
