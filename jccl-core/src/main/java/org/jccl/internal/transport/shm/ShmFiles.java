package org.jccl.internal.transport.shm;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.PeerFailedException;
import org.jccl.ResourceException;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.TransportContext;

/**
 * The SHM directory's files as an endpoint makes and maps them (its rings and the shared collective
 * segment): a file created with every page reserved, the directory's free space, and the bounded wait
 * for a file a peer publishes. Every mapping lives in the endpoint's arena.
 */
final class ShmFiles {
    private final TransportContext ctx;
    private final int rank;
    private final Path dir;
    private final Arena arena;

    ShmFiles(TransportContext ctx, Path dir, Arena arena) {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.dir = dir;
        this.arena = arena;
    }

    /** Creates {@code path} with every page reserved, or throws the "shared memory is full" error. */
    void reserve(Path path, long bytes, java.util.function.Function<Throwable, ResourceException> full) throws IOException {
        try {
            ShmReservation.createReserved(path, bytes);
        } catch (ShmReservation.FullException e) {
            throw full.apply(e.getCause());
        }
    }

    /** Maps the whole of a file this rank created ({@code bytes} long), read-write. */
    MemorySegment map(Path path, long bytes) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return ch.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
        }
    }

    long freeBytes() {
        try {
            return Files.getFileStore(dir).getUsableSpace();
        } catch (IOException ignored) {
            return -1; // reported as unknown
        }
    }

    /** Waits (bounded) for a peer's ring to be published, then maps it. */
    MemorySegment awaitAndMap(Path f, PeerInfo peer, long timeoutNanos, String what) throws IOException {
        long start = System.nanoTime();
        boolean pidVisible = ProcessHandle.of(peer.pid()).isPresent();
        long sleepMillis = 0;
        while (true) {
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                return ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size(), arena);
            } catch (NoSuchFileException notYet) {
                // the peer has not published it yet
            }
            if (ctx.isStopping()) {
                throw new JcclException(org.jccl.ErrorCode.ABORTED, "rank " + rank + ": communicator stopped while waiting for the " + what
                        + " of " + peer.describe(), null);
            }
            if (pidVisible && !ProcessHandle.of(peer.pid()).map(ProcessHandle::isAlive).orElse(false)) {
                throw new PeerFailedException(peer.rank(), "rank " + rank + ": " + peer.describe() + " exited before publishing its " + what + " "
                        + f + " (it failed during communicator creation or crashed)", null);
            }
            if (System.nanoTime() - start > timeoutNanos) {
                throw new JcclTimeoutException("rank " + rank + ": " + peer.describe() + " did not publish its " + what + " " + f + " within "
                        + timeoutNanos / 1_000_000_000L + " s (JCCL_CONNECT_TIMEOUT); it may have failed to reserve shared memory: see its"
                        + " error", null);
            }
            sleepMillis = Math.min(10, sleepMillis + 1);
            try {
                Thread.sleep(sleepMillis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new JcclException(org.jccl.ErrorCode.ABORTED, "rank " + rank + ": interrupted while waiting for the " + what + " of "
                        + peer.describe(), e);
            }
        }
    }
}
