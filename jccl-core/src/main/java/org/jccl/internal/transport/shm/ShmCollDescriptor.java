package org.jccl.internal.transport.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The layout of a communicator's shared collective segment (one file, created by rank 0, mapped by
 * every rank; see {@link ShmCollArea} for the protocol). Every offset in one place, as {@link
 * ShmRingDescriptor} does for the rings.
 *
 * <pre>
 *   0  +--------------------------------------------------------------+
 *      | magic "JCCLCOL1" (8) | version (4) | ranks (4)                  |  written once by rank 0 before
 *      | areaBytes (8) | creatorPid (8) | fileBytes (8)                 |  the file gets its final name
 *      | slotBytes (8): largest round of the far mode | hotBytes (8)    |
 *      | hotWindow (8) | hotSlot (8): ring part and round of the near mode |
 * 128  +--------------------------------------------------------------+
 *      | attached (4): ranks other than 0 that mapped the file          |  getAndAdd; the last one unlinks
 * 256  +--------------------------------------------------------------+
 *      | rank 0: arrive (8) | inline 0 (24) | inline 1 (24) | guard (8) |  release store / acquire load
 *  +64 | rank 0: signature 0 (32) | signature 1 (32)  [JCCL_CHECK=1]   |
 *  +128| rank 0: reduced (8) | state (4) | pad (4) | mode 0 | mode 1 (8 each; only rank 0's are used) |
 *  +256| rank 1: arrive ...                                             |  one 256-byte block per rank
 *      | ...                                                            |
 *      | padding to 4096                                                |
 * data +--------------------------------------------------------------+
 *      | rank 0's area (areaBytes, a page multiple):                     |  plain, published by arrive /
 *      |   hot 0 | hot 1 (hotBytes each) | ring (rounds > hotBytes,    |  reduced of the same rank
 *      |   each at most slotBytes <= half the ring, one after another) |
 *      | rank 1's area ...                                              |
 *      +--------------------------------------------------------------+
 * </pre>
 *
 * An input of at most {@link #INLINE_BYTES} bytes goes into the inline slot of the round's parity,
 * in the same cache line as {@code arrive} (NCCL's LL protocol has the same idea: flag and data in
 * one store unit), so that the peer's acquire load of the word brings the data along.
 * A rank's {@code arrive} word is the number of the last round whose input it has copied into its
 * area; {@code reduced} the last round whose reduced slice it has written there. Both only grow.
 * Where round {@code k}'s region lies in every area: {@link ShmCollArea#nextRound(long)}; the inline
 * and signature slots alternate by round parity. The guard word, last in {@code arrive}'s line, holds the
 * mismatch guard's signature of the call that published the round (org.jccl.internal.guard.OpGuard)
 * with the round's parity in bit 0, written before {@code arrive} and read after it; readers compare
 * it with their own call's (see {@link ShmCollArea#guardOf}). The words of one rank sit 128 bytes from
 * those of the next (the adjacent-line prefetcher pulls 128-byte pairs), and only their owner
 * writes them.
 */
final class ShmCollDescriptor {
    private ShmCollDescriptor() {
    }

    /** "JCCLCOL1" read as a little-endian long. */
    static final long MAGIC = 0x314c4f43_4c43434aL;
    /** Bumped whenever this layout changes. */
    static final int VERSION = 3;

    static final long MAGIC_OFFSET = ShmFileHeader.MAGIC_OFFSET;
    static final long VERSION_OFFSET = ShmFileHeader.VERSION_OFFSET;
    static final long RANKS_OFFSET = 12;
    static final long AREA_BYTES_OFFSET = 16;
    static final long CREATOR_PID_OFFSET = 24;
    static final long FILE_BYTES_OFFSET = 32;
    static final long SLOT_BYTES_OFFSET = 40;
    static final long HOT_BYTES_OFFSET = 48;
    static final long HOT_WINDOW_OFFSET = 56;
    static final long HOT_SLOT_OFFSET = 64;
    /** The part of the ring the near mode uses (the former two halves of the default 4 MiB area). */
    static final long HOT_WINDOW_MAX = 4 << 20;
    /**
     * Largest round of the near mode: half of one of the window's two halves. Measured, not derived:
     * with 2 MiB rounds (each half full), 2 MB all-reduces on 2 ranks issued back to back took 2-4x
     * as long as the same operations timed one by one, and one by one 1.1-1.6x as long as with 1 MiB
     * rounds (docs/PERFORMANCE.md, "The near window's rounds"); why full halves hurt pipelined rounds
     * is not known.
     */
    static final long HOT_SLOT_MAX = 1 << 20;
    /** Regions of the area start on cache-line multiples. */
    static final long ALIGN = 64;
    /** Largest hot region (rounds up to this size rewrite the same lines, hot in cache); at most an eighth of the area. */
    static final long HOT_MAX = 64 << 10;

    static final long LINE = 128;
    static final long ATTACHED_OFFSET = LINE;
    static final long RANKS_BLOCK_OFFSET = 2 * LINE;
    static final long RANK_BLOCK_BYTES = 2 * LINE;
    static final long ARRIVE = 0;
    /**
     * Two 24-byte slots (round parity) right after {@code arrive}, in its 64-byte cache line: an
     * input this small travels with the word that publishes it, in one cache-line transfer.
     */
    static final long INLINE = 8;
    static final long INLINE_BYTES = 24;
    /**
     * The guard word, in the last 8 bytes of {@code arrive}'s 64-byte line: the reader's acquire load
     * of {@code arrive} brings it along, so the always-on check costs no extra cache-line transfer.
     */
    static final long GUARD = 56;
    /**
     * Two 32-byte slots (round parity) in the second 64-byte line of {@code arrive}'s 128-byte pair:
     * with {@code JCCL_CHECK=1} a rank writes the signature of its collective here before it
     * arrives, so readers compare it before they use the round's data (OpSignature).
     */
    static final long SIG = 64;
    static final long SIG_BYTES = org.jccl.spi.CollectiveCall.SIGNATURE_BYTES;
    static final long REDUCED = LINE;
    static final long STATE = LINE + 8;
    /**
     * Two words (round parity) in rank 0's block: the mode (0: near, the ring's first {@code
     * hotWindow} bytes in rounds of at most {@code hotSlot}; 1: far, the whole ring in rounds of at
     * most {@code slotBytes}) of the operation that starts at round k, written by rank 0 before its
     * arrive at k-1 (ShmCollArea#arrive) and read by every rank when the operation starts.
     */
    static final long MODE = LINE + 16;
    static final long PAGE = ShmFileHeader.PAGE;

    static final int STATE_OPEN = 0;
    static final int STATE_CLOSED = 2;

    static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    /** Offset of word {@code which} ({@link #ARRIVE}, {@link #REDUCED}, {@link #STATE}) of {@code rank}. */
    static long word(int rank, long which) {
        return RANKS_BLOCK_OFFSET + rank * RANK_BLOCK_BYTES + which;
    }

    static long dataOffset(int ranks) {
        return ShmFileHeader.align(RANKS_BLOCK_OFFSET + ranks * RANK_BLOCK_BYTES, PAGE);
    }

    /** A rank's area rounded to whole pages, at least two (room for two slots of a page). */
    static long areaBytes(long requested) {
        return ShmFileHeader.align(Math.max(requested, 2 * PAGE), PAGE);
    }

    /** The hot regions' size for an area of {@code areaBytes}: {@link #HOT_MAX}, at most an eighth of the area, whole lines. */
    static long hotBytes(long areaBytes) {
        return Math.min(HOT_MAX, areaBytes / 8 / ALIGN * ALIGN);
    }

    /** The part of the ring the near mode uses: {@link #HOT_WINDOW_MAX} or the whole ring if smaller. */
    static long hotWindow(long areaBytes) {
        return Math.min(HOT_WINDOW_MAX, areaBytes - 2 * hotBytes(areaBytes));
    }

    /** The near mode's largest round: {@link #HOT_SLOT_MAX}, at most half its window, whole lines. */
    static long hotSlot(long areaBytes) {
        return Math.max(ALIGN, Math.min(HOT_SLOT_MAX, hotWindow(areaBytes) / 2 / ALIGN * ALIGN));
    }

    /** The far mode's largest round for an area of {@code areaBytes} and a requested {@code requested}: at most half the ring, whole lines. */
    static long slotBytes(long areaBytes, long requested) {
        long half = (areaBytes - 2 * hotBytes(areaBytes)) / 2 / ALIGN * ALIGN;
        return Math.max(ALIGN, Math.min(half, requested / ALIGN * ALIGN));
    }

    static long fileBytes(int ranks, long areaBytes) {
        return dataOffset(ranks) + ranks * areaBytes;
    }


    /** Writes the header of a fresh (zero-filled) file, magic last (release). */
    static void initialise(MemorySegment s, int ranks, long areaBytes, long slotBytes, long pid, boolean far) {
        // The mode of the first operations, before rank 0 publishes any (ShmCollArea#arrive).
        s.set(ValueLayout.JAVA_LONG, word(0, MODE), far ? 1L : 0L);
        s.set(ValueLayout.JAVA_LONG, word(0, MODE) + 8, far ? 1L : 0L);
        s.set(ValueLayout.JAVA_LONG, HOT_BYTES_OFFSET, hotBytes(areaBytes));
        s.set(ValueLayout.JAVA_LONG, HOT_WINDOW_OFFSET, hotWindow(areaBytes));
        s.set(ValueLayout.JAVA_LONG, HOT_SLOT_OFFSET, hotSlot(areaBytes));
        s.set(ValueLayout.JAVA_INT, VERSION_OFFSET, VERSION);
        s.set(ValueLayout.JAVA_INT, RANKS_OFFSET, ranks);
        s.set(ValueLayout.JAVA_LONG, AREA_BYTES_OFFSET, areaBytes);
        s.set(ValueLayout.JAVA_LONG, SLOT_BYTES_OFFSET, slotBytes);
        s.set(ValueLayout.JAVA_LONG, CREATOR_PID_OFFSET, pid);
        s.set(ValueLayout.JAVA_LONG, FILE_BYTES_OFFSET, s.byteSize());
        LONG.setRelease(s, MAGIC_OFFSET, MAGIC);
    }

    /** Null when {@code s} is a segment for {@code ranks} ranks, else what is wrong. */
    static String validate(MemorySegment s, int ranks) {
        String wrong = ShmFileHeader.identity(s, MAGIC, VERSION);
        if (wrong != null) {
            return wrong;
        }
        int r = s.get(ValueLayout.JAVA_INT, RANKS_OFFSET);
        long area = s.get(ValueLayout.JAVA_LONG, AREA_BYTES_OFFSET);
        long slot = s.get(ValueLayout.JAVA_LONG, SLOT_BYTES_OFFSET);
        long hot = s.get(ValueLayout.JAVA_LONG, HOT_BYTES_OFFSET);
        if (r != ranks || area < 2 * PAGE || area % PAGE != 0 || hot != hotBytes(area) || slot < ALIGN || slot % ALIGN != 0
                || s.get(ValueLayout.JAVA_LONG, HOT_WINDOW_OFFSET) != hotWindow(area) || s.get(ValueLayout.JAVA_LONG, HOT_SLOT_OFFSET) != hotSlot(area)
                || 2 * slot > area - 2 * hot || fileBytes(r, area) != s.byteSize()
                || s.get(ValueLayout.JAVA_LONG, FILE_BYTES_OFFSET) != s.byteSize()) {
            return "inconsistent geometry: " + r + " ranks (expected " + ranks + ") of " + area + " bytes in slots of " + slot
                    + " bytes in a file of " + s.byteSize() + " bytes";
        }
        return null;
    }
}
