package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jccl.cuda.CudaException;
import org.junit.jupiter.api.Test;

/**
 * The IPC mapping cache against a model of the driver's rule that broke reduce_scatter on the first GPU
 * run (CUDA_ERROR_ALREADY_MAPPED): a process may not open a peer allocation's handle while it holds a
 * mapping of that peer's memory in the same pages (here: the same {@code page}-aligned pages, 1 for
 * exact ranges, 2 MiB for the driver's coarser granularity). A peer's scratch that grows is freed and
 * reallocated at the same addresses under a new handle.
 */
class IpcMappingsTest {

    /** A peer allocation: its handle and range in the peer's address space. */
    private record Alloc(int owner, byte[] handle, long base, long size) {
    }

    /** The driver model: open mappings with their ranges; every event in order. */
    private static final class Model implements IpcMappings.Driver {
        final long page;
        final Map<String, Alloc> byHandle = new HashMap<>();
        final Map<Long, Alloc> open = new HashMap<>();
        final List<String> events = new ArrayList<>();
        long next = 0x7000_0000L;
        int handles;

        Model(long page) {
            this.page = page;
        }

        Alloc alloc(long base, long size) {
            return alloc(1, base, size);
        }

        Alloc alloc(int owner, long base, long size) {
            byte[] h = new byte[64];
            h[0] = (byte) ++handles;
            h[1] = (byte) (handles >> 8);
            Alloc a = new Alloc(owner, h, base, size);
            byHandle.put(java.util.HexFormat.of().formatHex(h), a);
            return a;
        }

        private long lo(long b) {
            return b / page * page;
        }

        private long hi(long b, long s) {
            return (b + s + page - 1) / page * page;
        }

        @Override
        public long open(byte[] handle) {
            Alloc a = byHandle.get(java.util.HexFormat.of().formatHex(handle));
            for (Alloc o : open.values()) {
                if (o.owner == a.owner && lo(a.base) < hi(o.base, o.size) && lo(o.base) < hi(a.base, a.size)) {
                    events.add("refused");
                    throw new CudaException("cuIpcOpenMemHandle() failed: CUDA_ERROR_ALREADY_MAPPED", IpcMappings.ALREADY_MAPPED);
                }
            }
            long here = next;
            next += 1L << 30;
            open.put(here, a);
            events.add("open " + Long.toHexString(a.base));
            return here;
        }

        @Override
        public void close(long base) {
            Alloc a = open.remove(base);
            assertTrue(a != null, "close of a base that is not open");
            events.add("close " + Long.toHexString(a.base));
        }

        @Override
        public void quiesce() {
            events.add("quiesce");
        }
    }

    @Test
    void aGrownScratchAtTheSameAddressClosesTheStaleMappingAfterTheGpuIsIdle() {
        Model d = new Model(1);
        IpcMappings m = new IpcMappings(d);
        Alloc user = d.alloc(0x1000_0000L, 1 << 20);
        Alloc small = d.alloc(0x2000_0000L, 4096);
        m.beginOperation();
        long u = m.map(1, user.handle(), user.base(), user.size());
        long s = m.map(1, small.handle(), small.base(), small.size());
        // The same handles again: the cached mappings, nothing opened.
        m.beginOperation();
        assertEquals(u, m.map(1, user.handle(), user.base(), user.size()));
        assertEquals(s, m.map(1, small.handle(), small.base(), small.size()));
        assertEquals(2, m.opened());
        // The peer frees its scratch and allocates a bigger one from the same address: a new handle.
        Alloc grown = d.alloc(0x2000_0000L, 3 * 4096);
        m.beginOperation();
        long g = m.map(1, grown.handle(), grown.base(), grown.size());
        assertEquals(List.of("open 10000000", "open 20000000", "quiesce", "close 20000000", "open 20000000"), d.events);
        assertNotEquals(s, g);
        assertEquals(2, m.held());
        assertEquals(1, m.closedStale());
        // The user buffer's mapping was kept.
        assertEquals(u, m.map(1, user.handle(), user.base(), user.size()));
        assertEquals(3, m.opened());
    }

    @Test
    void peersAreKeptApart() {
        Model d = new Model(1);
        IpcMappings m = new IpcMappings(d);
        // Two peers' allocations at the same address of their own address spaces: neither is stale for the other.
        Alloc a = d.alloc(1, 0x3000_0000L, 8192);
        Alloc b = d.alloc(2, 0x3000_0000L, 8192);
        m.beginOperation();
        long x = m.map(1, a.handle(), a.base(), a.size());
        long y = m.map(2, b.handle(), b.base(), b.size());
        assertNotEquals(x, y);
        assertEquals(List.of("open 30000000", "open 30000000"), d.events);
        assertEquals(2, m.held());
        assertEquals(0, m.closedStale());
    }

    @Test
    void aCoarserDriverGranularityIsRetriedAfterClosingMappingsTheOperationDoesNotUse() {
        Model d = new Model(2 << 20);
        IpcMappings m = new IpcMappings(d);
        Alloc inUse = d.alloc(0x4000_0000L, 4096);
        Alloc old = d.alloc(0x4000_2000L, 4096);
        m.beginOperation();
        m.map(1, old.handle(), old.base(), old.size());
        // next operation: inUse first (it shares old's 2 MiB page: the model refuses it; old is not used by this operation)
        m.beginOperation();
        long a = m.map(1, inUse.handle(), inUse.base(), inUse.size());
        assertEquals(List.of("open 40002000", "refused", "quiesce", "close 40002000", "open 40000000"), d.events);
        // now a third allocation of the same page while inUse is used by this operation: inUse stays, the error names the cause
        Alloc third = d.alloc(0x4000_4000L, 4096);
        CudaException e = assertThrows(CudaException.class, () -> m.map(1, third.handle(), third.base(), third.size()));
        assertEquals(IpcMappings.ALREADY_MAPPED, e.result());
        assertTrue(e.getMessage().contains("rank 1's allocation at 0x40004000"), e.getMessage());
        assertEquals(a, m.map(1, inUse.handle(), inUse.base(), inUse.size()));
        assertEquals(1, m.held());
    }
}
