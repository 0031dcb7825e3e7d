package org.jccl.cli.perf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Locale;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.Jccl;
import org.jccl.Work;

/**
 * Point-to-point through jccl's public API in the two shapes of {@code ucx_perftest}, so that a
 * transport's figures can be set beside the library's own: {@code lat} is tag_lat's ping-pong (rank 0
 * sends, rank 1 receives and sends back; half the round trip, p50 and mean), {@code bw} is tag_bw's
 * one-way stream (rank 0 keeps up to {@code window} sends in flight, rank 1 as many receives; MiB/s as
 * perftest prints "MB/s"). jccl's {@code perf sendrecv} is neither: there both ranks send at once.
 *
 * <p>Run under a launcher with exactly two ranks, e.g. {@code jccl run -np 2 --
 * org.jccl.cli.perf.P2pProbe lat 8 20000}; rank 0 prints one line. Both ranks first run the same shape
 * for {@code WARMUP_NANOS} (the JIT compiles the path being timed), then the timed iterations.
 *
 * <p>Usage: {@code P2pProbe lat|bw|xchg SIZE ITERS [WINDOW]} (SIZE in bytes, K/M suffixes allowed; WINDOW
 * for bw, default 32, perftest's). {@code xchg}: both ranks send and receive at once, each exchange timed (p50, mean).
 */
public final class P2pProbe {

    /** Untimed iterations run for at least this long first. */
    private static final long WARMUP_NANOS = 1_500_000_000L;

    private P2pProbe() {
    }

    public static void main(String[] args) {
        if (args.length < 3 || !(args[0].equals("lat") || args[0].equals("bw") || args[0].equals("xchg"))) {
            System.err.println("usage: P2pProbe lat|bw|xchg SIZE ITERS [WINDOW]   (under jccl run -np 2)");
            System.exit(2);
        }
        long size = Math.max(1, SizeSweep.parseSize(args[1], "SIZE"));
        int iters = Integer.parseInt(args[2]);
        int window = args.length > 3 ? Integer.parseInt(args[3]) : 32;
        try (Communicator c = Jccl.init(Config.fromEnvironment()); Arena arena = Arena.ofShared()) {
            if (c.size() != 2) {
                throw new IllegalArgumentException("P2pProbe needs exactly 2 ranks, this job has " + c.size());
            }
            Buffer send = Buffer.of(arena.allocate(size, 64), DataType.UINT8);
            Buffer recv = Buffer.of(arena.allocate(size, 64), DataType.UINT8);
            String line;
            if (args[0].equals("xchg")) {
                exchange(c, send, recv, 0, true);
                c.barrier();
                line = p50AndMean("xchg", size, exchange(c, send, recv, iters, false), 1, "both ranks send and receive at once");
            } else if (args[0].equals("lat")) {
                pingPong(c, send, recv, 0, true);
                c.barrier();
                line = p50AndMean("lat", size, pingPong(c, send, recv, iters, false), 2, "half the round trip");
            } else {
                stream(c, send, recv, 0, window, true);
                c.barrier();
                long nanos = stream(c, send, recv, iters, window, false);
                line = String.format(Locale.ROOT, "bw %d B: iterations %d, window %d, %.3f us per message, %.2f MB/s (MiB/s, as perftest)",
                        size, iters, window, nanos / 1e3 / iters, (double) size * iters / (nanos / 1e9) / (1 << 20));
            }
            if (c.rank() == 0) {
                System.out.println(line);
            }
        }
    }

    /** "lat 8 B: iterations N, p50 .. us, avg .. us (note)": the median and mean of {@code nanos}, each divided by {@code per}. */
    private static String p50AndMean(String shape, long size, long[] nanos, int per, String note) {
        long[] t = nanos.clone();
        Arrays.sort(t);
        double sum = 0;
        for (long x : t) {
            sum += x;
        }
        return String.format(Locale.ROOT, "%s %d B: iterations %d, p50 %.3f us, avg %.3f us (%s)", shape, size, t.length,
                t[t.length / 2] / (per * 1e3), sum / t.length / (per * 1e3), note);
    }

    /** Ping-pong: {@code iters} round trips timed one by one on rank 0, or (warm-up) as many as fit the warm-up time. */
    private static long[] pingPong(Communicator c, Buffer send, Buffer recv, int iters, boolean warmup) {
        long[] rtt = new long[warmup ? 0 : iters];
        long end = System.nanoTime() + WARMUP_NANOS;
        long[] more = {1};
        for (int i = 0; warmup ? more[0] != 0 : i < iters; i++) {
            long t0 = System.nanoTime();
            if (c.rank() == 0) {
                c.send(send, 1);
                c.recv(recv, 1);
            } else {
                c.recv(recv, 0);
                c.send(send, 0);
            }
            if (!warmup) {
                rtt[i] = System.nanoTime() - t0;
            } else if ((i & 1023) == 1023) {
                more[0] = System.nanoTime() - end < 0 ? 1 : 0;
                c.broadcast(more, 0); // every rank stops after the same iteration
            }
        }
        return rtt;
    }

    /**
     * Exchange: both ranks send to each other and receive at once ({@code sendAsync}, {@code recv}, join), back to back,
     * each timed on rank 0; or (warm-up) as many as fit the warm-up time. nccl-tests' sendrecv at two ranks, one by one.
     */
    private static long[] exchange(Communicator c, Buffer send, Buffer recv, int iters, boolean warmup) {
        long[] t = new long[warmup ? 0 : iters];
        long end = System.nanoTime() + WARMUP_NANOS;
        long[] more = {1};
        int peer = 1 - c.rank();
        for (int i = 0; warmup ? more[0] != 0 : i < iters; i++) {
            long t0 = System.nanoTime();
            Work s = c.sendAsync(send, peer);
            c.recv(recv, peer);
            s.join();
            if (!warmup) {
                t[i] = System.nanoTime() - t0;
            } else if ((i & 1023) == 1023) {
                more[0] = System.nanoTime() - end < 0 ? 1 : 0;
                c.broadcast(more, 0);
            }
        }
        return t;
    }

    /** One-way stream: rank 0 sends, rank 1 receives, up to {@code window} in flight each; returns rank 0's elapsed nanos. */
    private static long stream(Communicator c, Buffer send, Buffer recv, int iters, int window, boolean warmup) {
        long t0 = System.nanoTime();
        long end = t0 + WARMUP_NANOS;
        ArrayDeque<Work> inFlight = new ArrayDeque<>();
        long[] more = {1};
        for (int i = 0; warmup ? more[0] != 0 : i < iters; i++) {
            if (inFlight.size() >= window) {
                inFlight.removeFirst().join();
            }
            inFlight.addLast(c.rank() == 0 ? c.sendAsync(send, 1) : c.recvAsync(recv, 0));
            if (warmup && (i & 255) == 255) {
                while (!inFlight.isEmpty()) {
                    inFlight.removeFirst().join();
                }
                more[0] = System.nanoTime() - end < 0 ? 1 : 0;
                c.broadcast(more, 0);
            }
        }
        while (!inFlight.isEmpty()) {
            inFlight.removeFirst().join();
        }
        // A send may complete once its bytes are buffered: the receiver's one-byte reply after its last receive
        // stops the sender's clock, so the time covers delivery (one small message more in all).
        byte[] ack = {1};
        if (c.rank() == 0) {
            c.recv(Buffer.of(ack), 1);
        } else {
            c.send(Buffer.of(ack), 0);
        }
        long elapsed = System.nanoTime() - t0;
        long[] done = {elapsed};
        c.broadcast(done, 0);
        return done[0];
    }
}
