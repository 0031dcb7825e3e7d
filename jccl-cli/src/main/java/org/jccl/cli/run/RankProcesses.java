package org.jccl.cli.run;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The processes of one local job's ranks, by rank: which are still running, and stopping ranks
 * with everything they started (SIGTERM, then SIGKILL after {@link #GRACE}).
 */
final class RankProcesses {

    /** How long stopped ranks get to run their shutdown hooks before they are killed. */
    static final Duration GRACE = Duration.ofSeconds(3);

    private final int np;
    /** Written by the launching thread, read by the shutdown hook too. */
    private final AtomicReferenceArray<Process> procs;

    RankProcesses(int np) {
        this.np = np;
        this.procs = new AtomicReferenceArray<>(np);
    }

    void set(int rank, Process p) {
        procs.set(rank, p);
    }

    Process get(int rank) {
        return procs.get(rank);
    }

    /** The ranks whose process is still running. */
    List<Integer> live() {
        List<Integer> live = new ArrayList<>();
        for (int r = 0; r < np; r++) {
            Process p = procs.get(r);
            if (p != null && p.isAlive()) {
                live.add(r);
            }
        }
        return live;
    }

    /**
     * Stops the given ranks and everything they started: SIGTERM first, so JVM ranks run their shutdown
     * hooks, then SIGKILL after {@link #GRACE}. Descendants are collected before the first signal
     * because once a parent (say {@code sh -c}) is gone its children are re-parented and out of reach.
     */
    void stop(List<Integer> ranks) {
        List<ProcessHandle> all = new ArrayList<>();
        for (int r : ranks) {
            ProcessHandle h = procs.get(r).toHandle();
            all.add(h);
            h.descendants().forEach(all::add);
        }
        if (all.isEmpty()) {
            return;
        }
        all.forEach(ProcessHandle::destroy);
        CompletableFuture<?> gone = CompletableFuture.allOf(all.stream().map(ProcessHandle::onExit).toArray(CompletableFuture[]::new));
        try {
            gone.get(GRACE.toMillis(), TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
            // Past the grace period: kill what is left, including children started meanwhile.
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        List<ProcessHandle> left = new ArrayList<>();
        for (ProcessHandle h : all) {
            if (h.isAlive()) {
                h.descendants().forEach(left::add);
                left.add(h);
            }
        }
        left.forEach(ProcessHandle::destroyForcibly);
        for (ProcessHandle h : left) {
            try {
                h.onExit().get(GRACE.toMillis(), TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
                // SIGKILL cannot be refused; a process in uninterruptible sleep goes when the kernel lets it.
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
