package org.jccl.internal.algo;

import static org.jccl.internal.algo.Collectives.mod;

import java.lang.foreign.MemorySegment;
import org.jccl.spi.P2pRequest;

/**
 * The collectives where every rank talks to every other in turn: the pairwise all-to-all and
 * all-to-allv (n - 1 steps) and the dissemination barrier (ceil(log2 n) rounds of empty messages).
 */
final class PairwiseCollectives {
    private PairwiseCollectives() {
    }

    /**
     * Pairwise all-to-all: step i sends to rank + i and receives from rank - i. In place, the
     * blocks are sent from a copy.
     */
    static void allToAll(CollectiveContext ctx, MemorySegment s, MemorySegment r, long block) {
        int n = ctx.size();
        int rank = ctx.rank();
        MemorySegment src = s;
        if (s.address() == r.address() && s.isNative() == r.isNative() && n > 1) {
            // In place: every block is overwritten by the receive from its rank, so send from a copy.
            src = ctx.scratch(1, block * n);
            MemorySegment.copy(s, 0, src, 0, block * n);
        }
        if (src != r || n == 1) {
            MemorySegment.copy(src, block * rank, r, block * rank, block);
        }
        for (int i = 1; i < n; i++) {
            int to = mod(rank + i, n);
            int from = mod(rank - i, n);
            P2pRequest rq = ctx.recv(from, r.asSlice(block * from, block));
            P2pRequest sq = ctx.send(to, src.asSlice(block * to, block));
            ctx.await(rq);
            ctx.await(sq);
        }
    }

    /** Pairwise as {@link #allToAll}, each block of its own size. */
    static void allToAllv(CollectiveContext ctx, MemorySegment s, long[] sc, long[] sd, MemorySegment r, long[] rc, long[] rd,
                          int esz) {
        int n = ctx.size();
        int rank = ctx.rank();
        if (sc[rank] > 0) {
            MemorySegment.copy(s, sd[rank] * esz, r, rd[rank] * esz, sc[rank] * esz);
        }
        for (int i = 1; i < n; i++) {
            int to = mod(rank + i, n);
            int from = mod(rank - i, n);
            // Empty blocks still travel (as empty messages) so that mismatched counts are detected, not waited on.
            P2pRequest rq = ctx.recv(from, block(r, rd[from], rc[from], esz));
            P2pRequest sq = ctx.send(to, block(s, sd[to], sc[to], esz));
            ctx.await(rq);
            ctx.await(sq);
        }
    }

    /** Elements [displ, displ + count) of seg; an empty block may lie anywhere (even past the end). */
    private static MemorySegment block(MemorySegment seg, long displ, long count, int esz) {
        return count == 0 ? MemorySegment.NULL : seg.asSlice(displ * esz, count * esz);
    }

    /** Dissemination barrier: in round k every rank signals rank + 2^k and waits for rank - 2^k. */
    static void disseminationBarrier(CollectiveContext ctx) {
        int n = ctx.size();
        int rank = ctx.rank();
        for (int d = 1; d < n; d <<= 1) {
            P2pRequest rq = ctx.recv(mod(rank - d, n), MemorySegment.NULL);
            P2pRequest sq = ctx.send(mod(rank + d, n), MemorySegment.NULL);
            ctx.await(rq);
            ctx.await(sq);
        }
    }
}
