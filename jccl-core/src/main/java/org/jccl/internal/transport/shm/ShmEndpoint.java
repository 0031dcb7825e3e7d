package org.jccl.internal.transport.shm;

import static org.jccl.internal.transport.shm.ShmRingDescriptor.INT;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.RECEIVER_CLOSED;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.RECEIVER_STATE_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.SENDER_ATTACHED;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.SENDER_CLOSED;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.SENDER_STATE_OFFSET;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.SecureRandom;
import java.util.HexFormat;
import org.jccl.ResourceException;
import org.jccl.internal.log.Log;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.MemoryType;
import org.jccl.spi.OneSidedUnsupportedException;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.TransportContext;

/**
 * One rank's shared-memory presence for one communicator. Nothing happens at open but choosing a
 * nonce; once bootstrap has decided which peers use SHM, {@link #prepare} does all the work up front:
 *
 * <ol>
 *   <li>for every SHM peer {@code p}, create the ring {@code p -> this rank} under a temporary name,
 *       reserve all its pages (posix_fallocate: a full tmpfs fails here, with ENOSPC, never later
 *       with SIGBUS), map it, write its header, and rename it to its final name (the publication);</li>
 *   <li>for every SHM peer {@code p}, wait for the ring {@code this rank -> p} that {@code p}
 *       published, map it, check its header, and unlink it: the mapping lives on, the name is gone.
 *       Every ring is mapped by exactly two processes and the sender maps it last, so once every
 *       rank has passed this step no file of the communicator is left in the directory.</li>
 * </ol>
 *
 * File names: {@code jccl-shm-<communicator id>-<receiver nonce>-<receiver pid>-<from>to<to>}; the
 * random per-endpoint nonce and the pid mean a file of a dead job is never mistaken for a new one.
 * Address published at bootstrap: {@code "2;<nonce hex>;<d: doorbell socket | ->;<shared collective segment bytes per
 * rank>;<directory>"}. The files are made and mapped through {@link ShmFiles}.
 *
 * <p>Registered regions (one-sided puts) are files of their own, made by {@link #allocate}: see {@link ShmRegions}.
 *
 * <p>3. Doorbells: a Unix-domain socket per peer pair, connected at the end of {@link #prepare}: see
 * {@link ShmDoorbells}.
 *
 * <p>The communicator's shared collective segment, when every pair uses SHM, is made or mapped by
 * {@link #openCollArea}: see {@link ShmCollFile}.
 */
final class ShmEndpoint implements Endpoint {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final String PREFIX = "jccl-shm-";

    private final TransportContext ctx;
    private final int rank;
    private final Path dir;
    private final String nonce;
    private final String comm;
    private final int slotCount;
    private final long slotBytes;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment[] inbound;
    private final MemorySegment[] outbound;
    private final boolean[] checkPid;
    private final Path[] created;
    private final ShmConnection[] connections;
    /** The directory's files: reserved, mapped, awaited. */
    private final ShmFiles files;
    /** Doorbell sockets by peer, and this endpoint's listening one until prepare ends. */
    private final ShmDoorbells doorbells;
    /** Makes or maps the shared collective segment's file. */
    private final ShmCollFile collFile;
    private final long raiseAfterNanos;
    /** Bytes per rank of the shared collective segment this rank would create as rank 0 (JCCL_SHM_COLL_BUFFER, page-rounded). */
    private final long collBytes;
    /** The shared collective segment, once {@link #openCollArea()} made or mapped it. */
    private ShmCollArea coll;
    /** Regions allocated here and peers' regions mapped here (registration and one-sided puts). */
    private final ShmRegions regions;
    private boolean closed;
    /** The settings, concluded once at open. */
    private final ShmSettings settings;

    ShmEndpoint(TransportContext ctx) {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.settings = ShmSettings.conclude(ctx.config());
        this.dir = settings.dir();
        byte[] n = new byte[8];
        RANDOM.nextBytes(n);
        this.nonce = HexFormat.of().formatHex(n);
        this.comm = HexFormat.of().formatHex(ctx.commId(), 0, 8);
        this.slotCount = settings.slots();
        this.slotBytes = settings.slotBytes();
        int size = ctx.size();
        this.inbound = new MemorySegment[size];
        this.outbound = new MemorySegment[size];
        this.checkPid = new boolean[size];
        this.created = new Path[size * 2];
        this.connections = new ShmConnection[size];
        // Raise the waiting flags well inside the spin phase, so they are up before the runtime blocks.
        this.raiseAfterNanos = Math.min(50_000L, settings.idleSpinMicros() * 500L);
        long cb = settings.collBuffer();
        this.collBytes = cb == 0 ? 0 : ShmCollDescriptor.areaBytes(cb);
        this.regions = new ShmRegions(ctx, dir, PREFIX + comm, nonce);
        this.files = new ShmFiles(ctx, dir, arena);
        this.collFile = new ShmCollFile(ctx, files, dir, PREFIX + comm, settings);
        this.doorbells = new ShmDoorbells(ctx, dir, PREFIX + comm, nonce);
    }

    @Override
    public String transportName() {
        return ShmTransport.NAME;
    }

    /** SHM registers only memory it allocates (a /dev/shm file): another process cannot write this process's private memory. */
    @Override
    public boolean canRegister(MemoryType type) {
        return false;
    }

    @Override
    public boolean canAllocate() {
        return true;
    }

    @Override
    public RegisteredRegion register(MemorySegment memory) {
        throw new OneSidedUnsupportedException(ShmTransport.NAME, "registration of this process's memory", "memory that ranks in other"
                + " processes can write must be shared memory: allocate the region with Endpoint#allocate(length), which SHM backs with a"
                + " file in " + dir + " (writing into another process's private memory would need process_vm_writev, which many containers"
                + " block)");
    }

    @Override
    public RegisteredRegion allocate(long length) throws IOException {
        synchronized (this) {
            if (closed) {
                throw new IllegalStateException("SHM endpoint of rank " + rank + " is closed");
            }
        }
        return regions.allocate(length);
    }

    @Override
    public byte[] address() {
        return ("2;" + nonce + ";" + (doorbells.listening() ? "d" : "-") + ";" + collBytes + ";" + dir).getBytes(StandardCharsets.UTF_8);
    }

    /** The nonce, doorbell, shared collective segment size (what rank 0's says counts) and directory a peer published. */
    record PeerAddress(String nonce, boolean doorbell, long collBytes, Path dir) {
        static PeerAddress parse(PeerInfo p) throws IOException {
            String a = new String(p.addresses().get(ShmTransport.NAME), StandardCharsets.UTF_8);
            String[] parts = a.split(";", 5);
            if (parts.length != 5 || !parts[0].equals("2") || !parts[1].matches("[0-9a-f]{16}") || !parts[3].matches("[0-9]{1,12}")) {
                throw new IOException(p.describe() + " published an SHM address this jccl does not understand: '" + a
                        + "' (mixed jccl versions in one job?)");
            }
            return new PeerAddress(parts[1], parts[2].equals("d"), Long.parseLong(parts[3]), Path.of(parts[4]));
        }
    }

    private String fileName(String receiverNonce, long receiverPid, int from, int to) {
        return PREFIX + comm + "-" + receiverNonce + "-" + receiverPid + "-" + from + "to" + to;
    }

    @Override
    public synchronized void prepare(int[] peers) throws IOException {
        if (peers.length == 0) {
            doorbells.closeListener();
            return;
        }
        long fileBytes = ShmRingDescriptor.fileBytes(slotCount, slotBytes);
        long needed = fileBytes * peers.length;
        long pid = ProcessHandle.current().pid();
        // 1. This rank's inbound rings: created, reserved, initialised, then published by rename.
        // The ring from the lowest peer comes last: once rank 0 has mapped the ring a peer made for it,
        // every ring of that peer exists, so rank 0 sizes the shared collective segment (openCollArea,
        // after its prepare) against what the whole job's rings left free.
        for (int i = peers.length - 1; i >= 0; i--) {
            int p = peers[i];
            Path fin = dir.resolve(fileName(nonce, pid, p, rank));
            Path tmp = dir.resolve(fin.getFileName() + ".tmp");
            created[2 * p] = tmp;
            files.reserve(tmp, fileBytes, e -> full(needed, peers.length, e));
            inbound[p] = files.map(tmp, fileBytes);
            ShmRingDescriptor.initialise(inbound[p], slotCount, slotBytes, pid, p, rank);
            created[2 * p + 1] = fin;
            Files.move(tmp, fin, StandardCopyOption.ATOMIC_MOVE);
            created[2 * p] = null;
        }
        // 2. The outbound rings the peers published: mapped, checked, unlinked.
        long timeoutNanos = settings.connectTimeout().toNanos();
        for (int p : peers) {
            PeerInfo info = ctx.peer(p);
            PeerAddress a = PeerAddress.parse(info);
            Path f = a.dir().resolve(fileName(a.nonce(), info.pid(), rank, p));
            MemorySegment s = files.awaitAndMap(f, info, timeoutNanos, "SHM ring");
            String bad = ShmRingDescriptor.validate(s, rank, p);
            if (bad != null) {
                throw new IOException("rank " + rank + ": the SHM ring " + f + " published by " + info.describe() + " is unusable: " + bad);
            }
            outbound[p] = s;
            INT.setRelease(s, SENDER_STATE_OFFSET, SENDER_ATTACHED);
            // Both processes have it mapped now: the name can go, so that a crash leaves nothing behind.
            Files.deleteIfExists(f);
            // The pid is only meaningful in our pid namespace: check liveness only if we can see the peer now.
            checkPid[p] = ProcessHandle.of(info.pid()).map(ProcessHandle::isAlive).orElse(false);
        }
        doorbells.connect(peers, timeoutNanos);
        Log.info(Log.Subsys.SHM, rank, "SHM: rank " + rank + " reserved " + needed + " bytes in " + dir + " (" + peers.length
                + " ring(s) of " + slotCount + " x " + slotBytes + " B); all mapped and unlinked");
    }

    private ResourceException full(long needed, int rings, Throwable cause) {
        long free = files.freeBytes();
        return new ResourceException("rank " + rank + ": not enough shared memory for the SHM transport in " + dir + ": this rank needs "
                + needed + " bytes (" + rings + " ring(s) of " + slotCount + " x " + slotBytes + " bytes, one per same-host peer) and "
                + dir + " has " + (free < 0 ? "an unknown number of" : Long.toString(free)) + " bytes free. Fix: give the container more "
                + "shared memory (Docker: --shm-size=1g; Kubernetes: an emptyDir volume with medium: Memory mounted at /dev/shm), point "
                + "JCCL_SHM_DIR at a larger tmpfs, make the rings smaller (JCCL_SHM_SLOTS, JCCL_SHM_CHUNK), or set JCCL_SHM_DISABLE=1 "
                + "to use TCP between same-host ranks", cause);
    }

    /**
     * Makes (rank 0) or maps (the others) the communicator's shared collective segment; called once,
     * after {@link #prepare}, and only when every pair of the communicator's ranks uses SHM (every
     * rank decides that from the same peer table, so all or none come here). Rank 0's published
     * {@code JCCL_SHM_COLL_BUFFER} decides the size for all; 0 means no segment (null). The file is
     * reserved in full like the rings and unlinked by the last rank to map it.
     */
    synchronized ShmCollArea openCollArea() throws IOException {
        if (closed) {
            throw new IOException("SHM endpoint of rank " + rank + " is closed");
        }
        if (coll != null) {
            return coll;
        }
        coll = collFile.open();
        return coll;
    }

    @Override
    public synchronized Connection connect(int peerRank) throws IOException {
        if (closed) {
            throw new IOException("SHM endpoint of rank " + rank + " is closed");
        }
        ShmConnection c = connections[peerRank];
        if (c == null) {
            if (inbound[peerRank] == null || outbound[peerRank] == null) {
                throw new IOException("rank " + rank + " has no SHM ring with rank " + peerRank + " (not prepared for this peer)");
            }
            c = new ShmConnection(rank, ctx.peer(peerRank), inbound[peerRank], outbound[peerRank], checkPid[peerRank], doorbells.of(peerRank),
                    raiseAfterNanos, regions);
            connections[peerRank] = c;
            Log.info(Log.Subsys.SHM, rank, "rank " + rank + " -> rank " + peerRank + " via " + c.describe());
        }
        return c;
    }

    /** Marks every ring closed for the peers, unmaps them, and removes any file this rank still has a name for. */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        for (ShmConnection c : connections) {
            if (c != null) {
                c.close();
            }
        }
        regions.close();
        ShmCollArea area;
        synchronized (this) {
            area = coll;
        }
        if (area != null) {
            area.close();
        }
        for (int p = 0; p < inbound.length; p++) {
            try {
                if (inbound[p] != null) {
                    INT.setRelease(inbound[p], RECEIVER_STATE_OFFSET, RECEIVER_CLOSED);
                }
                if (outbound[p] != null) {
                    INT.setRelease(outbound[p], SENDER_STATE_OFFSET, SENDER_CLOSED);
                }
            } catch (IllegalStateException ignored) {
                // already unmapped
            }
        }
        collFile.removeFiles();
        for (Path f : created) {
            if (f != null) {
                try {
                    // A peer that never mapped its ring (it failed or died first) leaves the name to us.
                    Files.deleteIfExists(f);
                } catch (IOException e) {
                    Log.warn(Log.Subsys.SHM, rank, "SHM: cannot remove " + f + ": " + e);
                }
            }
        }
        doorbells.close();
        try {
            arena.close();
        } catch (IllegalStateException e) {
            Log.trace(Log.Subsys.SHM, rank, "SHM: unmapping: " + e);
        }
    }
}
