package org.jccl.internal.transport.shm;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import org.jccl.ResourceException;
import org.jccl.internal.log.Log;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.TransportContext;

/**
 * The file of a communicator's shared collective segment: rank 0 makes it (reserved in full like the
 * rings, down to a smaller area when the directory is short of room) and publishes it by rename, the
 * others wait for it and map it, and the last rank to map it unlinks it. {@link ShmEndpoint#openCollArea}
 * calls it once; what runs in the segment is {@link ShmCollArea} and {@link ShmCollectives}.
 */
final class ShmCollFile {
    /**
     * Smallest area per rank the shared collective segment falls back to when {@code JCCL_SHM_COLL_BUFFER}
     * does not fit in the directory (256 KiB: two hot regions of 32 KiB, room for every one-step
     * all-reduce, and a ring of 192 KiB whose rounds still amortise their synchronisation); a smaller
     * request is taken as is.
     */
    static final long COLL_MIN_AREA = 256 << 10;

    private final TransportContext ctx;
    private final int rank;
    private final Path dir;
    /** {@code jccl-shm-<comm>}: the start of every file name of this communicator. */
    private final String prefix;
    private final ShmFiles files;
    private final ShmSettings settings;
    /** Round (slot) size of the shared collective segment this rank would create as rank 0 (JCCL_SHM_COLL_SLOT). */
    private final long collSlotBytes;
    /** JCCL_SHM_COLL_RING (rank 0's counts: it picks the mode of every operation). */
    private final int collRing;
    /** Rank 0: the segment's file names (temporary, final) while they may exist. */
    private final Path[] collCreated = new Path[2];

    ShmCollFile(TransportContext ctx, ShmFiles files, Path dir, String prefix, ShmSettings settings) {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.dir = dir;
        this.prefix = prefix;
        this.files = files;
        this.settings = settings;
        this.collSlotBytes = settings.collSlotBytes();
        this.collRing = settings.collRing();
    }

    /**
     * Makes (rank 0) or maps (the others) the segment and returns it, or null when rank 0's published
     * {@code JCCL_SHM_COLL_BUFFER} is 0 (no segment); see {@link ShmEndpoint#openCollArea}.
     */
    ShmCollArea open() throws IOException {
        int n = ctx.size();
        PeerInfo p0 = ctx.peer(0);
        ShmEndpoint.PeerAddress a0 = ShmEndpoint.PeerAddress.parse(p0);
        long area = a0.collBytes();
        if (n < 2 || area == 0) {
            return null;
        }
        String name = prefix + "-" + a0.nonce() + "-" + p0.pid() + "-coll";
        MemorySegment seg;
        if (rank == 0) {
            Path fin = dir.resolve(name);
            Path tmp = dir.resolve(name + ".tmp");
            collCreated[0] = tmp;
            long got = reserveColl(tmp, n, area);
            long fileBytes = ShmCollDescriptor.fileBytes(n, got);
            seg = files.map(tmp, fileBytes);
            ShmCollDescriptor.initialise(seg, n, got, ShmCollDescriptor.slotBytes(got, collSlotBytes), ProcessHandle.current().pid(),
                    collRing == ShmCollArea.RING_ALWAYS);
            collCreated[1] = fin;
            Files.move(tmp, fin, StandardCopyOption.ATOMIC_MOVE);
            collCreated[0] = null;
        } else {
            Path f = a0.dir().resolve(name);
            seg = files.awaitAndMap(f, p0, settings.connectTimeout().toNanos(), "shared collective segment");
            String bad = ShmCollDescriptor.validate(seg, n);
            if (bad != null) {
                throw new IOException("rank " + rank + ": the shared collective segment " + f + " published by " + p0.describe()
                        + " is unusable: " + bad);
            }
            int before = (int) ShmCollDescriptor.INT.getAndAdd(seg, ShmCollDescriptor.ATTACHED_OFFSET, 1);
            if (before + 1 == n - 1) {
                // Every rank has it mapped now: the name can go, so that a crash leaves nothing behind.
                Files.deleteIfExists(f);
            }
        }
        PeerInfo[] infos = new PeerInfo[n];
        boolean[] check = new boolean[n];
        long self = ProcessHandle.current().pid();
        for (int q = 0; q < n; q++) {
            infos[q] = ctx.peer(q);
            check[q] = q != rank && infos[q].pid() != self && ProcessHandle.of(infos[q].pid()).map(ProcessHandle::isAlive).orElse(false);
        }
        ShmCollArea coll = new ShmCollArea(seg, rank, infos, check, collRing);
        Log.info(Log.Subsys.SHM, rank, "SHM: rank " + rank + " mapped the shared collective segment (" + coll.describe() + ")");
        return coll;
    }

    /**
     * Rank 0: creates {@code tmp} reserved for {@code n} areas of {@code requested} bytes (whole
     * pages) and returns the area size it got. When the directory has too little room,
     * it takes the largest area that fits (what the statvfs free space allows, then halving), down to
     * {@link #COLL_MIN_AREA}, and logs why at INFO; below that the same ResourceException as a full
     * directory always gave, with the sizes and the fix.
     */
    private long reserveColl(Path tmp, int n, long requested) throws IOException {
        long area = geometry(requested);
        long floor = Math.min(area, geometry(COLL_MIN_AREA));
        long tried = area;
        long freeBefore = -1;
        while (true) {
            long attempt = tried;
            boolean last = tried <= floor;
            try {
                files.reserve(tmp, ShmCollDescriptor.fileBytes(n, tried), e -> collFull(n, attempt, area, e));
                if (tried != area) {
                    Log.info(Log.Subsys.SHM, rank, "SHM: a shared collective segment of " + n + " x " + area + " bytes (JCCL_SHM_COLL_BUFFER)"
                            + " does not fit in " + dir + " (" + (freeBefore < 0 ? "an unknown number of" : Long.toString(freeBefore))
                            + " bytes free after the rings); using " + n + " x " + tried + " bytes instead (rounds of at most "
                            + ShmCollDescriptor.slotBytes(tried, collSlotBytes) + " B): a smaller ring, so large all-reduces can be slower"
                            + " when the host places the CPUs far apart. Fix: more shared memory (Docker: --shm-size=1g)");
                }
                return tried;
            } catch (ResourceException full) {
                if (last) {
                    throw full;
                }
            }
            // Whole pages of what statvfs says is free, per rank; at least half the last try, never below the floor.
            long free = files.freeBytes();
            freeBefore = freeBefore < 0 ? free : freeBefore;
            long fits = free < 0 ? 0 : (free - ShmCollDescriptor.dataOffset(n)) / n / ShmCollDescriptor.PAGE * ShmCollDescriptor.PAGE;
            tried = Math.max(floor, geometry(fits > 0 && fits < tried ? fits : tried / 2));
        }
    }

    /** The area (whole pages, at least two) that {@code requested} bytes per rank give. */
    private static long geometry(long requested) {
        return ShmCollDescriptor.areaBytes(requested);
    }

    private String freeOrUnknown() {
        long free = files.freeBytes();
        return free < 0 ? "an unknown number of" : Long.toString(free);
    }

    private ResourceException collFull(int n, long area, long requested, Throwable cause) {
        return new ResourceException("rank 0: not enough shared memory for the shared collective segment in " + dir + ": it needs "
                + ShmCollDescriptor.fileBytes(n, area) + " bytes (" + n + " ranks x " + area + " bytes, the smallest area it falls back to"
                + " from JCCL_SHM_COLL_BUFFER=" + requested + ") and " + dir + " has " + freeOrUnknown() + " bytes free. Fix: give the"
                + " container more shared memory (Docker: --shm-size=1g; Kubernetes: an emptyDir volume with medium: Memory mounted at"
                + " /dev/shm), set JCCL_SHM_COLL_BUFFER smaller or 0 (no segment), or point JCCL_SHM_DIR at a larger tmpfs", cause);
    }

    /** Removes the segment's file names that rank 0 still has (a segment never published or not yet mapped by all). */
    void removeFiles() {
        for (Path f : collCreated) {
            if (f != null) {
                try {
                    Files.deleteIfExists(f);
                } catch (IOException e) {
                    Log.warn(Log.Subsys.SHM, rank, "SHM: cannot remove " + f + ": " + e);
                }
            }
        }
    }
}
