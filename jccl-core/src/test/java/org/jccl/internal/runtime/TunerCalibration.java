package org.jccl.internal.runtime;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.testing.Ranks;

/**
 * Measures the {@link Tuner}'s constants on this machine; not a test (a main program, test scope).
 * For LOCAL (two ranks of one JVM), SHM (the same with {@code JCCL_LOCAL_DISABLE=1}: the /dev/shm rings) and TCP
 * (with {@code JCCL_SHM_DISABLE=1} too, loopback); the arguments, when given, name the transports to measure:
 * ping-pong inside one operation (OpContext send/recv/await on the operation threads), median half round trip of 8 B (alpha) and of 1 MiB and 16 MiB
 * (beta: the slope between them), each the least of three medians. gamma: median time per byte of a float32 SUM of 16 MiB into
 * 16 MiB ({@code Reductions.reduce}); copy: the same for {@code MemorySegment.copy}.
 * <pre>
 * ./mvnw -q -B -o -pl jccl-core test-compile
 * java -cp jccl-core/target/classes:jccl-core/target/test-classes org.jccl.internal.runtime.TunerCalibration
 * </pre>
 * Prints one {@code new Model(...)} line per transport, to paste into {@link Tuner}. {@code UCX-TCP}: the same over
 * jccl-ucx's transport with UCX's tcp alone (add {@code jccl-ucx/target/classes} to the class path and
 * {@code --enable-native-access=ALL-UNNAMED}), for {@code UcxTransport.costs()}.
 *
 * <p>{@code SHM-STEP} (an argument of its own): the SHM constants as the tuner uses them, from
 * real point-to-point algorithms rather than a ping-pong. Two ranks over the SHM rings (no shared
 * collective segment), each all-reduce timed alone after a barrier through the blocking API (the
 * anchors' method, what a program pays), median of many, the least of three medians: recursive
 * doubling (one exchange at two ranks) and ring (a reduce-scatter step and an all-gather step) at
 * 8 B; alpha is the cost of one exchange step of a real algorithm, recursive doubling's 8-byte
 * operation (the model has no per-operation term, so a step carries the call, as
 * {@link Tuner#SHARED}'s alpha is a whole one-step operation; the ring's second step, costing less,
 * is printed too); beta from the ring's slope
 * between 1 MiB and 16 MiB, whose model is {@code 2 alpha + m beta + m gamma / 2} at two ranks. The
 * shared segment's one-step 8-byte all-reduce is timed the same way, to check {@link Tuner#SHARED}'s alpha.
 * <pre>
 * java --add-modules jdk.incubator.vector -cp jccl-core/target/classes:jccl-core/target/test-classes \
 *     org.jccl.internal.runtime.TunerCalibration SHM-STEP
 * </pre>
 */
public final class TunerCalibration {
    private static final long SMALL = 8;
    private static final long MID = 1 << 20;
    private static final long BIG = 16 << 20;

    public static void main(String[] args) {
        double[] gc = gammaAndCopy();
        for (String tr : args.length > 0 ? args : new String[] {"LOCAL", "SHM", "TCP"}) {
            if (tr.equals("SHM-STEP")) {
                shmSteps(gc);
                continue;
            }
            Config cfg = switch (tr) {
                case "TCP" -> Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1");
                // jccl-ucx on the class path (jccl-ucx/target/classes): UCX over its tcp between the two ranks
                case "UCX-TCP" -> Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_NET", "UCX")
                        .with("JCCL_UCX_SAME_HOST", "1").with("JCCL_UCX_TLS", "tcp");
                case "SHM" -> Config.defaults().with("JCCL_LOCAL_DISABLE", "1"); // same host: the shared-memory rings
                default -> Config.defaults();
            };
            double a = best(cfg, SMALL, 4000);
            double m = best(cfg, MID, 200);
            double b = best(cfg, BIG, 30);
            double beta = (b - m) / (BIG - MID);
            double alpha = a;
            System.out.printf(Locale.ROOT, "%s: half round trip 8 B %.2f us, 1 MiB %.1f us, 16 MiB %.1f us%n", tr, a * 1e6, m * 1e6,
                    b * 1e6);
            System.out.printf(Locale.ROOT, "    static final Model %s = new Model(\"%s\", %.3g, %.3g, %.3g, %.3g);%n", tr, tr, alpha, beta,
                    gc[0], gc[1]);
        }
    }

    /** The SHM model from one step of real algorithms (see the class comment). */
    static void shmSteps(double[] gc) {
        Config rings = Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_COLL_BUFFER", "0");
        double rd = bestOp(rings.with("JCCL_ALGO", "allreduce:rd"), SMALL, 4000);
        double ring = bestOp(rings.with("JCCL_ALGO", "allreduce:ring"), SMALL, 4000);
        double ringMid = bestOp(rings.with("JCCL_ALGO", "allreduce:ring"), MID, 200);
        double ringBig = bestOp(rings.with("JCCL_ALGO", "allreduce:ring"), BIG, 30);
        double shared = bestOp(Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_ALGO", "allreduce:shared"), SMALL, 4000);
        double alpha = rd;
        double slope = (ringBig - ringMid) / (BIG - MID);
        double beta = Math.max(0, slope - gc[0] / 2);
        System.out.printf(Locale.ROOT, "SHM-STEP: all-reduce 8 B: rd (1 step) %.2f us, ring (2 steps) %.2f us, shared segment (1 step) %.2f us;"
                + " ring 1 MiB %.1f us, 16 MiB %.1f us%n", rd * 1e6, ring * 1e6, shared * 1e6, ringMid * 1e6, ringBig * 1e6);
        System.out.printf(Locale.ROOT, "    alpha = rd = %.2f us per step (the ring's second step: %.2f us); beta = ring slope %.3g - gamma/2"
                + " = %.3g s/B (%.1f GB/s)%n", alpha * 1e6, (ring - rd) * 1e6, slope, beta, beta > 0 ? 1e-9 / beta : 0);
        System.out.printf(Locale.ROOT, "    static final Model SHM = new Model(\"SHM\", %.3g, %.3g, %.3g, %.3g);%n", alpha, beta, gc[0], gc[1]);
    }

    /** The least of three medians of {@link #blockingAllReduce}. */
    static double bestOp(Config cfg, long bytes, int iters) {
        return leastOfThree(() -> blockingAllReduce(cfg, bytes, iters));
    }

    /**
     * The least of three runs of a median: on a shared machine other processes only ever add time (a
     * rank whose peer lost its core waits out the 200 us spin phase), so the least is the transport's.
     */
    static double leastOfThree(java.util.function.DoubleSupplier median) {
        double b = Double.MAX_VALUE;
        for (int i = 0; i < 3; i++) {
            b = Math.min(b, median.getAsDouble());
        }
        return b;
    }

    /**
     * Median over {@code iters} (after warm-up) of a blocking float32 SUM all-reduce of {@code bytes}
     * at two ranks, in place, each timed alone on rank 0 after a barrier, in seconds.
     */
    static double blockingAllReduce(Config cfg, long bytes, int iters) {
        List<Communicator> cs = Jccl.initLocal(2, cfg);
        double[] t = new double[iters];
        try (Arena arena = Arena.ofShared()) {
            MemorySegment[] buf = {arena.allocate(bytes, 64), arena.allocate(bytes, 64)};
            Ranks.run(cs, Duration.ofMinutes(5), c -> {
                Buffer b = Buffer.of(buf[c.rank()], bytes / 4, DataType.FLOAT32);
                int warm = Math.max(5, iters / 10);
                for (int i = -warm; i < iters; i++) {
                    c.barrier();
                    long t0 = System.nanoTime();
                    c.allReduce(b, b, ReduceOp.SUM);
                    if (i >= 0 && c.rank() == 0) {
                        t[i] = (System.nanoTime() - t0) / 1e9;
                    }
                }
            });
        } finally {
            cs.forEach(Communicator::close);
        }
        Arrays.sort(t);
        return t[iters / 2];
    }

    /** The least of three medians of {@link #halfRoundTrip}. */
    static double best(Config cfg, long bytes, int iters) {
        return leastOfThree(() -> halfRoundTrip(cfg, bytes, iters));
    }

    /**
     * Median over {@code iters} round trips (after warm-up) of half a round trip of {@code bytes}, in
     * seconds, timed inside one operation on each rank's operation thread (what an algorithm's
     * message costs, without the per-call submission).
     */
    static double halfRoundTrip(Config cfg, long bytes, int iters) {
        List<Communicator> cs = Jccl.initLocal(2, cfg);
        double[] t = new double[iters];
        try (Arena arena = Arena.ofShared()) {
            MemorySegment[] buf = {arena.allocate(bytes, 64), arena.allocate(bytes, 64)};
            Ranks.run(cs, Duration.ofMinutes(5), c -> ((CommunicatorImpl) c).submitRaw("pingpong", x -> {
                MemorySegment b = buf[x.rank()];
                int warm = Math.max(5, iters / 10);
                for (int i = -warm; i < iters; i++) {
                    long t0 = System.nanoTime();
                    if (x.rank() == 0) {
                        x.await(x.send(1, b));
                        x.await(x.recv(1, b));
                        if (i >= 0) {
                            t[i] = (System.nanoTime() - t0) / 2e9;
                        }
                    } else {
                        x.await(x.recv(0, b));
                        x.await(x.send(0, b));
                    }
                }
            }).join());
        } finally {
            cs.forEach(Communicator::close);
        }
        Arrays.sort(t);
        return t[iters / 2];
    }

    /** {gamma, copy} in seconds per byte, out of cache (16 MiB vectors). */
    static double[] gammaAndCopy() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment x = arena.allocate(BIG, 64);
            MemorySegment y = arena.allocate(BIG, 64);
            x.fill((byte) 1);
            y.fill((byte) 2);
            long count = BIG / 4;
            double[] r = new double[40];
            double[] c = new double[40];
            double[] best = {Double.MAX_VALUE, Double.MAX_VALUE};
            for (int k = 0; k < 4; k++) { // the first round warms up the JIT; the least median of the rest
                for (int i = 0; i < r.length; i++) {
                    long t0 = System.nanoTime();
                    Reductions.reduce(x, y, count, DataType.FLOAT32, ReduceOp.SUM);
                    long t1 = System.nanoTime();
                    MemorySegment.copy(y, 0, x, 0, BIG);
                    long t2 = System.nanoTime();
                    r[i] = (t1 - t0) / 1e9 / BIG;
                    c[i] = (t2 - t1) / 1e9 / BIG;
                }
                Arrays.sort(r);
                Arrays.sort(c);
                if (k > 0) {
                    best[0] = Math.min(best[0], r[r.length / 2]);
                    best[1] = Math.min(best[1], c[c.length / 2]);
                }
            }
            return best;
        }
    }
}
