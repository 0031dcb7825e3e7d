package org.jccl.internal.runtime;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.spi.P2pRequest;

/** A send or receive. Alone it posts and waits; inside a group it is posted together with the others. */
final class P2pOp extends Op {
    final boolean isSend;
    final MemorySegment segment;

    P2pOp(boolean isSend, int peer, MemorySegment segment, DataType type) {
        super(isSend ? "send" : "recv", segment.byteSize(), type, null, peer);
        this.isSend = isSend;
        this.segment = segment;
    }

    P2pRequest post(OpContext ctx) {
        return isSend ? ctx.send(rootOrPeer, segment) : ctx.recv(rootOrPeer, segment);
    }

    @Override
    void run(OpContext ctx) {
        ctx.await(post(ctx));
    }
}
