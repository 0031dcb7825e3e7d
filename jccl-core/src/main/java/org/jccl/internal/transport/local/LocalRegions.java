package org.jccl.internal.transport.local;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jccl.internal.transport.AbstractRegisteredRegion;
import org.jccl.internal.transport.AbstractRemoteRegion;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.RemoteRegion;
import org.jccl.spi.TransportContext;

/**
 * Registration and one-sided puts between ranks of one JVM: a registered region is the caller's own
 * segment (or one allocated here), found by a JVM-wide id; a put is one {@code MemorySegment.copy}
 * into it on the putting rank's thread, so it is complete, and visible to whoever synchronises with
 * that thread afterwards, when {@code put} returns; a flush has nothing left to do.
 *
 * <p>The remote key (little-endian):
 * <pre>
 *   "JLK1" (4) | JVM id (16) | region id (8) | owner rank (4) | length (8)
 * </pre>
 * The JVM id is random per class load of this transport, so a key carried to another JVM (whose
 * ranks reach this one over SHM, UCX or TCP) is refused with a message, never taken for a region of
 * that JVM. The owner is checked by identity: a key is used on the connection to the rank that made
 * it, in the same communicator.
 *
 * <p>Threading: the JVM-wide table is concurrent; a region's state is volatile. A region closed while
 * another rank copies into it fails that copy (the closed arena's check), never the JVM.
 */
final class LocalRegions {
    /** "JLK1" as a little-endian int. */
    static final int KEY_MAGIC = 0x314b4c4a;
    static final int KEY_BYTES = 4 + 16 + 8 + 4 + 8;

    private static final byte[] JVM_ID = new byte[16];
    private static final ConcurrentHashMap<Long, Region> REGISTRY = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT_ID = new AtomicLong();
    /** An unstarted thread: memory it may access is memory any thread may access (not a confined arena's). */
    private static final Thread ANOTHER_THREAD = Thread.ofPlatform().unstarted(() -> { });

    static {
        new SecureRandom().nextBytes(JVM_ID);
    }

    private final TransportContext ctx;
    private final Set<Region> regions = ConcurrentHashMap.newKeySet();
    private final Set<Remote> remotes = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    LocalRegions(TransportContext ctx) {
        this.ctx = ctx;
    }

    RegisteredRegion register(MemorySegment memory) {
        if (!memory.isNative()) {
            throw new IllegalArgumentException("LOCAL: cannot register a heap segment (" + memory.byteSize() + " bytes): registered memory"
                    + " must be native (Arena.ofShared(), Arena.ofAuto(), Arena.global()); heap arrays are staged by the runtime");
        }
        if (!memory.scope().isAlive()) {
            throw new IllegalArgumentException("LOCAL: cannot register memory of an arena that is already closed");
        }
        if (!memory.isAccessibleBy(ANOTHER_THREAD)) {
            throw new IllegalArgumentException("LOCAL: cannot register memory of a confined arena: other ranks' threads put into registered"
                    + " memory, so allocate it with Arena.ofShared(), Arena.ofAuto() or Arena.global()");
        }
        return add(new Region(this, memory, null));
    }

    RegisteredRegion allocate(long length) {
        if (length < 0) {
            throw new IllegalArgumentException("LOCAL: cannot allocate " + length + " bytes");
        }
        Arena arena = Arena.ofShared();
        try {
            return add(new Region(this, arena.allocate(Math.max(1, length), 64).asSlice(0, length), arena));
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
    }

    private Region add(Region r) {
        synchronized (this) {
            if (closed) {
                r.close();
                throw new IllegalStateException("LOCAL endpoint of rank " + ctx.rank() + " is closed");
            }
            regions.add(r);
        }
        REGISTRY.put(r.id, r);
        return r;
    }

    /** Makes a handle of {@code key} for puts by {@code connection}, whose peer's context is {@code peerContext}. */
    RemoteRegion unpack(byte[] key, Object connection, int peer, TransportContext peerContext) {
        ByteBuffer b = ByteBuffer.wrap(key).order(ByteOrder.LITTLE_ENDIAN);
        byte[] jvm = new byte[16];
        long id;
        int owner;
        long length;
        try {
            if (key.length != KEY_BYTES || b.getInt() != KEY_MAGIC) {
                throw new IllegalArgumentException(notALocalKey(key));
            }
            b.get(jvm);
            id = b.getLong();
            owner = b.getInt();
            length = b.getLong();
        } catch (BufferUnderflowException e) {
            throw new IllegalArgumentException(notALocalKey(key), e);
        }
        if (!java.util.Arrays.equals(jvm, JVM_ID)) {
            throw new IllegalArgumentException("rank " + ctx.rank() + ": the LOCAL key of rank " + owner + "'s region #" + id
                    + " was made in another JVM (JVM id " + HexFormat.of().formatHex(jvm) + ", this JVM's is " + HexFormat.of().formatHex(JVM_ID)
                    + "): LOCAL keys are valid only among ranks of the JVM that made them; ranks in other processes reach each other over"
                    + " SHM, UCX or TCP");
        }
        Region r = REGISTRY.get(id);
        if (r == null || !r.isOpen()) {
            throw new IllegalStateException("rank " + ctx.rank() + ": the LOCAL key names rank " + owner + "'s region #" + id + " of " + length
                    + " B, which its owner has deregistered (closed the region or its communicator)");
        }
        if (r.owner.ctx != peerContext) {
            throw new IllegalArgumentException("rank " + ctx.rank() + ": the LOCAL key of " + r.describe() + " was unpacked on the connection to"
                    + " rank " + peer + (r.owner.ctx.rank() == peer ? " of another communicator" : "") + ": unpack a key on the connection to"
                    + " the rank that registered it, in the same communicator");
        }
        Remote h = new Remote(r, connection, peer);
        synchronized (this) {
            if (closed) {
                throw new IllegalStateException("LOCAL endpoint of rank " + ctx.rank() + " is closed");
            }
            remotes.add(h);
        }
        return h;
    }

    private static String notALocalKey(byte[] key) {
        return "not a LOCAL remote key (" + key.length + " bytes, starting "
                + HexFormat.of().formatHex(key, 0, Math.min(8, key.length)) + "): a key is understood only by the transport that made it";
    }

    /** The checked copy of a put by {@code connection} (the one that unpacked {@code dst}). */
    P2pRequest put(Object connection, MemorySegment src, RemoteRegion dst, long dstOffset) {
        if (!(dst instanceof Remote h) || !h.unpackedBy(connection)) {
            throw new IllegalArgumentException("rank " + ctx.rank() + ": a LOCAL put into " + (dst == null ? "null" : dst.describe())
                    + ", which was not unpacked on this connection: unpack the key on the connection to the rank that registered it");
        }
        if (!src.isNative()) {
            throw new IllegalArgumentException("rank " + ctx.rank() + ": a put's source must be native memory, not a heap segment");
        }
        if (!h.isOpen()) {
            throw new IllegalStateException("rank " + ctx.rank() + ": a put into " + h.describe() + ", whose handle is closed");
        }
        if (!src.scope().isAlive()) {
            throw new IllegalStateException("rank " + ctx.rank() + ": a put into " + h.describe() + " from memory of an arena that is closed");
        }
        RemoteRegion.checkBounds(h, dstOffset, src.byteSize());
        Region r = h.region;
        if (!r.isOpen()) {
            throw deregistered(h);
        }
        try {
            MemorySegment.copy(src, 0, r.memory(), dstOffset, src.byteSize());
        } catch (IllegalStateException closedUnderUs) {
            // The owner freed the memory while we copied (its arena's close won).
            IllegalStateException e = deregistered(h);
            e.initCause(closedUnderUs);
            throw e;
        }
        P2pRequest done = new P2pRequest(src, true);
        done.complete();
        return done;
    }

    private IllegalStateException deregistered(Remote h) {
        return new IllegalStateException("rank " + ctx.rank() + ": a put into " + h.describe() + ", which its owner has deregistered (closed"
                + " the region or its communicator): nothing was written");
    }

    /** A flush: every put was copied when it was posted. */
    static P2pRequest flushed() {
        P2pRequest done = new P2pRequest(MemorySegment.NULL, true);
        done.complete();
        return done;
    }

    /** Closes every handle unpacked by {@code connection}. */
    void closeRemotes(Object connection) {
        for (Remote h : remotes) {
            if (h.unpackedBy(connection)) {
                h.close();
            }
        }
    }

    /** Deregisters every region of this endpoint and closes every handle its connections unpacked. */
    void close() {
        synchronized (this) {
            closed = true;
        }
        for (Region r : regions) {
            r.close();
        }
        for (Remote h : remotes) {
            h.close();
        }
    }

    /** A registered (or allocated) region of one rank. */
    private static final class Region extends AbstractRegisteredRegion {
        final long id = NEXT_ID.incrementAndGet();
        final LocalRegions owner;
        /** The arena of an allocated region (freed at close), null for the caller's memory. */
        final Arena arena;

        Region(LocalRegions owner, MemorySegment segment, Arena arena) {
            super(segment);
            this.owner = owner;
            this.arena = arena;
        }

        /** The region's memory, open or not (a put's copy fails on it once an allocated region is freed). */
        MemorySegment memory() {
            return data;
        }

        @Override
        protected byte[] packKey() {
            ByteBuffer b = ByteBuffer.allocate(KEY_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(KEY_MAGIC).put(JVM_ID).putLong(id).putInt(owner.ctx.rank()).putLong(data.byteSize());
            return b.array();
        }

        @Override
        public String describe() {
            return "LOCAL region #" + id + " of rank " + owner.ctx.rank() + " (" + data.byteSize() + " B" + (arena != null ? ", allocated" : "")
                    + ")";
        }

        @Override
        protected void deregistered() {
            REGISTRY.remove(id, this);
            owner.regions.remove(this);
            if (arena != null) {
                try {
                    arena.close();
                } catch (IllegalStateException stillAcquired) {
                    // Held by a native call right now (none of jccl's): left to the JVM's exit rather than failing a close.
                }
            }
        }
    }

    /** A peer's region as one connection sees it. */
    private final class Remote extends AbstractRemoteRegion {
        final Region region;

        Remote(Region region, Object connection, int peer) {
            super(connection, peer, region.length());
            this.region = region;
        }

        @Override
        public String describe() {
            return "rank " + owner() + "'s LOCAL region #" + region.id + " (" + region.length() + " B)";
        }

        @Override
        protected void released() {
            remotes.remove(this);
        }
    }
}
