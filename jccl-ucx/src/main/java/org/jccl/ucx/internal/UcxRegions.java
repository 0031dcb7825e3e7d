package org.jccl.ucx.internal;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jccl.spi.MemoryType;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.RegistrationCache;
import org.jccl.spi.RemoteRegion;

/**
 * Registered memory and remote keys over UCX: {@code ucp_mem_map} (through the endpoint's {@link
 * RegistrationCache}), {@code ucp_rkey_pack}, {@code ucp_ep_rkey_unpack}, {@code ucp_rkey_destroy}. A packed
 * key is jccl's header (magic, owner rank, the owner endpoint's address hash, base address, length) followed by
 * UCX's rkey bytes, so that a connection refuses a key that is not its peer's, saying why.
 */
final class UcxRegions {
    private UcxRegions() {
    }

    static final int MAGIC = 0x55435831; // "UCX1"
    private static final int HEADER = 4 + 4 + 4 + 8 + 8 + 4;

    /** This rank's registered region. */
    static final class Local implements RegisteredRegion {
        private final UcxEndpoint endpoint;
        private final MemorySegment data;
        private final RegistrationCache.Entry<Long> entry;
        private final Arena owned; // for allocate(): the memory is ours to free
        private final int id;
        private final AtomicBoolean open = new AtomicBoolean(true);

        Local(UcxEndpoint endpoint, MemorySegment data, RegistrationCache.Entry<Long> entry, Arena owned, int id) {
            this.endpoint = endpoint;
            this.data = data;
            this.entry = entry;
            this.owned = owned;
            this.id = id;
        }

        @Override
        public long address() {
            return data.address();
        }

        @Override
        public long length() {
            return data.byteSize();
        }

        @Override
        public MemoryType type() {
            return MemoryType.HOST;
        }

        @Override
        public MemorySegment segment() {
            if (!open.get()) {
                throw new IllegalStateException(describe() + " is closed");
            }
            return data;
        }

        @Override
        public byte[] packedKey() {
            if (!open.get()) {
                throw new IllegalStateException(describe() + " is closed");
            }
            byte[] rkey = endpoint.packRkey(entry.handle());
            ByteBuffer b = ByteBuffer.allocate(HEADER + rkey.length).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(MAGIC).putInt(endpoint.rank).putInt(endpoint.addressHash()).putLong(data.address()).putLong(data.byteSize())
                    .putInt(rkey.length).put(rkey);
            return b.array();
        }

        @Override
        public boolean isOpen() {
            return open.get() && !endpoint.worker.isClosed();
        }

        @Override
        public String describe() {
            return "UCX region #" + id + " of rank " + endpoint.rank + " (" + data.byteSize() + " B)";
        }

        @Override
        public void close() {
            if (open.compareAndSet(true, false)) {
                endpoint.release(entry, this);
                if (owned != null) {
                    endpoint.invalidate(data);
                    owned.close();
                }
            }
        }
    }

    /** A peer's region as unpacked on one connection. */
    static final class Remote implements RemoteRegion {
        final UcxConnection connection;
        final int owner;
        final long base;
        final long length;
        private final long rkey;
        private final AtomicBoolean open = new AtomicBoolean(true);

        Remote(UcxConnection connection, int owner, long base, long length, long rkey) {
            this.connection = connection;
            this.owner = owner;
            this.base = base;
            this.length = length;
            this.rkey = rkey;
        }

        long rkey() {
            return rkey;
        }

        @Override
        public int owner() {
            return owner;
        }

        @Override
        public long length() {
            return length;
        }

        @Override
        public MemoryType type() {
            return MemoryType.HOST;
        }

        @Override
        public boolean isOpen() {
            return open.get() && !connection.endpoint().worker.isClosed();
        }

        @Override
        public String describe() {
            return "rank " + owner + "'s UCX region (" + length + " B)";
        }

        @Override
        public void close() {
            if (open.compareAndSet(true, false)) {
                UcxWorker w = connection.endpoint().worker;
                synchronized (w.lock) {
                    if (!w.isClosedUnlocked()) {
                        connection.ucp().rkeyDestroy(rkey);
                    }
                }
            }
        }
    }

    /** Decodes and checks a packed key for {@code conn}, whose peer is {@code peer}; the worker's lock is held. */
    static Remote unpack(UcxConnection conn, byte[] key, int peer) throws IOException {
        if (key == null || key.length < HEADER) {
            throw new IllegalArgumentException("not a UCX remote key (" + (key == null ? "null" : key.length + " bytes, shorter than its "
                    + HEADER + "-byte header") + "): a remote key is understood only by the transport that made it");
        }
        ByteBuffer b = ByteBuffer.wrap(key).order(ByteOrder.LITTLE_ENDIAN);
        int magic = b.getInt();
        if (magic != MAGIC) {
            throw new IllegalArgumentException("not a UCX remote key: a remote key is understood only by the transport that made it");
        }
        int owner = b.getInt();
        int hash = b.getInt();
        long base = b.getLong();
        long length = b.getLong();
        int n = b.getInt();
        if (n != key.length - HEADER) {
            throw new IllegalArgumentException("malformed UCX region key: its rkey length " + n + " does not match its " + key.length + " bytes");
        }
        if (owner != peer) {
            throw new IllegalArgumentException("UCX: the remote key was registered by rank " + owner + ", not by this connection's peer, rank "
                    + peer + ": unpack a key on the connection to the rank that registered it");
        }
        if (hash != conn.endpoint().peerAddressHash(peer)) {
            throw new IllegalArgumentException("the UCX region key of rank " + owner
                    + " was made by another endpoint (another communicator or process) than this connection's peer");
        }
        byte[] rkeyBytes = new byte[n];
        b.get(rkeyBytes);
        try {
            long rkey = conn.ucp().rkeyUnpack(conn.ep, rkeyBytes);
            return new Remote(conn, owner, base, length, rkey);
        } catch (UcxException e) {
            throw new IOException("UCX: cannot unpack rank " + owner + "'s region key: " + e.getMessage(), e);
        }
    }

    /** The checks of a put before any byte moves. */
    static Remote check(UcxConnection conn, RemoteRegion dst, long offset, MemorySegment src) {
        if (!(dst instanceof Remote r) || r.connection != conn) {
            throw new IllegalArgumentException(dst.describe() + " was not unpacked on this connection (" + conn.describe() + ")");
        }
        if (!r.isOpen()) {
            throw new IllegalStateException(dst.describe() + " is closed");
        }
        if (!src.isNative()) {
            throw new IllegalArgumentException("a put's source must be native memory, not a heap array");
        }
        RemoteRegion.checkBounds(dst, offset, src.byteSize());
        return r;
    }
}
