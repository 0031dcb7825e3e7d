package org.jccl.spi;

import java.io.IOException;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.jccl.ResourceException;

/**
 * Registrations kept for reuse, for transports whose registration is expensive (RDMA: pinning pages
 * and programming the card costs tens of microseconds to milliseconds, so UCX and NCCL cache them).
 * {@link #acquire} returns a registration that contains the requested range, registering one only on a
 * miss; {@link #release} gives it back. Unreferenced registrations stay registered for the next
 * acquire until the bound on registered bytes needs their room: then the least recently released go
 * first (LRU). {@link #close()} deregisters everything.
 *
 * <ul>
 *   <li><b>Hits:</b> a range inside an already registered one of the same {@link MemoryType} hits (the
 *       transport computes offsets from {@link Entry#address()}); overlapping but not contained ranges
 *       get a registration of their own.</li>
 *   <li><b>References:</b> every acquire counts one reference until its release; a referenced
 *       registration is never evicted.</li>
 *   <li><b>Bound:</b> the registered bytes never exceed {@code maxBytes}; a miss that cannot fit after
 *       evicting every unreferenced registration fails with a {@link ResourceException} naming the sizes.</li>
 *   <li><b>Freed memory:</b> the cache cannot see memory being freed; the owner of memory that goes away
 *       calls {@link #invalidate} so that a later allocation at the same address is not served a stale
 *       registration (UCX watches mmap/munmap for this; jccl's transports know when they free).</li>
 * </ul>
 *
 * <p><b>Threading contract:</b> thread-safe; every method holds the cache's lock, including the calls to
 * the {@link Registrar} (registrations are serialised, which RDMA drivers do anyway).
 *
 * @param <H> the transport's handle of one registration (UCX: the {@code ucp_mem_h})
 */
public final class RegistrationCache<H> implements AutoCloseable {

    /**
     * How the transport registers and deregisters memory; called under the cache's lock.
     *
     * @param <H> the transport's handle of one registration
     */
    public interface Registrar<H> {
        /**
         * Registers {@code length} bytes at {@code address}.
         *
         * @throws IOException when the transport cannot register it; the cache stays as it was
         */
        H register(long address, long length, MemoryType type) throws IOException;

        /** Deregisters what {@link #register} returned. Called once per handle. */
        void deregister(H handle);
    }

    /**
     * One registration in the cache. Its fields are read-only for users; the cache changes its state under its lock.
     *
     * @param <H> the transport's handle of one registration
     */
    public static final class Entry<H> {
        private final long address;
        private final long length;
        private final MemoryType type;
        private final H handle;
        private int references;
        /** Invalidated while referenced: no longer found, deregistered at its last release. */
        private boolean stale;
        private boolean deregistered;

        private Entry(long address, long length, MemoryType type, H handle) {
            this.address = address;
            this.length = length;
            this.type = type;
            this.handle = handle;
        }

        /** The first registered byte. */
        public long address() {
            return address;
        }

        /** Registered bytes. */
        public long length() {
            return length;
        }

        /** The memory type. */
        public MemoryType type() {
            return type;
        }

        /** The transport's handle. */
        public H handle() {
            return handle;
        }

        private boolean contains(long a, long n) {
            return a >= address && a - address <= length - n;
        }

        private boolean overlaps(long a, long n) {
            return a < address + length && address < a + n;
        }

        @Override
        public String toString() {
            return type + " [0x" + Long.toHexString(address) + ", +" + length + ")";
        }
    }

    private final String name;
    private final long maxBytes;
    private final String boundHint;
    private final Registrar<H> registrar;
    /** Live (not stale) entries by type and start address; several may start at one address. */
    private final Map<MemoryType, TreeMap<Long, List<Entry<H>>>> index = new EnumMap<>(MemoryType.class);
    /** The longest registration ever made per type: lookups stop scanning below {@code address - maxLength}. */
    private final Map<MemoryType, Long> maxLength = new EnumMap<>(MemoryType.class);
    /** Unreferenced live entries, least recently released first. */
    private final LinkedHashSet<Entry<H>> idle = new LinkedHashSet<>();
    /** Every entry still registered, stale ones included. */
    private final LinkedHashSet<Entry<H>> all = new LinkedHashSet<>();
    private long registeredBytes;
    private long hits;
    private long misses;
    private long evictions;
    private boolean closed;

    /**
     * An empty cache.
     *
     * @param name for messages: "UCX registration cache of rank 3"
     * @param maxBytes the bound on registered bytes (more than 0)
     * @param boundHint for the bound's error: what sets the bound and how to raise it (a setting's name)
     * @param registrar the transport's registration calls
     */
    public RegistrationCache(String name, long maxBytes, String boundHint, Registrar<H> registrar) {
        if (maxBytes <= 0) {
            throw new IllegalArgumentException(name + ": the bound on registered bytes must be positive, not " + maxBytes);
        }
        this.name = Objects.requireNonNull(name, "name");
        this.maxBytes = maxBytes;
        this.boundHint = Objects.requireNonNull(boundHint, "boundHint");
        this.registrar = Objects.requireNonNull(registrar, "registrar");
    }

    /**
     * A registration containing {@code [address, address + length)} of {@code type}, with one more
     * reference: a hit, or a new registration of exactly that range (after evicting unreferenced ones,
     * least recently released first, if the bound needs it).
     *
     * @throws IllegalArgumentException for a length that is not positive or a range that wraps around
     * @throws ResourceException when the range does not fit under the bound even with every unreferenced
     *         registration evicted
     * @throws IOException when the registrar fails
     * @throws IllegalStateException after {@link #close()}
     */
    public synchronized Entry<H> acquire(long address, long length, MemoryType type) throws IOException {
        Objects.requireNonNull(type, "type");
        if (closed) {
            throw new IllegalStateException(name + " is closed");
        }
        if (address < 0 || length <= 0 || address + length < 0) {
            throw new IllegalArgumentException(name + ": cannot register " + length + " bytes at 0x" + Long.toHexString(address)
                    + " (the length must be positive and the range must not wrap around)");
        }
        Entry<H> hit = find(address, length, type);
        if (hit != null) {
            hits++;
            if (hit.references++ == 0) {
                idle.remove(hit);
            }
            return hit;
        }
        misses++;
        makeRoom(length, address, type);
        H handle = registrar.register(address, length, type);
        Entry<H> e = new Entry<>(address, length, type, handle);
        e.references = 1;
        index.computeIfAbsent(type, t -> new TreeMap<>()).computeIfAbsent(address, a -> new ArrayList<>(1)).add(e);
        maxLength.merge(type, length, Math::max);
        all.add(e);
        registeredBytes += length;
        return e;
    }

    /**
     * Gives back one reference. At zero the registration stays cached (most recently released last in
     * line for eviction), unless it was invalidated meanwhile: then it is deregistered now. No-op after close.
     *
     * @throws IllegalStateException when the entry has no reference left (released more often than acquired)
     */
    public synchronized void release(Entry<H> e) {
        if (closed || e.deregistered) {
            return;
        }
        if (e.references <= 0) {
            throw new IllegalStateException(name + ": " + e + " released more often than acquired");
        }
        if (--e.references == 0) {
            if (e.stale) {
                deregister(e);
            } else {
                idle.add(e);
            }
        }
    }

    /**
     * Forgets every registration overlapping {@code [address, address + length)} of {@code type}, because
     * that memory was (or is about to be) freed: unreferenced ones are deregistered now, referenced ones
     * are no longer found by {@link #acquire} and are deregistered at their last release.
     *
     * @return how many registrations were forgotten
     */
    public synchronized int invalidate(long address, long length, MemoryType type) {
        TreeMap<Long, List<Entry<H>>> byStart = index.get(type);
        if (closed || byStart == null || length <= 0) {
            return 0;
        }
        List<Entry<H>> hit = new ArrayList<>();
        long reach = maxLength.getOrDefault(type, 0L);
        // Candidates start before the range's end and no earlier than (range start - longest registration).
        for (List<Entry<H>> list : byStart.subMap(address - Math.min(reach, address), true, address + length, false).values()) {
            for (Entry<H> e : list) {
                if (e.overlaps(address, length)) {
                    hit.add(e);
                }
            }
        }
        for (Entry<H> e : hit) {
            unindex(e);
            if (e.references == 0) {
                idle.remove(e);
                deregister(e);
            } else {
                e.stale = true;
            }
        }
        return hit.size();
    }

    /** Bytes registered now (referenced, cached and stale registrations). */
    public synchronized long registeredBytes() {
        return registeredBytes;
    }

    /** The bound on {@link #registeredBytes()}. */
    public long maxBytes() {
        return maxBytes;
    }

    /** Registrations held now. */
    public synchronized int size() {
        return all.size();
    }

    /** Acquires served by an existing registration. */
    public synchronized long hits() {
        return hits;
    }

    /** Acquires that registered. */
    public synchronized long misses() {
        return misses;
    }

    /** Unreferenced registrations deregistered to make room under the bound. */
    public synchronized long evictions() {
        return evictions;
    }

    /** The references an entry holds now (0: cached, unreferenced). */
    public synchronized int references(Entry<H> e) {
        return e.references;
    }

    /** Whether the entry is still registered. */
    public synchronized boolean isRegistered(Entry<H> e) {
        return !e.deregistered;
    }

    /**
     * Deregisters every registration, referenced or not (the transport is closing: no operation may use
     * them any more). Idempotent. A registrar failure does not stop the others; the first is rethrown.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        RuntimeException first = null;
        for (Entry<H> e : new ArrayList<>(all)) {
            try {
                deregister(e);
            } catch (RuntimeException ex) {
                if (first == null) {
                    first = ex;
                } else {
                    first.addSuppressed(ex);
                }
            }
        }
        index.clear();
        idle.clear();
        if (first != null) {
            throw first;
        }
    }

    @Override
    public synchronized String toString() {
        return name + ": " + all.size() + " registration(s), " + registeredBytes + " of at most " + maxBytes + " bytes, " + hits + " hit(s), "
                + misses + " miss(es), " + evictions + " eviction(s)";
    }

    private Entry<H> find(long address, long length, MemoryType type) {
        TreeMap<Long, List<Entry<H>>> byStart = index.get(type);
        if (byStart == null) {
            return null;
        }
        long reach = maxLength.getOrDefault(type, 0L);
        for (Map.Entry<Long, List<Entry<H>>> m : byStart.headMap(address, true).descendingMap().entrySet()) {
            if (address - m.getKey() > reach) {
                break; // every earlier registration ends before this range does
            }
            for (Entry<H> e : m.getValue()) {
                if (e.contains(address, length)) {
                    return e;
                }
            }
        }
        return null;
    }

    /** Evicts unreferenced registrations, least recently released first, until {@code length} more bytes fit. */
    private void makeRoom(long length, long address, MemoryType type) {
        if (length > maxBytes - registeredBytes) {
            Iterator<Entry<H>> it = idle.iterator();
            while (length > maxBytes - registeredBytes && it.hasNext()) {
                Entry<H> e = it.next();
                it.remove();
                unindex(e);
                deregister(e);
                evictions++;
            }
        }
        if (length > maxBytes - registeredBytes) {
            throw new ResourceException(name + ": cannot register " + length + " bytes of " + type + " memory at 0x" + Long.toHexString(address)
                    + ": " + registeredBytes + " bytes are registered and in use by operations in flight, and the bound is " + maxBytes
                    + " bytes. Fix: raise the bound (" + boundHint + "), or keep fewer registered buffers in use at once", null);
        }
    }

    private void unindex(Entry<H> e) {
        TreeMap<Long, List<Entry<H>>> byStart = index.get(e.type);
        List<Entry<H>> list = byStart == null ? null : byStart.get(e.address);
        if (list != null && list.remove(e) && list.isEmpty()) {
            byStart.remove(e.address);
        }
    }

    private void deregister(Entry<H> e) {
        if (e.deregistered) {
            return;
        }
        e.deregistered = true;
        all.remove(e);
        registeredBytes -= e.length;
        registrar.deregister(e.handle);
    }
}
