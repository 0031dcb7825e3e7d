package org.jccl.internal.runtime;

import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.guard.OpGuard;

/**
 * One queued operation: what it is (for messages and the flight recorder) and how to run it on
 * whichever thread runs it (Executor). Arguments were validated and heap memory staged before it was queued.
 */
abstract class Op {
    final String name;
    final long bytes;
    final DataType type;
    final ReduceOp reduceOp;
    /** Root or peer rank, -1 when the collective has none. */
    final int rootOrPeer;
    final WorkImpl work = new WorkImpl();
    /** Sequence number on its communicator, assigned when queued. */
    long seq;
    /** When it was issued (System.nanoTime), 0 for a small operation (untimed, FlightRecorder's class comment). */
    long queuedAt;
    /** Runs inline, on the issuing thread: recorded as running when issued (no separate start record). */
    boolean startedAtIssue;
    /** Copies staged results back to heap memory; run by the thread running it, before completion. */
    Runnable finisher;
    /** Returns pooled staging memory; run only after the operation succeeded (Staging.Pool). */
    Runnable releaser;

    Op(String name, long bytes, DataType type, ReduceOp reduceOp, int rootOrPeer) {
        this.name = name;
        this.bytes = bytes;
        this.type = type;
        this.reduceOp = reduceOp;
        this.rootOrPeer = rootOrPeer;
    }

    /** Runs the operation to completion, on the thread holding the execution lock. */
    abstract void run(OpContext ctx) throws Exception;

    /** The guard word of this operation (computed when its call starts, OpContext#beginCall). */
    long guardWord() {
        if (this instanceof P2pOp) {
            return OpGuard.p2p();
        }
        int kind = OpGuard.kindOf(name);
        if (kind == 0) {
            return (long) OpGuard.KIND_INTERNAL << 60;
        }
        // Element sizes are powers of two: a shift, not a division (this runs on every call's path).
        long count = kind == 7 ? OpGuard.COUNT_ANY : type == null ? bytes : bytes >>> Integer.numberOfTrailingZeros(type.size());
        return OpGuard.of(kind, count, type, reduceOp, rootOrPeer);
    }

    /** "allReduce #17 (4096 B float sum)", the way errors name an operation. */
    String describe() {
        StringBuilder sb = new StringBuilder(name).append(" #").append(seq).append(" (").append(bytes).append(" B");
        if (type != null) {
            sb.append(' ').append(type.ncclName());
        }
        if (reduceOp != null) {
            sb.append(' ').append(reduceOp.ncclName());
        }
        if (rootOrPeer >= 0) {
            sb.append(name.equals("send") || name.equals("recv") ? " peer " : " root ").append(rootOrPeer);
        }
        return sb.append(')').toString();
    }
}
