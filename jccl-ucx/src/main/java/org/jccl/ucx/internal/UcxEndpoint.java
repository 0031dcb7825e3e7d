package org.jccl.ucx.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.MemoryType;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.RegistrationCache;
import org.jccl.spi.TransportContext;

/**
 * One rank's UCX presence for one communicator: a context and a worker ({@link UcxWorker}), the worker's
 * address as this endpoint's published address, its event fd as the wake descriptor, a {@link UcxConnection}
 * (a UCX endpoint) per peer, and the registrations ({@link RegistrationCache} over {@code ucp_mem_map}).
 */
final class UcxEndpoint implements Endpoint {
    /** An unstarted thread: memory it may access is memory any thread may access (not a confined arena's). */
    private static final Thread ANOTHER_THREAD = Thread.ofPlatform().unstarted(() -> { });

    /** Registered bytes per rank before unreferenced registrations are evicted. */
    static final long REGISTRATION_BOUND = 4L << 30;

    final UcxWorker worker;
    final TransportContext ctx;
    final int rank;
    final boolean onesided = true;
    /** UCX's transports of this context ("tcp", "posix"), for describe(). */
    final List<String> transports;
    private final Map<Integer, UcxConnection> connections = new HashMap<>();
    private final RegistrationCache<Long> cache;
    private final AtomicInteger regions = new AtomicInteger();

    /** First word of the address a rank publishes ({@link #address}): jccl's header, then UCX's worker address. */
    static final int ADDRESS_MAGIC = 0x4A435831;
    /** Bytes of that header: the magic, then the rank's split size ({@link UcxConnection#splitAt}). */
    static final int ADDRESS_HEADER = 8;

    /** Guarded messages from this size go as head and body, as far as this rank is concerned (the pair takes the smaller). */
    final long splitAt;

    UcxEndpoint(UcxWorker worker, TransportContext ctx) {
        this(worker, ctx, UcxConnection.SPLIT_AT);
    }

    UcxEndpoint(UcxWorker worker, TransportContext ctx, long splitAt) {
        this.splitAt = splitAt;
        this.worker = worker;
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.transports = worker.resources.stream().map(r -> r.substring(0, r.indexOf('/') < 0 ? r.length() : r.indexOf('/'))).distinct()
                .toList();
        this.cache = new RegistrationCache<>("UCX registration cache of rank " + rank, REGISTRATION_BOUND,
                "a bound of " + (REGISTRATION_BOUND >> 30) + " GiB per rank, fixed in this version",
                new RegistrationCache.Registrar<>() {
                    @Override
                    public Long register(long address, long length, MemoryType type) throws IOException {
                        synchronized (worker.lock) {
                            if (worker.isClosedUnlocked()) {
                                throw new IOException("UCX endpoint of rank " + rank + " is closed");
                            }
                            try {
                                return worker.ucp.memMap(worker.context, address, length, false);
                            } catch (UcxException e) {
                                throw new IOException("UCX: registering " + length + " B failed: " + e.getMessage()
                                        + (e.status() == Status.ERR_NO_MEMORY || e.status() == Status.ERR_IO_ERROR
                                        ? " (RDMA: raise the locked-memory limit, ulimit -l unlimited)" : ""), e);
                            }
                        }
                    }

                    @Override
                    public void deregister(Long memh) {
                        synchronized (worker.lock) {
                            if (!worker.isClosedUnlocked()) {
                                worker.ucp.memUnmap(worker.context, memh);
                            }
                        }
                    }
                });
    }

    /**
     * What this rank publishes: {@link #ADDRESS_MAGIC}, its split size (both big-endian ints), then UCX's worker
     * address. A peer without the header runs another jccl version: {@link #connect} refuses it by name.
     */
    @Override
    public byte[] address() {
        return java.nio.ByteBuffer.allocate(ADDRESS_HEADER + worker.address.length).putInt(ADDRESS_MAGIC).putInt((int) splitAt)
                .put(worker.address).array();
    }

    @Override
    public String transportName() {
        return UcxTransport.NAME;
    }

    int addressHash() {
        return Arrays.hashCode(address());
    }

    int peerAddressHash(int peer) {
        byte[] a = ctx.peer(peer).addresses().get(UcxTransport.NAME);
        return a == null ? 0 : Arrays.hashCode(a);
    }

    @Override
    public void prepare(int[] peers) throws IOException {
        for (int p : peers) {
            connect(p);
        }
    }

    @Override
    public Connection connect(int peerRank) throws IOException {
        synchronized (worker.lock) {
            if (worker.isClosedUnlocked()) {
                throw new IOException("UCX endpoint of rank " + rank + " is closed");
            }
            UcxConnection c = connections.get(peerRank);
            if (c != null) {
                return c;
            }
            PeerInfo peer = ctx.peer(peerRank);
            byte[] published = peer.addresses().get(UcxTransport.NAME);
            if (published == null) {
                throw new IOException("UCX: " + peer.describe() + " published no UCX address (UCX is off or unavailable there)");
            }
            java.nio.ByteBuffer header = java.nio.ByteBuffer.wrap(published);
            if (published.length <= ADDRESS_HEADER || header.getInt(0) != ADDRESS_MAGIC) {
                throw new IOException("UCX: " + peer.describe() + " published a UCX address without this jccl version's header: it runs"
                        + " another version of jccl (every rank of a job must run the same one)");
            }
            long pairSplit = Math.min(splitAt, Integer.toUnsignedLong(header.getInt(4)));
            byte[] remote = Arrays.copyOfRange(published, ADDRESS_HEADER, published.length);
            try (Arena a = Arena.ofConfined()) {
                MemorySegment addr = a.allocate(remote.length);
                MemorySegment.copy(remote, 0, addr, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, remote.length);
                MemorySegment params = a.allocate(Layouts.STRUCT_BYTES, 8);
                long key = EpErrors.newKey();
                params.set(JAVA_LONG, Layouts.EP_FIELD_MASK, Layouts.UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
                        | Layouts.UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | Layouts.UCP_EP_PARAM_FIELD_ERR_HANDLER);
                params.set(ADDRESS, Layouts.EP_ADDRESS, addr);
                params.set(JAVA_INT, Layouts.EP_ERR_MODE, Layouts.UCP_ERR_HANDLING_MODE_PEER);
                params.set(ADDRESS, Layouts.EP_ERR_HANDLER_CB, EpErrors.STUB);
                params.set(JAVA_LONG, Layouts.EP_ERR_HANDLER_ARG, key);
                MemorySegment out = a.allocate(ADDRESS);
                byte s = worker.ucp.epCreate(worker.worker, params, out);
                if (s != Status.OK) {
                    throw new IOException("UCX: rank " + rank + " cannot create an endpoint to " + peer.describe() + ": ucp_ep_create returned "
                            + Status.name(s) + (s == Status.ERR_UNREACHABLE
                            ? " (no UCX transport reaches it in the peer-failure error mode; UCX transports here: " + worker.resources
                            + "; with only posix/sysv/cma and self, set UCX_POSIX_ERROR_HANDLING=y, or let SHM carry same-host pairs)" : ""));
                }
                c = new UcxConnection(this, rank, peerRank, peer, out.get(JAVA_LONG, 0), key, pairSplit);
                EpErrors.bind(key, c);
                connections.put(peerRank, c);
                return c;
            }
        }
    }

    void forget(int peer) {
        connections.remove(peer);
    }

    @Override
    public int wakeFd() {
        return worker.efd;
    }

    @Override
    public boolean armWakeFd() {
        synchronized (worker.lock) {
            if (worker.isClosedUnlocked()) {
                return true;
            }
            byte s = worker.ucp.arm(worker.worker);
            return s == Status.OK;
        }
    }

    @Override
    public Set<MemoryType> memoryTypes() {
        return EnumSet.of(MemoryType.HOST);
    }

    @Override
    public boolean canRegister(MemoryType type) {
        return type == MemoryType.HOST;
    }

    @Override
    public boolean canAllocate() {
        return true;
    }

    @Override
    public RegisteredRegion register(MemorySegment memory) throws IOException {
        if (!memory.isNative()) {
            throw new IllegalArgumentException("UCX: cannot register a heap segment (" + memory.byteSize() + " bytes): registered memory must"
                    + " be native (Arena.ofShared(), Arena.ofAuto(), Arena.global()); heap arrays are staged by the runtime");
        }
        if (!memory.scope().isAlive()) {
            throw new IllegalArgumentException("UCX: cannot register memory of an arena that is already closed");
        }
        if (!memory.isAccessibleBy(ANOTHER_THREAD)) {
            throw new IllegalArgumentException("UCX: cannot register memory of a confined arena: operations run on the caller's thread or"
                    + " the operation thread, so allocate it with Arena.ofShared(), Arena.ofAuto() or Arena.global()");
        }
        if (memory.byteSize() == 0) {
            throw new IllegalArgumentException("UCX cannot register an empty segment");
        }
        RegistrationCache.Entry<Long> e = cache.acquire(memory.address(), memory.byteSize(), MemoryType.HOST);
        return new UcxRegions.Local(this, memory, e, null, regions.incrementAndGet());
    }

    @Override
    public RegisteredRegion allocate(long length) throws IOException {
        if (length < 0) {
            throw new IllegalArgumentException("cannot allocate " + length + " bytes");
        }
        Arena arena = Arena.ofShared();
        try {
            MemorySegment m = arena.allocate(Math.max(1, length), 64).asSlice(0, length);
            RegistrationCache.Entry<Long> e = cache.acquire(m.address(), Math.max(1, length), MemoryType.HOST);
            return new UcxRegions.Local(this, m, e, arena, regions.incrementAndGet());
        } catch (IOException | RuntimeException ex) {
            arena.close();
            throw ex;
        }
    }

    void release(RegistrationCache.Entry<Long> e, UcxRegions.Local region) {
        cache.release(e);
    }

    void invalidate(MemorySegment freed) {
        cache.invalidate(freed.address(), Math.max(1, freed.byteSize()), MemoryType.HOST);
    }

    byte[] packRkey(long memh) {
        synchronized (worker.lock) {
            if (worker.isClosedUnlocked()) {
                throw new IllegalStateException("UCX endpoint of rank " + rank + " is closed");
            }
            return worker.ucp.rkeyPack(worker.context, memh);
        }
    }

    /**
     * Progresses until every request finished or 1 s passed, freeing each (one still running is released by UCX when
     * it ends, before the worker is destroyed); the worker's lock is held.
     */
    void awaitLocked(List<Long> requests) {
        List<Long> left = new ArrayList<>();
        for (long r : requests) {
            if (r != 0) {
                left.add(r);
            }
        }
        long deadline = System.nanoTime() + 1_000_000_000L;
        while (!left.isEmpty() && System.nanoTime() < deadline) {
            worker.progressLocked();
            left.removeIf(r -> {
                if (worker.ucp.checkStatus(r) != Status.INPROGRESS) {
                    worker.ucp.free(r);
                    return true;
                }
                return false;
            });
        }
        for (long r : left) {
            worker.ucp.free(r);
        }
    }

    @Override
    public void close() {
        synchronized (worker.lock) {
            if (worker.isClosedUnlocked()) {
                return;
            }
            for (UcxConnection c : connections.values()) {
                c.startCloseLocked();
            }
            List<Long> flushing = new ArrayList<>();
            for (UcxConnection c : connections.values()) {
                flushing.add(c.startFlushLocked());
            }
            awaitLocked(flushing);
            List<Long> closing = new ArrayList<>();
            for (UcxConnection c : connections.values()) {
                closing.add(c.forceCloseLocked());
            }
            awaitLocked(closing);
            connections.clear();
            try {
                cache.close();
            } catch (RuntimeException e) {
                // the worker and its context go next, with every mapping
            }
            worker.markClosed();
            worker.destroyLocked();
        }
    }
}
