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
}
