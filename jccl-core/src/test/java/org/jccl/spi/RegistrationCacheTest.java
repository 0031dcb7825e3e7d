package org.jccl.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.jccl.ResourceException;
import org.junit.jupiter.api.Test;

/**
 * The registration cache against a registrar that records every call: containment hits, references,
 * LRU eviction under the byte bound (never of referenced registrations), invalidation, close.
 */
class RegistrationCacheTest {

    /** Handles are "type:address+length#n"; every register and deregister is recorded. */
    static final class Recorder implements RegistrationCache.Registrar<String> {
        final List<String> registered = new ArrayList<>();
        final List<String> deregistered = new ArrayList<>();
        IOException failNext;

        @Override
        public String register(long address, long length, MemoryType type) throws IOException {
            if (failNext != null) {
                IOException e = failNext;
                failNext = null;
                throw e;
            }
            String h = type + ":" + address + "+" + length + "#" + registered.size();
            registered.add(h);
            return h;
        }

        @Override
        public void deregister(String handle) {
            assertFalse(deregistered.contains(handle), "deregistered twice: " + handle);
            deregistered.add(handle);
        }
    }

    private final Recorder rec = new Recorder();

    private RegistrationCache<String> cache(long max) {
        return new RegistrationCache<>("test cache", max, "TEST_BOUND", rec);
    }

    @Test
    void aRangeInsideARegisteredOneHitsItAndOthersMiss() throws IOException {
        RegistrationCache<String> c = cache(1 << 20);
        RegistrationCache.Entry<String> a = c.acquire(1000, 4096, MemoryType.HOST);
        assertEquals(1, rec.registered.size());
        assertEquals(1000, a.address());
        assertEquals(4096, a.length());
        assertSame(a, c.acquire(1000, 4096, MemoryType.HOST), "the same range");
        assertSame(a, c.acquire(1500, 100, MemoryType.HOST), "a range inside");
        assertSame(a, c.acquire(5095, 1, MemoryType.HOST), "its last byte");
        assertEquals(3, c.hits());
        assertEquals(1, rec.registered.size(), "hits do not register");
        RegistrationCache.Entry<String> beyond = c.acquire(5096, 1, MemoryType.HOST);
        RegistrationCache.Entry<String> straddling = c.acquire(900, 200, MemoryType.HOST);
        RegistrationCache.Entry<String> device = c.acquire(1000, 4096, MemoryType.CUDA);
        assertNotSame(a, beyond);
        assertNotSame(a, straddling);
        assertNotSame(a, device);
        assertEquals(MemoryType.CUDA, device.type());
        assertEquals(4, rec.registered.size(), "one byte past it, overlapping it, and another memory type each register");
        assertEquals(4, c.misses());
        assertEquals(4096 + 1 + 200 + 4096, c.registeredBytes());
        assertEquals(4, c.references(a));
    }

    @Test
    void aContainingRegistrationIsFoundAmongManySmallerOnes() throws IOException {
        RegistrationCache<String> c = cache(1L << 40);
        RegistrationCache.Entry<String> big = c.acquire(0, 1_000_000, MemoryType.HOST);
        for (int i = 1; i < 200; i++) {
            c.acquire(i * 5000L, 100, MemoryType.HOST);
        }
        assertSame(big, c.acquire(500_050, 1000, MemoryType.HOST));
        assertSame(big, c.acquire(999_000, 1000, MemoryType.HOST));
        assertNotSame(big, c.acquire(999_000, 1001, MemoryType.HOST));
    }

    @Test
    void referencesCountAndAReleaseTooManyIsRefused() throws IOException {
        RegistrationCache<String> c = cache(1 << 20);
        RegistrationCache.Entry<String> a = c.acquire(0, 100, MemoryType.HOST);
        c.acquire(10, 10, MemoryType.HOST);
        assertEquals(2, c.references(a));
        c.release(a);
        c.release(a);
        assertEquals(0, c.references(a));
        assertTrue(c.isRegistered(a), "an unreferenced registration stays cached");
        assertEquals(List.of(), rec.deregistered);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> c.release(a));
        assertTrue(e.getMessage().contains("released more often than acquired"), e.getMessage());
        assertSame(a, c.acquire(50, 50, MemoryType.HOST), "a cached registration is hit again");
        assertEquals(1, c.references(a));
    }

    @Test
    void theBoundEvictsTheLeastRecentlyReleasedUnreferencedRegistrationsFirst() throws IOException {
        RegistrationCache<String> c = cache(300);
        RegistrationCache.Entry<String> a = c.acquire(0, 100, MemoryType.HOST);
        RegistrationCache.Entry<String> b = c.acquire(1000, 100, MemoryType.HOST);
        RegistrationCache.Entry<String> d = c.acquire(2000, 100, MemoryType.HOST);
        c.release(b);
        c.release(a);
        c.release(d);
        // 150 more bytes need two evictions: b (released first), then a; d stays.
        RegistrationCache.Entry<String> e = c.acquire(3000, 150, MemoryType.HOST);
        assertEquals(List.of(b.handle(), a.handle()), rec.deregistered);
        assertFalse(c.isRegistered(a));
        assertFalse(c.isRegistered(b));
        assertTrue(c.isRegistered(d));
        assertEquals(2, c.evictions());
        assertEquals(250, c.registeredBytes());
        assertTrue(c.registeredBytes() <= c.maxBytes());
        // An evicted range registers again, and a hit moves a registration out of the eviction line.
        assertSame(d, c.acquire(2000, 10, MemoryType.HOST));
        c.release(e);
        RegistrationCache.Entry<String> a2 = c.acquire(0, 51, MemoryType.HOST); // 250 + 51 > 300
        assertNotSame(a, a2);
        assertEquals(List.of(b.handle(), a.handle(), e.handle()), rec.deregistered, "e (unreferenced) went, d (referenced) stayed");
        assertTrue(c.isRegistered(d));
    }

    @Test
    void referencedRegistrationsAreNeverEvictedAndTheBoundIsNamed() throws IOException {
        RegistrationCache<String> c = cache(200);
        c.acquire(0, 100, MemoryType.HOST);
        c.acquire(1000, 100, MemoryType.HOST);
        ResourceException e = assertThrows(ResourceException.class, () -> c.acquire(5000, 50, MemoryType.HOST));
        assertTrue(e.getMessage().contains("test cache: cannot register 50 bytes of HOST memory at 0x1388: 200 bytes are registered and in use")
                && e.getMessage().contains("the bound is 200 bytes") && e.getMessage().contains("TEST_BOUND"), e.getMessage());
        assertEquals(2, rec.registered.size(), "nothing registered");
        assertEquals(List.of(), rec.deregistered, "nothing evicted");
        assertEquals(2, c.size());
        ResourceException tooBig = assertThrows(ResourceException.class, () -> cache(100).acquire(0, 101, MemoryType.HOST));
        assertTrue(tooBig.getMessage().contains("cannot register 101 bytes") && tooBig.getMessage().contains("the bound is 100 bytes"),
                tooBig.getMessage());
    }

    @Test
    void aFailedRegistrationLeavesTheCacheAsItWas() throws IOException {
        RegistrationCache<String> c = cache(1000);
        RegistrationCache.Entry<String> a = c.acquire(0, 100, MemoryType.HOST);
        rec.failNext = new IOException("locked-memory limit");
        IOException e = assertThrows(IOException.class, () -> c.acquire(500, 100, MemoryType.HOST));
        assertEquals("locked-memory limit", e.getMessage());
        assertEquals(1, c.size());
        assertEquals(100, c.registeredBytes());
        assertSame(a, c.acquire(0, 10, MemoryType.HOST));
        assertEquals(500, c.acquire(500, 100, MemoryType.HOST).address(), "the next try registers");
    }

    @Test
    void invalidatedRegistrationsAreNotFoundAndGoWhenUnreferenced() throws IOException {
        RegistrationCache<String> c = cache(1 << 20);
        RegistrationCache.Entry<String> idle = c.acquire(0, 100, MemoryType.HOST);
        c.release(idle);
        RegistrationCache.Entry<String> held = c.acquire(1000, 100, MemoryType.HOST);
        RegistrationCache.Entry<String> other = c.acquire(5000, 100, MemoryType.HOST);
        RegistrationCache.Entry<String> device = c.acquire(0, 2000, MemoryType.CUDA);
        // [50, 1050) overlaps idle and held, not other, and only HOST memory.
        assertEquals(2, c.invalidate(50, 1000, MemoryType.HOST));
        assertEquals(List.of(idle.handle()), rec.deregistered, "the unreferenced one goes at once");
        assertTrue(c.isRegistered(held), "a referenced one stays registered while in use");
        RegistrationCache.Entry<String> fresh = c.acquire(1000, 100, MemoryType.HOST);
        assertNotSame(held, fresh, "but is no longer found");
        c.release(held);
        assertFalse(c.isRegistered(held), "and goes at its last release");
        assertTrue(c.isRegistered(other));
        assertTrue(c.isRegistered(device));
        assertEquals(100 + 100 + 2000, c.registeredBytes());
        assertEquals(0, c.invalidate(200_000, 10, MemoryType.HOST));
    }

    @Test
    void closeDeregistersEverythingOnce() throws IOException {
        RegistrationCache<String> c = cache(1 << 20);
        RegistrationCache.Entry<String> held = c.acquire(0, 100, MemoryType.HOST);
        RegistrationCache.Entry<String> cached = c.acquire(1000, 100, MemoryType.HOST);
        c.release(cached);
        RegistrationCache.Entry<String> device = c.acquire(0, 64, MemoryType.CUDA);
        c.close();
        assertEquals(3, rec.deregistered.size());
        assertTrue(rec.deregistered.containsAll(List.of(held.handle(), cached.handle(), device.handle())));
        assertEquals(0, c.registeredBytes());
        assertEquals(0, c.size());
        c.release(held); // after close: nothing more to do
        c.close();
        assertEquals(3, rec.deregistered.size(), "close is idempotent");
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> c.acquire(0, 1, MemoryType.HOST));
        assertTrue(e.getMessage().contains("test cache is closed"), e.getMessage());
    }

    @Test
    void badRangesAndBoundsAreRefused() {
        RegistrationCache<String> c = cache(1000);
        assertThrows(IllegalArgumentException.class, () -> c.acquire(0, 0, MemoryType.HOST));
        assertThrows(IllegalArgumentException.class, () -> c.acquire(-8, 8, MemoryType.HOST));
        assertThrows(IllegalArgumentException.class, () -> c.acquire(Long.MAX_VALUE - 2, 8, MemoryType.HOST));
        assertThrows(IllegalArgumentException.class, () -> cache(0));
        assertEquals(List.of(), rec.registered);
    }
}
