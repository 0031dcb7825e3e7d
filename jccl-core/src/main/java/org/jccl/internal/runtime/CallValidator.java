package org.jccl.internal.runtime;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.function.Supplier;
import org.jccl.Buffer;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.algo.Collectives;

/**
 * The one validator of collective calls: checks a call's arguments on the caller's thread, before
 * any byte moves (a bad call throws {@link IllegalArgumentException} or {@link NullPointerException}
 * naming the argument and the fix), stages its memory ({@link Staging}) and makes the {@link Op}
 * that runs it. What every collective shares is here once: buffers present, same data type, enough
 * elements, a valid root, and the in-place test and staging of {@link #stage}.
 */
final class CallValidator {
    private final int rank;
    private final int size;
    /** A fresh staging for one call; throws when the communicator can no longer be used. */
    private final Supplier<Staging> staging;

    CallValidator(int rank, int size, Supplier<Staging> staging) {
        this.rank = rank;
        this.size = size;
        this.staging = staging;
    }

    // ------------------------------------------------------------------------------------------ the collectives

    Op allReduce(Buffer send, Buffer recv, ReduceOp op) {
        final String c = "allReduce";
        nonNull(c, send, recv, op);
        sameType(c, send, recv);
        long count = send.count();
        DataType t = send.type();
        long bytes = t.bytes(count);
        atLeast(c, "recv", recv, count);
        Staged x = stage(staging.get(), c, send, bytes, recv, bytes, 0);
        MemorySegment s = x.send;
        MemorySegment r = x.recv;
        return x.op(new LambdaOp(c, bytes, t, op, -1, ctx -> Collectives.allReduce(ctx, s, r, count, t, op)));
    }

    Op broadcast(Buffer send, Buffer recv, int root) {
        final String c = "broadcast";
        Objects.requireNonNull(recv, "recv");
        checkRoot(c, root);
        long count = recv.count();
        DataType t = recv.type();
        long bytes = t.bytes(count);
        Staging st = staging.get();
        if (rank == root) {
            Objects.requireNonNull(send, "send (required on the root)");
            sameType(c, send, recv);
            atLeast(c, "send", send, count);
        }
        Staged x = stage(st, c, rank == root ? send : null, bytes, recv, bytes, 0);
        MemorySegment s = x.send;
        MemorySegment r = x.recv;
        return x.op(new LambdaOp(c, bytes, t, null, root, ctx -> Collectives.broadcast(ctx, s, r, bytes, root)));
    }

    Op reduce(Buffer send, Buffer recv, ReduceOp op, int root) {
        final String c = "reduce";
        Objects.requireNonNull(send, "send");
        Objects.requireNonNull(op, "op");
        checkRoot(c, root);
        long count = send.count();
        DataType t = send.type();
        long bytes = t.bytes(count);
        Staging st = staging.get();
        if (rank == root) {
            Objects.requireNonNull(recv, "recv (required on the root)");
            sameType(c, send, recv);
            atLeast(c, "recv", recv, count);
        }
        Staged x = stage(st, c, send, bytes, rank == root ? recv : null, bytes, 0);
        MemorySegment s = x.send;
        MemorySegment r = x.recv;
        return x.op(new LambdaOp(c, bytes, t, op, root, ctx -> Collectives.reduce(ctx, s, r, count, t, op, root)));
    }

    Op allGather(Buffer send, Buffer recv) {
        final String c = "allGather";
        nonNull(c, send, recv, ReduceOp.SUM);
        sameType(c, send, recv);
        long count = send.count();
        DataType t = send.type();
        long bytes = t.bytes(count);
        atLeast(c, "recv", recv, Math.multiplyExact(count, (long) size));
        Staged x = stage(staging.get(), c, send, bytes, recv, bytes * size, bytes * rank);
        MemorySegment s = x.send;
        MemorySegment r = x.recv;
        return x.op(new LambdaOp(c, bytes * size, t, null, -1, ctx -> Collectives.allGather(ctx, s, r, bytes)));
    }

    Op reduceScatter(Buffer send, Buffer recv, ReduceOp op) {
        final String c = "reduceScatter";
        nonNull(c, send, recv, op);
        sameType(c, send, recv);
        long count = recv.count();
        DataType t = recv.type();
        long bytes = t.bytes(count);
        atLeast(c, "send", send, Math.multiplyExact(count, (long) size));
        // In place: recv is this rank's slot of send (NCCL: recvbuff == sendbuff + rank * recvcount).
        Staged x = stageIntoSlot(staging.get(), c, send, bytes * size, recv, bytes, bytes * rank);
        MemorySegment s = x.send;
        MemorySegment r = x.recv;
        return x.op(new LambdaOp(c, bytes * size, t, op, -1, ctx -> Collectives.reduceScatter(ctx, s, r, count, t, op)));
    }

    Op allToAll(Buffer send, Buffer recv) {
        final String c = "allToAll";
        nonNull(c, send, recv, ReduceOp.SUM);
        sameType(c, send, recv);
        if (send.count() % size != 0) {
            throw new IllegalArgumentException(c + ": send holds " + send.count() + " elements, not a multiple of the " + size
                    + " ranks (each rank gets send.count()/size elements)");
        }
        long total = send.count();
        DataType t = send.type();
        long block = t.bytes(total / size);
        atLeast(c, "recv", recv, total);
        Staged x = stage(staging.get(), c, send, block * size, recv, block * size, 0);
        MemorySegment s = x.send;
        MemorySegment r = x.recv;
        return x.op(new LambdaOp(c, block * size, t, null, -1, ctx -> Collectives.allToAll(ctx, s, r, block)));
    }

    Op allToAllv(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls) {
        final String c = "allToAllv";
        nonNull(c, send, recv, ReduceOp.SUM);
        sameType(c, send, recv);
        checkVector(c, "send", send, sendCounts, sendDispls);
        checkVector(c, "recv", recv, recvCounts, recvDispls);
        if (recvCounts[rank] != sendCounts[rank]) {
            throw new IllegalArgumentException(c + ": this rank sends itself " + sendCounts[rank] + " elements but receives "
                    + recvCounts[rank] + " from itself");
        }
        DataType t = send.type();
        long sendExtent = extent(sendCounts, sendDispls);
        long recvExtent = extent(recvCounts, recvDispls);
        if (send.segment().asOverlappingSlice(recv.segment()).isPresent() && sendExtent > 0 && recvExtent > 0) {
            throw new IllegalArgumentException(c + ": send and recv overlap; allToAllv is not in place, use separate buffers");
        }
        Staging st = staging.get();
        MemorySegment s = st.input(c, "send", send, t.bytes(sendExtent));
        // Copied in too: the gaps between blocks are copied back and must keep the caller's values.
        MemorySegment r = st.output(c, "recv", recv, t.bytes(recvExtent), true);
        long[] sc = sendCounts.clone();
        long[] sd = sendDispls.clone();
        long[] rc = recvCounts.clone();
        long[] rd = recvDispls.clone();
        long total = 0;
        for (long x : sc) {
            total += x;
        }
        return new Staged(s, r, st).op(new LambdaOp(c, t.bytes(total), t, null, -1,
                ctx -> Collectives.allToAllv(ctx, s, sc, sd, r, rc, rd, t.size())));
    }

    Op gather(Buffer send, Buffer recv, int root) {
        final String c = "gather";
        Objects.requireNonNull(send, "send");
        checkRoot(c, root);
        long count = send.count();
        DataType t = send.type();
        long bytes = t.bytes(count);
        Staging st = staging.get();
        if (rank == root) {
            Objects.requireNonNull(recv, "recv (required on the root)");
            sameType(c, send, recv);
            atLeast(c, "recv", recv, Math.multiplyExact(count, (long) size));
        }
        Staged x = stage(st, c, send, bytes, rank == root ? recv : null, bytes * size, bytes * rank);
        MemorySegment s = x.send;
        MemorySegment r = x.recv;
        return x.op(new LambdaOp(c, bytes * size, t, null, root, ctx -> Collectives.gather(ctx, s, r, bytes, root)));
    }

    Op scatter(Buffer send, Buffer recv, int root) {
        final String c = "scatter";
        Objects.requireNonNull(recv, "recv");
        checkRoot(c, root);
        long count = recv.count();
        DataType t = recv.type();
        long bytes = t.bytes(count);
        Staging st = staging.get();
        if (rank == root) {
            Objects.requireNonNull(send, "send (required on the root)");
            sameType(c, send, recv);
            atLeast(c, "send", send, Math.multiplyExact(count, (long) size));
        }
        Staged x = stageIntoSlot(st, c, rank == root ? send : null, bytes * size, recv, bytes, bytes * rank);
        MemorySegment s = x.send;
        MemorySegment r = x.recv;
        return x.op(new LambdaOp(c, bytes * size, t, null, root, ctx -> Collectives.scatter(ctx, s, r, bytes, root)));
    }

    Op barrier() {
        return new LambdaOp("barrier", 0, null, null, -1, Collectives::barrier);
    }

    /** A send or receive; {@code inGroup}: the call is recorded in an open group, where a peer may be this rank. */
    Op p2p(boolean isSend, Buffer buf, int peer, boolean inGroup) {
        String c = isSend ? "send" : "recv";
        Objects.requireNonNull(buf, "buf");
        if (peer < 0 || peer >= size) {
            throw new IllegalArgumentException(c + ": peer " + peer + " is outside [0, " + size + ")");
        }
        if (peer == rank && !inGroup) {
            throw new IllegalArgumentException(c + ": peer is this rank (" + rank + "); a " + c
                    + " to itself needs its matching " + (isSend ? "recv" : "send") + " in the same group (comm.group())");
        }
        long bytes = buf.byteSize();
        Staging st = staging.get();
        MemorySegment seg = isSend ? st.input(c, "buf", buf, bytes) : st.output(c, "buf", buf, bytes, false);
        return new Staged(null, seg, st).op(new P2pOp(isSend, peer, seg, buf.type()));
    }

    // ------------------------------------------------------------------------------------------ staging

    /** The memory an operation runs on, and the staging that made it (copy-back and pooled blocks). */
    private record Staged(MemorySegment send, MemorySegment recv, Staging staging) {
        /** {@code op}, with the staging's copy-back and release attached. */
        Op op(Op op) {
            op.finisher = staging.finisher();
            op.releaser = staging.releaser();
            return op;
        }
    }

    /**
     * Stages a call whose input is the whole of, or this rank's slot of, its output: in place when
     * {@code send} is {@code recv}'s memory at {@code slotOffset} (any other overlap is an error).
     * The output is copied in too when in place. Either buffer is null where this rank has none (a
     * root's side of a rooted collective); then its segment is null.
     */
    private static Staged stage(Staging st, String c, Buffer send, long sendBytes, Buffer recv, long recvBytes, long slotOffset) {
        boolean inPlace = Staging.inPlace(c, send, recv, sendBytes, slotOffset);
        MemorySegment r = recv == null ? null : st.output(c, "recv", recv, recvBytes, inPlace);
        MemorySegment s = send == null ? null
                : !inPlace ? st.input(c, "send", send, sendBytes)
                : slotOffset == 0 && sendBytes == recvBytes ? r : r.asSlice(slotOffset, sendBytes);
        return new Staged(s, r, st);
    }

    /**
     * Stages a call whose output is this rank's slot of its input (reduce-scatter, scatter): in place
     * when {@code recv} is {@code send}'s memory at {@code slotOffset}, then the input is staged as
     * an output too (it is written) and the output is its slot. {@code send} is null where this rank
     * has none (a scatter's non-root).
     */
    private static Staged stageIntoSlot(Staging st, String c, Buffer send, long sendBytes, Buffer recv, long recvBytes,
                                        long slotOffset) {
        if (Staging.inPlace(c, recv, send, recvBytes, slotOffset)) {
            MemorySegment s = st.output(c, "send", send, sendBytes, true);
            return new Staged(s, s.asSlice(slotOffset, recvBytes), st);
        }
        MemorySegment s = send == null ? null : st.input(c, "send", send, sendBytes);
        return new Staged(s, st.output(c, "recv", recv, recvBytes, false), st);
    }

    // ------------------------------------------------------------------------------------------ checks

    private static void nonNull(String coll, Buffer send, Buffer recv, ReduceOp op) {
        Objects.requireNonNull(send, coll + ": send");
        Objects.requireNonNull(recv, coll + ": recv");
        Objects.requireNonNull(op, coll + ": op");
    }

    private static void sameType(String coll, Buffer a, Buffer b) {
        if (a.type() != b.type()) {
            throw new IllegalArgumentException(coll + ": send holds " + a.type() + " but recv holds " + b.type()
                    + "; both buffers must have the same data type");
        }
    }

    private static void atLeast(String coll, String name, Buffer b, long needed) {
        if (b.count() < needed) {
            throw new IllegalArgumentException(coll + ": " + name + " holds " + b.count() + " elements but " + needed
                    + " are needed");
        }
    }

    private void checkRoot(String coll, int root) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException(coll + ": root " + root + " is outside [0, " + size + ")");
        }
    }

    private void checkVector(String coll, String name, Buffer b, long[] counts, long[] displs) {
        Objects.requireNonNull(counts, coll + ": " + name + "Counts");
        Objects.requireNonNull(displs, coll + ": " + name + "Displs");
        if (counts.length != size || displs.length != size) {
            throw new IllegalArgumentException(coll + ": " + name + "Counts and " + name + "Displs must have " + size
                    + " entries (one per rank), got " + counts.length + " and " + displs.length);
        }
        for (int i = 0; i < size; i++) {
            if (counts[i] < 0 || displs[i] < 0) {
                throw new IllegalArgumentException(coll + ": " + name + "Counts[" + i + "]=" + counts[i] + " and " + name + "Displs["
                        + i + "]=" + displs[i] + " must be >= 0");
            }
            if (counts[i] > b.count() - displs[i]) { // written so that huge values cannot overflow
                throw new IllegalArgumentException(coll + ": " + name + " block " + i + " [" + displs[i] + ", " + (displs[i] + counts[i])
                        + ") is outside " + name + " (" + b.count() + " elements)");
            }
        }
    }

    private static long extent(long[] counts, long[] displs) {
        long e = 0;
        for (int i = 0; i < counts.length; i++) {
            if (counts[i] > 0) {
                e = Math.max(e, displs[i] + counts[i]);
            }
        }
        return e;
    }
}
