package org.jccl.cuda.testing;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.cuda.CudaException;
import org.jccl.cuda.CudaStream;
import org.jccl.cuda.DeviceBuffer;
import org.jccl.cuda.DeviceCommunicator;
import org.jccl.cuda.internal.CudaDriver;

/**
 * Runs one {@link Case} on a {@link RankSet} and checks everything it can see:
 * <ol>
 *   <li>every rank's send and receive area (256 guard bytes before and after the buffers) is filled
 *       with the poison byte 0xA5, then the fresh inputs are copied in, all on the rank's stream with
 *       no host synchronization before the collective (the collective must wait for them: stream
 *       order on its own rank, and its peers' progress for theirs);</li>
 *   <li>the collective is issued in the case's style and awaited with a deadline;</li>
 *   <li>each received element is compared with the reference of {@link Elements}; guards and areas
 *       that must not change (a null buffer's area, a non-root's buffer of an in-place reduce, the
 *       send buffer of an out-of-place call) must be unchanged.</li>
 * </ol>
 * A failure lists the number of wrong elements per rank (and how many still hold the poison, i.e.
 * were never written), the first few mismatches (rank, index, expected, got) and the case with its
 * seed. {@link #sweep} reruns a failing case with every stream synchronized before the collective,
 * which tells a stream-ordering bug (or a race) from wrong arithmetic.
 */
public final class CaseRunner {
    private CaseRunner() {
    }

    public static final byte POISON = (byte) 0xA5;
    /** 64 KiB of poison, to compare areas with in bulk. */
    private static final MemorySegment POISON_BLOCK = Arena.global().allocate(1 << 16).fill(POISON);
    private static final int MAX_LINES = 6;

    /** Deadline of one case: -Djccl.gpu.caseTimeoutSeconds (default 30). */
    public static Duration caseTimeout() {
        return Duration.ofSeconds(Long.getLong("jccl.gpu.caseTimeoutSeconds", 30));
    }

    /**
     * What a sweep did.
     *
     * @param ran cases run
     * @param failures what was wrong, one entry per failing case
     * @param broken whether the set became unusable (the sweep stopped there)
     * @param stopped whether the sweep stopped at the failure limit
     * @param seconds how long it took
     */
    public record Outcome(int ran, List<String> failures, boolean broken, boolean stopped, double seconds) {
    }

    /**
     * Runs the cases that {@code filter} accepts, continuing after wrong results (up to {@code
     * maxFailures} failing cases) and stopping when the set becomes unusable.
     */
    public static Outcome sweep(RankSet set, List<Case> cases, Predicate<Case> filter, int maxFailures) {
        long t0 = System.nanoTime();
        List<String> failures = new ArrayList<>();
        int ran = 0;
        boolean broken = false;
        for (Case c : cases) {
            if (!filter.test(c)) {
                continue;
            }
            String f;
            try {
                f = run(set, c);
            } catch (RankSet.Broken e) {
                failures.add(c + ": " + e.getMessage());
                ran++;
                broken = true;
                break;
            } catch (CudaException e) {
                // A driver call of the harness failed (upload, read-back): the context is likely gone.
                set.abort("a CUDA call failed: " + e.getMessage());
                failures.add(c + ": a CUDA call failed (the set is now unusable): " + e);
                ran++;
                broken = true;
                break;
            } catch (RuntimeException e) {
                f = c + ": the test harness failed: " + e;
            }
            ran++;
            if (f != null) {
                if (!c.syncFirst() && set.usable()) {
                    try {
                        String again = run(set, c.synced());
                        f += again == null
                                ? "\n    -> passes when rerun with every stream and device synchronized before the collective:"
                                        + " a stream-ordering bug or a race"
                                : "\n    -> fails the same way when rerun with the inputs synchronized first";
                    } catch (RankSet.Broken e) {
                        f += "\n    -> the rerun with the inputs synchronized first broke the set: " + e.getMessage();
                        failures.add(f);
                        broken = true;
                        break;
                    } catch (RuntimeException e) {
                        f += "\n    -> the synchronized rerun failed: " + e;
                    }
                }
                failures.add(f);
                if (failures.size() >= maxFailures) {
                    return new Outcome(ran, failures, broken, true, (System.nanoTime() - t0) / 1e9);
                }
            }
        }
        return new Outcome(ran, failures, broken, false, (System.nanoTime() - t0) / 1e9);
    }

    // ------------------------------------------------------------------ one case

    /** A typed view of {@code count} elements at byte {@code offset} of a byte area. */
    static DeviceBuffer view(DeviceBuffer area, long offset, long count, DataType t) {
        return area.slice(offset, t.bytes(count)).as(t, count);
    }

    private static DeviceBuffer view(RankSet set, int r, Layout.Place p, DataType t) {
        if (p == null) {
            return null;
        }
        return view(p.area() == Layout.Area.SEND ? set.sendArea(r) : set.recvArea(r), p.offset(), p.count(), t);
    }

    /**
     * Runs {@code c} once.
     *
     * @return null when every check passed, else a description of what was wrong
     * @throws RankSet.Broken when the set became unusable (hang, CUDA error)
     */
    public static String run(RankSet set, Case c) {
        int n = set.size();
        DataType t = c.type();
        int es = t.size();
        Layout l = Layout.of(c, n);
        set.ensureDevice(Math.max(l.sendSpan(), 1), l.recvSpan());

        DeviceBuffer[] send = new DeviceBuffer[n];
        DeviceBuffer[] recv = new DeviceBuffer[n];
        for (int r = 0; r < n; r++) {
            send[r] = view(set, r, l.send(r), t);
            recv[r] = view(set, r, l.recv(r), t);
        }

        // The inputs, generated on the host (in parallel when large).
        MemorySegment[] hin = new MemorySegment[n];
        for (int r = 0; r < n; r++) {
            hin[r] = l.hasInput(r) ? set.hostIn(r, l.sc() * es) : null;
        }
        IntStream ranks = IntStream.range(0, n);
        (l.sc() > CHUNK / 4 ? ranks.parallel() : ranks).forEach(r -> {
            if (hin[r] != null) {
                Elements.fill(hin[r], t, c.op(), Elements.rankSeed(c.seed(), r), l.sc());
            }
        });
        // Poison, then inputs: queued on each rank's stream, no host wait before the collective.
        for (int r = 0; r < n; r++) {
            CudaStream s = set.stream(r);
            set.devices().get(r).makeCurrent();
            set.recvArea(r).slice(0, l.recvSpan()).fill(POISON, s);
            if (l.sendSpan() > 0) {
                set.sendArea(r).slice(0, l.sendSpan()).fill(POISON, s);
            }
            if (hin[r] != null) {
                // Pageable source: the driver stages it before returning, so hin[r] may be reused at once.
                CudaDriver.memcpyHtoDAsync(send[r].address(), hin[r], l.sc() * es, s.handle());
            }
        }
        if (c.syncFirst()) {
            for (int r = 0; r < n; r++) {
                set.stream(r).synchronize();
                set.devices().get(r).synchronize();
            }
        }

        Map<String, Throwable> errors = set.run(c.style(), (r, comm, s) -> issue(c, r, n, comm, send[r], recv[r], s), caseTimeout());
        if (!errors.isEmpty()) {
            StringBuilder sb = new StringBuilder(c + ": the calls threw:");
            errors.forEach((who, e) -> sb.append("\n    ").append(who).append(": ").append(e));
            return sb.toString();
        }

        MemorySegment[] hr = new MemorySegment[n];
        MemorySegment[] hs = new MemorySegment[n];
        for (int r = 0; r < n; r++) {
            hr[r] = set.hostRecv(r, l.recvSpan());
            set.recvArea(r).slice(0, l.recvSpan()).copyTo(hr[r]);
            if (l.sendSpan() > 0) {
                hs[r] = set.hostSend(r, l.sendSpan());
                set.sendArea(r).slice(0, l.sendSpan()).copyTo(hs[r]);
            }
        }
        return check(l, hr, hs, hin);
    }

    /** Elements per checking task; bigger outputs are checked in parallel chunks. */
    private static final long CHUNK = 1 << 16;

    /**
     * Checks the read-back areas of every rank against the reference; null when everything matched,
     * else what differed.
     *
     * @param hr each rank's receive area, read back
     * @param hs each rank's send area, read back (null in place)
     * @param inputs each rank's input as uploaded (null where it has none), or null: a fast path
     *     compares copies (broadcast, allGather, allToAll, send/recv, unchanged send buffers) with
     *     them byte for byte, and only a block that differs is checked (and reported) element by
     *     element; reductions are always checked element by element, in parallel chunks when large
     */
    public static String check(Layout l, MemorySegment[] hr, MemorySegment[] hs, MemorySegment[] inputs) {
        Case c = l.c();
        int n = l.n();
        int es = c.type().size();
        long cnt = c.count();
        long rOff = l.rOff();
        long sOff = l.sOff();
        long[] rseed = new long[n];
        for (int r = 0; r < n; r++) {
            rseed[r] = Elements.rankSeed(c.seed(), r);
        }
        List<Supplier<Checker>> tasks = new ArrayList<>();
        long[] work = {0};
        // Guards, untouched areas, and (out of place) the send buffers, which must still hold the inputs.
        for (int r = 0; r < n; r++) {
            int rank = r;
            tasks.add(() -> {
                Checker k = new Checker(c, n, rseed);
                if (l.recv(rank) == null) {
                    k.untouched(rank, "in the receive area (recv was null)", hr[rank], 0, l.recvSpan(), 0);
                } else {
                    long end = rOff + l.regionElems() * es;
                    k.untouched(rank, "before the receive buffer", hr[rank], 0, rOff, rOff);
                    k.untouched(rank, "after the receive buffer", hr[rank], end, l.recvSpan(), end);
                }
                if (l.sendSpan() > 0) {
                    if (l.send(rank) == null) {
                        k.untouched(rank, "in the send area (send was null)", hs[rank], 0, l.sendSpan(), 0);
                    } else {
                        long end = sOff + l.sc() * es;
                        k.untouched(rank, "before the send buffer", hs[rank], 0, sOff, sOff);
                        k.untouched(rank, "after the send buffer", hs[rank], end, l.sendSpan(), end);
                    }
                }
                return k;
            });
            if (l.sendSpan() > 0 && l.send(r) != null) {
                MemorySegment in = hs[r].asSlice(sOff);
                copyCheck(tasks, work, c, n, rseed, inputs == null ? null : inputs[r], 0, in, 0, l.sc(),
                        (k, j) -> k.checkInput(rank, "send", in, j, rank, j));
            }
        }
        // Outputs. Element j of out is element j of the region the operation may write (in place: the larger buffer).
        int rootOrShift = c.root();
        if (c.coll() == Coll.ALL_REDUCE) {
            // One reference per element, compared on every rank.
            MemorySegment[] outs = new MemorySegment[n];
            for (int q = 0; q < n; q++) {
                outs[q] = hr[q].asSlice(rOff);
            }
            for (long a = 0; a < cnt; a += CHUNK) {
                long from = a;
                long to = Math.min(cnt, a + CHUNK);
                tasks.add(() -> {
                    Checker k = new Checker(c, n, rseed);
                    for (long j = from; j < to; j++) {
                        k.reduceAt(j);
                        for (int q = 0; q < n; q++) {
                            k.checkReduced(q, "recv", outs[q], j);
                        }
                    }
                    return k;
                });
            }
            work[0] += cnt * n * n;
        } else {
            for (int r = 0; r < n; r++) {
                if (l.recv(r) == null) {
                    continue;
                }
                int rank = r;
                MemorySegment out = hr[r].asSlice(rOff);
                switch (c.coll()) {
                    case BROADCAST -> copyCheck(tasks, work, c, n, rseed, input(inputs, rootOrShift), 0, out, 0, cnt,
                            (k, j) -> k.checkInput(rank, "recv", out, j, rootOrShift, j));
                    case SEND_RECV -> {
                        int from = Math.floorMod(r - rootOrShift, n);
                        copyCheck(tasks, work, c, n, rseed, input(inputs, from), 0, out, 0, cnt,
                                (k, j) -> k.checkInput(rank, "recv", out, j, from, j));
                    }
                    case ALL_GATHER -> {
                        for (int q = 0; q < n; q++) {
                            int src = q;
                            copyCheck(tasks, work, c, n, rseed, input(inputs, q), 0, out, q * cnt, cnt,
                                    (k, j) -> k.checkInput(rank, "recv", out, j, src, j - src * cnt));
                        }
                    }
                    case ALL_TO_ALL -> {
                        for (int q = 0; q < n; q++) {
                            int src = q;
                            copyCheck(tasks, work, c, n, rseed, input(inputs, q), r * cnt, out, q * cnt, cnt,
                                    (k, j) -> k.checkInput(rank, "recv", out, j, src, rank * cnt + j - src * cnt));
                        }
                    }
                    case REDUCE -> {
                        if (r != rootOrShift) {
                            // In place on a non-root: send == recv is input only, and must be left alone.
                            copyCheck(tasks, work, c, n, rseed, input(inputs, r), 0, out, 0, cnt,
                                    (k, j) -> k.checkInput(rank, "send (non-root, in place)", out, j, rank, j));
                        } else {
                            reduceCheck(tasks, work, c, n, rseed, cnt, (k, j) -> {
                                k.reduceAt(j);
                                k.checkReduced(rank, "recv", out, j);
                            });
                        }
                    }
                    case REDUCE_SCATTER -> {
                        long base = c.inPlace() ? r * cnt : 0;
                        reduceCheck(tasks, work, c, n, rseed, cnt, (k, j) -> {
                            k.reduceAt(rank * cnt + j);
                            k.checkReduced(rank, "recv", out, base + j);
                        });
                    }
                    case ALL_REDUCE -> throw new IllegalStateException("allReduce is checked above");
                }
            }
        }
        List<Checker> done = (work[0] > 2 * CHUNK ? tasks.parallelStream() : tasks.stream()).map(Supplier::get).toList();
        Checker all = new Checker(c, n, rseed);
        done.forEach(all::absorb);
        return all.report();
    }

    /** {@link #check(Layout, MemorySegment[], MemorySegment[], MemorySegment[])} without the fast path. */
    public static String check(Layout l, MemorySegment[] hr, MemorySegment[] hs) {
        return check(l, hr, hs, null);
    }

    /** Checks one element j (an index into the segment under test). */
    @FunctionalInterface
    private interface ElementCheck {
        void check(Checker k, long j);
    }

    private static MemorySegment input(MemorySegment[] inputs, int r) {
        return inputs == null ? null : inputs[r];
    }

    /**
     * Elements [at, at+count) of {@code got} must be the input elements [from, from+count) of a rank:
     * compared byte for byte with {@code input} when given, element by element (with a report) when
     * not or when they differ.
     */
    private static void copyCheck(List<Supplier<Checker>> tasks, long[] work, Case c, int n, long[] rseed, MemorySegment input,
                                  long from, MemorySegment got, long at, long count, ElementCheck each) {
        int es = c.type().size();
        if (input != null && count > 0
                && MemorySegment.mismatch(input, from * es, (from + count) * es, got, at * es, (at + count) * es) == -1) {
            return;
        }
        for (long a = at; a < at + count; a += CHUNK) {
            long lo = a;
            long hi = Math.min(at + count, a + CHUNK);
            tasks.add(() -> {
                Checker k = new Checker(c, n, rseed);
                for (long j = lo; j < hi; j++) {
                    each.check(k, j);
                }
                return k;
            });
        }
        work[0] += count;
    }

    /** Element-by-element checks of j in [0, count), in chunks; each costs about n input evaluations. */
    private static void reduceCheck(List<Supplier<Checker>> tasks, long[] work, Case c, int n, long[] rseed, long count,
                                    ElementCheck each) {
        for (long a = 0; a < count; a += CHUNK) {
            long lo = a;
            long hi = Math.min(count, a + CHUNK);
            tasks.add(() -> {
                Checker k = new Checker(c, n, rseed);
                for (long j = lo; j < hi; j++) {
                    each.check(k, j);
                }
                return k;
            });
        }
        work[0] += count * n;
    }

    /** Issues rank r's part of case c. */
    static void issue(Case c, int r, int n, DeviceCommunicator comm, DeviceBuffer send, DeviceBuffer recv, CudaStream s) {
        switch (c.coll()) {
            case ALL_REDUCE -> comm.allReduce(send, recv, c.op(), s);
            case BROADCAST -> comm.broadcast(send, recv, c.root(), s);
            case REDUCE -> comm.reduce(send, recv, c.op(), c.root(), s);
            case ALL_GATHER -> comm.allGather(send, recv, s);
            case REDUCE_SCATTER -> comm.reduceScatter(send, recv, c.op(), s);
            case ALL_TO_ALL -> comm.allToAll(send, recv, s);
            case SEND_RECV -> {
                comm.groupStart();
                try {
                    comm.send(send, Math.floorMod(r + c.root(), n), s);
                    comm.recv(recv, Math.floorMod(r - c.root(), n), s);
                } finally {
                    comm.groupEnd();
                }
            }
        }
    }

    // ------------------------------------------------------------------ checking

    /** Compares outputs with the reference and collects what differs. */
    static final class Checker {
        private final Case c;
        private final int n;
        private final long[] rseed;
        private final DataType t;
        private final ReduceOp op;
        private final boolean fp;
        private final long[] wrong;
        private final long[] poisoned;
        private final List<String> lines = new ArrayList<>();
        private final List<String> outside = new ArrayList<>();
        // the current reference of reduceAt
        private long iv;
        private double fv;
        private double tol;

        Checker(Case c, int n, long[] rseed) {
            this.c = c;
            this.n = n;
            this.rseed = rseed;
            this.t = c.type();
            this.op = c.op();
            this.fp = t.isFloatingPoint();
            this.wrong = new long[n];
            this.poisoned = new long[n];
        }

        /** Sets the reference to the reduction over ranks, in rank order, of input element idx. */
        void reduceAt(long idx) {
            if (fp) {
                double acc = Elements.floatValue(t, op, rseed[0], idx);
                double sumAbs = Math.abs(acc);
                for (int q = 1; q < n; q++) {
                    double x = Elements.floatValue(t, op, rseed[q], idx);
                    acc = Elements.combine(op, acc, x);
                    sumAbs += Math.abs(x);
                }
                if (op == ReduceOp.AVG) {
                    acc /= n;
                }
                fv = acc;
                tol = Elements.tolerance(t, op, n, acc, sumAbs);
            } else {
                long acc = Elements.intValue(t, rseed[0], idx);
                for (int q = 1; q < n; q++) {
                    acc = Elements.combine(t, op, acc, Elements.intValue(t, rseed[q], idx));
                }
                iv = op == ReduceOp.AVG ? Elements.finishAvg(t, acc, n) : acc;
            }
        }

        void checkReduced(int r, String what, MemorySegment out, long j) {
            if (fp) {
                double got = Elements.getFloat(out, t, j);
                if (!(Math.abs(got - fv) <= tol)) {
                    miss(r, what, out, j, fv + (tol == 0 ? "" : String.format(Locale.ROOT, " +- %.3g", tol)));
                }
            } else if (Elements.getInt(out, t, j) != iv) {
                miss(r, what, out, j, Elements.showInt(t, iv));
            }
        }

        /** Element j of out must be input element idx of rank q, exactly. */
        void checkInput(int r, String what, MemorySegment out, long j, int q, long idx) {
            if (fp) {
                double want = Elements.floatValue(t, op, rseed[q], idx);
                if (Elements.getFloat(out, t, j) != want) {
                    miss(r, what, out, j, want + " (rank " + q + "'s element " + idx + ")");
                }
            } else {
                long want = Elements.intValue(t, rseed[q], idx);
                if (Elements.getInt(out, t, j) != want) {
                    miss(r, what, out, j, Elements.showInt(t, want) + " (rank " + q + "'s element " + idx + ")");
                }
            }
        }

        private void miss(int r, String what, MemorySegment out, long j, String expected) {
            wrong[r]++;
            boolean poison = true;
            long o = j * t.size();
            for (int b = 0; b < t.size(); b++) {
                poison &= out.get(ValueLayout.JAVA_BYTE, o + b) == POISON;
            }
            if (poison) {
                poisoned[r]++;
            }
            if (lines.size() < MAX_LINES) {
                lines.add("rank " + r + " " + what + "[" + j + "]: expected " + expected + ", got " + Elements.show(out, t, j));
            }
        }

        /** Bytes [from, to) of a read-back area must all still be the poison. {@code origin} is where the buffer starts. */
        void untouched(int r, String what, MemorySegment area, long from, long to, long origin) {
            // Fast path: compare with a poison block; the byte scan below runs only where something changed.
            boolean clean = true;
            for (long a = from; a < to && clean; a += POISON_BLOCK.byteSize()) {
                long len = Math.min(POISON_BLOCK.byteSize(), to - a);
                clean = MemorySegment.mismatch(area, a, a + len, POISON_BLOCK, 0, len) == -1;
            }
            if (clean) {
                return;
            }
            long count = 0;
            long first = -1;
            for (long b = from; b < to; b++) {
                if (area.get(ValueLayout.JAVA_BYTE, b) != POISON) {
                    if (first < 0) {
                        first = b;
                    }
                    count++;
                }
            }
            if (count > 0) {
                long rel = first - origin;
                outside.add("rank " + r + ": " + count + " byte(s) changed " + what + " (first at byte " + (rel >= 0 ? "+" : "") + rel
                        + " from its start, now 0x" + String.format(Locale.ROOT, "%02x", area.get(ValueLayout.JAVA_BYTE, first)) + ")");
            }
        }

        /** Adds another chunk's findings (in order; the first lines are kept). */
        void absorb(Checker o) {
            for (int r = 0; r < n; r++) {
                wrong[r] += o.wrong[r];
                poisoned[r] += o.poisoned[r];
            }
            for (String l : o.lines) {
                if (lines.size() < MAX_LINES) {
                    lines.add(l);
                }
            }
            outside.addAll(o.outside);
        }

        /** Null when everything matched. */
        String report() {
            long total = 0;
            for (long w : wrong) {
                total += w;
            }
            if (total == 0 && outside.isEmpty()) {
                return null;
            }
            StringBuilder sb = new StringBuilder(c.toString()).append(':');
            if (total > 0) {
                sb.append(' ').append(total).append(" wrong element(s) (");
                boolean firstRank = true;
                for (int r = 0; r < n; r++) {
                    if (wrong[r] > 0) {
                        sb.append(firstRank ? "" : "; ").append("rank ").append(r).append(": ").append(wrong[r]);
                        if (poisoned[r] > 0) {
                            sb.append(poisoned[r] == wrong[r] ? ", all" : ", " + poisoned[r]).append(" never written (still 0xA5)");
                        }
                        firstRank = false;
                    }
                }
                sb.append(')');
                for (String l : lines) {
                    sb.append("\n    ").append(l);
                }
            }
            for (String o : outside) {
                sb.append("\n    ").append(o);
            }
            return sb.toString();
        }
    }
}
