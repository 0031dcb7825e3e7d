package org.jccl.internal.runtime;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
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
 * Prints one {@code new Model(...)} line per transport, to paste into {@link Tuner}.
 */
public final class TunerCalibration {
    private static final long SMALL = 8;
    private static final long MID = 1 << 20;
    private static final long BIG = 16 << 20;

    public static void main(String[] args) {
        double[] gc = gammaAndCopy();
        for (String tr : args.length > 0 ? args : new String[] {"LOCAL", "SHM", "TCP"}) {
            Config cfg = switch (tr) {
                case "TCP" -> Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1");
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

    /**
     * The least of three medians: on a shared machine other processes only ever add time (a rank
     * whose peer lost its core waits out the 200 us spin phase), so the least is the transport's.
     */
    static double best(Config cfg, long bytes, int iters) {
        double b = Double.MAX_VALUE;
        for (int i = 0; i < 3; i++) {
            b = Math.min(b, halfRoundTrip(cfg, bytes, iters));
        }
        return b;
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
