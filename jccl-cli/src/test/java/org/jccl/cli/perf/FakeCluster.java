package org.jccl.cli.perf;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.Group;
import org.jccl.ReduceOp;
import org.jccl.Work;

/**
 * A deliberately simple in-memory stand-in for jccl's runtime, so the benchmark's buffer
 * layouts, in-place slots, roots, check logic and rank-combining can be tested before (and
 * independently of) the real runtime: n ranks as n threads, every operation a rendezvous on a
 * barrier (deposit inputs, wait, compute own result into a temporary, wait, write it). Operations
 * therefore complete before the ...Async call returns.
 *
 * <p>{@link #corruptRank} makes one rank's results wrong on purpose, to test that the check
 * notices.
 */
final class FakeCluster {
    final int n;
    private final CyclicBarrier barrier;
    private final Object[] slots;
    /** Rank whose receive buffers get one wrong element after every operation, or -1. */
    volatile int corruptRank = -1;
    /** When set, only in-place operations are corrupted. */
    volatile boolean corruptInPlaceOnly;
    /**
     * When set, every all-reduce and barrier is reported to it: {@code "<rank> allReduce <bytes>
     * oop|ip native|heap"} and {@code "<rank> barrier"}, from the rank's thread.
     */
    volatile java.util.function.Consumer<String> trace;

    private void trace(String event) {
        java.util.function.Consumer<String> t = trace;
        if (t != null) {
            t.accept(event);
        }
    }

    FakeCluster(int n) {
        this.n = n;
        this.barrier = new CyclicBarrier(n);
        this.slots = new Object[n];
    }

    List<Communicator> comms() {
        List<Communicator> l = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            l.add(new Comm(r));
        }
        return l;
    }

    private void await() {
        try {
            barrier.await(20, TimeUnit.SECONDS);
        } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
            throw new IllegalStateException("fake cluster: ranks did not meet (mismatched calls?)", e);
        }
    }

    private static final Work DONE = new Work() {
        @Override
        public void join() {
        }

        @Override
        public boolean join(Duration timeout) {
            return true;
        }

        @Override
        public boolean isDone() {
            return true;
        }
    };

    /** The reduction of element {@code i} of each rank's buffer (at element offset {@code off}). */
    static long reduceElement(Buffer[] in, long i, DataType t, ReduceOp op) {
        int n = in.length;
        if (t.isFloatingPoint()) {
            double acc = Elements.toDouble(t, Elements.getBits(in[0].segment(), i, t));
            for (int r = 1; r < n; r++) {
                double v = Elements.toDouble(t, Elements.getBits(in[r].segment(), i, t));
                acc = switch (op) {
                    case SUM, AVG -> acc + v;
                    case PROD -> acc * v;
                    case MIN -> Math.min(acc, v);
                    case MAX -> Math.max(acc, v);
                };
            }
            return Elements.fromDouble(t, op == ReduceOp.AVG ? acc / n : acc);
        }
        long acc = Elements.toLong(t, Elements.getBits(in[0].segment(), i, t));
        for (int r = 1; r < n; r++) {
            long v = Elements.toLong(t, Elements.getBits(in[r].segment(), i, t));
            int cmp = t.isSigned() ? Long.compare(acc, v) : Long.compareUnsigned(acc, v);
            acc = switch (op) {
                case SUM, AVG -> acc + v;
                case PROD -> acc * v;
                case MIN -> cmp <= 0 ? acc : v;
                case MAX -> cmp >= 0 ? acc : v;
            };
        }
        if (op == ReduceOp.AVG) {
            long sum = Elements.toLong(t, Elements.fromLong(t, acc));
            acc = t.isSigned() ? sum / n : Long.divideUnsigned(sum, n);
        }
        return Elements.fromLong(t, acc);
    }

    private final class Comm implements Communicator {
        private final int rank;
        private int groupDepth;
        private final List<Buffer[]> groupOps = new ArrayList<>(); // {buf, null} send / {null, buf} recv
        private final List<Integer> groupPeers = new ArrayList<>();

        Comm(int rank) {
            this.rank = rank;
        }

        @Override
        public int rank() {
            return rank;
        }

        @Override
        public int size() {
            return n;
        }

        private Buffer[] exchange(Buffer mine) {
            slots[rank] = mine;
            await();
            Buffer[] all = new Buffer[n];
            for (int r = 0; r < n; r++) {
                all[r] = (Buffer) slots[r];
            }
            return all;
        }

        /** Second half of an operation: everyone has read the inputs, now write the result. */
        private Work finish(byte[] result, Buffer recv, boolean inPlace) {
            await();
            if (result != null) {
                MemorySegment.copy(MemorySegment.ofArray(result), 0, recv.segment(), 0, result.length);
                // Only the benchmark's native buffers: the heap arrays carry its own bookkeeping (times, counts).
                if (corruptRank == rank && recv.segment().isNative() && recv.count() > 0 && (!corruptInPlaceOnly || inPlace)) {
                    long bits = Elements.getBits(recv.segment(), 0, recv.type());
                    Elements.setBits(recv.segment(), 0, recv.type(), bits ^ 0x3);
                }
            }
            return DONE;
        }

        private static boolean same(Buffer a, Buffer b) {
            return a != null && b != null && a.segment().address() == b.segment().address();
        }

        private static boolean inside(Buffer part, Buffer whole) {
            long a = part.segment().address();
            long w = whole.segment().address();
            return a >= w && a < w + Math.max(whole.byteSize(), 1);
        }

        @Override
        public Work allReduceAsync(Buffer send, Buffer recv, ReduceOp op) {
            trace(rank + " allReduce " + recv.byteSize() + (same(send, recv) ? " ip" : " oop")
                    + (recv.segment().isNative() ? " native" : " heap"));
            Buffer[] in = exchange(send);
            MemorySegment tmp = MemorySegment.ofArray(new byte[(int) recv.byteSize()]);
            for (long i = 0; i < recv.count(); i++) {
                Elements.setBits(tmp, i, recv.type(), reduceElement(in, i, recv.type(), op));
            }
            return finish(tmp.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE), recv, same(send, recv));
        }

        @Override
        public Work broadcastAsync(Buffer send, Buffer recv, int root) {
            Buffer[] in = exchange(send);
            byte[] tmp = in[root].segment().asSlice(0, recv.byteSize()).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            return finish(tmp, recv, same(send, recv));
        }

        @Override
        public Work reduceAsync(Buffer send, Buffer recv, ReduceOp op, int root) {
            Buffer[] in = exchange(send);
            if (rank != root) {
                return finish(null, recv, false);
            }
            MemorySegment tmp = MemorySegment.ofArray(new byte[(int) recv.byteSize()]);
            for (long i = 0; i < recv.count(); i++) {
                Elements.setBits(tmp, i, recv.type(), reduceElement(in, i, recv.type(), op));
            }
            return finish(tmp.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE), recv, same(send, recv));
        }

        @Override
        public Work allGatherAsync(Buffer send, Buffer recv) {
            Buffer[] in = exchange(send);
            byte[] tmp = new byte[(int) recv.byteSize()];
            long block = send.byteSize();
            for (int r = 0; r < n; r++) {
                MemorySegment.copy(in[r].segment(), 0, MemorySegment.ofArray(tmp), r * block, block);
            }
            return finish(tmp, recv, inside(send, recv));
        }

        @Override
        public Work reduceScatterAsync(Buffer send, Buffer recv, ReduceOp op) {
            Buffer[] in = exchange(send);
            long c = recv.count();
            Buffer[] mine = new Buffer[n];
            for (int r = 0; r < n; r++) {
                mine[r] = in[r].slice(rank * c, c);
            }
            MemorySegment tmp = MemorySegment.ofArray(new byte[(int) recv.byteSize()]);
            for (long i = 0; i < c; i++) {
                Elements.setBits(tmp, i, recv.type(), reduceElement(mine, i, recv.type(), op));
            }
            return finish(tmp.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE), recv, inside(recv, send));
        }

        @Override
        public Work allToAllAsync(Buffer send, Buffer recv) {
            Buffer[] in = exchange(send);
            long block = send.byteSize() / n;
            byte[] tmp = new byte[(int) recv.byteSize()];
            for (int r = 0; r < n; r++) {
                MemorySegment.copy(in[r].segment(), rank * block, MemorySegment.ofArray(tmp), r * block, block);
            }
            return finish(tmp, recv, same(send, recv));
        }

        @Override
        public Work barrierAsync() {
            trace(rank + " barrier");
            await();
            return DONE;
        }

        @Override
        public Work sendAsync(Buffer buf, int peer) {
            requireGroup();
            groupOps.add(new Buffer[] {buf, null});
            groupPeers.add(peer);
            return DONE;
        }

        @Override
        public Work recvAsync(Buffer buf, int peer) {
            requireGroup();
            groupOps.add(new Buffer[] {null, buf});
            groupPeers.add(peer);
            return DONE;
        }

        private void requireGroup() {
            if (groupDepth == 0) {
                throw new AssertionError("jccl perf runs send/recv only inside a group; the fake models just that");
            }
        }

        @Override
        public Group group() {
            groupDepth++;
            return () -> {
                if (--groupDepth > 0) {
                    return;
                }
                Map<Integer, Buffer> sends = new HashMap<>();
                List<Buffer> recvs = new ArrayList<>();
                List<Integer> from = new ArrayList<>();
                for (int k = 0; k < groupOps.size(); k++) {
                    Buffer[] op = groupOps.get(k);
                    if (op[0] != null) {
                        sends.put(groupPeers.get(k), op[0]);
                    } else {
                        recvs.add(op[1]);
                        from.add(groupPeers.get(k));
                    }
                }
                groupOps.clear();
                groupPeers.clear();
                slots[rank] = sends;
                await();
                List<byte[]> got = new ArrayList<>();
                for (int k = 0; k < recvs.size(); k++) {
                    @SuppressWarnings("unchecked")
                    Map<Integer, Buffer> theirs = (Map<Integer, Buffer>) slots[from.get(k)];
                    got.add(theirs.get(rank).segment().asSlice(0, recvs.get(k).byteSize())
                            .toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
                }
                await();
                for (int k = 0; k < recvs.size(); k++) {
                    MemorySegment.copy(MemorySegment.ofArray(got.get(k)), 0, recvs.get(k).segment(), 0, got.get(k).length);
                }
            };
        }

        @Override
        public Work allToAllvAsync(Buffer send, long[] sc, long[] sd, Buffer recv, long[] rc, long[] rd) {
            throw new AssertionError("jccl perf never calls this; the fake only models what the benchmark uses");
        }

        @Override
        public Work gatherAsync(Buffer send, Buffer recv, int root) {
            throw new AssertionError("jccl perf never calls this; the fake only models what the benchmark uses");
        }

        @Override
        public Work scatterAsync(Buffer send, Buffer recv, int root) {
            throw new AssertionError("jccl perf never calls this; the fake only models what the benchmark uses");
        }

        @Override
        public Communicator split(int color, int key) {
            throw new AssertionError("jccl perf never calls this; the fake only models what the benchmark uses");
        }

        @Override
        public Communicator dup() {
            throw new AssertionError("jccl perf never calls this; the fake only models what the benchmark uses");
        }

        @Override
        public Communicator shrink(int... excludedRanks) {
            throw new AssertionError("jccl perf never calls this; the fake only models what the benchmark uses");
        }

        @Override
        public org.jccl.CommStats stats() {
            throw new AssertionError("jccl perf never calls this; the fake only models what the benchmark uses");
        }

        @Override
        public void abort() {
        }

        @Override
        public void close() {
        }
    }
}
