package org.jccl.internal.algo;

import static org.jccl.internal.algo.Collectives.mod;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.spi.P2pRequest;

/**
 * Bruck's algorithms, ceil(log2 n) messages per rank where the simple ones send n - 1: the
 * all-gather and the all-to-all.
 */
final class BruckCollectives {
    private BruckCollectives() {
    }

    /**
     * Bruck all-gather (bytes), in place: at step k (d = 2^k) rank v sends the min(d, n-d) chunks
     * starting at its own to v - d and receives those starting at v + d from v + d, so after
     * ceil(log2 n) steps it holds all n. The chunks are read and written where they belong in
     * {@code w} (a cyclic range that wraps is sent as two messages, split identically on both
     * sides), so there is no rotation copy.
     */
    static void bruckAllGather(CollectiveContext ctx, MemorySegment w, Chunks ch, int shift) {
        int n = ctx.size();
        int v = mod(ctx.rank() - shift, n);
        List<P2pRequest> rs = new ArrayList<>(4);
        for (int d = 1; d < n; d <<= 1) {
            int cnt = Math.min(d, n - d);
            int from = mod(v + d + shift, n);
            int to = mod(v - d + shift, n);
            int rstart = mod(v + d, n);
            postCyclic(ctx, rs, from, w, ch, rstart, cnt, false);
            postCyclic(ctx, rs, to, w, ch, v, cnt, true);
            ctx.awaitAll(rs);
        }
    }

    /** Posts the chunks [start, start + cnt) mod n as one or two messages (empty parts skipped). */
    private static void postCyclic(CollectiveContext ctx, List<P2pRequest> rs, int peer, MemorySegment w, Chunks ch, int start, int cnt,
                                   boolean send) {
        int n = ch.count();
        int end1 = Math.min(start + cnt, n);
        MemorySegment a = ch.range(w, start, end1);
        MemorySegment b = ch.range(w, 0, start + cnt - end1);
        for (MemorySegment x : new MemorySegment[] {a, b}) {
            if (x.byteSize() > 0) {
                rs.add(send ? ctx.send(peer, x) : ctx.recv(peer, x));
            }
        }
    }

    /**
     * Bruck all-to-all: rotate so that position i holds the block for rank + i; in step k every
     * block whose position has bit k set is packed, sent to rank + 2^k and replaced by what arrives
     * from rank - 2^k (a block at position i travels i ranks in total); finally position i holds the
     * block from rank - i. ceil(log2 n) messages instead of n - 1, each about half the buffer.
     * The send buffer is read only by the first rotation, so in place needs nothing more.
     */
    static void bruckAllToAll(CollectiveContext ctx, MemorySegment s, MemorySegment r, long block) {
        int n = ctx.size();
        int rank = ctx.rank();
        long total = block * n;
        MemorySegment tmp = ctx.scratch(1, total);
        MemorySegment.copy(s, block * rank, tmp, 0, block * (n - rank));
        MemorySegment.copy(s, 0, tmp, block * (n - rank), block * rank);
        MemorySegment out = ctx.scratch(2, total / 2 + block);
        MemorySegment in = ctx.scratch(3, total / 2 + block);
        for (int d = 1; d < n; d <<= 1) {
            long k = 0;
            for (int i = 0; i < n; i++) {
                if ((i & d) != 0) {
                    MemorySegment.copy(tmp, block * i, out, block * k++, block);
                }
            }
            exchangeTo(ctx, mod(rank + d, n), out.asSlice(0, block * k), mod(rank - d, n), in.asSlice(0, block * k));
            k = 0;
            for (int i = 0; i < n; i++) {
                if ((i & d) != 0) {
                    MemorySegment.copy(in, block * k++, tmp, block * i, block);
                }
            }
        }
        for (int i = 0; i < n; i++) {
            MemorySegment.copy(tmp, block * i, r, block * mod(rank - i, n), block);
        }
    }

    private static void exchangeTo(CollectiveContext ctx, int to, MemorySegment send, int from, MemorySegment recv) {
        P2pRequest rq = ctx.recv(from, recv);
        P2pRequest sq = ctx.send(to, send);
        ctx.await(rq);
        ctx.await(sq);
    }
}
