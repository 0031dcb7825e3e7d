package org.jccl.internal.runtime;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.jccl.InvalidUsageException;
import org.jccl.spi.P2pRequest;

/**
 * The operations of one {@link org.jccl.Group}, run as one step: every send and receive is posted
 * first (so a ring of blocking-looking send/recv pairs cannot deadlock), then the collectives run
 * in order while those transfers progress, then everything is awaited. Sends and receives to this
 * rank itself are matched in order and copied.
 */
final class FusedOp extends Op {
    private final List<Op> ops;

    FusedOp(List<Op> ops) {
        super("group", ops.stream().mapToLong(o -> o.bytes).sum(), null, null, -1);
        this.ops = ops;
    }

    List<Op> ops() {
        return ops;
    }

    @Override
    void run(OpContext ctx) throws Exception {
        ctx.guard().guardP2p();
        List<P2pRequest> pending = new ArrayList<>();
        ArrayDeque<P2pOp> selfSends = new ArrayDeque<>();
        ArrayDeque<P2pOp> selfRecvs = new ArrayDeque<>();
        for (Op op : ops) {
            if (op instanceof P2pOp p) {
                if (p.rootOrPeer == ctx.rank()) {
                    (p.isSend ? selfSends : selfRecvs).add(p);
                } else {
                    pending.add(p.post(ctx));
                }
            }
        }
        if (selfSends.size() != selfRecvs.size()) {
            throw new InvalidUsageException("rank " + ctx.rank() + ": a group has " + selfSends.size() + " send(s) to this rank itself but "
                    + selfRecvs.size() + " recv(s) from it; they must pair up");
        }
        while (!selfSends.isEmpty()) {
            P2pOp s = selfSends.poll();
            P2pOp r = selfRecvs.poll();
            if (s.segment.byteSize() != r.segment.byteSize()) {
                throw new InvalidUsageException("rank " + ctx.rank() + ": send to self of " + s.segment.byteSize()
                        + " bytes is matched by a recv of " + r.segment.byteSize() + " bytes");
            }
            MemorySegment.copy(s.segment, 0, r.segment, 0, s.segment.byteSize());
        }
        for (Op op : ops) {
            if (!(op instanceof P2pOp)) {
                // Each collective of the group is a call of its own: its own guard word, collective index, confirmation.
                ctx.guard().beginCall(op, false);
                op.run(ctx);
                ctx.guard().endCall();
            }
        }
        ctx.guard().guardP2p();
        ctx.awaitAll(pending);
    }
}
