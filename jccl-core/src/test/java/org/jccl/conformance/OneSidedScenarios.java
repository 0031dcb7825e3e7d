package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.MemoryType;
import org.jccl.spi.OneSidedUnsupportedException;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.RemoteRegion;

/**
 * What one rank does in each scenario of {@link OneSidedConformance}: written once, run by rank
 * threads of one JVM and by rank processes alike (looked up by name in {@link #BY_NAME}). A transport
 * without one-sided support runs every scenario as {@link #refused}: each call is refused with
 * {@link OneSidedUnsupportedException} naming the transport, before anything moves.
 */
final class OneSidedScenarios {
    private OneSidedScenarios() {
    }

    /** One rank's part of a scenario. */
    @FunctionalInterface
    interface Body {
        void run(SpiRig rig) throws Exception;
    }

    /** A piece of a large put: 1 MiB + 3 bytes, so no transport's chunking lines up with it. */
    static final long BIG = (1 << 20) + 3;
    /** Each writer's slot in a target's region: a 1-byte put at 0, 7 bytes at 8, BIG at 64, 13 bytes from a registered source at SLOT - 16. */
    static final long SLOT = 64 + BIG + 16;

    static final Map<String, Body> BY_NAME = Map.of(
            "putAtOffsetsFlushThenNotify", OneSidedScenarios::putAtOffsetsFlushThenNotify,
            "putOutOfBounds", OneSidedScenarios::putOutOfBounds,
            "deregisterThenPut", OneSidedScenarios::deregisterThenPut,
            "deregisterUnseenThenClose", OneSidedScenarios::deregisterUnseenThenClose,
            "keyOnTheWrongConnection", OneSidedScenarios::keyOnTheWrongConnection,
            "closeWhileRegistered", OneSidedScenarios::closeWhileRegistered,
            "registerProcessMemory", OneSidedScenarios::registerProcessMemory);

    /** The byte writer {@code w} puts at position {@code i} of its slot in target {@code t}'s region. */
    static byte pattern(int w, int t, long i) {
        return (byte) (w * 131 + t * 31 + i * 7 + (i >>> 8) * 3 + 1);
    }

    private static void fill(MemorySegment s, int w, int t, long slotOffset) {
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(ValueLayout.JAVA_BYTE, i, pattern(w, t, slotOffset + i));
        }
    }

    /** Registered memory peers can write: allocated where the transport offers it, else registered. */
    private static RegisteredRegion target(Endpoint ep, long length, Arena arena) throws Exception {
        if (ep.canAllocate()) {
            RegisteredRegion r = ep.allocate(length);
            assertEquals(length, r.length());
            for (long i = 0; i < length; i++) {
                if (r.segment().get(ValueLayout.JAVA_BYTE, i) != 0) {
                    throw new AssertionError("allocated memory is not zeroed at byte " + i);
                }
            }
            return r;
        }
        return ep.register(arena.allocate(length, 64));
    }

    private static byte[] longBytes(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }

    private static long longOf(byte[] b) {
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    private static int[] peersOf(SpiRig rig) {
        int[] p = new int[rig.size() - 1];
        for (int r = 0, i = 0; r < rig.size(); r++) {
            if (r != rig.rank()) {
                p[i++] = r;
            }
        }
        return p;
    }

    /** The refusals of a transport without registration or puts: every call names the transport and moves nothing. */
    static void refused(SpiRig rig) throws Exception {
        Endpoint ep = rig.endpoint();
        String name = rig.transport();
        assertFalse(ep.canAllocate());
        for (MemoryType t : MemoryType.values()) {
            assertFalse(ep.canRegister(t), t.toString());
        }
        try (Arena a = Arena.ofShared()) {
            MemorySegment s = a.allocate(64);
            assertRefused(name, "memory registration", () -> ep.register(s));
            assertRefused(name, "allocation of registered memory", () -> ep.allocate(64));
            assertRefused(name, "registration of CUDA memory", () -> ep.register(0x1000, 64, MemoryType.CUDA));
            for (int p : peersOf(rig)) {
                Connection c = rig.connection(p);
                assertFalse(c.supportsPut());
                assertRefused(name, "one-sided put (unpacking a remote key)", () -> c.unpack(new byte[16]));
                assertRefused(name, "one-sided put", () -> c.put(s, null, 0));
                assertRefused(name, "one-sided flush", () -> c.flush());
            }
        }
        // The connections still carry messages after the refusals.
        Map<Integer, byte[]> out = new HashMap<>();
        for (int p : peersOf(rig)) {
            out.put(p, longBytes(rig.rank()));
        }
        Map<Integer, byte[]> in = rig.exchange(out, peersOf(rig));
        for (int p : peersOf(rig)) {
            assertEquals(p, longOf(in.get(p)));
        }
    }

    private static void assertRefused(String transport, String operation, org.junit.jupiter.api.function.Executable call) {
        OneSidedUnsupportedException e = assertThrows(OneSidedUnsupportedException.class, call);
        assertTrue(e.getMessage().startsWith(transport + " ") && e.getMessage().contains("does not support " + operation + ":")
                && e.getMessage().contains("send/recv"), e.getMessage());
        assertTrue(e.transport().startsWith(transport), e.transport());
    }

    /**
     * Every rank gives every other rank a slot of its region; each writes four pieces into each of its
     * slots (1 byte, 7 bytes, 1 MiB + 3 bytes, and 13 bytes from a registered source), flushes, waits for
     * the flush, then sends the number of bytes it put as the notification. Each rank checks, after every
     * peer's notification, every byte of its region: the pieces are there, every other byte is still 0.
     */
    static void putAtOffsetsFlushThenNotify(SpiRig rig) throws Exception {
        if (!rig.connection(peersOf(rig)[0]).supportsPut()) {
            refused(rig);
            return;
        }
        Endpoint ep = rig.endpoint();
        int me = rig.rank();
        int n = rig.size();
        try (Arena arena = Arena.ofShared()) {
            RegisteredRegion mine = target(ep, n * SLOT, arena);
            RegisteredRegion source = target(ep, 13, arena);
            Map<Integer, byte[]> keys = new HashMap<>();
            for (int p : peersOf(rig)) {
                keys.put(p, mine.packedKey());
            }
            Map<Integer, byte[]> theirs = rig.exchange(keys, peersOf(rig));
            long[][] pieces = {{0, 1}, {8, 7}, {64, BIG}};
            Map<Integer, byte[]> notifications = new HashMap<>();
            for (int p : peersOf(rig)) {
                Connection c = rig.connection(p);
                RemoteRegion dst = c.unpack(theirs.get(p));
                assertEquals(n * SLOT, dst.length());
                assertEquals(p, dst.owner());
                assertEquals(MemoryType.HOST, dst.type());
                assertTrue(dst.isOpen());
                List<P2pRequest> puts = new ArrayList<>();
                long put = 0;
                for (long[] piece : pieces) {
                    MemorySegment src = arena.allocate(piece[1]);
                    fill(src, me, p, piece[0]);
                    puts.add(c.put(src, dst, me * SLOT + piece[0]));
                    put += piece[1];
                }
                fill(source.segment(), me, p, SLOT - 16);
                puts.add(c.put(source, 0, 13, dst, me * SLOT + SLOT - 16));
                put += 13;
                rig.drive(puts); // local completion: the sources may be reused
                P2pRequest flush = c.flush();
                rig.drive(flush);
                assertTrue(flush.isDone() && flush.error() == null);
                notifications.put(p, longBytes(put));
                dst.close();
                assertFalse(dst.isOpen());
            }
            // The notifications: messages sent after the flushes completed, one to and one from every peer
            // (all posted at once, receives first: a send to a peer still putting must not wait for it).
            Map<Integer, byte[]> notes = rig.exchange(notifications, peersOf(rig));
            MemorySegment got = mine.segment();
            for (int w = 0; w < n; w++) {
                long base = w * SLOT;
                if (w != me) {
                    assertEquals(1 + 7 + BIG + 13, longOf(notes.get(w)), "bytes rank " + w + " says it put");
                }
                for (long i = 0; i < SLOT; i++) {
                    boolean written = w != me && (i == 0 || (i >= 8 && i < 15) || (i >= 64 && i < 64 + BIG) || (i >= SLOT - 16 && i < SLOT - 3));
                    byte want = written ? pattern(w, me, i) : 0;
                    byte b = got.get(ValueLayout.JAVA_BYTE, base + i);
                    if (b != want) {
                        throw new AssertionError("rank " + me + ": byte " + i + " of rank " + w + "'s slot is " + b + ", expected " + want
                                + (written ? " (put by rank " + w + ")" : " (never written)"));
                    }
                }
            }
            // Every rank has checked before any region goes away.
            rig.exchange(all(rig, new byte[] {1}), peersOf(rig));
            source.close();
            mine.close();
            assertFalse(mine.isOpen());
            mine.close(); // idempotent
            assertThrows(IllegalStateException.class, mine::packedKey);
            assertThrows(IllegalStateException.class, mine::segment);
        }
    }

    private static Map<Integer, byte[]> all(SpiRig rig, byte[] b) {
        Map<Integer, byte[]> m = new HashMap<>();
        for (int p : peersOf(rig)) {
            m.put(p, b);
        }
        return m;
    }

    /**
     * Rank 1 offers a region of 4096 bytes; rank 0's puts that reach outside it are refused with both
     * ranges named, and rank 1 then finds only the one valid put's bytes: nothing of a refused put moved.
     */
    static void putOutOfBounds(SpiRig rig) throws Exception {
        if (!rig.connection(peersOf(rig)[0]).supportsPut()) {
            refused(rig);
            return;
        }
        try (Arena arena = Arena.ofShared()) {
            if (rig.rank() == 1) {
                RegisteredRegion mine = target(rig.endpoint(), 4096, arena);
                rig.send(0, mine.packedKey());
                rig.recv(0); // the notification
                MemorySegment s = mine.segment();
                for (long i = 0; i < 4096; i++) {
                    byte want = i >= 3996 ? (byte) 0x5a : 0;
                    assertEquals(want, s.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
                }
                mine.close();
            } else if (rig.rank() == 0) {
                Connection c = rig.connection(1);
                RemoteRegion dst = c.unpack(rig.recv(1));
                MemorySegment src = arena.allocate(100).fill((byte) 0x77);
                IndexOutOfBoundsException e = assertThrows(IndexOutOfBoundsException.class, () -> c.put(src, dst, 4000));
                assertTrue(e.getMessage().contains("[4000, 4100)") && e.getMessage().contains("[0, 4096)")
                        && e.getMessage().contains(dst.describe()) && e.getMessage().contains("nothing was written"), e.getMessage());
                e = assertThrows(IndexOutOfBoundsException.class, () -> c.put(src, dst, -1));
                assertTrue(e.getMessage().contains("[-1, 99)") && e.getMessage().contains("[0, 4096)"), e.getMessage());
                e = assertThrows(IndexOutOfBoundsException.class, () -> c.put(src, dst, Long.MAX_VALUE - 10));
                assertTrue(e.getMessage().contains("[0, 4096)"), e.getMessage());
                // A registered source: its own range is checked too.
                RegisteredRegion reg = target(rig.endpoint(), 64, arena);
                e = assertThrows(IndexOutOfBoundsException.class, () -> c.put(reg, 32, 40, dst, 0));
                assertTrue(e.getMessage().contains("[32, 72)") && e.getMessage().contains("[0, 64)"), e.getMessage());
                reg.close();
                // The valid put at the very end, then flush and notify.
                MemorySegment ok = arena.allocate(100).fill((byte) 0x5a);
                rig.drive(c.put(ok, dst, 3996));
                rig.drive(c.flush());
                rig.send(1, new byte[] {1});
                dst.close();
            }
        }
    }

    /**
     * Rank 1 deregisters its region after rank 0 has unpacked it: rank 0's next put and a new unpack of
     * the same key are refused, naming the deregistration; a put through a closed handle is refused too.
     */
    static void deregisterThenPut(SpiRig rig) throws Exception {
        if (!rig.connection(peersOf(rig)[0]).supportsPut()) {
            refused(rig);
            return;
        }
        try (Arena arena = Arena.ofShared()) {
            if (rig.rank() == 1) {
                RegisteredRegion mine = target(rig.endpoint(), 256, arena);
                rig.send(0, mine.packedKey());
                rig.recv(0); // rank 0 put, flushed and unpacked a second handle
                assertEquals((byte) 9, mine.segment().get(ValueLayout.JAVA_BYTE, 10));
                mine.close();
                rig.send(0, new byte[] {2}); // deregistered
                rig.recv(0); // rank 0 is done
            } else if (rig.rank() == 0) {
                Connection c = rig.connection(1);
                byte[] key = rig.recv(1);
                RemoteRegion dst = c.unpack(key);
                RemoteRegion second = c.unpack(key);
                MemorySegment src = arena.allocate(16).fill((byte) 9);
                rig.drive(c.put(src, dst, 0));
                rig.drive(c.flush());
                second.close();
                IllegalStateException closed = assertThrows(IllegalStateException.class, () -> c.put(src, second, 0));
                assertTrue(closed.getMessage().contains("closed"), closed.getMessage());
                rig.send(1, new byte[] {1});
                rig.recv(1); // rank 1 deregistered its region
                IllegalStateException gone = assertThrows(IllegalStateException.class, () -> c.put(src, dst, 0));
                assertTrue(gone.getMessage().contains("deregistered") && gone.getMessage().contains(dst.describe()), gone.getMessage());
                gone = assertThrows(IllegalStateException.class, () -> c.unpack(key));
                assertTrue(gone.getMessage().contains("deregistered"), gone.getMessage());
                dst.close();
                rig.send(1, new byte[] {3});
            }
        }
    }

    /**
     * {@link #deregisterThenPut} for a transport that cannot see a peer's deregistration (RDMA through UCX: the SPI
     * allows it, RegisteredRegion's contract): everything up to the deregistration is checked alike (puts through two
     * handles of one key, a closed handle refused by name); after the owner deregistered, rank 0 makes no put (it
     * would land in freed memory on a transport that cannot tell) and closes its handle.
     */
    static void deregisterUnseenThenClose(SpiRig rig) throws Exception {
        try (Arena arena = Arena.ofShared()) {
            if (rig.rank() == 1) {
                RegisteredRegion mine = target(rig.endpoint(), 256, arena);
                rig.send(0, mine.packedKey());
                rig.recv(0);
                assertEquals((byte) 9, mine.segment().get(ValueLayout.JAVA_BYTE, 10));
                mine.close();
                assertTrue(!mine.isOpen());
                assertThrows(IllegalStateException.class, mine::packedKey);
                rig.send(0, new byte[] {2});
                rig.recv(0);
            } else if (rig.rank() == 0) {
                Connection c = rig.connection(1);
                byte[] key = rig.recv(1);
                RemoteRegion dst = c.unpack(key);
                RemoteRegion second = c.unpack(key);
                MemorySegment src = arena.allocate(16).fill((byte) 9);
                rig.drive(c.put(src, second, 0));
                rig.drive(c.flush());
                second.close();
                IllegalStateException closed = assertThrows(IllegalStateException.class, () -> c.put(src, second, 0));
                assertTrue(closed.getMessage().contains("closed"), closed.getMessage());
                rig.send(1, new byte[] {1});
                rig.recv(1);
                dst.close();
                assertTrue(!dst.isOpen());
                rig.send(1, new byte[] {3});
            }
        }
    }

    /**
     * Keys are used on the connection to the rank that made them: rank 0 unpacking rank 1's key on its
     * connection to rank 2 is refused, and so is a put through rank 1's handle on the connection to rank
     * 2, and a key of bytes no transport made.
     */
    static void keyOnTheWrongConnection(SpiRig rig) throws Exception {
        if (!rig.connection(peersOf(rig)[0]).supportsPut()) {
            refused(rig);
            return;
        }
        try (Arena arena = Arena.ofShared()) {
            if (rig.rank() == 1) {
                RegisteredRegion mine = target(rig.endpoint(), 128, arena);
                rig.send(0, mine.packedKey());
                rig.recv(0);
                mine.close();
            } else if (rig.rank() == 0) {
                byte[] key = rig.recv(1);
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.connection(2).unpack(key));
                assertTrue(e.getMessage().contains("rank 1") && e.getMessage().contains("rank 2")
                        && e.getMessage().contains("unpack a key on the connection to the rank that registered it"), e.getMessage());
                RemoteRegion dst = rig.connection(1).unpack(key);
                MemorySegment src = arena.allocate(8);
                e = assertThrows(IllegalArgumentException.class, () -> rig.connection(2).put(src, dst, 0));
                assertTrue(e.getMessage().contains("not unpacked on this connection"), e.getMessage());
                byte[] garbage = "not a key at all".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
                e = assertThrows(IllegalArgumentException.class, () -> rig.connection(1).unpack(garbage));
                assertTrue(e.getMessage().startsWith("not a") && e.getMessage().contains("remote key")
                        && e.getMessage().contains("understood only by the transport that made it"), e.getMessage());
                dst.close();
                rig.send(1, new byte[] {1});
            }
            // rank 2 has nothing to do but be there
        }
    }

    /**
     * Every rank holds two regions, a handle to each peer's and one put into each, and closes its
     * endpoint without deregistering anything: regions, handles and connections are closed with it (the
     * rig then checks that no file is left).
     */
    static void closeWhileRegistered(SpiRig rig) throws Exception {
        if (!rig.connection(peersOf(rig)[0]).supportsPut()) {
            refused(rig);
            rig.close();
            return;
        }
        try (Arena arena = Arena.ofShared()) {
            Endpoint ep = rig.endpoint();
            RegisteredRegion a = target(ep, 4096, arena);
            RegisteredRegion b = target(ep, 100_000, arena);
            Map<Integer, byte[]> keys = rig.exchange(all(rig, a.packedKey()), peersOf(rig));
            List<RemoteRegion> handles = new ArrayList<>();
            for (int p : peersOf(rig)) {
                RemoteRegion h = rig.connection(p).unpack(keys.get(p));
                handles.add(h);
                rig.drive(rig.connection(p).put(arena.allocate(64).fill((byte) 1), h, 64L * rig.rank()));
                rig.drive(rig.connection(p).flush());
            }
            rig.exchange(all(rig, new byte[] {1}), peersOf(rig)); // everyone has put and flushed
            for (int p : peersOf(rig)) {
                assertEquals((byte) 1, a.segment().get(ValueLayout.JAVA_BYTE, 64L * p), "rank " + p + "'s put");
            }
            rig.close();
            rig.close(); // idempotent
            assertFalse(a.isOpen());
            assertFalse(b.isOpen());
            assertThrows(IllegalStateException.class, a::packedKey);
            for (RemoteRegion h : handles) {
                assertFalse(h.isOpen(), h.describe());
            }
            Connection c = rig.connection(peersOf(rig)[0]);
            MemorySegment src = arena.allocate(8);
            assertThrows(IllegalStateException.class, () -> c.put(src, handles.get(0), 0));
            assertThrows(IllegalStateException.class, () -> ep.allocate(64));
            a.close(); // still idempotent after the endpoint closed it
        }
    }

    /**
     * Memory of the process itself: a transport that registers it ({@code canRegister(HOST)}) takes a
     * shared arena's segment as the target of a put; heap and confined memory are refused with the fix.
     * A transport that does not (SHM: other processes cannot write private memory) refuses it naming
     * itself and {@code allocate}.
     */
    static void registerProcessMemory(SpiRig rig) throws Exception {
        Endpoint ep = rig.endpoint();
        if (!rig.connection(peersOf(rig)[0]).supportsPut()) {
            refused(rig);
            return;
        }
        if (!ep.canRegister(MemoryType.HOST)) {
            try (Arena a = Arena.ofShared()) {
                MemorySegment s = a.allocate(64);
                OneSidedUnsupportedException e = assertThrows(OneSidedUnsupportedException.class, () -> ep.register(s));
                assertTrue(e.getMessage().startsWith(rig.transport() + " does not support") && e.getMessage().contains("allocate"),
                        e.getMessage());
            }
            return;
        }
        IllegalArgumentException heap = assertThrows(IllegalArgumentException.class, () -> ep.register(MemorySegment.ofArray(new byte[64])));
        assertTrue(heap.getMessage().contains("heap") && heap.getMessage().contains("Arena.ofShared()"), heap.getMessage());
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment c = confined.allocate(64);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ep.register(c));
            assertTrue(e.getMessage().contains("confined") && e.getMessage().contains("Arena.ofShared()"), e.getMessage());
        }
        IllegalArgumentException host = assertThrows(IllegalArgumentException.class, () -> ep.register(0x1000, 64, MemoryType.HOST));
        assertTrue(host.getMessage().contains("register(MemorySegment)"), host.getMessage());
        try (Arena arena = Arena.ofShared()) {
            MemorySegment mem = arena.allocate(1000);
            RegisteredRegion mine = ep.register(mem.asSlice(100, 500));
            assertEquals(mem.address() + 100, mine.address());
            assertEquals(500, mine.length());
            Map<Integer, byte[]> keys = rig.exchange(all(rig, mine.packedKey()), peersOf(rig));
            for (int p : peersOf(rig)) {
                RemoteRegion dst = rig.connection(p).unpack(keys.get(p));
                MemorySegment src = arena.allocate(10);
                fill(src, rig.rank(), p, 0);
                rig.drive(rig.connection(p).put(src, dst, 10L * rig.rank()));
                rig.drive(rig.connection(p).flush());
                dst.close();
            }
            rig.exchange(all(rig, new byte[] {1}), peersOf(rig));
            for (int w = 0; w < rig.size(); w++) {
                for (long i = 0; i < 10; i++) {
                    byte want = w == rig.rank() ? 0 : pattern(w, rig.rank(), i);
                    assertEquals(want, mem.get(ValueLayout.JAVA_BYTE, 100 + 10L * w + i), "byte " + i + " from rank " + w);
                }
            }
            assertEquals(0, mem.get(ValueLayout.JAVA_BYTE, 99), "the byte before the region");
            rig.exchange(all(rig, new byte[] {1}), peersOf(rig));
            mine.close();
        }
    }
}
