package org.jccl.cuda.internal;

import java.lang.foreign.MemorySegment;
import java.util.List;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.HierPlan.Form;
import org.jccl.cuda.internal.HierPlan.Step;

/**
 * The hierarchical GPU collectives of one rank, written once over a {@link HierDevice} (the GPU, or
 * host memory in tests) and three host communicators: {@code cross} (this rank's cross-host group,
 * rank = host index), {@code leaders} (the first rank of every host, rank = host index; this rank's
 * cross group when it is its host's first rank, else null) and {@code all} (every rank, in GPU rank
 * order). Each collective is cut into {@link HierPlan} steps and run by {@link HierPipeline}.
 *
 * <p>Forms (L ranks per host, H hosts, N = L H ranks; "equal": every host has L):
 * <ul>
 * <li>all-reduce: SLICE steps (reduce-scatter in the host, 1/L of the step across hosts per GPU,
 *     all-gather in the host), WHOLE for small messages and the count % L tail, LEADER for uneven hosts;</li>
 * <li>reduce-scatter, equal: the blocks of each local index gathered (a reordering copy), reduce-scatter
 *     in the host, reduce-scatter of the H blocks across hosts; uneven: LEADER all-reduce, own block kept;</li>
 * <li>all-gather, equal: all-gather across hosts, all-gather in the host, blocks copied to their rank's
 *     place; uneven: through {@code all};</li>
 * <li>broadcast and reduce: leader forms (the root's host first or last in the host, the first GPUs across);</li>
 * <li>all-to-all: every block through pinned memory and {@code all}, step by step.</li>
 * </ul>
 */
public final class HierPrograms {
    private final HierDevice dev;
    private final HostSplit split;
    private final Communicator cross;
    private final Communicator leaders;
    private final Communicator all;
    private final long chunk;
    private final int slots;
    private final long wholeMax;
    /** World rank of each rank of {@code cross}. */
    private final int[] crossRanks;

    public HierPrograms(HierDevice dev, HostSplit split, Communicator cross, Communicator leaders, Communicator all, long chunk, int slots,
                        long wholeMax) {
        this.dev = dev;
        this.split = split;
        this.cross = cross;
        this.leaders = leaders;
        this.all = all;
        this.chunk = chunk;
        this.slots = slots;
        this.wholeMax = wholeMax;
        this.crossRanks = split.crossGroup();
        if ((split.myLocal() == 0) != (leaders != null)) {
            throw new IllegalArgumentException("leaders must be given exactly on the first rank of each host");
        }
    }

    private static long maxCount(List<Step> steps) {
        long m = 0;
        for (Step s : steps) {
            m = Math.max(m, s.count());
        }
        return m;
    }

    /**
     * Runs a leg on the cross-host group (or the leaders, the same group on a host's first rank), whose
     * ranks are host indices: its failure names ranks in the whole communicator's numbering.
     */
    private HierPipeline.Leg crossLeg(java.util.function.Supplier<org.jccl.Work> leg) {
        org.jccl.Work w;
        try {
            w = leg.get();
        } catch (org.jccl.JcclException x) {
            throw HostSplit.inWorldRanks(x, crossRanks);
        }
        return () -> {
            try {
                w.join();
            } catch (org.jccl.JcclException x) {
                throw HostSplit.inWorldRanks(x, crossRanks);
            }
        };
    }

    /** A leg on {@code all} (ranks already in the whole communicator's numbering). */
    private static HierPipeline.Leg allLeg(org.jccl.Work w) {
        return w::join;
    }

    /** A step without a leg (a group of one). */
    private static final HierPipeline.Leg NONE = () -> { };

    private MemorySegment seg(int slot, int half, long bytes) {
        return dev.slot(slot, half).asSlice(0, bytes);
    }

    // ================================================================== all-reduce

    public void allReduce(long send, long recv, long count, DataType t, ReduceOp op) {
        List<Step> steps = HierPlan.allReduce(count, t.size(), split.localSize(), split.equalHosts(), chunk, slots, wholeMax);
        if (steps.isEmpty()) {
            return;
        }
        dev.prepare(0, 0, maxCount(steps) * t.size(), slots);
        allReduceSteps(steps, send, recv, t, op);
    }

    private void allReduceSteps(List<Step> steps, long send, long recv, DataType t, ReduceOp op) {
        int eb = t.size();
        int l = split.localSize();
        int i = split.myLocal();
        HierPipeline.run(steps.size(), slots, dev, new HierPipeline.Legs() {
            @Override
            public void pre(int c, int slot) {
                Step st = steps.get(c);
                long o = st.offset() * eb;
                long m = st.count();
                switch (st.form()) {
                    case SLICE -> dev.localReduceScatter(send + o, recv + o + i * (m / l) * eb, m / l, t, op);
                    case WHOLE -> {
                        if (l > 1) {
                            dev.localAllReduce(send + o, recv + o, m, t, op);
                        }
                    }
                    case LEADER -> {
                        if (l > 1) {
                            dev.localReduce(send + o, i == 0 ? recv + o : 0, m, t, op, 0);
                        }
                    }
                }
            }

            @Override
            public boolean hostLeg(int c) {
                return steps.get(c).form() != Form.LEADER || i == 0;
            }

            /** Device address and elements of the step's part that crosses hosts from this rank. */
            private long part(Step st) {
                long o = st.offset() * eb;
                return st.form() == Form.SLICE ? recv + o + i * (st.count() / l) * eb : recv + o;
            }

            private long partCount(Step st) {
                return st.form() == Form.SLICE ? st.count() / l : st.count();
            }

            @Override
            public void out(int c, int slot) {
                Step st = steps.get(c);
                long n = partCount(st);
                long src = st.form() == Form.SLICE || l > 1 ? part(st) : send + st.offset() * eb;
                dev.toHost(slot, seg(slot, 0, n * eb), src, n * eb);
            }

            @Override
            public HierPipeline.Leg cross(int c, int slot) {
                Step st = steps.get(c);
                long n = partCount(st);
                Communicator comm = st.form() == Form.LEADER ? leaders : cross;
                if (comm.size() == 1) {
                    return NONE;
                }
                MemorySegment m = seg(slot, 0, n * eb);
                return crossLeg(() -> comm.allReduceAsync(Buffer.of(m, n, t), Buffer.of(m, n, t), op));
            }

            @Override
            public void in(int c, int slot) {
                Step st = steps.get(c);
                long n = partCount(st);
                dev.toDevice(slot, part(st), seg(slot, 0, n * eb), n * eb);
            }

            @Override
            public void post(int c, int slot) {
                Step st = steps.get(c);
                long o = st.offset() * eb;
                long m = st.count();
                if (st.form() == Form.SLICE) {
                    dev.localAllGather(part(st), recv + o, m / l, t);
                } else if (st.form() == Form.LEADER && l > 1) {
                    dev.localBroadcast(i == 0 ? recv + o : 0, recv + o, m, t, 0);
                }
            }
        });
    }

    // ================================================================== reduce-scatter

    /** send: size() x n elements, recv: n (this rank's block of the sum). */
    public void reduceScatter(long send, long recv, long n, DataType t, ReduceOp op) {
        if (n == 0) {
            return;
        }
        int eb = t.size();
        int size = split.size();
        if (!split.equalHosts()) {
            List<Step> steps = HierPlan.allReduce(n * size, eb, split.localSize(), false, chunk, slots, wholeMax);
            dev.prepare(n * size * eb, 0, maxCount(steps) * eb, slots);
            long whole = dev.scratch(-1);
            allReduceSteps(steps, send, whole, t, op);
            dev.copy(recv, whole + split.rank() * n * eb, n * eb);
            return;
        }
        int l = split.localSize();
        int h = split.hosts();
        int me = split.myHost();
        List<Step> steps = HierPlan.blocks(n, eb, size, chunk, slots, Form.SLICE);
        long len = maxCount(steps);
        dev.prepare(l > 1 ? size * len * eb : 0, l > 1 ? h * len * eb : 0, h * len * eb, slots);
        HierPipeline.run(steps.size(), slots, dev, new HierPipeline.Legs() {
            @Override
            public void pre(int c, int slot) {
                if (l == 1) {
                    return;
                }
                Step st = steps.get(c);
                long a = st.offset();
                long k = st.count();
                long gathered = dev.scratch(-1);
                for (int j = 0; j < l; j++) {
                    for (int g = 0; g < h; g++) {
                        dev.copy(gathered + (j * (long) h + g) * k * eb, send + (split.member(g, j) * n + a) * eb, k * eb);
                    }
                }
                dev.localReduceScatter(gathered, dev.scratch(slot), h * k, t, op);
            }

            @Override
            public void out(int c, int slot) {
                Step st = steps.get(c);
                long k = st.count();
                MemorySegment s = seg(slot, 0, h * k * eb);
                if (l > 1) {
                    dev.toHost(slot, s, dev.scratch(slot), h * k * eb);
                } else {
                    for (int g = 0; g < h; g++) {
                        dev.toHost(slot, s.asSlice(g * k * eb, k * eb), send + (split.member(g, 0) * n + st.offset()) * eb, k * eb);
                    }
                }
            }

            @Override
            public HierPipeline.Leg cross(int c, int slot) {
                long k = steps.get(c).count();
                MemorySegment s = seg(slot, 0, h * k * eb);
                return crossLeg(() -> cross.reduceScatterAsync(Buffer.of(s, h * k, t), Buffer.of(s.asSlice(me * k * eb, k * eb), k, t), op));
            }

            @Override
            public void in(int c, int slot) {
                Step st = steps.get(c);
                long k = st.count();
                dev.toDevice(slot, recv + st.offset() * eb, seg(slot, 0, h * k * eb).asSlice(me * k * eb, k * eb), k * eb);
            }

            @Override
            public void post(int c, int slot) {
            }
        });
    }

    // ================================================================== all-gather

    /** send: n elements, recv: size() x n in rank order. */
    public void allGather(long send, long recv, long n, DataType t) {
        if (n == 0) {
            return;
        }
        int eb = t.size();
        int size = split.size();
        int l = split.localSize();
        int h = split.hosts();
        int me = split.myHost();
        int i = split.myLocal();
        boolean equal = split.equalHosts();
        List<Step> steps = HierPlan.blocks(n, eb, size, chunk, slots, Form.SLICE);
        long len = maxCount(steps);
        dev.prepare(0, equal ? size * len * eb : 0, (equal ? h : size) * len * eb, slots);
        HierPipeline.run(steps.size(), slots, dev, new HierPipeline.Legs() {
            @Override
            public void out(int c, int slot) {
                Step st = steps.get(c);
                long k = st.count();
                MemorySegment dst = equal ? seg(slot, 0, h * k * eb).asSlice(me * k * eb, k * eb) : seg(slot, 0, k * eb);
                dev.toHost(slot, dst, send + st.offset() * eb, k * eb);
            }

            @Override
            public HierPipeline.Leg cross(int c, int slot) {
                long k = steps.get(c).count();
                if (equal) {
                    MemorySegment s = seg(slot, 0, h * k * eb);
                    return crossLeg(() -> cross.allGatherAsync(Buffer.of(s.asSlice(me * k * eb, k * eb), k, t), Buffer.of(s, h * k, t)));
                } else {
                    return allLeg(all.allGatherAsync(Buffer.of(seg(slot, 0, k * eb), k, t), Buffer.of(seg(slot, 1, size * k * eb), size * k, t)));
                }
            }

            @Override
            public void in(int c, int slot) {
                Step st = steps.get(c);
                long k = st.count();
                if (equal) {
                    dev.toDevice(slot, dev.scratch(slot) + i * h * k * eb, seg(slot, 0, h * k * eb), h * k * eb);
                } else {
                    MemorySegment s = seg(slot, 1, size * k * eb);
                    for (int g = 0; g < size; g++) {
                        dev.toDevice(slot, recv + (g * n + st.offset()) * eb, s.asSlice(g * k * eb, k * eb), k * eb);
                    }
                }
            }

            @Override
            public void post(int c, int slot) {
                if (!equal) {
                    return;
                }
                Step st = steps.get(c);
                long k = st.count();
                long gathered = dev.scratch(slot);
                if (l > 1) {
                    dev.localAllGather(gathered + i * h * k * eb, gathered, h * k, t);
                }
                for (int j = 0; j < l; j++) {
                    for (int g = 0; g < h; g++) {
                        dev.copy(recv + (split.member(g, j) * n + st.offset()) * eb, gathered + (j * (long) h + g) * k * eb, k * eb);
                    }
                }
            }
        });
    }

    // ================================================================== broadcast and reduce

    public void broadcast(long send, long recv, long count, DataType t, int root) {
        if (count == 0) {
            return;
        }
        int eb = t.size();
        int l = split.localSize();
        int i = split.myLocal();
        int rootHost = split.hostOf(root);
        boolean mine = split.myHost() == rootHost;
        boolean isRoot = split.rank() == root;
        List<Step> steps = HierPlan.blocks(count, eb, 1, chunk, slots, Form.LEADER);
        dev.prepare(0, 0, maxCount(steps) * eb, slots);
        HierPipeline.run(steps.size(), slots, dev, new HierPipeline.Legs() {
            @Override
            public void pre(int c, int slot) {
                Step st = steps.get(c);
                long o = st.offset() * eb;
                if (!mine) {
                    return;
                }
                if (l > 1) {
                    dev.localBroadcast(isRoot ? send + o : 0, recv + o, st.count(), t, split.localOf(root));
                } else if (send != recv) {
                    dev.copy(recv + o, send + o, st.count() * eb);
                }
            }

            @Override
            public boolean hostLeg(int c) {
                return i == 0;
            }

            @Override
            public void out(int c, int slot) {
                Step st = steps.get(c);
                if (mine) {
                    dev.toHost(slot, seg(slot, 0, st.count() * eb), recv + st.offset() * eb, st.count() * eb);
                }
            }

            @Override
            public HierPipeline.Leg cross(int c, int slot) {
                long k = steps.get(c).count();
                MemorySegment m = seg(slot, 0, k * eb);
                return crossLeg(() -> leaders.broadcastAsync(Buffer.of(m, k, t), Buffer.of(m, k, t), rootHost));
            }

            @Override
            public void in(int c, int slot) {
                Step st = steps.get(c);
                if (!mine) {
                    dev.toDevice(slot, recv + st.offset() * eb, seg(slot, 0, st.count() * eb), st.count() * eb);
                }
            }

            @Override
            public void post(int c, int slot) {
                Step st = steps.get(c);
                long o = st.offset() * eb;
                if (!mine && l > 1) {
                    dev.localBroadcast(i == 0 ? recv + o : 0, recv + o, st.count(), t, 0);
                }
            }
        });
    }

    /** recv is used on the root only. */
    public void reduce(long send, long recv, long count, DataType t, ReduceOp op, int root) {
        if (count == 0) {
            return;
        }
        int eb = t.size();
        int l = split.localSize();
        int i = split.myLocal();
        int rootHost = split.hostOf(root);
        int rootLocal = split.localOf(root);
        boolean mine = split.myHost() == rootHost;
        boolean isRoot = split.rank() == root;
        List<Step> steps = HierPlan.blocks(count, eb, 1, chunk, slots, Form.LEADER);
        dev.prepare(l > 1 ? count * eb : 0, 0, maxCount(steps) * eb, slots);
        // Where the first rank of a host holds its host's (then, on the root's host, the global) sum.
        java.util.function.LongUnaryOperator held = o -> isRoot ? recv + o : dev.scratch(-1) + o;
        HierPipeline.run(steps.size(), slots, dev, new HierPipeline.Legs() {
            @Override
            public void pre(int c, int slot) {
                Step st = steps.get(c);
                long o = st.offset() * eb;
                if (l > 1) {
                    dev.localReduce(send + o, i == 0 ? held.applyAsLong(o) : 0, st.count(), t, op, 0);
                }
            }

            @Override
            public boolean hostLeg(int c) {
                return i == 0;
            }

            @Override
            public void out(int c, int slot) {
                Step st = steps.get(c);
                long o = st.offset() * eb;
                dev.toHost(slot, seg(slot, 0, st.count() * eb), l > 1 ? held.applyAsLong(o) : send + o, st.count() * eb);
            }

            @Override
            public HierPipeline.Leg cross(int c, int slot) {
                long k = steps.get(c).count();
                Buffer b = Buffer.of(seg(slot, 0, k * eb), k, t);
                if (leaders.size() == 1) {
                    return NONE;
                }
                return crossLeg(() -> leaders.reduceAsync(b, b, op, rootHost));
            }

            @Override
            public void in(int c, int slot) {
                Step st = steps.get(c);
                if (mine) {
                    dev.toDevice(slot, held.applyAsLong(st.offset() * eb), seg(slot, 0, st.count() * eb), st.count() * eb);
                }
            }

            @Override
            public void post(int c, int slot) {
                Step st = steps.get(c);
                long o = st.offset() * eb;
                if (mine && rootLocal != 0) {
                    long into = isRoot ? recv + o : dev.scratch(-1) + o;
                    dev.localBroadcast(i == 0 ? held.applyAsLong(o) : 0, into, st.count(), t, 0);
                }
            }
        });
    }

    // ================================================================== all-to-all

    /** send and recv: size() blocks of {@code block} elements. */
    public void allToAll(long send, long recv, long block, DataType t) {
        if (block == 0) {
            return;
        }
        int eb = t.size();
        int size = split.size();
        List<Step> steps = HierPlan.blocks(block, eb, size, chunk, slots, Form.SLICE);
        dev.prepare(0, 0, size * maxCount(steps) * eb, slots);
        HierPipeline.run(steps.size(), slots, dev, new HierPipeline.Legs() {
            @Override
            public void out(int c, int slot) {
                Step st = steps.get(c);
                long k = st.count();
                MemorySegment s = seg(slot, 0, size * k * eb);
                for (int g = 0; g < size; g++) {
                    dev.toHost(slot, s.asSlice(g * k * eb, k * eb), send + (g * block + st.offset()) * eb, k * eb);
                }
            }

            @Override
            public HierPipeline.Leg cross(int c, int slot) {
                long k = steps.get(c).count();
                return allLeg(all.allToAllAsync(Buffer.of(seg(slot, 0, size * k * eb), size * k, t), Buffer.of(seg(slot, 1, size * k * eb), size * k, t)));
            }

            @Override
            public void in(int c, int slot) {
                Step st = steps.get(c);
                long k = st.count();
                MemorySegment s = seg(slot, 1, size * k * eb);
                for (int g = 0; g < size; g++) {
                    dev.toDevice(slot, recv + (g * block + st.offset()) * eb, s.asSlice(g * k * eb, k * eb), k * eb);
                }
            }

            @Override
            public void post(int c, int slot) {
            }
        });
    }
}
