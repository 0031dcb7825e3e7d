package org.jccl.cuda.testing;

import java.util.Locale;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * One run of one collective on every rank.
 *
 * @param coll the collective
 * @param type element type
 * @param op reduction (null for collectives without one)
 * @param count elements per rank: the whole buffer for allReduce, broadcast, reduce and send/recv;
 *     the per-rank block for allGather (send), reduceScatter (recv) and allToAll (per peer)
 * @param root the root of broadcast/reduce; the shift of send/recv (rank r sends to r+shift); else -1
 * @param inPlace NCCL's in-place form: send and recv at the same address, or for allGather send =
 *     this rank's slot of recv, for reduceScatter recv = this rank's slot of send
 * @param style how the calls are issued
 * @param misalign 0: buffers at the allocation's 256-byte alignment; 1: send one element and recv
 *     three elements past it (aligned only to the element size)
 * @param seed the inputs' seed (see {@link Elements})
 * @param syncFirst wait for the inputs' upload (every stream and device) before issuing the
 *     collective; used to rerun a failing case, to tell stream-ordering bugs from arithmetic ones
 */
public record Case(Coll coll, DataType type, ReduceOp op, long count, int root, boolean inPlace, Style style,
                   int misalign, long seed, boolean syncFirst) {

    /** A case whose seed is derived from {@code baseSeed} and the case's own description (stable under filtering and reordering). */
    public static Case of(Coll coll, DataType type, ReduceOp op, long count, int root, boolean inPlace, Style style,
                          int misalign, long baseSeed) {
        Case c = new Case(coll, type, op, count, root, inPlace, style, misalign, 0, false);
        return c.withSeed(Elements.mix(baseSeed ^ Elements.fnv(c.name())));
    }

    public Case withSeed(long s) {
        return new Case(coll, type, op, count, root, inPlace, style, misalign, s, syncFirst);
    }

    public Case synced() {
        return new Case(coll, type, op, count, root, inPlace, style, misalign, seed, true);
    }

    /** "allReduce int8 sum count=17 in-place threads", without the seed. */
    public String name() {
        StringBuilder sb = new StringBuilder(coll.apiName()).append(' ').append(type.name().toLowerCase(Locale.ROOT));
        if (op != null) {
            sb.append(' ').append(op.ncclName());
        }
        sb.append(" count=").append(count);
        if (coll.rooted()) {
            sb.append(" root=").append(root);
        } else if (coll == Coll.SEND_RECV) {
            sb.append(" shift=").append(root);
        }
        sb.append(inPlace ? " in-place" : " out-of-place").append(' ').append(style);
        if (misalign != 0) {
            sb.append(" misaligned");
        }
        if (syncFirst) {
            sb.append(" synced");
        }
        return sb.toString();
    }

    @Override
    public String toString() {
        return name() + " seed=0x" + Long.toHexString(seed);
    }
}
