package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Communicator;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared-memory mailbox of the GPU exchange between processes, without a GPU: ranks are
 * threads with host communicators of their own, the files real shared mappings in a directory.
 */
class ShmMailboxTest {
    private static final int RECORD = 168;

    @TempDir
    Path dir;

    /** Runs {@code body(rank, host)} on one thread per rank and returns the results in rank order. */
    private static <T> List<T> onRanks(int n, RankBody<T> body) throws Exception {
        List<Communicator> hosts = Jccl.initLocal(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Future<T>> fs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                fs.add(pool.submit((Callable<T>) () -> body.run(rank, hosts.get(rank))));
            }
            List<T> out = new ArrayList<>();
            for (Future<T> f : fs) {
                out.add(f.get(60, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            pool.shutdownNow();
            for (Communicator c : hosts) {
                c.close();
            }
        }
    }

    interface RankBody<T> {
        T run(int rank, Communicator host) throws Exception;
    }

    private static byte[] record(int rank, long seq) {
        byte[] r = new byte[RECORD];
        for (int i = 0; i < RECORD; i++) {
            r[i] = (byte) (rank * 31 + seq * 7 + i);
        }
        return r;
    }

    @Test
    @Timeout(120)
    void recordsArriveInOrderWhileTheSlotsRotateAndTheFilesAreUnlinked() throws Exception {
        int n = 3;
        long ops = 3L * ShmMailbox.SLOTS + 17; // every slot rewritten three times
        List<Long> done = onRanks(n, (rank, host) -> {
            try (ShmMailbox m = ShmMailbox.create(host, dir, RECORD, 60_000_000_000L)) {
                for (long seq = 1; seq <= ops; seq++) {
                    // groups of up to 5 records published before they are read, as a group of collectives does
                    if ((seq - 1) % 5 == 0) {
                        for (long k = seq; k < Math.min(seq + 5, ops + 1); k++) {
                            assertEquals(k, m.publish(record(rank, k)));
                        }
                    }
                    for (int q = 0; q < n; q++) {
                        if (q != rank) {
                            assertArrayEquals(record(q, seq), m.read(q, seq), "rank " + rank + " reading rank " + q + "'s #" + seq);
                        }
                    }
                    m.consumed(seq);
                    if (ThreadLocalRandom.current().nextInt(200) == 0) {
                        Thread.sleep(1); // skew between the ranks
                    }
                }
                return ops;
            }
        });
        try (Stream<Path> s = Files.list(dir)) {
            assertEquals(List.of(), s.toList(), "the mailbox files must be unlinked once every rank has mapped them");
        }
        assertEquals(List.of(ops, ops, ops), done);
    }

    @Test
    @Timeout(60)
    void aGroupLargerThanTheRingIsRefusedInsteadOfDeadlocking() throws Exception {
        List<Throwable> errors = onRanks(2, (rank, host) -> {
            try (ShmMailbox m = ShmMailbox.create(host, dir, RECORD, 60_000_000_000L)) {
                for (long seq = 1; seq <= ShmMailbox.SLOTS; seq++) {
                    m.publish(record(rank, seq));
                }
                return assertThrows(InvalidUsageException.class, () -> m.publish(record(rank, ShmMailbox.SLOTS + 1)));
            }
        });
        for (Throwable t : errors) {
            assertTrue(t.getMessage().contains("more than " + ShmMailbox.SLOTS + " GPU collectives in one group"), t.getMessage());
        }
    }

    @Test
    @Timeout(60)
    void aPeerThatNeverPublishesEndsTheWaitAtTheDeadlineNamingIt() throws Exception {
        List<JcclException> errors = onRanks(2, (rank, host) -> {
            try (ShmMailbox m = ShmMailbox.create(host, dir, RECORD, 300_000_000L)) {
                if (rank == 1) {
                    return null; // never publishes
                }
                long t0 = System.nanoTime();
                JcclException e = assertThrows(JcclException.class, () -> m.read(1, 1));
                double s = (System.nanoTime() - t0) / 1e9;
                assertTrue(s >= 0.25 && s < 10, "gave up after " + s + " s, deadline 0.3 s");
                return e;
            }
        });
        JcclException e = errors.get(0);
        assertEquals(ErrorCode.TIMEOUT, e.code());
        assertTrue(e.getMessage().contains("for rank 1") && e.getMessage().contains("JCCL_CUDA_WAIT_TIMEOUT"), e.getMessage());
    }

    @Test
    @Timeout(60)
    void abortEndsAWaitAtOnce() throws Exception {
        List<JcclException> errors = onRanks(2, (rank, host) -> {
            try (ShmMailbox m = ShmMailbox.create(host, dir, RECORD, 60_000_000_000L)) {
                if (rank == 1) {
                    return null;
                }
                Thread aborter = new Thread(() -> {
                    try {
                        Thread.sleep(300);
                    } catch (InterruptedException ignored) {
                        // abort now
                    }
                    m.abort();
                });
                aborter.start();
                long t0 = System.nanoTime();
                JcclException e = assertThrows(JcclException.class, () -> m.read(1, 1));
                assertTrue((System.nanoTime() - t0) / 1e9 < 10, "abort did not end the wait promptly");
                aborter.join();
                return e;
            }
        });
        assertEquals(ErrorCode.ABORTED, errors.get(0).code());
    }

    @Test
    @Timeout(60)
    void aMissingDirectoryFailsOnEveryRankSoAllFallBackTogether() throws Exception {
        Path missing = dir.resolve("does-not-exist");
        List<String> messages = onRanks(2, (rank, host) -> {
            IOException e = assertThrows(IOException.class, () -> ShmMailbox.create(host, missing, RECORD, 1_000_000_000L));
            return e.getMessage();
        });
        for (String m : messages) {
            assertTrue(m.contains("could not create its file"), m);
        }
    }
}
