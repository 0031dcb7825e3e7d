package org.jccl.cuda.testing;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.cuda.DeviceBuffer;
import org.jccl.cuda.internal.CudaDriver;

/**
 * A training-loop shape: 24 collectives issued back to back on each rank's stream, with no host
 * synchronization between them, each reading what the previous one wrote (two int64 buffers A and
 * B per rank, in place and out of place, rotating roots). The host simulates the same chain and the
 * final A and B of every rank must match it exactly (int64 wraps like the GPU).
 *
 * <p>What it catches that single cases do not: a collective that does not wait for the previous one
 * on its stream, state (flags, sequence numbers, scratch) reused across consecutive operations, and
 * non-roots of reduce writing a recv they were told is not theirs.
 */
public final class ChainCheck {
    private ChainCheck() {
    }

    /** One step: coll from buffer (A or B) to buffer. */
    record Step(Coll coll, boolean srcA, boolean dstA, ReduceOp op, int root) {
        @Override
        public String toString() {
            return coll + "(" + (srcA ? "A" : "B") + "->" + (dstA ? "A" : "B") + (op == null ? "" : ", " + op.ncclName())
                    + (root >= 0 ? ", root " + root : "") + ")";
        }
    }

    static List<Step> steps(int n) {
        List<Step> round = List.of(
                new Step(Coll.ALL_REDUCE, true, false, ReduceOp.SUM, -1),
                new Step(Coll.ALL_REDUCE, false, false, ReduceOp.SUM, -1),
                new Step(Coll.REDUCE, false, true, ReduceOp.MAX, 1 % n),
                new Step(Coll.BROADCAST, true, true, null, 1 % n),
                new Step(Coll.ALL_REDUCE, true, true, ReduceOp.PROD, -1),
                new Step(Coll.ALL_REDUCE, true, false, ReduceOp.MIN, -1),
                new Step(Coll.BROADCAST, false, true, null, n - 1),
                new Step(Coll.ALL_REDUCE, true, true, ReduceOp.SUM, -1));
        List<Step> all = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            all.addAll(round);
        }
        return all;
    }

    /** Runs the chain on {@code count} int64 per rank; null when it matched, else what differed. */
    public static String run(RankSet set, long count, long seed) {
        int n = set.size();
        DataType t = DataType.INT64;
        long bytes = t.bytes(count);
        long off = Layout.GUARD;
        long span = off + bytes + Layout.GUARD;
        set.ensureDevice(span, span);
        long caseSeed = Elements.mix(seed ^ Elements.fnv("chain " + count));
        List<Step> steps = steps(n);
        String what = "chain of " + steps.size() + " int64 collectives, count=" + count + " seed=0x" + Long.toHexString(caseSeed);

        DeviceBuffer[] a = new DeviceBuffer[n];
        DeviceBuffer[] b = new DeviceBuffer[n];
        long[][] ma = new long[n][];
        long[][] mb = new long[n][];
        for (int r = 0; r < n; r++) {
            a[r] = CaseRunner.view(set.sendArea(r), off, count, t);
            b[r] = CaseRunner.view(set.recvArea(r), off, count, t);
            long rs = Elements.rankSeed(caseSeed, r);
            ma[r] = new long[(int) count];
            mb[r] = new long[(int) count];
            MemorySegment h = set.hostIn(r, bytes);
            for (int i = 0; i < count; i++) {
                ma[r][i] = Elements.intValue(t, rs, i);
                mb[r][i] = 0xA5A5A5A5A5A5A5A5L;
                h.setAtIndex(ValueLayout.JAVA_LONG, i, ma[r][i]);
            }
            set.devices().get(r).makeCurrent();
            set.sendArea(r).slice(0, span).fill(CaseRunner.POISON, set.stream(r));
            set.recvArea(r).slice(0, span).fill(CaseRunner.POISON, set.stream(r));
            CudaDriver.memcpyHtoDAsync(a[r].address(), h, bytes, set.stream(r).handle());
        }

        Map<String, Throwable> errors = set.run(Style.THREADS, (r, comm, s) -> {
            for (Step st : steps) {
                DeviceBuffer src = st.srcA() ? a[r] : b[r];
                DeviceBuffer dst = st.dstA() ? a[r] : b[r];
                switch (st.coll()) {
                    case ALL_REDUCE -> comm.allReduce(src, dst, st.op(), s);
                    case REDUCE -> comm.reduce(src, dst, st.op(), st.root(), s);
                    case BROADCAST -> comm.broadcast(src, dst, st.root(), s);
                    default -> throw new IllegalStateException(st.toString());
                }
            }
        }, CaseRunner.caseTimeout().multipliedBy(2));
        if (!errors.isEmpty()) {
            return what + ": the calls threw: " + errors;
        }

        // The host model of the same chain.
        for (Step st : steps) {
            long[][] src = st.srcA() ? ma : mb;
            long[][] dst = st.dstA() ? ma : mb;
            long[] res = new long[(int) count];
            if (st.coll() == Coll.BROADCAST) {
                System.arraycopy(src[st.root()], 0, res, 0, (int) count);
            } else {
                for (int i = 0; i < count; i++) {
                    long acc = src[0][i];
                    for (int q = 1; q < n; q++) {
                        acc = Elements.combine(t, st.op(), acc, src[q][i]);
                    }
                    res[i] = acc;
                }
            }
            for (int r = 0; r < n; r++) {
                if (st.coll() != Coll.REDUCE || r == st.root()) {
                    dst[r] = res.clone();
                }
            }
        }

        List<String> lines = new ArrayList<>();
        long wrong = 0;
        for (int r = 0; r < n; r++) {
            for (int which = 0; which < 2; which++) {
                DeviceBuffer d = which == 0 ? a[r] : b[r];
                long[] m = which == 0 ? ma[r] : mb[r];
                MemorySegment h = set.hostRecv(r, bytes);
                d.copyTo(h);
                for (int i = 0; i < count; i++) {
                    long got = h.getAtIndex(ValueLayout.JAVA_LONG, i);
                    if (got != m[i]) {
                        wrong++;
                        if (lines.size() < 6) {
                            lines.add("rank " + r + " " + (which == 0 ? "A" : "B") + "[" + i + "]: expected " + m[i] + ", got " + got
                                    + (got == 0xA5A5A5A5A5A5A5A5L ? " (0xA5 poison: never written)" : ""));
                        }
                    }
                }
            }
        }
        if (wrong == 0) {
            return null;
        }
        return what + ": " + wrong + " wrong element(s) after " + steps.subList(0, 8) + " x3\n    " + String.join("\n    ", lines);
    }
}
