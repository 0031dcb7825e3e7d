package org.jccl.cuda.internal;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HexFormat;
import java.util.concurrent.locks.LockSupport;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;

/**
 * Fixed-size records of every GPU collective between the processes of one host, through shared
 * memory instead of a host-communicator all-gather per operation: each rank writes its records,
 * in order, into a ring of {@link #SLOTS} slots in a file of its own, and reads the peers' records
 * straight out of their files. A rank waits only for the records it needs (the peers' record of
 * the same operation), never for a round of messages, so the host side of an operation costs a
 * few cache-line transfers instead of an all-gather of the host communicator.
 *
 * <p>Layout of each rank's file ({@code JCCL_SHM_DIR}, unlinked once every rank has mapped it):
 * a 256-byte header (word 0: the highest sequence number up to which this rank has read every
 * peer's record; word 8: its pid; bytes 128-255: {@link #NOTES} notes of operations this rank ran
 * without a record, the one-shot all-reduces: epoch, guard word), then the slots, each a sequence
 * word followed by the record.
 * The writer of slot {@code s % SLOTS} stores the record, then the sequence number {@code s} with
 * a release store; a reader waits for an acquire load of that word to show {@code s}. A slot is
 * rewritten (sequence {@code s + SLOTS}) only after every peer has read sequence {@code s}. Each
 * word has one writer.
 *
 * <p>Waits spin, then yield, then park in steps of at most 50 us; they end with an error on
 * {@link #abort}, when the peer's process is gone (checked every 50 ms), and after the deadline
 * ({@code JCCL_CUDA_WAIT_TIMEOUT}).
 */
final class ShmMailbox implements AutoCloseable {
    /** Records a rank may run ahead of the slowest reader; also the most collectives one group may hold. */
    static final int SLOTS = 1024;
    private static final int HEADER = 256;
    private static final long CONSUMED = 0;
    private static final long PID = 8;
    /** Notes of the one-shot all-reduces (Exchange#noteOneShot): [epoch % NOTES] -> epoch, guard word. */
    static final int NOTES = 8;
    private static final long NOTE = 128;
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final int PATH_BYTES = 256;

    private final int rank;
    private final int n;
    private final int recordBytes;
    private final long slotBytes;
    private final long timeoutNs;
    private final Arena arena;
    /** Every rank's file, mapped here (this rank's own at {@code rank}). */
    private final MemorySegment[] files;
    private final long[] pids;
    private long published;
    private long consumed;
    private volatile boolean aborted;

    private ShmMailbox(int rank, int n, int recordBytes, long timeoutNs, Arena arena, MemorySegment[] files, long[] pids) {
        this.rank = rank;
        this.n = n;
        this.recordBytes = recordBytes;
        this.slotBytes = slotBytes(recordBytes);
        this.timeoutNs = timeoutNs;
        this.arena = arena;
        this.files = files;
        this.pids = pids;
    }

    static long slotBytes(int recordBytes) {
        return (8 + recordBytes + 63) / 64 * 64;
    }

    static long fileBytes(int recordBytes) {
        return HEADER + SLOTS * slotBytes(recordBytes);
    }

    /**
     * Collective over {@code host} (every rank on this host): creates this rank's file in {@code dir},
     * maps every rank's, and unlinks its own once all have mapped theirs.
     *
     * @throws IOException when this rank's file cannot be created or a peer's mapped (the caller falls back)
     */
    static ShmMailbox create(Communicator host, Path dir, int recordBytes, long timeoutNs) throws IOException {
        int n = host.size();
        int rank = host.rank();
        long bytes = fileBytes(recordBytes);
        byte[] token = new byte[8];
        new java.security.SecureRandom().nextBytes(token);
        Path own = dir.resolve("jccl-gpu-mailbox-" + HexFormat.of().formatHex(token) + "-" + rank);
        boolean ok = true;
        String why = "";
        try {
            org.jccl.internal.transport.shm.ShmReservation.createReserved(own, bytes);
        } catch (IOException e) {
            ok = false;
            why = own + ": " + e.getMessage();
        }
        // Everyone learns whether every rank has its file, so all take the same path.
        byte[] me = new byte[PATH_BYTES + 16];
        ByteBuffer b = ByteBuffer.wrap(me).order(ByteOrder.LITTLE_ENDIAN);
        byte[] p = own.toString().getBytes(StandardCharsets.UTF_8);
        if (p.length > PATH_BYTES) {
            Files.deleteIfExists(own);
            ok = false;
            why = "the path " + own + " is longer than " + PATH_BYTES + " bytes";
        }
        b.put(p, 0, Math.min(p.length, PATH_BYTES));
        b.putLong(PATH_BYTES, ProcessHandle.current().pid());
        b.putLong(PATH_BYTES + 8, ok ? 1 : 0);
        byte[] all = new byte[me.length * n];
        host.allGather(Buffer.of(me), Buffer.of(all));
        String firstProblem = null;
        for (int q = 0; q < n && firstProblem == null; q++) {
            if (ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN).getLong(q * me.length + PATH_BYTES + 8) == 0) {
                firstProblem = "rank " + q + " could not create its file" + (q == rank ? " (" + why + ")" : "");
            }
        }
        if (firstProblem != null) {
            Files.deleteIfExists(own);
            throw new IOException(firstProblem);
        }
        Arena arena = Arena.ofShared();
        MemorySegment[] files = new MemorySegment[n];
        long[] pids = new long[n];
        int mapped = 1;
        String mapProblem = null;
        for (int q = 0; q < n; q++) {
            ByteBuffer r = ByteBuffer.wrap(all, q * me.length, me.length).order(ByteOrder.LITTLE_ENDIAN);
            byte[] pathBytes = new byte[PATH_BYTES];
            r.get(pathBytes);
            Path path = Path.of(new String(pathBytes, StandardCharsets.UTF_8).replace("\0", ""));
            pids[q] = r.getLong(PATH_BYTES);
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                files[q] = ch.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
            } catch (IOException e) {
                mapped = 0;
                mapProblem = "rank " + rank + " cannot map rank " + q + "'s " + path + ": " + e.getMessage();
                break;
            }
        }
        if (mapped == 1) {
            LONG.setRelease(files[rank], PID, ProcessHandle.current().pid());
        }
        // Every rank has mapped every file (or says it could not): the names can go.
        byte[] flags = new byte[n];
        host.allGather(Buffer.of(new byte[] {(byte) mapped}), Buffer.of(flags));
        Files.deleteIfExists(own);
        for (int q = 0; q < n; q++) {
            if (flags[q] == 0) {
                arena.close();
                throw new IOException(mapProblem != null ? mapProblem : "rank " + q + " could not map the others' files");
            }
        }
        return new ShmMailbox(rank, n, recordBytes, timeoutNs, arena, files, pids);
    }

    /** Publishes this rank's next record ({@code recordBytes} long); returns its sequence number (1, 2, ...). */
    long publish(byte[] record) {
        if (record.length != recordBytes) {
            throw new IllegalArgumentException("record of " + record.length + " bytes, expected " + recordBytes);
        }
        long seq = published + 1;
        if (seq - consumed > SLOTS) {
            throw new InvalidUsageException("more than " + SLOTS + " GPU collectives in one group between processes: split the group");
        }
        // The slot's previous record (seq - SLOTS) must have been read by every peer.
        for (int q = 0; q < n; q++) {
            if (q != rank) {
                awaitAtLeast(q, CONSUMED, seq - SLOTS, "to read this rank's record #" + (seq - SLOTS), null);
            }
        }
        long at = HEADER + (seq % SLOTS) * slotBytes;
        MemorySegment.copy(record, 0, files[rank], ValueLayout.JAVA_BYTE, at + 8, recordBytes);
        LONG.setRelease(files[rank], at, seq);
        published = seq;
        return seq;
    }

    /** Notes that this rank ran operation {@code epoch} (guard word {@code guard}) without a record. */
    void note(long epoch, long guard) {
        long at = NOTE + 16 * (epoch % NOTES);
        LONG.setRelease(files[rank], at, 0L); // the pair is being rewritten (a sequence lock: 0, the guard, the epoch)
        VarHandle.storeStoreFence();
        LONG.set(files[rank], at + 8, guard);
        LONG.setRelease(files[rank], at, epoch);
    }

    /**
     * Whether rank {@code q} noted operation {@code epoch} or a later one: null if not; else {epoch, its
     * guard word, or 0 where its note of {@code epoch} was overwritten since}.
     */
    long[] noted(int q, long epoch) {
        long newest = 0;
        for (int k = 0; k < NOTES; k++) {
            newest = Math.max(newest, (long) LONG.getAcquire(files[q], NOTE + 16L * k));
        }
        if (newest < epoch) {
            return null;
        }
        long at = NOTE + 16 * (epoch % NOTES);
        long e1 = (long) LONG.getAcquire(files[q], at);
        long g = (long) LONG.get(files[q], at + 8);
        VarHandle.loadLoadFence();
        long e2 = (long) LONG.getAcquire(files[q], at);
        return new long[] {epoch, e1 == epoch && e2 == epoch ? g : 0};
    }

    /** Rank {@code q}'s record number {@code seq}, once it is there. */
    byte[] read(int q, long seq) {
        return read(q, seq, null);
    }

    /**
     * Rank {@code q}'s record number {@code seq}, once it is there; while it waits, {@code check} (may be
     * null) is asked every few milliseconds, and an exception it returns ends the wait.
     */
    byte[] read(int q, long seq, java.util.function.Supplier<RuntimeException> check) {
        long at = HEADER + (seq % SLOTS) * slotBytes;
        awaitAtLeast(q, at, seq, "to publish its record #" + seq, check);
        byte[] r = new byte[recordBytes];
        MemorySegment.copy(files[q], ValueLayout.JAVA_BYTE, at + 8, r, 0, recordBytes);
        return r;
    }

    /** This rank has read every peer's records up to {@code seq}: their slots may be rewritten. */
    void consumed(long seq) {
        consumed = seq;
        LONG.setRelease(files[rank], CONSUMED, seq);
    }

    void abort() {
        aborted = true;
    }

    private void awaitAtLeast(int q, long offset, long target, String what, java.util.function.Supplier<RuntimeException> check) {
        if ((long) LONG.getAcquire(files[q], offset) >= target) {
            return;
        }
        long start = System.nanoTime();
        long nextLiveness = start + 50_000_000L;
        long park = 1_000;
        for (int spins = 0; ; spins++) {
            if ((long) LONG.getAcquire(files[q], offset) >= target) {
                return;
            }
            if (aborted) {
                throw new JcclException(ErrorCode.ABORTED, "rank " + rank + ": the GPU communicator was aborted while waiting for rank "
                        + q + " " + what);
            }
            if (check != null && spins >= 2_000 && (spins & 127) == 0) {
                RuntimeException stop = check.get();
                // (a peer notes an operation after it published its earlier records: what the check saw may be
                // newer than the record awaited here, which then is there by now)
                if (stop != null && (long) LONG.getAcquire(files[q], offset) < target) {
                    throw stop;
                }
            }
            if (spins < 20_000) {
                Thread.onSpinWait();
                continue;
            }
            long now = System.nanoTime();
            if (now - start > timeoutNs) {
                throw new JcclException(ErrorCode.TIMEOUT, "rank " + rank + " waited " + timeoutNs / 1_000_000_000L + " s for rank " + q
                        + " " + what + " (JCCL_CUDA_WAIT_TIMEOUT) and gave up: rank " + q
                        + " never reached the same GPU operation (it hangs, or called a different sequence of operations)");
            }
            if (now > nextLiveness) {
                nextLiveness = now + 50_000_000L;
                if (!ProcessHandle.of(pids[q]).map(ProcessHandle::isAlive).orElse(false)) {
                    throw new JcclException(ErrorCode.PEER_FAILED, "rank " + rank + ": rank " + q + " (pid " + pids[q]
                            + ") exited while this rank waited for it " + what);
                }
            }
            if (spins < 21_000) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(park);
                park = Math.min(park * 2, 50_000);
            }
        }
    }

    @Override
    public void close() {
        aborted = true;
        arena.close();
    }
}
