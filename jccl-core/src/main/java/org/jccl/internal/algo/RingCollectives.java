package org.jccl.internal.algo;

import static org.jccl.internal.algo.Collectives.mod;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.spi.P2pRequest;

/**
 * The pipelined rings: reduce-scatter and all-gather in n-1 steps each, every chunk cut into
 * {@code JCCL_CHUNK_SIZE} slices so that receiving slice k+1 overlaps reducing slice k and a slice
 * moves on to the next rank as soon as it is reduced. The ring all-reduce is the two back to back
 * ({@link Collectives#allReduce}); the hierarchical collectives run them on the ranks of a host.
 */
final class RingCollectives {
    /** Receive slices in flight per ring step (bounds scratch memory to WINDOW x slice). */
    private static final int WINDOW = 8;

    private RingCollectives() {
    }

    /**
     * Ring reduce-scatter from {@code src} into {@code w} (which may be the same memory): at step s
     * this rank sends chunk (rank - s + shift) and writes (its own src chunk op the chunk received
     * from its left neighbour) into w; after n-1 steps chunk (rank + 1 + shift) of w holds the full
     * reduction (shift -1 makes that chunk {@code rank}). Step 0 sends straight from src, and every
     * chunk of w this rank reduces is written once, so out of place needs no initial copy.
     * When {@code gatherSends} is not null, each finished slice is also sent on at once as the first
     * step of the ring all-gather, and those sends are added to it (the all-gather awaits them:
     * waiting here could deadlock the ring, since the neighbour takes them only after its own
     * reduce-scatter).
     */
    static void ringReduceScatter(CollectiveContext ctx, MemorySegment src, MemorySegment w, Chunks ch, DataType t, ReduceOp op,
                                  int shift, List<P2pRequest> gatherSends) {
        int n = ctx.size();
        int rank = ctx.rank();
        int next = mod(rank + 1, n);
        int prev = mod(rank - 1, n);
        int esz = t.size();
        long sliceBytes = ch.sliceElems() * esz;
        MemorySegment tmp = ctx.scratch(0, Math.min(WINDOW, Math.max(1, ch.slices(0))) * sliceBytes);
        int window = (int) (tmp.byteSize() / sliceBytes);
        List<P2pRequest> sends = new ArrayList<>();
        int first = mod(rank + shift, n);
        for (int k = 0; k < ch.slices(first); k++) {
            sends.add(ctx.send(next, ch.slice(src, first, k, esz)));
        }
        for (int s = 0; s < n - 1; s++) {
            int c = mod(rank - s - 1 + shift, n);
            int ns = ch.slices(c);
            P2pRequest[] rq = new P2pRequest[ns];
            int posted = 0;
            for (; posted < Math.min(window, ns); posted++) {
                rq[posted] = ctx.recv(prev, tmp.asSlice((posted % window) * sliceBytes, ch.sliceLength(c, posted) * esz));
            }
            boolean last = s == n - 2;
            for (int k = 0; k < ns; k++) {
                ctx.await(rq[k]);
                long len = ch.sliceLength(c, k);
                MemorySegment dst = ch.slice(w, c, k, esz);
                Reductions.reduce(dst, ch.slice(src, c, k, esz), tmp.asSlice((k % window) * sliceBytes, len * esz), len, t, op);
                if (posted < ns) {
                    rq[posted] = ctx.recv(prev, tmp.asSlice((posted % window) * sliceBytes, ch.sliceLength(c, posted) * esz));
                    posted++;
                }
                if (!last) {
                    sends.add(ctx.send(next, dst));
                } else {
                    Reductions.finishAvg(dst, len, t, op, n);
                    if (gatherSends != null) {
                        gatherSends.add(ctx.send(next, dst));
                    }
                }
            }
        }
        // The all-gather overwrites chunks these sends read: they must be done first.
        ctx.awaitAll(sends);
    }

    /**
     * Ring all-gather in place over {@code w}: this rank holds chunk {@code own}; at step s it
     * receives chunk (own - s - 1) from its left neighbour straight into {@code w} and forwards it
     * at the next step. {@code sends} holds step-0 sends already posted (by the reduce-scatter), or
     * is empty, in which case step 0 is posted here.
     */
    static void ringAllGather(CollectiveContext ctx, MemorySegment w, Chunks ch, int esz, int own, List<P2pRequest> sends) {
        int n = ctx.size();
        int rank = ctx.rank();
        int next = mod(rank + 1, n);
        int prev = mod(rank - 1, n);
        if (sends.isEmpty()) {
            for (int k = 0; k < ch.slices(own); k++) {
                sends.add(ctx.send(next, ch.slice(w, own, k, esz)));
            }
        }
        for (int s = 0; s < n - 1; s++) {
            int c = mod(own - s - 1, n);
            int ns = ch.slices(c);
            P2pRequest[] rq = new P2pRequest[ns];
            for (int k = 0; k < ns; k++) {
                rq[k] = ctx.recv(prev, ch.slice(w, c, k, esz));
            }
            for (int k = 0; k < ns; k++) {
                ctx.await(rq[k]);
                if (s < n - 2) {
                    sends.add(ctx.send(next, ch.slice(w, c, k, esz)));
                }
            }
        }
        ctx.awaitAll(sends);
    }
}
