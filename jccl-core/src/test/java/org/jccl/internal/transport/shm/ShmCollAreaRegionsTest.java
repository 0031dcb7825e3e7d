package org.jccl.internal.transport.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.jccl.spi.PeerInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Where the shared collective segment puts each round's region (ShmCollArea#nextRound): small
 * rounds alternate between the two hot regions, larger ones walk the ring, no region ever overlaps
 * the previous round's unless a fence round came between, every rank computes the same places, and
 * a line of the ring is rewritten only after (nearly) the whole ring was written since. Over
 * thousands of rounds of odd sizes, on a real segment of the descriptor's layout.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShmCollAreaRegionsTest {
    private static final int RANKS = 3;

    private static ShmCollArea[] areas(MemorySegment file) {
        PeerInfo[] peers = new PeerInfo[RANKS];
        for (int q = 0; q < RANKS; q++) {
            peers[q] = new PeerInfo(q, "localhost", ProcessHandle.current().pid(), "h", "p", Map.of());
        }
        ShmCollArea[] a = new ShmCollArea[RANKS];
        for (int q = 0; q < RANKS; q++) {
            a[q] = new ShmCollArea(file, q, peers, new boolean[RANKS], ShmCollArea.RING_AUTO);
        }
        return a;
    }

    private static MemorySegment segment(Arena arena, long area, long slot, boolean far) {
        long areaBytes = ShmCollDescriptor.areaBytes(area);
        MemorySegment s = arena.allocate(ShmCollDescriptor.fileBytes(RANKS, areaBytes), 4096);
        ShmCollDescriptor.initialise(s, RANKS, areaBytes, ShmCollDescriptor.slotBytes(areaBytes, slot), 1, far);
        assertNull(ShmCollDescriptor.validate(s, RANKS));
        return s;
    }

    /** Offset of {@code region} inside rank q's area. */
    private static long offset(MemorySegment file, MemorySegment region, int q, long areaBytes) {
        return region.address() - file.address() - ShmCollDescriptor.dataOffset(RANKS) - q * areaBytes;
    }

    @Test
    void roundsOfOddSizesNeverOverlapThePreviousRoundAndAgreeOnEveryRank() {
        try (Arena arena = Arena.ofConfined()) {
            // Far rounds up to half the ring (the most a round may take) and near ones up to half the
            // near window, so that a round can need a fence; operations switch modes at random.
            MemorySegment file = segment(arena, 6 << 20, 3 << 20, false);
            ShmCollArea[] a = areas(file);
            long area = a[0].areaBytes();
            long hot = a[0].hotBytes();
            assertEquals(64 << 10, hot);
            assertEquals(1 << 20, a[0].nearSlotBytes());
            int farOps = 0;
            int roundsLeft = 0;
            Random rnd = new Random(42);
            long prevStart = -1;
            long prevEnd = -1;
            int fences = 0;
            int hotRounds = 0;
            int wraps = 0;
            long lastRingStart = -1;
            for (int i = 0; i < 20_000; i++) {
                if (roundsLeft-- == 0) {
                    // A new operation: rank 0's published mode for the next round, taken by every rank.
                    boolean far = rnd.nextBoolean();
                    farOps += far ? 1 : 0;
                    long next = a[0].currentRound() + 1;
                    file.set(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.word(0, ShmCollDescriptor.MODE) + (next & 1) * 8,
                            far ? 1 : 0);
                    for (ShmCollArea r : a) {
                        r.beginOperation();
                        assertEquals(far, r.far());
                        assertEquals(far ? (area - 2 * hot) / 2 : 1 << 20, r.slotBytes(), "far rounds: at most half the ring; near ones a quarter of the window");
                    }
                    roundsLeft = rnd.nextInt(20);
                }
                long slot = a[0].slotBytes();
                long windowEnd = a[0].far() ? area : 2 * hot + (4 << 20);
                // Mostly odd sizes: tiny, around the hot limit, up to the largest round.
                long bytes = switch (rnd.nextInt(5)) {
                    case 0 -> 1 + rnd.nextInt(100);
                    case 1 -> hot - 50 + rnd.nextInt(100);
                    case 2 -> slot - rnd.nextInt(1000);
                    default -> 1 + rnd.nextInt((int) slot);
                };
                boolean fence = a[0].needsFence(bytes);
                for (ShmCollArea r : a) {
                    assertEquals(fence, r.needsFence(bytes), "every rank decides the same");
                }
                if (fence) {
                    fences++;
                    for (ShmCollArea r : a) {
                        r.nextRound(0);
                    }
                    prevStart = prevEnd = -1;
                }
                long k = a[0].nextRound(bytes);
                for (int q = 1; q < RANKS; q++) {
                    assertEquals(k, a[q].nextRound(bytes));
                }
                long start = offset(file, a[0].slot(0, k), 0, area);
                for (int q = 0; q < RANKS; q++) {
                    for (int me = 0; me < RANKS; me++) {
                        MemorySegment region = a[me].slot(q, k);
                        assertEquals(bytes, region.byteSize());
                        assertEquals(start, offset(file, region, q, area), "rank " + me + " places rank " + q + "'s region of round " + k);
                    }
                }
                long end = start + bytes;
                assertTrue(start >= 0 && end <= area, start + ".." + end);
                assertEquals(0, start % ShmCollDescriptor.ALIGN);
                if (bytes <= hot) {
                    hotRounds++;
                    assertTrue(start == 0 || start == hot, "a small round takes a hot region: " + start);
                    assertTrue(end <= 2 * hot);
                } else {
                    assertTrue(start >= 2 * hot && end <= windowEnd, "a larger round takes the mode's part of the ring: " + start + ".." + end);
                    if (!a[0].far()) {
                        assertEquals(2 * hot + (k & 1) * (2 << 20), start, "near: the half of the round's parity");
                    }
                    if (lastRingStart >= 0 && start < lastRingStart) {
                        wraps++;
                    }
                    lastRingStart = start;
                }
                assertFalse(prevEnd > prevStart && start < prevEnd && prevStart < end,
                        "round " + k + " [" + start + ", " + end + ") overlaps the previous one [" + prevStart + ", " + prevEnd + ")");
                prevStart = start;
                prevEnd = end;
            }
            assertTrue(fences > 0 && fences < 2_000, "fences: " + fences);
            assertTrue(hotRounds > 5_000, "hot rounds: " + hotRounds);
            assertTrue(wraps > 500, "the ring wrapped " + wraps + " times");
            assertTrue(farOps > 300, "far operations: " + farOps);
        }
    }

    @Test
    void aRingLineIsRewrittenOnlyAfterTheRestOfItsModesWindow() {
        for (boolean far : new boolean[] {false, true}) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment file = segment(arena, 16 << 20, 6 << 20, far);
                ShmCollArea[] a = areas(file);
                a[0].beginOperation();
                assertEquals(far, a[0].far());
                long area = a[0].areaBytes();
                // Far: the whole ring; near: the two halves of its first 4 MiB, by round parity.
                long window = area - 2 * a[0].hotBytes();
                // The same odd size over and over (the anchors' method): between two writes of a byte, far
                // takes at least the ring less two rounds of other rounds; near exactly one other round.
                long bytes = (512 << 10) + 4 * 7;
                long[] lastWritten = new long[(int) (area / ShmCollDescriptor.ALIGN)];
                long written = 0;
                long shortest = Long.MAX_VALUE;
                for (int i = 0; i < 1_000; i++) {
                    assertFalse(a[0].needsFence(bytes));
                    long k = a[0].nextRound(bytes);
                    long start = offset(file, a[0].slot(0, k), 0, area);
                    for (long line = start / ShmCollDescriptor.ALIGN; line * ShmCollDescriptor.ALIGN < start + bytes; line++) {
                        if (lastWritten[(int) line] > 0) {
                            shortest = Math.min(shortest, written - lastWritten[(int) line]);
                        }
                        lastWritten[(int) line] = written + 1;
                    }
                    written += bytes;
                }
                if (far) {
                    assertTrue(shortest >= window - 2 * bytes && shortest <= window, "far: a line was rewritten after " + shortest
                            + " bytes, in a ring of " + window);
                } else {
                    assertEquals(2 * bytes - 1, shortest, "near: every line is rewritten two rounds later");
                }
            }
        }
    }

    @Test
    void theGeometryIsCheckedWhenMapped() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = segment(arena, 8192, 2 << 20, false);
            ShmCollArea[] a = areas(s);
            assertEquals(1024, a[0].hotBytes());
            assertEquals(3072, a[0].slotBytes());
            assertThrows(IllegalArgumentException.class, () -> a[0].nextRound(3073));
            // A slot larger than half the ring is refused by a mapping rank.
            s.set(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.SLOT_BYTES_OFFSET, 4096);
            assertTrue(ShmCollDescriptor.validate(s, RANKS).startsWith("inconsistent geometry"), ShmCollDescriptor.validate(s, RANKS));
        }
    }
}
