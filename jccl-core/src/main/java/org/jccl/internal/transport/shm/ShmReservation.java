package org.jccl.internal.transport.shm;

/**
 * How much shared memory the SHM transport reserves, for callers outside this package
 * ({@code jccl doctor} checks /dev/shm against it before a job starts). The numbers are the
 * transport's own: {@link ShmEndpoint#prepare} reserves one ring file of
 * {@link ShmRingDescriptor#fileBytes} per same-host peer, for every rank.
 */
public final class ShmReservation {
    private ShmReservation() {
    }

    /** Bytes of one ring file with {@code slots} slots of {@code chunkBytes} (JCCL_SHM_SLOTS, JCCL_SHM_CHUNK). */
    public static long ringBytes(int slots, long chunkBytes) {
        return ShmRingDescriptor.fileBytes(slots, chunkBytes);
    }

    /** Bytes one rank reserves when {@code localRanks} ranks share the host: one ring per other local rank. */
    public static long perRankBytes(int localRanks, int slots, long chunkBytes) {
        return Math.max(0, localRanks - 1) * ringBytes(slots, chunkBytes);
    }

    /** Bytes the whole host needs for {@code localRanks} ranks at once. */
    public static long hostBytes(int localRanks, int slots, long chunkBytes) {
        return (long) Math.max(0, localRanks) * perRankBytes(localRanks, slots, chunkBytes);
    }

    /** The file system of a {@link #createReserved} file is full (ENOSPC); the cause, if any, is write(2)'s error. */
    public static final class FullException extends java.io.IOException {
        private static final long serialVersionUID = 1L;

        FullException(java.nio.file.Path path, long bytes, Throwable cause) {
            super("no space left for " + bytes + " bytes in " + path, cause);
        }
    }

    /**
     * Creates {@code path} (it must not exist) with every one of its {@code bytes} reserved
     * (posix_fallocate, or every page written where libc is out of reach), so that a full tmpfs fails
     * here and never with a SIGBUS when a page is first touched. Nothing is left behind on failure.
     *
     * @throws FullException when the file system has no room
     */
    public static void createReserved(java.nio.file.Path path, long bytes) throws java.io.IOException {
        if (Libc.available()) {
            int err = Libc.createReserved(path, bytes);
            if (err == 0) {
                return;
            }
            java.nio.file.Files.deleteIfExists(path);
            if (err == Libc.ENOSPC) {
                throw new FullException(path, bytes, null);
            }
            throw new java.io.IOException("posix_fallocate(" + path + ", " + bytes + " bytes) failed with errno " + err);
        }
        // No libc access: write every page. write(2) reports ENOSPC as an IOException, as fallocate would.
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(path, java.nio.file.StandardOpenOption.CREATE_NEW,
                java.nio.file.StandardOpenOption.WRITE)) {
            java.nio.ByteBuffer zeros = java.nio.ByteBuffer.allocateDirect((int) Math.min(bytes, 1 << 20));
            long done = 0;
            while (done < bytes) {
                zeros.clear().limit((int) Math.min(zeros.capacity(), bytes - done));
                done += ch.write(zeros, done);
            }
        } catch (java.io.IOException e) {
            java.nio.file.Files.deleteIfExists(path);
            if (String.valueOf(e.getMessage()).contains("No space left")) {
                throw new FullException(path, bytes, e);
            }
            throw e;
        }
    }
}
