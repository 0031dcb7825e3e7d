package org.jccl.internal.transport.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The layout of one registered-region file: memory a rank allocated ({@code Endpoint.allocate}) for
 * peers of its host to put into. The owner creates, reserves and initialises the file, and publishes
 * it by renaming it to its final name; peers map it when they unpack its key. The file keeps its name
 * while the region is registered (a peer may unpack the key at any time) and is unlinked when the
 * owner deregisters it or closes its endpoint.
 *
 * <pre>
 *    0  +------------------------------------------------------------------+
 *       | magic "JCCLSHR1" (8, written last) | version (4) | ownerRank (4)  |  written once by the owner,
 *       | length (8) | token (8) | ownerPid (8) | fileBytes (8)            |  before the rename
 *  128  +------------------------------------------------------------------+
 *       | state (4): 1 live, 2 deregistered    [owner writes, release]     |  putters read it (acquire)
 *       +------------------------------------------------------------------+     before every put
 *       | padding to 4096                                                  |
 * 4096  +------------------------------------------------------------------+
 *       | data: length bytes, rounded up to whole pages                    |  written by peers' puts
 *       +------------------------------------------------------------------+
 * </pre>
 *
 * The token is random per region and travels in the key: a file recreated under a reused name is
 * never taken for the region a key names.
 */
final class ShmRegionDescriptor {
    private ShmRegionDescriptor() {
    }

    /** "JCCLSHR1" read as a little-endian long. */
    static final long MAGIC = 0x31524853_4c43434aL;
    /** Bumped whenever this layout changes. */
    static final int VERSION = 1;

    static final long OWNER_RANK_OFFSET = 12;
    static final long LENGTH_OFFSET = 16;
    static final long TOKEN_OFFSET = 24;
    static final long OWNER_PID_OFFSET = 32;
    static final long FILE_BYTES_OFFSET = 40;
    static final long STATE_OFFSET = 128;
    static final long DATA_OFFSET = ShmFileHeader.PAGE;

    static final int LIVE = 1;
    static final int DEREGISTERED = 2;

    /** Bytes of the file of a region of {@code length} bytes. */
    static long fileBytes(long length) {
        return DATA_OFFSET + ShmFileHeader.align(length, ShmFileHeader.PAGE);
    }

    /** Writes the header of a fresh (zeroed) file; the magic last, with release semantics. */
    static void initialise(MemorySegment s, int ownerRank, long length, long token, long ownerPid) {
        s.set(ValueLayout.JAVA_INT, ShmFileHeader.VERSION_OFFSET, VERSION);
        s.set(ValueLayout.JAVA_INT, OWNER_RANK_OFFSET, ownerRank);
        s.set(ValueLayout.JAVA_LONG, LENGTH_OFFSET, length);
        s.set(ValueLayout.JAVA_LONG, TOKEN_OFFSET, token);
        s.set(ValueLayout.JAVA_LONG, OWNER_PID_OFFSET, ownerPid);
        s.set(ValueLayout.JAVA_LONG, FILE_BYTES_OFFSET, s.byteSize());
        ShmRingDescriptor.INT.setRelease(s, STATE_OFFSET, LIVE);
        ShmRingDescriptor.LONG.setRelease(s, ShmFileHeader.MAGIC_OFFSET, MAGIC);
    }

    /** Null when {@code s} is the region a key describes (owner, length, token), else what differs. */
    static String validate(MemorySegment s, int ownerRank, long length, long token) {
        String bad = ShmFileHeader.identity(s, MAGIC, VERSION);
        if (bad != null) {
            return bad;
        }
        if (s.get(ValueLayout.JAVA_LONG, TOKEN_OFFSET) != token) {
            return "it is another region than the key names (token differs: the name was reused)";
        }
        int owner = s.get(ValueLayout.JAVA_INT, OWNER_RANK_OFFSET);
        long len = s.get(ValueLayout.JAVA_LONG, LENGTH_OFFSET);
        if (owner != ownerRank || len != length || s.byteSize() < fileBytes(length)) {
            return "its header says rank " + owner + ", " + len + " B in a file of " + s.byteSize() + " B; the key says rank " + ownerRank
                    + ", " + length + " B";
        }
        return null;
    }

    static boolean isLive(MemorySegment s) {
        return (int) ShmRingDescriptor.INT.getAcquire(s, STATE_OFFSET) == LIVE;
    }

    static void markDeregistered(MemorySegment s) {
        ShmRingDescriptor.INT.setRelease(s, STATE_OFFSET, DEREGISTERED);
    }
}
