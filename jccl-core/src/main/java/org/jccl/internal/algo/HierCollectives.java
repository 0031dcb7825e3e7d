package org.jccl.internal.algo;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.jccl.internal.tune.Hierarchy;
import org.jccl.spi.P2pRequest;

/**
 * Hierarchical collectives, for communicators whose ranks span several hosts ({@link Hierarchy}):
 * a same-host stage over the same-host transport (SHM), one cross-host stage over the network among
 * one rank per host (or per slice), and a same-host stage again. The stages are the flat algorithms
 * of {@link Collectives} run on a group of ranks ({@link CollectiveContext#inGroup}), each chosen by the
 * stage's own cost model, so only the cross-host stage's bytes cross hosts: an all-reduce of m bytes
 * sends m (leader form) or m/L (slice form, L ranks per host) per rank over the network, where the
 * flat algorithms send up to 2m from every rank.
 *
 * <ul>
 * <li>allReduce, leader form: binomial reduce to the first rank of each host, all-reduce among
 *     those, broadcast on each host. Any layout (3+2, 1+3, interleaved ranks).</li>
 * <li>allReduce, slice form (every host has L ranks): ring reduce-scatter of L balanced slices on
 *     each host, all-reduce of slice i among the i-th ranks of every host, ring all-gather on each
 *     host. The model picks between the two forms ({@link Hierarchy#sliceAllReduce}).</li>
 * <li>broadcast: across hosts among the root and the first rank of every other host, then on each host.</li>
 * <li>reduce: on each host to the root (its host) or the first rank (the others), then across hosts to the root.</li>
 * <li>reduceScatter: see {@link #reduceScatter} (a slice and a leader form, as all-reduce).</li>
 * <li>allGather: every rank's block to the first rank of its host, the hosts' blocks around a ring of
 *     those first ranks (one message per block: a host's blocks need not be contiguous in the
 *     output), the whole output broadcast on each host.</li>
 * </ul>
 * AVG runs as SUM in every stage and is divided by the communicator's size once, at the end, as the
 * flat algorithms do.
 */
public final class HierCollectives {
    private HierCollectives() {
    }

    /** Slot of the partial result of a reduce's host leader that is not the root (the user passes no buffer there). */
    private static final int LEADER_SLOT = 4;

    private static ReduceOp stageOp(ReduceOp op) {
        return op == ReduceOp.AVG ? ReduceOp.SUM : op;
    }

    private static boolean same(MemorySegment a, MemorySegment b) {
        return a.address() == b.address() && a.isNative() == b.isNative();
    }

    private static int indexOf(int[] a, int v) {
        for (int i = 0; i < a.length; i++) {
            if (a[i] == v) {
                return i;
            }
        }
        throw new IllegalStateException("rank " + v + " is not in " + java.util.Arrays.toString(a));
    }

    // ------------------------------------------------------------------------------------ allReduce

    static void allReduce(CollectiveContext ctx, Hierarchy h, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        if (h.sliceAllReduce(t.bytes(count))) {
            sliceAllReduce(ctx, h, s, r, count, t, op);
        } else {
            leaderAllReduce(ctx, h, s, r, count, t, op);
        }
    }

    private static void leaderAllReduce(CollectiveContext ctx, Hierarchy h, MemorySegment s, MemorySegment r, long count, DataType t,
                                        ReduceOp op) {
        int n = ctx.size();
        ReduceOp sop = stageOp(op);
        int[] local = h.intraGroup();
        boolean leader = h.myLocal() == 0;
        if (local.length > 1) {
            ctx.inGroup(local, h.intraTuner(), () -> Collectives.reduce(ctx, s, r, count, t, sop, 0));
        } else if (!same(s, r)) {
            MemorySegment.copy(s, 0, r, 0, t.bytes(count));
        }
        if (leader) {
            ctx.inGroup(h.leaders(ctx.rank()), h.interTuner(), () -> Collectives.allReduce(ctx, r, r, count, t, sop));
            Reductions.finishAvg(r, count, t, op, n);
        }
        if (local.length > 1) {
            ctx.inGroup(local, h.intraTuner(), () -> Collectives.broadcast(ctx, r, r, t.bytes(count), 0));
        }
    }

    private static void sliceAllReduce(CollectiveContext ctx, Hierarchy h, MemorySegment s, MemorySegment r, long count, DataType t,
                                       ReduceOp op) {
        int n = ctx.size();
        ReduceOp sop = stageOp(op);
        int[] local = h.intraGroup();
        int esz = t.size();
        int me = h.myLocal();
        Chunks ch = Chunks.balanced(count, local.length, ctx.chunkBytes() / esz);
        // Reduce-scatter: afterwards chunk `me` of r holds the sum over this host (shift -1: chunk rank).
        ctx.inGroup(local, h.intraTuner(), () -> RingCollectives.ringReduceScatter(ctx, s, r, ch, t, sop, -1, null));
        long len = ch.rangeLength(me, me + 1);
        if (len > 0) {
            // Every host cuts the same slices (same count, same L), so the group agrees on len.
            MemorySegment slice = r.asSlice(ch.rangeOffset(me) * esz, len * esz);
            ctx.inGroup(h.sliceGroup(), h.interTuner(), () -> Collectives.allReduce(ctx, slice, slice, len, t, sop));
            Reductions.finishAvg(slice, len, t, op, n);
        }
        ctx.inGroup(local, h.intraTuner(), () -> RingCollectives.ringAllGather(ctx, r, ch, esz, me, new ArrayList<>()));
    }

    // ------------------------------------------------------------------------------------ broadcast / reduce

    static void broadcast(CollectiveContext ctx, Hierarchy h, MemorySegment r, long bytes, int root) {
        int rootHost = h.hostOf(root);
        int[] local = h.intraGroup();
        int localRoot = h.myHost() == rootHost ? indexOf(local, root) : 0;
        if (ctx.rank() == local[localRoot]) {
            ctx.inGroup(h.leaders(root), h.interTuner(), () -> Collectives.broadcast(ctx, r, r, bytes, rootHost));
        }
        if (local.length > 1) {
            ctx.inGroup(local, h.intraTuner(), () -> Collectives.broadcast(ctx, r, r, bytes, localRoot));
        }
    }

    /** {@code r} is the root's output, null elsewhere. */
    static void reduce(CollectiveContext ctx, Hierarchy h, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op, int root) {
        int n = ctx.size();
        long bytes = t.bytes(count);
        ReduceOp sop = stageOp(op);
        int rootHost = h.hostOf(root);
        int[] local = h.intraGroup();
        int localRoot = h.myHost() == rootHost ? indexOf(local, root) : 0;
        boolean leader = ctx.rank() == local[localRoot];
        MemorySegment acc = ctx.rank() == root ? r : leader ? ctx.scratch(LEADER_SLOT, bytes) : null;
        if (local.length > 1) {
            ctx.inGroup(local, h.intraTuner(), () -> Collectives.reduce(ctx, s, acc, count, t, sop, localRoot));
        } else if (!same(s, acc)) {
            MemorySegment.copy(s, 0, acc, 0, bytes);
        }
        if (leader) {
            ctx.inGroup(h.leaders(root), h.interTuner(), () -> Collectives.reduce(ctx, acc, acc, count, t, sop, rootHost));
        }
        if (ctx.rank() == root) {
            Reductions.finishAvg(r, count, t, op, n);
        }
    }

    // ------------------------------------------------------------------------------------ allGather

    /** {@code r}: the whole output, this rank's block already in place. */
    static void allGather(CollectiveContext ctx, Hierarchy h, MemorySegment r, long bytesPerRank) {
        int rank = ctx.rank();
        int[] local = h.intraGroup();
        int leader = local[0];
        List<P2pRequest> rs = new ArrayList<>();
        if (rank != leader) {
            ctx.await(ctx.send(leader, block(r, rank, bytesPerRank)));
        } else {
            for (int i = 1; i < local.length; i++) {
                rs.add(ctx.recv(local[i], block(r, local[i], bytesPerRank)));
            }
            ctx.awaitAll(rs);
            // Ring of the hosts' first ranks: step k passes on the blocks of host (myHost - k), one
            // message per block; the receiver expects those of host (its host - k - 1), the same host.
            int hosts = h.hosts();
            int me = h.myHost();
            int[] leaders = h.leaders(leader);
            int next = leaders[(me + 1) % hosts];
            int prev = leaders[(me + hosts - 1) % hosts];
            List<P2pRequest> sends = new ArrayList<>();
            for (int k = 0; k < hosts - 1; k++) {
                for (int m : h.members((me + 2 * hosts - k - 1) % hosts)) {
                    rs.add(ctx.recv(prev, block(r, m, bytesPerRank)));
                }
                for (int m : h.members((me + hosts - k) % hosts)) {
                    sends.add(ctx.send(next, block(r, m, bytesPerRank)));
                }
                ctx.awaitAll(rs);
                ctx.awaitAll(sends);
            }
        }
        if (local.length > 1) {
            long all = bytesPerRank * ctx.size();
            ctx.inGroup(local, h.intraTuner(), () -> Collectives.broadcast(ctx, r, r, all, 0));
        }
    }

    // ------------------------------------------------------------------------------------ reduceScatter

    /** Slot of the reordered input of a reduce-scatter; {@link #LEADER_SLOT} holds a leader's sum. */
    private static final int REORDERED_SLOT = 5;

    /**
     * {@code s}: the whole input (n blocks of {@code count}), {@code r}: this rank's block (may lie in
     * {@code s}: the input is copied first). Slice form (equal hosts): the blocks reordered so that
     * those of the i-th ranks of all hosts are adjacent (by host), a ring reduce-scatter of these L
     * groups on each host, then a reduce-scatter of its group among the i-th ranks of every host.
     * Leader form (any layout): the blocks reordered by host, reduced to the first rank of each host,
     * a ring reduce-scatter of the hosts' regions among those first ranks, each block sent to its rank.
     */
    static void reduceScatter(CollectiveContext ctx, Hierarchy h, MemorySegment s, MemorySegment r, long count, DataType t, ReduceOp op) {
        int n = ctx.size();
        int esz = t.size();
        long block = t.bytes(count);
        ReduceOp sop = stageOp(op);
        int hosts = h.hosts();
        int[] local = h.intraGroup();
        MemorySegment p = ctx.scratch(REORDERED_SLOT, block * n);
        if (h.sliceReduceScatter(block * n)) {
            int l = local.length;
            long at = 0;
            for (int i = 0; i < l; i++) {
                for (int x = 0; x < hosts; x++) {
                    MemorySegment.copy(s, block * h.members(x)[i], p, at, block);
                    at += block;
                }
            }
            Chunks ch = Chunks.equal(hosts * count, l, ctx.chunkBytes() / esz);
            ctx.inGroup(local, h.intraTuner(), () -> RingCollectives.ringReduceScatter(ctx, p, p, ch, t, sop, -1, null));
            MemorySegment mine = p.asSlice(h.myLocal() * hosts * block, hosts * block);
            ctx.inGroup(h.sliceGroup(), h.interTuner(), () -> Collectives.reduceScatter(ctx, mine, r, count, t, sop));
        } else {
            long[] lengths = new long[hosts];
            long at = 0;
            for (int x = 0; x < hosts; x++) {
                for (int m : h.members(x)) {
                    MemorySegment.copy(s, block * m, p, at, block);
                    at += block;
                }
                lengths[x] = h.members(x).length * count;
            }
            boolean leader = h.myLocal() == 0;
            MemorySegment acc = local.length == 1 ? p : leader ? ctx.scratch(LEADER_SLOT, block * n) : null;
            if (local.length > 1) {
                ctx.inGroup(local, h.intraTuner(), () -> Collectives.reduce(ctx, p, acc, count * n, t, sop, 0));
            }
            if (leader) {
                Chunks ch = Chunks.sized(lengths, ctx.chunkBytes() / esz);
                ctx.inGroup(h.leaders(ctx.rank()), h.interTuner(), () -> RingCollectives.ringReduceScatter(ctx, acc, acc, ch, t, sop, -1, null));
                long base = ch.rangeOffset(h.myHost()) * esz;
                List<P2pRequest> sends = new ArrayList<>();
                for (int i = 1; i < local.length; i++) {
                    sends.add(ctx.send(local[i], acc.asSlice(base + i * block, block)));
                }
                MemorySegment.copy(acc, base, r, 0, block);
                ctx.awaitAll(sends);
            } else {
                ctx.await(ctx.recv(local[0], r));
            }
        }
        Reductions.finishAvg(r, count, t, op, n);
    }

    private static MemorySegment block(MemorySegment r, int rank, long bytes) {
        return r.asSlice(bytes * rank, bytes);
    }
}
