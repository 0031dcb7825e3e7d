package org.jccl.internal.transport.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The layout of one ring file: the messages one rank sends to one other rank on one communicator
 * (Agrona's {@code RingBufferDescriptor} pattern: every offset in one place). The receiver creates,
 * reserves and initialises the file; the sender maps it and unlinks it.
 *
 * <pre>
 *   0  +--------------------------------------------------------------+
 *      | magic "JCCLSHM1" (8) | version (4) | slotCount (4)              |  written once by the receiver,
 *      | slotBytes (8) | creatorPid (8) | fromRank (4) | toRank (4)      |  before the file gets its final
 *      | fileBytes (8)                                                  |  name (rename = publication)
 * 128  +--------------------------------------------------------------+
 *      | tail: chunks published by the sender (8)      [sender writes]  |  release store / acquire load
 * 256  +--------------------------------------------------------------+
 *      | head: chunks consumed by the receiver (8)   [receiver writes]  |  release store / acquire load
 * 384  +--------------------------------------------------------------+
 *      | senderState (4): 0 not attached, 1 attached, 2 closed          |
 * 512  +--------------------------------------------------------------+
 *      | receiverState (4): 1 open, 2 closed                            |
 * 640  +--------------------------------------------------------------+
 *      | receiverWaiting (4): 1 = receiver may block, ring its doorbell |  set by receiver, CAS 1->0 by sender
 * 768  +--------------------------------------------------------------+
 *      | senderWaiting (4): 1 = sender may block, ring its doorbell     |  set by sender, CAS 1->0 by receiver
 * 896  +--------------------------------------------------------------+
 *      | slot meta [slotCount] x 64: messageBytes (8) | chunkBytes (8)  |  plain, published by tail
 *      |   | guard (8): the mismatch guard's word of the sender's call    |
 *      +--------------------------------------------------------------+
 *      | padding to 4096                                                |
 * data +--------------------------------------------------------------+
 *      | slot data [slotCount] x slotBytes                              |  plain, published by tail
 *      +--------------------------------------------------------------+
 * </pre>
 *
 * The waiting flags make the doorbell cheap: a side about to block raises its flag (volatile), then
 * re-reads the counter it waits for; the other side, after a volatile store of its counter, rings
 * the doorbell (one byte on a Unix-domain socket the blocked side's selector watches) only when it
 * wins the CAS that lowers the flag. Store-then-load on both sides, sequentially consistent, so a
 * wake-up is never lost; a busy pair never makes a system call.
 *
 * <p>The two counters sit 128 bytes apart, not 64: Intel's adjacent-line prefetcher pulls cache lines
 * in pairs, so 64 would still let the sender's and the receiver's stores fight over one pair.
 * Counters only grow; slot {@code i} of chunk {@code k} is {@code k % slotCount}; the ring is full
 * when {@code tail - head == slotCount}.
 */
final class ShmRingDescriptor {
    private ShmRingDescriptor() {
    }

    /** "JCCLSHM1" read as a little-endian long; a file with anything else here is not ours. */
    static final long MAGIC = 0x314d4853_4c43434aL;
    /** Bumped whenever this layout changes; both sides must agree. */
    static final int VERSION = 3;

    static final long MAGIC_OFFSET = ShmFileHeader.MAGIC_OFFSET;
    static final long VERSION_OFFSET = ShmFileHeader.VERSION_OFFSET;
    static final long SLOT_COUNT_OFFSET = 12;
    static final long SLOT_BYTES_OFFSET = 16;
    static final long CREATOR_PID_OFFSET = 24;
    static final long FROM_RANK_OFFSET = 32;
    static final long TO_RANK_OFFSET = 36;
    static final long FILE_BYTES_OFFSET = 40;

    /** Padding unit between fields written by different processes. */
    static final long LINE = 128;
    static final long TAIL_OFFSET = LINE;
    static final long HEAD_OFFSET = 2 * LINE;
    static final long SENDER_STATE_OFFSET = 3 * LINE;
    static final long RECEIVER_STATE_OFFSET = 4 * LINE;
    static final long RECEIVER_WAITING_OFFSET = 5 * LINE;
    static final long SENDER_WAITING_OFFSET = 6 * LINE;
    static final long SLOT_META_OFFSET = 7 * LINE;
    static final long SLOT_META_BYTES = 64;
    static final long META_MESSAGE_BYTES = 0;
    static final long META_CHUNK_BYTES = 8;
    /**
     * The guard word (org.jccl.internal.guard.OpGuard) of the call that sent the chunk's message:
     * the receiver compares it with its own call's before the message size (version 3).
     */
    static final long META_GUARD = 16;
    static final long PAGE = ShmFileHeader.PAGE;

    static final int SENDER_NONE = 0;
    static final int SENDER_ATTACHED = 1;
    static final int SENDER_CLOSED = 2;
    static final int RECEIVER_OPEN = 1;
    static final int RECEIVER_CLOSED = 2;

    /** Atomic long access on native memory: coordinates (MemorySegment, long offset). */
    static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    /** Atomic int access on native memory: coordinates (MemorySegment, long offset). */
    static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    static long slotMetaOffset(int slot) {
        return SLOT_META_OFFSET + slot * SLOT_META_BYTES;
    }

    static long dataOffset(int slotCount) {
        return ShmFileHeader.align(SLOT_META_OFFSET + slotCount * SLOT_META_BYTES, PAGE);
    }

    static long slotDataOffset(int slotCount, long slotBytes, int slot) {
        return dataOffset(slotCount) + slot * slotBytes;
    }

    /** Size of a file with this geometry (a whole number of pages). */
    static long fileBytes(int slotCount, long slotBytes) {
        return ShmFileHeader.align(dataOffset(slotCount) + slotCount * slotBytes, PAGE);
    }


    /** Writes the header of a fresh (zero-filled) file; counters and states start at zero/open. */
    static void initialise(MemorySegment s, int slotCount, long slotBytes, long pid, int fromRank, int toRank) {
        s.set(ValueLayout.JAVA_INT, VERSION_OFFSET, VERSION);
        s.set(ValueLayout.JAVA_INT, SLOT_COUNT_OFFSET, slotCount);
        s.set(ValueLayout.JAVA_LONG, SLOT_BYTES_OFFSET, slotBytes);
        s.set(ValueLayout.JAVA_LONG, CREATOR_PID_OFFSET, pid);
        s.set(ValueLayout.JAVA_INT, FROM_RANK_OFFSET, fromRank);
        s.set(ValueLayout.JAVA_INT, TO_RANK_OFFSET, toRank);
        s.set(ValueLayout.JAVA_LONG, FILE_BYTES_OFFSET, s.byteSize());
        INT.setRelease(s, RECEIVER_STATE_OFFSET, RECEIVER_OPEN);
        // Magic last, with release: a reader that sees it sees every field above.
        LONG.setRelease(s, MAGIC_OFFSET, MAGIC);
    }

    /**
     * Checks a file mapped by the sender; returns null when it is what {@code fromRank -> toRank}
     * expects, else what is wrong.
     */
    static String validate(MemorySegment s, int fromRank, int toRank) {
        String wrong = ShmFileHeader.identity(s, MAGIC, VERSION);
        if (wrong != null) {
            return wrong;
        }
        int slots = slotCount(s);
        long slotBytes = slotBytes(s);
        if (slots < 1 || slotBytes < 1 || fileBytes(slots, slotBytes) != s.byteSize()
                || s.get(ValueLayout.JAVA_LONG, FILE_BYTES_OFFSET) != s.byteSize()) {
            return "inconsistent geometry: " + slots + " slots of " + slotBytes + " bytes in a file of " + s.byteSize() + " bytes";
        }
        int f = s.get(ValueLayout.JAVA_INT, FROM_RANK_OFFSET);
        int t = s.get(ValueLayout.JAVA_INT, TO_RANK_OFFSET);
        if (f != fromRank || t != toRank) {
            return "ring of rank " + f + " -> rank " + t + " where rank " + fromRank + " -> rank " + toRank + " was expected";
        }
        return null;
    }

    static int slotCount(MemorySegment s) {
        return s.get(ValueLayout.JAVA_INT, SLOT_COUNT_OFFSET);
    }

    static long slotBytes(MemorySegment s) {
        return s.get(ValueLayout.JAVA_LONG, SLOT_BYTES_OFFSET);
    }
}
