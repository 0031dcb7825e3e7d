package org.jccl.internal.transport.shm;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jccl.ResourceException;
import org.jccl.internal.log.Log;
import org.jccl.internal.transport.AbstractRegisteredRegion;
import org.jccl.internal.transport.AbstractRemoteRegion;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.RemoteRegion;
import org.jccl.spi.TransportContext;

/**
 * Registration and one-sided puts between processes of one host. Memory another process can write
 * must be shared memory, so SHM registers only memory it allocates itself: {@link #allocate} creates
 * a file in {@code JCCL_SHM_DIR} (reserved in full, like the rings: a full tmpfs fails here with the
 * sizes and the fix, never later with SIGBUS), maps it and publishes it by rename ({@link
 * ShmRegionDescriptor}). Registering other memory of the process is refused: writing into it from
 * another process would need {@code process_vm_writev}, which many containers block.
 *
 * <p>The remote key names the file; a peer's connection maps it on {@link #unpack} (once per file and
 * endpoint: later unpacks of the same key share the mapping) and a put is one copy into the mapping,
 * complete and visible to whoever synchronises with the putting thread afterwards (a message sent on
 * the connection) when {@code put} returns. A flush has nothing left to do.
 *
 * <p>Key (little-endian):
 * <pre>
 *   "JSK1" (4) | owner rank (4) | communicator id (16) | owner pid (8) | token (8) | length (8) | region number (4)
 *   | host id (2 + UTF-8) | file name (2 + UTF-8)
 * </pre>
 * The file name is checked against what the owner published at bootstrap (its nonce and pid), and
 * resolved in the directory it published, so a key can never make a rank map another file.
 *
 * <p>Files: {@code jccl-shm-<communicator id>-<owner nonce>-<owner pid>-mem<n>}. A region's file keeps
 * its name while the region is registered and is unlinked when the owner deregisters it or closes its
 * endpoint (and, on a failed allocation, at once); the memory itself goes when the last process unmaps
 * it. A process killed while it holds regions leaves their files behind, named with its pid.
 *
 * <p>Threading: the operation thread allocates, unpacks and puts; {@code close} of a region, a handle
 * or the whole set may come from any thread. A region freed while a peer copies into it fails that copy
 * (the owner's unmapping does not touch the peer's mapping: the peer writes pages nobody reads).
 */
final class ShmRegions {
    static final int KEY_MAGIC = 0x314b534a; // "JSK1"
    private static final SecureRandom RANDOM = new SecureRandom();

    private final TransportContext ctx;
    private final int rank;
    private final Path dir;
    private final String prefix;
    private final String nonce;
    private final long pid = ProcessHandle.current().pid();
    private final Set<Region> regions = ConcurrentHashMap.newKeySet();
    /** Peers' files mapped by this rank, by file name. */
    private final Map<String, Mapping> mappings = new HashMap<>();
    private int nextRegion;
    private boolean closed;

    /**
     * @param prefix the communicator's file prefix, {@code jccl-shm-<communicator id>}
     * @param nonce this endpoint's nonce, as published in its address
     */
    ShmRegions(TransportContext ctx, Path dir, String prefix, String nonce) {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.dir = dir;
        this.prefix = prefix;
        this.nonce = nonce;
    }

    /** Makes a region of {@code length} zeroed bytes in a new shared file. */
    RegisteredRegion allocate(long length) throws IOException {
        if (length < 0) {
            throw new IllegalArgumentException("SHM: cannot allocate " + length + " bytes");
        }
        int n;
        synchronized (this) {
            requireOpen();
            n = nextRegion++;
        }
        String name = prefix + "-" + nonce + "-" + pid + "-mem" + n;
        Path fin = dir.resolve(name);
        Path tmp = dir.resolve(name + ".tmp");
        long fileBytes = ShmRegionDescriptor.fileBytes(length);
        long token = RANDOM.nextLong();
        // An arena per region, so that each can be unmapped alone; closing a shared arena is a JVM-wide
        // handshake, which regions (long-lived, like UCX registrations) pay once each.
        Arena arena = Arena.ofShared();
        boolean published = false;
        try {
            try {
                ShmReservation.createReserved(tmp, fileBytes);
            } catch (ShmReservation.FullException e) {
                throw full(length, fileBytes, e.getCause());
            }
            MemorySegment file;
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                file = ch.map(FileChannel.MapMode.READ_WRITE, 0, fileBytes, arena);
            }
            ShmRegionDescriptor.initialise(file, rank, length, token, pid);
            Region r = new Region(n, fin, file, arena, length, token);
            synchronized (this) {
                requireOpen();
                Files.move(tmp, fin, StandardCopyOption.ATOMIC_MOVE);
                published = true;
                regions.add(r);
            }
            Log.trace(Log.Subsys.SHM, rank, "SHM: rank " + rank + " allocated " + r.describe());
            return r;
        } finally {
            if (!published) {
                Files.deleteIfExists(tmp);
                arena.close();
            }
        }
    }

    private ResourceException full(long length, long fileBytes, Throwable cause) {
        long free;
        try {
            free = Files.getFileStore(dir).getUsableSpace();
        } catch (IOException e) {
            free = -1;
        }
        return new ResourceException("rank " + rank + ": not enough shared memory for a registered SHM region of " + length + " bytes in "
                + dir + ": it needs " + fileBytes + " bytes (the region and a header page) and " + dir + " has "
                + (free < 0 ? "an unknown number of" : Long.toString(free)) + " bytes free. Fix: give the container more shared memory (Docker:"
                + " --shm-size=1g; Kubernetes: an emptyDir volume with medium: Memory mounted at /dev/shm), point JCCL_SHM_DIR at a larger"
                + " tmpfs, or close regions no longer needed", cause);
    }

    private void requireOpen() {
        if (closed) {
            throw new IllegalStateException("SHM endpoint of rank " + rank + " is closed");
        }
    }

    /** Makes a handle of a key {@code peer} made, for puts by {@code connection}. */
    RemoteRegion unpack(byte[] key, Object connection, PeerInfo peer) throws IOException {
        ParsedKey k = ParsedKey.parse(key);
        byte[] comm = ctx.commId();
        if (!Arrays.equals(k.comm, 0, 16, comm, 0, 16)) {
            throw new IllegalArgumentException("rank " + rank + ": the SHM key of rank " + k.owner + "'s region #" + k.number + " belongs to"
                    + " another communicator (id " + HexFormat.of().formatHex(k.comm) + "): keys are valid only in the communicator that"
                    + " registered them");
        }
        String myHost = ctx.peer(rank).hostHash();
        if (!k.host.equals(myHost)) {
            throw new IllegalArgumentException("rank " + rank + ": the SHM key of rank " + k.owner + "'s region #" + k.number + " was made on"
                    + " another host (host id " + k.host + "; this rank's is " + myHost + "): SHM regions live in one host's shared memory;"
                    + " ranks on other hosts reach them through a network transport");
        }
        if (k.owner != peer.rank()) {
            throw new IllegalArgumentException("rank " + rank + ": the SHM key of rank " + k.owner + "'s region #" + k.number + " was unpacked"
                    + " on the connection to " + peer.describe() + ": unpack a key on the connection to the rank that registered it");
        }
        ShmEndpoint.PeerAddress a = ShmEndpoint.PeerAddress.parse(peer);
        String expected = prefix + "-" + a.nonce() + "-" + peer.pid() + "-mem" + k.number;
        if (!k.file.equals(expected) || k.pid != peer.pid()) {
            throw new IllegalArgumentException("rank " + rank + ": the SHM key of rank " + k.owner + "'s region #" + k.number + " names the"
                    + " file '" + k.file + "' of pid " + k.pid + ", not the one " + peer.describe() + " would have made ('" + expected + "')");
        }
        Mapping m;
        synchronized (this) {
            requireOpen();
            m = mappings.get(k.file);
            if (m == null || m.token != k.token) {
                m = map(a.dir().resolve(k.file), k, peer);
                mappings.put(k.file, m);
            }
            m.references++;
        }
        if (!ShmRegionDescriptor.isLive(m.file)) {
            release(m);
            throw new IllegalStateException("rank " + rank + ": the SHM key names rank " + k.owner + "'s region #" + k.number + " ("
                    + k.length + " B), which its owner has deregistered (closed the region or its communicator)");
        }
        return new Remote(m, connection, k);
    }

    private Mapping map(Path f, ParsedKey k, PeerInfo peer) throws IOException {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment s;
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                s = ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size(), arena);
            } catch (NoSuchFileException gone) {
                throw new IllegalStateException("rank " + rank + ": the SHM key names rank " + k.owner + "'s region #" + k.number + " ("
                        + k.length + " B), whose file " + f + " is gone: its owner has deregistered it (closed the region or its communicator)");
            }
            String bad = ShmRegionDescriptor.validate(s, k.owner, k.length, k.token);
            if (bad != null) {
                throw new IllegalStateException("rank " + rank + ": the SHM region file " + f + " of " + peer.describe() + " is not the region"
                        + " its key names: " + bad);
            }
            return new Mapping(k.file, arena, s, k.token);
        } catch (IOException | RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /** The checked copy of a put by {@code connection} (the one that unpacked {@code dst}). */
    P2pRequest put(Object connection, MemorySegment src, RemoteRegion dst, long dstOffset) {
        if (!(dst instanceof Remote h) || !h.unpackedBy(connection)) {
            throw new IllegalArgumentException("rank " + rank + ": an SHM put into " + (dst == null ? "null" : dst.describe())
                    + ", which was not unpacked on this connection: unpack the key on the connection to the rank that registered it");
        }
        if (!src.isNative()) {
            throw new IllegalArgumentException("rank " + rank + ": a put's source must be native memory, not a heap segment");
        }
        if (!h.isOpen()) {
            throw new IllegalStateException("rank " + rank + ": a put into " + h.describe() + ", whose handle is closed");
        }
        RemoteRegion.checkBounds(h, dstOffset, src.byteSize());
        MemorySegment file = h.mapping.file;
        if (!ShmRegionDescriptor.isLive(file)) {
            throw new IllegalStateException("rank " + rank + ": a put into " + h.describe() + ", which its owner has deregistered (closed the"
                    + " region or its communicator): nothing was written");
        }
        try {
            MemorySegment.copy(src, 0, file, ShmRegionDescriptor.DATA_OFFSET + dstOffset, src.byteSize());
        } catch (IllegalStateException unmapped) {
            // This rank's endpoint was closed (an abort) while it copied: the mapping is gone, not the peer's memory.
            throw new IllegalStateException("rank " + rank + ": a put into " + h.describe() + " was cut short: this rank's SHM endpoint was"
                    + " closed meanwhile (its communicator was closed or aborted)", unmapped);
        }
        P2pRequest done = new P2pRequest(src, true);
        done.complete();
        return done;
    }

    /** A flush: every put was copied when it was posted. */
    static P2pRequest flushed() {
        P2pRequest done = new P2pRequest(MemorySegment.NULL, true);
        done.complete();
        return done;
    }

    /** Closes every handle {@code connection} unpacked. */
    void closeRemotes(Object connection) {
        Mapping[] ms;
        synchronized (this) {
            ms = mappings.values().toArray(Mapping[]::new);
        }
        for (Mapping m : ms) {
            for (Remote h : m.handles.toArray(Remote[]::new)) {
                if (h.unpackedBy(connection)) {
                    h.close();
                }
            }
        }
    }

    /** Deregisters every region (files unlinked, memory unmapped) and unmaps every peer's region. Idempotent; any thread. */
    void close() {
        Mapping[] ms;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            ms = mappings.values().toArray(Mapping[]::new);
            mappings.clear();
        }
        for (Region r : regions) {
            r.close();
        }
        for (Mapping m : ms) {
            for (Remote h : m.handles.toArray(Remote[]::new)) {
                h.invalidate();
            }
            unmap(m);
        }
    }

    private void release(Mapping m) {
        synchronized (this) {
            if (--m.references > 0) {
                return;
            }
            mappings.remove(m.name, m);
        }
        unmap(m);
    }

    private void unmap(Mapping m) {
        try {
            m.arena.close();
        } catch (IllegalStateException alreadyOrStillHeld) {
            // closed already, or held by a native call (none of jccl's)
        }
    }

    /** A peer's region file as this rank mapped it, shared by every handle of its key. */
    private static final class Mapping {
        final String name;
        final Arena arena;
        final MemorySegment file;
        final long token;
        final Set<Remote> handles = ConcurrentHashMap.newKeySet();
        /** Handles (open or being made) that use this mapping; guarded by the ShmRegions' lock. */
        int references;

        Mapping(String name, Arena arena, MemorySegment file, long token) {
            this.name = name;
            this.arena = arena;
            this.file = file;
            this.token = token;
        }
    }

    private record ParsedKey(int owner, byte[] comm, long pid, long token, long length, int number, String host, String file) {
        static ParsedKey parse(byte[] key) {
            try {
                ByteBuffer b = ByteBuffer.wrap(key).order(ByteOrder.LITTLE_ENDIAN);
                if (b.getInt() != KEY_MAGIC) {
                    throw new IllegalArgumentException(notAnShmKey(key));
                }
                int owner = b.getInt();
                byte[] comm = new byte[16];
                b.get(comm);
                long pid = b.getLong();
                long token = b.getLong();
                long length = b.getLong();
                int number = b.getInt();
                String host = string(b);
                String file = string(b);
                if (b.hasRemaining() || length < 0 || number < 0) {
                    throw new IllegalArgumentException(notAnShmKey(key));
                }
                return new ParsedKey(owner, comm, pid, token, length, number, host, file);
            } catch (BufferUnderflowException e) {
                throw new IllegalArgumentException(notAnShmKey(key), e);
            }
        }

        private static String string(ByteBuffer b) {
            byte[] s = new byte[Short.toUnsignedInt(b.getShort())];
            b.get(s);
            return new String(s, StandardCharsets.UTF_8);
        }

        private static String notAnShmKey(byte[] key) {
            return "not an SHM remote key (" + key.length + " bytes, starting " + HexFormat.of().formatHex(key, 0, Math.min(8, key.length))
                    + "): a key is understood only by the transport that made it";
        }
    }

    /** One region this rank allocated. */
    private final class Region extends AbstractRegisteredRegion {
        final int number;
        final Path path;
        final MemorySegment file;
        final Arena arena;
        final long token;

        Region(int number, Path path, MemorySegment file, Arena arena, long length, long token) {
            super(file.asSlice(ShmRegionDescriptor.DATA_OFFSET, length));
            this.number = number;
            this.path = path;
            this.file = file;
            this.arena = arena;
            this.token = token;
        }

        @Override
        protected byte[] packKey() {
            byte[] host = ctx.peer(rank).hostHash().getBytes(StandardCharsets.UTF_8);
            byte[] name = path.getFileName().toString().getBytes(StandardCharsets.UTF_8);
            ByteBuffer b = ByteBuffer.allocate(4 + 4 + 16 + 8 + 8 + 8 + 4 + 2 + host.length + 2 + name.length).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(KEY_MAGIC).putInt(rank).put(Arrays.copyOf(ctx.commId(), 16)).putLong(pid).putLong(token).putLong(length()).putInt(number);
            b.putShort((short) host.length).put(host).putShort((short) name.length).put(name);
            return b.array();
        }

        @Override
        public String describe() {
            return "SHM region #" + number + " of rank " + rank + " (" + length() + " B, " + path + ")";
        }

        /** Marks the region deregistered for the peers, unlinks its file and unmaps it here. */
        @Override
        protected void deregistered() {
            regions.remove(this);
            try {
                ShmRegionDescriptor.markDeregistered(file);
            } catch (IllegalStateException alreadyUnmapped) {
                // unmapped by a concurrent close
            }
            try {
                Files.deleteIfExists(path);
            } catch (IOException e) {
                Log.warn(Log.Subsys.SHM, rank, "SHM: cannot remove " + path + ": " + e);
            }
            try {
                arena.close();
            } catch (IllegalStateException alreadyOrStillHeld) {
                // closed already, or held by a native call (none of jccl's)
            }
        }
    }

    /** A peer's region as one connection of this rank sees it. */
    private final class Remote extends AbstractRemoteRegion {
        final Mapping mapping;
        final ParsedKey key;

        Remote(Mapping mapping, Object connection, ParsedKey key) {
            super(connection, key.owner, key.length);
            this.mapping = mapping;
            this.key = key;
            mapping.handles.add(this);
        }

        @Override
        public String describe() {
            return "rank " + key.owner + "'s SHM region #" + key.number + " (" + key.length + " B)";
        }

        @Override
        protected void released() {
            mapping.handles.remove(this);
            release(mapping);
        }
    }
}
