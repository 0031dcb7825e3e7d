package org.jccl.testing;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jccl.Communicator;

/**
 * Runs one body per rank, each on its own thread (Gloo's test style): collects every rank's
 * failure, and on a timeout aborts the communicators and reports the stacks of the stuck threads
 * instead of hanging.
 */
public final class Ranks {
    private Ranks() {
    }

    /** What one rank does. */
    @FunctionalInterface
    public interface Body {
        void run(Communicator comm) throws Exception;
    }

    public static void run(List<Communicator> comms, Duration timeout, Body body) {
        int n = comms.size();
        ExecutorService pool = Executors.newFixedThreadPool(n, r -> {
            Thread t = new Thread(r, "rank-worker");
            t.setDaemon(true);
            return t;
        });
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (Communicator c : comms) {
                futures.add(pool.submit(() -> {
                    Thread.currentThread().setName("rank-" + c.rank());
                    body.run(c);
                    return null;
                }));
            }
            long deadline = System.nanoTime() + timeout.toNanos();
            AssertionError failure = null;
            for (int r = 0; r < n; r++) {
                try {
                    futures.get(r).get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    String stacks = dumpStacks();
                    comms.forEach(Communicator::abort);
                    AssertionError ae = new AssertionError("rank " + r + " did not finish within " + timeout + "; stacks:\n" + stacks);
                    if (failure != null) {
                        ae.addSuppressed(failure);
                    }
                    throw ae;
                } catch (ExecutionException e) {
                    AssertionError ae = new AssertionError("rank " + r + " failed: " + e.getCause(), e.getCause());
                    if (failure == null) {
                        failure = ae;
                    } else {
                        failure.addSuppressed(ae);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError("interrupted", e);
                }
            }
            if (failure != null) {
                throw failure;
            }
        } finally {
            pool.shutdownNow();
        }
    }

    private static String dumpStacks() {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            String name = e.getKey().getName();
            if (name.startsWith("rank-") || name.startsWith("jccl")) {
                sb.append("  ").append(name).append(" ").append(e.getKey().getState()).append('\n');
                StackTraceElement[] st = e.getValue();
                for (int i = 0; i < Math.min(st.length, 12); i++) {
                    sb.append("      at ").append(st[i]).append('\n');
                }
            }
        }
        return sb.toString();
    }
}
