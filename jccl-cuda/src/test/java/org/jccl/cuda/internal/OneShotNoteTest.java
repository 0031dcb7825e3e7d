package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.internal.guard.OpGuard;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Without a GPU: the host side of the one-shot all-reduce's mismatch guard. A rank that runs a call
 * as a one-shot all-reduce publishes no record but a note; a peer whose call of the same number
 * exchanges records (another count above the one-shot size, another collective, other settings)
 * finds the note while it waits and fails with a MISMATCH naming both calls, within milliseconds
 * instead of at JCCL_CUDA_WAIT_TIMEOUT. Both exchanges: in one process (createAll) and the
 * shared-memory mailbox between processes (create(host)); the waits are given 60 s deadlines, so a
 * missed note shows as a slow failure, not a pass.
 */
class OneShotNoteTest {
    private static final long DEADLINE_NS = 60_000_000_000L;

    @TempDir
    Path dir;

    private static long allReduce(long count) {
        return OpGuard.collective("allReduce", count, DataType.FLOAT32, ReduceOp.SUM, -1);
    }

    private static void contains(String message, String... parts) {
        for (String p : parts) {
            assertTrue(message.contains(p), "missing \"" + p + "\" in: " + message);
        }
    }

    /** Rank 1 resolves its exchanged call #epoch of word {@code mine} while rank 0 has only its notes; returns the error and the seconds. */
    private static Object[] resolveAgainstNotes(InProcessExchange ex, long epoch, long mine) {
        ex.publishCollective(1, epoch, 0x1000, 0x2000, mine);
        long t0 = System.nanoTime();
        InvalidUsageException e = assertThrows(InvalidUsageException.class, () -> ex.resolveCollective(1, epoch));
        return new Object[] {e, (System.nanoTime() - t0) / 1e9};
    }

    @Test
    @Timeout(120)
    void aPeersOneShotNoteEndsTheWaitWithBothCalls() {
        InProcessExchange ex = new InProcessExchange(2, DEADLINE_NS);
        ex.noteOneShot(0, 1, allReduce(60_000));
        Object[] r = resolveAgainstNotes(ex, 1, allReduce(70_000));
        InvalidUsageException e = (InvalidUsageException) r[0];
        assertEquals(ErrorCode.MISMATCH, e.code());
        // the kind that makes the communicator release the peer's waiting one-shot kernel
        assertInstanceOf(Exchange.OneShotPeer.class, e);
        contains(e.getMessage(), "rank 1: GPU collective #1 failed: mismatched collective calls",
                "rank 0 called allReduce (60000 x float sum)", "but rank 1 called allReduce (70000 x float sum)", "count 60000 vs 70000",
                "one-shot all-reduce (JCCL_CUDA_ONESHOT_MAX)");
        assertTrue((double) r[1] < 10, "found after " + r[1] + " s: the note was not read while waiting");
    }

    @Test
    @Timeout(120)
    void theSameCallRunAsAOneShotOnlyThereNamesTheSettings() {
        InProcessExchange ex = new InProcessExchange(2, DEADLINE_NS);
        ex.noteOneShot(0, 1, allReduce(60_000));
        InvalidUsageException e = (InvalidUsageException) resolveAgainstNotes(ex, 1, allReduce(60_000))[0];
        contains(e.getMessage(), "both called allReduce (60000 x float sum)", "JCCL_CUDA_ONESHOT_MAX and JCCL_CUDA_ALLREDUCE alike");
    }

    @Test
    @Timeout(120)
    void aNoteOverwrittenByLaterOneShotsStillFailsTheCall() {
        InProcessExchange ex = new InProcessExchange(2, DEADLINE_NS);
        for (long e = 1; e <= 1 + InProcessExchange.NOTES; e++) {
            ex.noteOneShot(0, e, allReduce(e));
        }
        InvalidUsageException e = (InvalidUsageException) resolveAgainstNotes(ex, 1, allReduce(70_000))[0];
        contains(e.getMessage(), "rank 0 called an all-reduce of at most JCCL_CUDA_ONESHOT_MAX bytes", "70000 x float sum");
    }

    @Test
    @Timeout(120)
    void aRecordPublishedBeforeALaterNoteIsNoMismatch() throws Exception {
        InProcessExchange ex = new InProcessExchange(2, DEADLINE_NS);
        long w = allReduce(70_000);
        ex.publishCollective(1, 1, 0x1000, 0x2000, w);
        Thread peer = new Thread(() -> {
            try {
                Thread.sleep(300); // rank 1 waits (and checks the notes) meanwhile
            } catch (InterruptedException ignored) {
                return;
            }
            ex.publishCollective(0, 1, 0x3000, 0x4000, w); // its call #1 exchanges records,
            ex.noteOneShot(0, 2, allReduce(8)); // then #2 is a one-shot
        });
        peer.start();
        long[] peers = ex.resolveCollective(1, 1);
        peer.join();
        assertArrayEquals(new long[] {0x3000, 0x4000, 0x1000, 0x2000}, peers);
    }

    @Test
    @Timeout(120)
    void aWatcherEndsTheWait() {
        InProcessExchange ex = new InProcessExchange(2, DEADLINE_NS);
        JcclException failed = new InvalidUsageException(ErrorCode.MISMATCH, "this rank's one-shot kernel found a mismatch");
        ex.watch(1, () -> failed);
        ex.publishCollective(1, 1, 0x1000, 0x2000, allReduce(8));
        assertSame(failed, assertThrows(JcclException.class, () -> ex.resolveCollective(1, 1)));
    }

    @Test
    @Timeout(120)
    void withoutANoteTheWaitGoesOnToTheDeadline() {
        InProcessExchange ex = new InProcessExchange(2, 300_000_000L);
        ex.noteOneShot(0, 3, allReduce(8)); // a later operation than the one awaited: not yet reached
        ex.publishCollective(1, 4, 0x1000, 0x2000, allReduce(8));
        JcclException e = assertThrows(JcclException.class, () -> ex.resolveCollective(1, 4));
        assertEquals(ErrorCode.TIMEOUT, e.code(), e.getMessage());
    }

    // ---- the shared-memory mailbox (create(host): one process per GPU)

    private static <T> List<T> onRanks(int n, Body<T> body) throws Exception {
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

    interface Body<T> {
        T run(int rank, Communicator host) throws Exception;
    }

    @Test
    @Timeout(120)
    void theMailboxCarriesTheNotesBetweenProcesses() throws Exception {
        List<Object> got = onRanks(2, (rank, host) -> {
            try (ShmMailbox m = ShmMailbox.create(host, dir, 192, DEADLINE_NS)) {
                if (rank == 0) {
                    assertNull(m.noted(1, 1), "no note yet");
                    host.barrier();
                    host.barrier(); // rank 1 has noted #1 ... #3 and #12
                    assertArrayEquals(new long[] {2, allReduce(2)}, m.noted(1, 2));
                    assertArrayEquals(new long[] {3, allReduce(3)}, m.noted(1, 3));
                    assertArrayEquals(new long[] {4, 0}, m.noted(1, 4), "passed #4 without a record: a one-shot whose note is gone");
                    assertArrayEquals(new long[] {12, allReduce(12)}, m.noted(1, 12));
                    assertNull(m.noted(1, 13));
                    // rank 1 never publishes record #1: the note of operation 12 ends the wait for it at once
                    long t0 = System.nanoTime();
                    InvalidUsageException e = assertThrows(InvalidUsageException.class, () -> m.read(1, 1, () -> {
                        long[] note = m.noted(1, 12);
                        return note == null ? null : Exchange.oneShotPeer(0, 12, 1, note[1], allReduce(99));
                    }));
                    double s = (System.nanoTime() - t0) / 1e9;
                    assertTrue(s < 10, "the check ended the wait after " + s + " s");
                    return e;
                }
                host.barrier();
                for (long e : new long[] {1, 2, 3, 12}) {
                    m.note(e, allReduce(e));
                }
                host.barrier();
                return null;
            }
        });
        InvalidUsageException e = (InvalidUsageException) got.get(0);
        contains(e.getMessage(), "rank 1 called allReduce (12 x float sum)", "rank 0 called allReduce (99 x float sum)");
    }

    @Test
    @Timeout(120)
    void aMailboxCheckDoesNotFailAWaitWhoseRecordArrived() throws Exception {
        List<Object> got = onRanks(2, (rank, host) -> {
            try (ShmMailbox m = ShmMailbox.create(host, dir, 192, DEADLINE_NS)) {
                if (rank == 1) {
                    Thread.sleep(300);
                    m.publish(new byte[192]);
                    m.note(2, allReduce(8)); // its next call is a one-shot
                    return null;
                }
                // The check sees the note (published after the record), so the record must be there: no failure.
                return m.read(1, 1, () -> m.noted(1, 2) == null ? null : new IllegalStateException("must not be thrown"));
            }
        });
        assertInstanceOf(byte[].class, got.get(0));
    }
}
