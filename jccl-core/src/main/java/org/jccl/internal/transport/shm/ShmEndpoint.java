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
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.PeerFailedException;
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
 * Address published at bootstrap: {@code "1;<nonce hex>;<d: doorbell socket | ->;<directory>"}.
 *
 * <p>Registered regions (one-sided puts) are files of their own, made by {@link #allocate}: see {@link ShmRegions}.
 *
 * <p>3. Doorbells: a Unix-domain socket per peer pair (the lower rank connects to the higher one's
 * listener {@code jccl-shm-<comm>-<nonce>-<pid>.sock}, sends its rank and the communicator id);
 * the listener's name is unlinked as soon as every lower peer has connected. The socket carries
 * only wake-up bytes, never data.
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
    /** Doorbell sockets by peer (see ShmConnection), and this endpoint's listening one until prepare ends. */
    private final SocketChannel[] doorbells;
    private ServerSocketChannel listener;
    private Path listenerPath;
    private final long raiseAfterNanos;
    /** Bytes per rank of the shared collective segment this rank would create as rank 0 (JCCL_SHM_COLL_BUFFER, page-rounded). */
    private final long collBytes;
    /** Round (slot) size of the shared collective segment this rank would create as rank 0 (JCCL_SHM_COLL_SLOT). */
    private final long collSlotBytes;
    /** JCCL_SHM_COLL_RING (rank 0's counts: it picks the mode of every operation). */
    private final int collRing;
    /** The shared collective segment, once {@link #openCollArea()} made or mapped it. */
    private ShmCollArea coll;
    /** Rank 0: the segment's file names (temporary, final) while they may exist. */
    private final Path[] collCreated = new Path[2];
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
        this.doorbells = new SocketChannel[size];
        // Raise the waiting flags well inside the spin phase, so they are up before the runtime blocks.
        this.raiseAfterNanos = Math.min(50_000L, settings.idleSpinMicros() * 500L);
        long cb = settings.collBuffer();
        this.collBytes = cb == 0 ? 0 : ShmCollDescriptor.areaBytes(cb);
        this.collSlotBytes = settings.collSlotBytes();
        this.collRing = settings.collRing();
        this.regions = new ShmRegions(ctx, dir, PREFIX + comm, nonce);
        openListener(ProcessHandle.current().pid());
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

    /** The doorbell listener, a Unix-domain socket in the directory; without it the peers poll (selector timeout). */
    private void openListener(long pid) {
        Path p = dir.resolve(PREFIX + comm + "-" + nonce + "-" + pid + ".sock");
        try {
            ServerSocketChannel l = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            try {
                l.bind(UnixDomainSocketAddress.of(p), 256);
                l.configureBlocking(false);
            } catch (IOException | RuntimeException e) {
                l.close();
                throw e;
            }
            listener = l;
            listenerPath = p;
        } catch (IOException | RuntimeException e) {
            Log.warn(Log.Subsys.SHM, rank, "SHM: no doorbell socket at " + p + " (" + e + "): blocked ranks wake by timeout");
        }
    }

    @Override
    public byte[] address() {
        return ("2;" + nonce + ";" + (listener != null ? "d" : "-") + ";" + collBytes + ";" + dir).getBytes(StandardCharsets.UTF_8);
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
            closeListener();
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
            reserve(tmp, fileBytes, e -> full(needed, peers.length, e));
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                inbound[p] = ch.map(FileChannel.MapMode.READ_WRITE, 0, fileBytes, arena);
            }
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
            MemorySegment s = awaitAndMap(f, info, timeoutNanos, "SHM ring");
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
        connectDoorbells(peers, timeoutNanos);
        Log.info(Log.Subsys.SHM, rank, "SHM: rank " + rank + " reserved " + needed + " bytes in " + dir + " (" + peers.length
                + " ring(s) of " + slotCount + " x " + slotBytes + " B); all mapped and unlinked");
    }

    /** Step 3: doorbell sockets with every peer that has a listener too (lower rank connects). */
    private void connectDoorbells(int[] peers, long timeoutNanos) throws IOException {
        if (listener == null) {
            return;
        }
        long start = System.nanoTime();
        byte[] id = Arrays.copyOf(ctx.commId(), 16);
        int expected = 0;
        for (int p : peers) {
            PeerAddress a = PeerAddress.parse(ctx.peer(p));
            if (!a.doorbell()) {
                continue;
            }
            if (p < rank) {
                expected++;
                continue;
            }
            Path path = a.dir().resolve(PREFIX + comm + "-" + a.nonce() + "-" + ctx.peer(p).pid() + ".sock");
            SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            try {
                ch.connect(UnixDomainSocketAddress.of(path));
                ByteBuffer hello = ByteBuffer.allocate(20).putInt(rank).put(id).flip();
                while (hello.hasRemaining()) {
                    ch.write(hello);
                }
                ch.configureBlocking(false);
            } catch (IOException e) {
                ch.close();
                throw new IOException("rank " + rank + ": cannot connect the SHM doorbell of " + ctx.peer(p).describe() + " at " + path
                        + ": " + e.getMessage(), e);
            }
            doorbells[p] = ch;
        }
        while (expected > 0) {
            SocketChannel ch = listener.accept();
            if (ch == null) {
                if (System.nanoTime() - start > timeoutNanos) {
                    throw new JcclTimeoutException("rank " + rank + ": " + expected + " lower SHM peer(s) did not connect their doorbell within "
                            + timeoutNanos / 1_000_000_000L + " s (JCCL_CONNECT_TIMEOUT)", null);
                }
                if (ctx.isStopping()) {
                    throw new JcclException(org.jccl.ErrorCode.ABORTED, "rank " + rank + ": communicator stopped while connecting SHM doorbells",
                            null);
                }
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new JcclException(org.jccl.ErrorCode.ABORTED, "rank " + rank + ": interrupted while connecting SHM doorbells", e);
                }
                continue;
            }
            ch.configureBlocking(false);
            ByteBuffer hello = ByteBuffer.allocate(20);
            long helloDeadline = System.nanoTime() + 2_000_000_000L;
            while (hello.hasRemaining() && System.nanoTime() < helloDeadline) {
                int n = ch.read(hello);  // non-blocking: a silent stranger cannot stall us
                if (n < 0) {
                    break;
                }
                if (n == 0) {
                    Thread.onSpinWait();
                    Thread.yield();
                }
            }
            hello.flip();
            int from = hello.remaining() == 20 ? hello.getInt() : -1;
            byte[] got = new byte[16];
            if (from >= 0) {
                hello.get(got);
            }
            if (from < 0 || from >= rank || !Arrays.equals(got, id) || doorbells[from] != null) {
                // Not one of ours (a stranger on a world-writable directory, or another communicator): ignore it.
                ch.close();
                continue;
            }
            ch.configureBlocking(false);
            doorbells[from] = ch;
            expected--;
        }
        closeListener();
    }

    private void closeListener() {
        if (listener != null) {
            try {
                listener.close();
                Files.deleteIfExists(listenerPath);
            } catch (IOException e) {
                Log.warn(Log.Subsys.SHM, rank, "SHM: cannot remove " + listenerPath + ": " + e);
            }
            listener = null;
        }
    }

    /** Creates {@code path} with every page reserved, or throws the "shared memory is full" error. */
    private void reserve(Path path, long bytes, java.util.function.Function<Throwable, ResourceException> full) throws IOException {
        try {
            ShmReservation.createReserved(path, bytes);
        } catch (ShmReservation.FullException e) {
            throw full.apply(e.getCause());
        }
    }

    private long freeBytes() {
        try {
            return Files.getFileStore(dir).getUsableSpace();
        } catch (IOException ignored) {
            return -1; // reported as unknown
        }
    }

    private ResourceException full(long needed, int rings, Throwable cause) {
        long free = freeBytes();
        return new ResourceException("rank " + rank + ": not enough shared memory for the SHM transport in " + dir + ": this rank needs "
                + needed + " bytes (" + rings + " ring(s) of " + slotCount + " x " + slotBytes + " bytes, one per same-host peer) and "
                + dir + " has " + (free < 0 ? "an unknown number of" : Long.toString(free)) + " bytes free. Fix: give the container more "
                + "shared memory (Docker: --shm-size=1g; Kubernetes: an emptyDir volume with medium: Memory mounted at /dev/shm), point "
                + "JCCL_SHM_DIR at a larger tmpfs, make the rings smaller (JCCL_SHM_SLOTS, JCCL_SHM_CHUNK), or set JCCL_SHM_DISABLE=1 "
                + "to use TCP between same-host ranks", cause);
    }

    /** Waits (bounded) for a peer's ring to be published, then maps it. */
    private MemorySegment awaitAndMap(Path f, PeerInfo peer, long timeoutNanos, String what) throws IOException {
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

    /**
     * Smallest area per rank the shared collective segment falls back to when {@code JCCL_SHM_COLL_BUFFER}
     * does not fit in the directory (256 KiB: two hot regions of 32 KiB, room for every one-step
     * all-reduce, and a ring of 192 KiB whose rounds still amortise their synchronisation); a smaller
     * request is taken as is.
     */
    static final long COLL_MIN_AREA = 256 << 10;

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
                reserve(tmp, ShmCollDescriptor.fileBytes(n, tried), e -> collFull(n, attempt, area, e));
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
            long free = freeBytes();
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
        long free = freeBytes();
        return free < 0 ? "an unknown number of" : Long.toString(free);
    }

    private ResourceException collFull(int n, long area, long requested, Throwable cause) {
        return new ResourceException("rank 0: not enough shared memory for the shared collective segment in " + dir + ": it needs "
                + ShmCollDescriptor.fileBytes(n, area) + " bytes (" + n + " ranks x " + area + " bytes, the smallest area it falls back to"
                + " from JCCL_SHM_COLL_BUFFER=" + requested + ") and " + dir + " has " + freeOrUnknown() + " bytes free. Fix: give the"
                + " container more shared memory (Docker: --shm-size=1g; Kubernetes: an emptyDir volume with medium: Memory mounted at"
                + " /dev/shm), set JCCL_SHM_COLL_BUFFER smaller or 0 (no segment), or point JCCL_SHM_DIR at a larger tmpfs", cause);
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
        int n = ctx.size();
        PeerInfo p0 = ctx.peer(0);
        PeerAddress a0 = PeerAddress.parse(p0);
        long area = a0.collBytes();
        if (n < 2 || area == 0) {
            return null;
        }
        String name = PREFIX + comm + "-" + a0.nonce() + "-" + p0.pid() + "-coll";
        MemorySegment seg;
        if (rank == 0) {
            Path fin = dir.resolve(name);
            Path tmp = dir.resolve(name + ".tmp");
            collCreated[0] = tmp;
            long got = reserveColl(tmp, n, area);
            long fileBytes = ShmCollDescriptor.fileBytes(n, got);
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                seg = ch.map(FileChannel.MapMode.READ_WRITE, 0, fileBytes, arena);
            }
            ShmCollDescriptor.initialise(seg, n, got, ShmCollDescriptor.slotBytes(got, collSlotBytes), ProcessHandle.current().pid(),
                    collRing == ShmCollArea.RING_ALWAYS);
            collCreated[1] = fin;
            Files.move(tmp, fin, StandardCopyOption.ATOMIC_MOVE);
            collCreated[0] = null;
        } else {
            Path f = a0.dir().resolve(name);
            seg = awaitAndMap(f, p0, settings.connectTimeout().toNanos(), "shared collective segment");
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
        coll = new ShmCollArea(seg, rank, infos, check, collRing);
        Log.info(Log.Subsys.SHM, rank, "SHM: rank " + rank + " mapped the shared collective segment (" + coll.describe() + ")");
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
            c = new ShmConnection(rank, ctx.peer(peerRank), inbound[peerRank], outbound[peerRank], checkPid[peerRank], doorbells[peerRank],
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
        for (Path f : collCreated) {
            if (f != null) {
                try {
                    Files.deleteIfExists(f);
                } catch (IOException e) {
                    Log.warn(Log.Subsys.SHM, rank, "SHM: cannot remove " + f + ": " + e);
                }
            }
        }
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
        closeListener();
        for (SocketChannel d : doorbells) {
            if (d != null) {
                try {
                    d.close();
                } catch (IOException ignored) {
                    // closing anyway
                }
            }
        }
        try {
            arena.close();
        } catch (IllegalStateException e) {
            Log.trace(Log.Subsys.SHM, rank, "SHM: unmapping: " + e);
        }
    }
}
