package org.jccl.cuda.internal;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jccl.cuda.CudaException;

/**
 * The peer allocations this process has opened with cuIpcOpenMemHandle, by peer and handle, with the
 * range each covers in the peer's address space.
 *
 * <p>The rule it keeps: a process may hold one mapping of a peer's memory at a time. When a peer frees
 * an allocation and allocates again (a scratch buffer that grows), its new allocation can reuse the
 * freed addresses under a new handle; while this process still holds the old mapping, opening the new
 * handle fails with CUDA_ERROR_ALREADY_MAPPED. So a mapping of a peer whose range overlaps the new
 * allocation's is stale (the peer cannot have two live allocations at one address): it is closed,
 * after this process's GPU work is idle (a kernel queued earlier may still read it), before the new
 * handle is opened. Should the driver still answer ALREADY_MAPPED (its mapping granularity is coarser
 * than the ranges seen here), the peer's mappings not used by the current operation are closed the
 * same way and the open is tried once more.
 */
final class IpcMappings {
    /** CUDA_ERROR_ALREADY_MAPPED. */
    static final int ALREADY_MAPPED = 208;

    /** What the cache asks of the driver (the real one, or a model of it in tests). */
    interface Driver {
        long open(byte[] handle);

        void close(long base);

        /** Waits until the GPU work queued by this process so far is done. */
        void quiesce();
    }

    private record Entry(long peerBase, long peerSize, long base) {
        boolean overlaps(long b, long s) {
            return b < peerBase + peerSize && peerBase < b + s;
        }
    }

    private final Driver driver;
    private final Map<Integer, LinkedHashMap<String, Entry>> byPeer = new HashMap<>();
    /** Mapped bases the current operation resolved (not closed by the fallback). */
    private final List<Long> inUse = new ArrayList<>();
    private int opened;
    private int closedStale;

    IpcMappings(Driver driver) {
        this.driver = driver;
    }

    /** A new operation starts resolving its peers' buffers. */
    void beginOperation() {
        inUse.clear();
    }

    /**
     * The base, mapped here, of {@code peer}'s allocation {@code handle}, which covers {@code [peerBase,
     * peerBase + peerSize)} in the peer's address space.
     */
    long map(int peer, byte[] handle, long peerBase, long peerSize) {
        LinkedHashMap<String, Entry> m = byPeer.computeIfAbsent(peer, p -> new LinkedHashMap<>());
        String key = HexFormat.of().formatHex(handle);
        Entry e = m.get(key);
        if (e != null) {
            inUse.add(e.base);
            return e.base;
        }
        closeWhere(m, x -> x.overlaps(peerBase, peerSize));
        long base;
        try {
            base = driver.open(handle);
        } catch (CudaException x) {
            if (x.result() != ALREADY_MAPPED) {
                throw x;
            }
            int n = closeWhere(m, y -> !inUse.contains(y.base));
            try {
                base = driver.open(handle);
            } catch (CudaException y) {
                y.addSuppressed(x);
                throw new CudaException("cuIpcOpenMemHandle() of rank " + peer + "'s allocation at 0x" + Long.toHexString(peerBase)
                        + " (" + peerSize + " bytes) failed: " + y.getMessage() + "; this process held " + (m.size() + n)
                        + " mapping(s) of that rank and closed " + n + " of them first. A mapping of that rank's memory made"
                        + " outside jccl's communicator (another library or communicator in this process opening the same"
                        + " buffers) causes this: pass buffers that only one communicator maps, or close the other first", y.result());
            }
        }
        m.put(key, new Entry(peerBase, peerSize, base));
        inUse.add(base);
        opened++;
        return base;
    }

    private int closeWhere(LinkedHashMap<String, Entry> m, java.util.function.Predicate<Entry> stale) {
        List<Entry> gone = new ArrayList<>();
        for (Iterator<Entry> it = m.values().iterator(); it.hasNext(); ) {
            Entry e = it.next();
            if (stale.test(e)) {
                gone.add(e);
                it.remove();
            }
        }
        if (gone.isEmpty()) {
            return 0;
        }
        driver.quiesce();
        for (Entry e : gone) {
            driver.close(e.base);
            closedStale++;
        }
        return gone.size();
    }

    /** Handles opened so far, and mappings closed as stale. */
    int opened() {
        return opened;
    }

    int closedStale() {
        return closedStale;
    }

    /** Mappings held now. */
    int held() {
        int n = 0;
        for (LinkedHashMap<String, Entry> m : byPeer.values()) {
            n += m.size();
        }
        return n;
    }

    /** Closes every mapping; returns the failures' messages (the caller logs them). */
    List<String> closeAll() {
        List<String> errors = new ArrayList<>();
        for (LinkedHashMap<String, Entry> m : byPeer.values()) {
            for (Entry e : m.values()) {
                try {
                    driver.close(e.base);
                } catch (RuntimeException x) {
                    errors.add(x.getMessage());
                }
            }
        }
        byPeer.clear();
        return errors;
    }
}
