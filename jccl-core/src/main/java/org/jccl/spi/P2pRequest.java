package org.jccl.spi;

import java.lang.foreign.MemorySegment;

/**
 * One posted send or receive of a whole message on a {@link Connection}. The connection advances
 * it in {@link Connection#progress()} and marks it done or failed; the runtime polls {@link #isDone()}.
 * One-sided operations use it too: a {@link Connection#put put} is a request with {@link #isSend()}
 * true whose segment is the put's source, a {@link Connection#flush() flush} one with an empty segment.
 *
 * <p>Threading: the fields other than {@code done}/{@code error} belong to the thread that drives
 * the connection's progress. {@code done} is published with release semantics (volatile), so a
 * receiver that sees it also sees the bytes written into the segment before it.
 */
public final class P2pRequest {
    private final MemorySegment segment;
    private final boolean send;
    /** The mismatch guard's word of the call this message belongs to (0: none); see {@link Connection#send(MemorySegment, long)}. */
    private final long guard;
    /** Bytes moved so far; owned by the progressing thread. */
    public long position;
    /** Free slot for the transport's per-request state (e.g. which sockets carry which stripe). */
    public Object transportState;
    private volatile boolean done;
    private volatile Throwable error;

    public P2pRequest(MemorySegment segment, boolean send) {
        this(segment, send, 0);
    }

    public P2pRequest(MemorySegment segment, boolean send, long guard) {
        this.segment = segment;
        this.send = send;
        this.guard = guard;
    }

    /** The guard word this request was posted with (0: none). */
    public long guard() {
        return guard;
    }

    public MemorySegment segment() {
        return segment;
    }

    public boolean isSend() {
        return send;
    }

    public long size() {
        return segment.byteSize();
    }

    public boolean isDone() {
        return done;
    }

    /** The failure, or null; meaningful once {@link #isDone()}. */
    public Throwable error() {
        return error;
    }

    public void complete() {
        done = true;
    }

    public void fail(Throwable t) {
        error = t;
        done = true;
    }
}
