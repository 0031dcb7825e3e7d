package org.jccl.cuda.testing;

/**
 * Where a {@link Case}'s buffers sit in each rank's two scratch areas (send area and receive area),
 * in bytes: {@link #GUARD} poisoned bytes, the buffer, {@link #GUARD} more. In place, both buffers
 * sit in the receive area, which then holds the larger one (allGather's recv, reduceScatter's send).
 *
 * @param sc elements of each rank's send buffer
 * @param rc elements of each rank's receive buffer
 * @param sOff byte offset of the send buffer in the send area (out of place)
 * @param rOff byte offset of the receive buffer (in place: of the larger buffer) in the receive area
 * @param regionElems elements from rOff that the operation may write
 * @param sendSpan bytes of the send area in use (0 in place)
 * @param recvSpan bytes of the receive area in use
 */
public record Layout(Case c, int n, long sc, long rc, long sOff, long rOff, long regionElems, long sendSpan, long recvSpan) {

    /** Guard bytes before and after each buffer; a multiple of 256 keeps cuMemAlloc's alignment. */
    public static final int GUARD = 256;

    /** Which scratch area. */
    public enum Area { SEND, RECV }

    /** A buffer: {@code count} elements at byte {@code offset} of {@code area}. */
    public record Place(Area area, long offset, long count) {
    }

    public static Layout of(Case c, int n) {
        int es = c.type().size();
        long sc = c.coll().sendCount(c.count(), n);
        long rc = c.coll().recvCount(c.count(), n);
        long sOff = GUARD + (long) c.misalign() * es;
        long rOff = GUARD + 3L * c.misalign() * es;
        long regionElems = c.inPlace() ? Math.max(sc, rc) : rc;
        long sendSpan = c.inPlace() ? 0 : sOff + sc * es + GUARD;
        long recvSpan = rOff + regionElems * es + GUARD;
        return new Layout(c, n, sc, rc, sOff, rOff, regionElems, sendSpan, recvSpan);
    }

    /** Whether rank r's input matters (broadcast: only the root's). */
    public boolean hasInput(int r) {
        return c.coll() != Coll.BROADCAST || r == c.root();
    }

    /** Rank r's send buffer, or null when it passes none (out-of-place broadcast off the root). */
    public Place send(int r) {
        int es = c.type().size();
        if (!c.inPlace()) {
            return c.coll() != Coll.BROADCAST || r == c.root() ? new Place(Area.SEND, sOff, sc) : null;
        }
        return switch (c.coll()) {
            case ALL_GATHER -> new Place(Area.RECV, rOff + r * c.count() * es, c.count());
            default -> new Place(Area.RECV, rOff, sc);
        };
    }

    /** Rank r's receive buffer, or null when it passes none (out-of-place reduce off the root). */
    public Place recv(int r) {
        int es = c.type().size();
        if (!c.inPlace()) {
            return c.coll() != Coll.REDUCE || r == c.root() ? new Place(Area.RECV, rOff, rc) : null;
        }
        return switch (c.coll()) {
            case REDUCE_SCATTER -> new Place(Area.RECV, rOff + r * c.count() * es, c.count());
            default -> new Place(Area.RECV, rOff, rc);
        };
    }
}
