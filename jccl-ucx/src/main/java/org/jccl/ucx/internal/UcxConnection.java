package org.jccl.ucx.internal;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.spi.Connection;
import org.jccl.spi.GuardMismatchException;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.RemoteRegion;

/**
 * The link to one peer: a UCX endpoint in the peer-failure error mode ({@code UCP_ERR_HANDLING_MODE_PEER}),
 * messages as tagged sends and receives. The k-th message from rank s to this rank carries the tag
 * {@code s << 40 | k} (40 bits of sequence per direction, 24 of rank) and is received with the full mask, so
 * messages match in order per direction and never across peers, whatever UCX's own order. Requests are
 * polled ({@code ucp_request_check_status}, {@code ucp_tag_recv_request_test}); no callbacks. A message that belongs to
 * a collective call carries the call's mismatch-guard word: sent and received as a two-entry IOV (the 8-byte word,
 * then the data, no copy), and compared when the receive completes, before it is marked done; a different word fails
 * the receive with a {@link GuardMismatchException} (also when the sizes differ too). A receive whose
 * message has another size fails naming both sizes; a request that UCX completes with an error (the peer
 * died, the link broke) fails, and {@link #progress()} throws an {@link IOException} naming the peer and
 * UCX's status, which the runtime reports as a PeerFailedException.
 */
final class UcxConnection implements Connection {
    static final int SEQ_BITS = 40;
    static final long SEQ_MASK = (1L << SEQ_BITS) - 1;

    private final UcxEndpoint endpoint;
    private final UcxWorker w;
    private final Ucp ucp;
    private final int rank;
    private final int peer;
    private final PeerInfo peerInfo;
    final long ep;
    /** A zeroed ucp_request_param_t for sends (no field set: polled, host memory, contiguous bytes). */
    private final long sendParams;
    /**
     * ucp_request_param_t for receives: {@code UCP_OP_ATTR_FLAG_NO_IMM_CMPL}, so that every receive returns a request
     * whose length {@code ucp_tag_recv_request_test} reports. (UCX 1.13.1 completes a receive of an already arrived
     * eager message immediately, returning NULL, without writing the RECV_INFO struct it was given: the length of
     * such a message would be unknown, and a message of the wrong size would go unnoticed.)
     */
    private final long recvParams;
    /** ucp_tag_recv_info_t for ucp_tag_recv_request_test. */
    private final long testInfo;
    private final MemorySegment testInfoSeg;
    /** ucp_request_param_t of ucp_ep_flush_nbx (none set) and ucp_ep_close_nbx (FLAGS = FORCE). */
    private final long flushParams;
    private final long forceCloseParams;
    private long sendSeq;
    private long recvSeq;
    private final List<P2pRequest> pending = new ArrayList<>();
    /** The worker's {@link UcxWorker#events} when every pending request was last tested; -1 before the first test. */
    private long testedAt = -1;
    /** Progress passes in a row that skipped the tests; at {@link #TEST_ANYWAY_AFTER} they test anyway. */
    private int untestedPasses;
    /**
     * Idle passes after which the requests are tested although UCX reported nothing: a safety net should a completion
     * ever come without a progress call that reports work.
     */
    private static final int TEST_ANYWAY_AFTER = 16;
    private IOException failure;
    private boolean closed;

    /**
     * A posted operation, kept in {@link P2pRequest#transportState}: one UCX request, or two for a split message (the
     * 16-byte head, then the body).
     */
    private static final class Posted {
        /** The head's (or only) UCX request; 0 once it finished. */
        long request;
        /** The body's UCX request of a split message; 0 when there is none or it finished. */
        long body;
        final boolean recv;
        /** What it is, for messages: "put of 64 B into ...", or null for a send or receive (built from bytes and seq when needed). */
        private final String label;
        private final long bytes;
        private final long seq;
        /** The IOV block of an inline guarded message or a split send's head (returned to the pool when UCX is done), or null. */
        final MemorySegment block;
        /** A split receive's head buffer (guard, size, room for an inline message of the peer), or null. */
        final MemorySegment head;
        /** A small guarded message's contiguous copy (guard word, then the data), or null. */
        MemorySegment small;
        final boolean split;
        boolean headDone;
        int headStatus;
        long headLength;
        long headTag;
        boolean bodyDone;
        int bodyStatus;
        long bodyLength;

        Posted(boolean recv, String label, MemorySegment block, MemorySegment head, boolean split) {
            this(recv, label, 0, 0, block, head, split);
        }

        /** A send or receive of {@code bytes}, message {@code seq} of its direction: no string is made unless it fails. */
        Posted(boolean recv, long bytes, long seq, MemorySegment block, MemorySegment head, boolean split) {
            this(recv, null, bytes, seq, block, head, split);
        }

        private Posted(boolean recv, String label, long bytes, long seq, MemorySegment block, MemorySegment head, boolean split) {
            this.recv = recv;
            this.label = label;
            this.bytes = bytes;
            this.seq = seq;
            this.block = block;
            this.head = head;
            this.split = split;
        }

        String what() {
            return label != null ? label : (recv ? "receive of " : "send of ") + bytes + " B (message " + seq + ")";
        }
    }

    /** Bytes of one IOV block: two ucp_dt_iov_t entries, then the 8-byte guard word. */
    private static final long BLOCK = 2 * Layouts.DT_IOV_SIZE + 8;
    private static final long BLOCK_GUARD = 2 * Layouts.DT_IOV_SIZE;
    private static final int BLOCKS_PER_CHUNK = 64;
    /**
     * Guarded messages of at least {@link #splitAt} bytes go as two UCX messages: a 16-byte head (the guard word and
     * the size) and the data as contiguous bytes, which keeps UCX's zero-copy rendezvous for them (UCX 1.13 moves an
     * IOV datatype with copies; the two-entry IOV halved sendrecv's bandwidth at 1 MiB over tcp). Smaller ones go as
     * one two-entry IOV message (guard word, data): one message, no extra latency. This is the default; over tcp
     * alone, where messages below the rendezvous threshold are copied anyway, the threshold (UcxEndpoint#address
     * publishes each rank's; a pair uses the smaller).
     */
    static final long SPLIT_AT = 8192;
    /** Tag bit of a split message's body. */
    static final long TAG_BODY = 1;
    /** Tag bit of a split message's head (receives of heads ignore it, and learn from the sender's tag which it was). */
    static final long TAG_SPLIT = 2;
    /** Guarded messages of at least this many bytes are split (head and body); the same at both ends of the pair. */
    private final long splitAt;
    /** Bytes of a split receive's head buffer: the guard word and room for the largest inline message (or a 16-byte head). */
    private final long headBytes;
    /** Where drained bodies land (nothing: the receives are empty and truncate). */
    private final long drainByte;
    /** Free head buffers of split receives. */
    private final java.util.ArrayDeque<MemorySegment> heads = new java.util.ArrayDeque<>();

    /** Guarded messages of at least this many bytes go as head and body (the smaller of the two ranks' published values). */
    long splitAt() {
        return splitAt;
    }

    private MemorySegment takeHead() {
        MemorySegment h = heads.poll();
        return h != null ? h : w.arena.allocate(headBytes, 16);
    }
    /**
     * Guarded messages of at most this many bytes go as one contiguous copy (guard word, data) instead of a two-entry
     * IOV: the bytes on the wire are the same, and UCX takes its short-message path for contiguous bytes, where an IOV
     * is gathered and scattered by its generic datatype code (8 B over posix: 0.07 us of a 0.33 us one-way trip).
     */
    static final long SMALL_MAX = 1024;
    /** Free small copies ({@link #SMALL_MAX} + 8 bytes each). */
    private final Slabs smalls;

    /** Free IOV blocks (a guarded message in flight holds one). */
    private final Slabs blocks;
    /** ucp_request_param_t with DATATYPE = IOV, for guarded sends and (with NO_IMM_CMPL) guarded receives. */
    private final long sendIovParams;
    private final long recvIovParams;

    /**
     * Buffers of one size for messages in flight, carved {@link #BLOCKS_PER_CHUNK} at a time from the worker's arena
     * and reused once UCX is done with them.
     */
    private static final class Slabs {
        private final java.util.ArrayDeque<MemorySegment> free = new java.util.ArrayDeque<>();
        private final java.lang.foreign.Arena arena;
        private final long bytes;

        Slabs(java.lang.foreign.Arena arena, long bytes) {
            this.arena = arena;
            this.bytes = bytes;
        }

        MemorySegment take() {
            MemorySegment b = free.poll();
            if (b == null) {
                MemorySegment chunk = arena.allocate(bytes * BLOCKS_PER_CHUNK, 16);
                for (int i = 1; i < BLOCKS_PER_CHUNK; i++) {
                    free.add(chunk.asSlice(i * bytes, bytes));
                }
                b = chunk.asSlice(0, bytes);
            }
            return b;
        }

        void give(MemorySegment b) {
            free.add(b);
        }
    }

    /** Fills a block: entry 0 the guard word's 8 bytes, entry 1 {@code data}. */
    private static void fillBlock(MemorySegment b, long guard, MemorySegment data) {
        b.set(JAVA_LONG, BLOCK_GUARD, guard);
        b.set(JAVA_LONG, 0, b.address() + BLOCK_GUARD);
        b.set(JAVA_LONG, 8, 8);
        b.set(JAVA_LONG, Layouts.DT_IOV_SIZE, data.address());
        b.set(JAVA_LONG, Layouts.DT_IOV_SIZE + 8, data.byteSize());
    }

    /** Receives cancelled after the endpoint failed, progressed until UCX lets go of their buffers. */
    private final List<Long> orphans = new ArrayList<>();
    /** The key of this connection's error handler ({@link EpErrors}). */
    private final long errorKey;
    /** The status UCX's error handler reported for this endpoint (0: none). */
    private int epStatus;
    private boolean epFailureHandled;

    UcxConnection(UcxEndpoint endpoint, int rank, int peer, PeerInfo peerInfo, long ep, long errorKey, long splitAt) {
        this.splitAt = splitAt;
        this.headBytes = 8 + splitAt;
        this.errorKey = errorKey;
        this.endpoint = endpoint;
        this.w = endpoint.worker;
        this.blocks = new Slabs(w.arena, BLOCK);
        this.smalls = new Slabs(w.arena, SMALL_MAX + 8);
        this.ucp = w.ucp;
        this.rank = rank;
        this.peer = peer;
        this.peerInfo = peerInfo;
        this.ep = ep;
        MemorySegment s = w.arena.allocate(Layouts.STRUCT_BYTES, 8);
        sendParams = s.address();
        MemorySegment r = w.arena.allocate(Layouts.STRUCT_BYTES, 8);
        r.set(JAVA_INT, Layouts.REQ_OP_ATTR_MASK, Layouts.UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
        recvParams = r.address();
        drainByte = w.arena.allocate(8, 8).address();
        testInfoSeg = w.arena.allocate(Layouts.RECV_INFO_SIZE, 8);
        testInfo = testInfoSeg.address();
        flushParams = w.arena.allocate(Layouts.STRUCT_BYTES, 8).address();
        MemorySegment si = w.arena.allocate(Layouts.STRUCT_BYTES, 8);
        si.set(JAVA_INT, Layouts.REQ_OP_ATTR_MASK, Layouts.UCP_OP_ATTR_FIELD_DATATYPE);
        si.set(JAVA_LONG, Layouts.REQ_DATATYPE, Layouts.UCP_DATATYPE_IOV);
        sendIovParams = si.address();
        MemorySegment ri = w.arena.allocate(Layouts.STRUCT_BYTES, 8);
        ri.set(JAVA_INT, Layouts.REQ_OP_ATTR_MASK, Layouts.UCP_OP_ATTR_FIELD_DATATYPE | Layouts.UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
        ri.set(JAVA_LONG, Layouts.REQ_DATATYPE, Layouts.UCP_DATATYPE_IOV);
        recvIovParams = ri.address();
        MemorySegment c = w.arena.allocate(Layouts.STRUCT_BYTES, 8);
        c.set(JAVA_INT, Layouts.REQ_OP_ATTR_MASK, Layouts.UCP_OP_ATTR_FIELD_FLAGS);
        c.set(JAVA_INT, Layouts.REQ_FLAGS, Layouts.UCP_EP_CLOSE_FLAG_FORCE);
        forceCloseParams = c.address();
    }

    /** From {@link EpErrors}' upcall, inside a progress call of this worker (its lock held by the caller). */
    void endpointFailed(byte status) {
        if (epStatus == 0) {
            epStatus = status;
        }
    }

    /** After UCX reported this endpoint failed: every pending request fails (receives cancelled first), once. */
    private void failAllOnEndpointError() {
        if (epStatus == 0 || epFailureHandled) {
            return;
        }
        epFailureHandled = true;
        String msg = "UCX: rank " + rank + ": the endpoint to " + peerInfo.describe() + " failed: " + Status.name(epStatus)
                + " (the peer or the link to it failed)";
        IOException e = new IOException(msg);
        if (failure == null) {
            failure = e;
        }
        for (P2pRequest r : pending) {
            Posted p = (Posted) r.transportState;
            for (long q : new long[] {p.request, p.body}) {
                if (q == 0) {
                    continue;
                }
                if (p.recv) {
                    ucp.cancel(w.worker, q);
                    orphans.add(q); // its buffers stay out of the pools: UCX may still write them
                } else {
                    ucp.free(q);
                }
            }
            r.transportState = null;
            r.fail(e);
        }
        pending.clear();
    }

    private void drainOrphans() {
        if (!orphans.isEmpty()) {
            orphans.removeIf(o -> {
                if (ucp.recvTest(o, testInfo) != Status.INPROGRESS) {
                    ucp.free(o);
                    return true;
                }
                return false;
            });
        }
    }

    /** The tag of part {@code bits} ({@link #TAG_BODY}, {@link #TAG_SPLIT} or 0) of message {@code seq} from {@code sender}. */
    static long tag(int sender, long seq, long bits) {
        return ((long) sender << SEQ_BITS) | (((seq << 2) | bits) & SEQ_MASK);
    }

    @Override
    public int peer() {
        return peer;
    }

    @Override
    public String describe() {
        return "UCX " + (endpoint.transports.isEmpty() ? "" : String.join(",", endpoint.transports) + " ") + "to " + peerInfo.describe();
    }

    @Override
    public P2pRequest send(MemorySegment src) {
        return send(src, 0);
    }

    @Override
    public P2pRequest recv(MemorySegment dst) {
        return recv(dst, 0);
    }

    @Override
    public P2pRequest send(MemorySegment src, long guard) {
        P2pRequest r = new P2pRequest(src, true, guard);
        long size = src.byteSize();
        synchronized (w.lock) {
            checkUsable();
            long seq = sendSeq++;
            if (guard == 0) {
                post(r, new Posted(false, size, seq, null, null, false), ucp.tagSend(ep, src.address(), size, tag(rank, seq, 0), sendParams), 0);
            } else if (size <= SMALL_MAX && size < splitAt) {
                MemorySegment c = smalls.take();
                c.set(JAVA_LONG, 0, guard);
                MemorySegment.copy(src, 0, c, 8, size);
                Posted p = new Posted(false, size, seq, null, null, false);
                p.small = c;
                post(r, p, ucp.tagSend(ep, c.address(), 8 + size, tag(rank, seq, 0), sendParams), 0);
            } else if (size < splitAt) {
                MemorySegment b = blocks.take();
                fillBlock(b, guard, src);
                post(r, new Posted(false, size, seq, b, null, false), ucp.tagSend(ep, b.address(), 2, tag(rank, seq, 0), sendIovParams), 0);
            } else {
                MemorySegment b = blocks.take();
                b.set(JAVA_LONG, 0, guard);
                b.set(JAVA_LONG, 8, size);
                long head = ucp.tagSend(ep, b.address(), 16, tag(rank, seq, TAG_SPLIT), sendParams);
                long body = ucp.tagSend(ep, src.address(), size, tag(rank, seq, TAG_BODY), sendParams);
                post(r, new Posted(false, size, seq, b, null, true), head, body);
            }
        }
        return r;
    }

    @Override
    public P2pRequest recv(MemorySegment dst, long guard) {
        P2pRequest r = new P2pRequest(dst, false, guard);
        long size = dst.byteSize();
        synchronized (w.lock) {
            checkUsable();
            long seq = recvSeq++;
            // heads are received whatever their split bit (~TAG_SPLIT), so that a peer whose call differs is reported, not waited for
            if (guard == 0) {
                post(r, new Posted(true, size, seq, null, null, false),
                        ucp.tagRecv(w.worker, dst.address(), size, tag(peer, seq, 0), ~TAG_SPLIT, recvParams), 0);
            } else if (size <= SMALL_MAX && size < splitAt) {
                MemorySegment c = smalls.take();
                c.set(JAVA_LONG, 0, 0L);
                Posted p = new Posted(true, size, seq, null, null, false);
                p.small = c;
                post(r, p, ucp.tagRecv(w.worker, c.address(), 8 + size, tag(peer, seq, 0), ~TAG_SPLIT, recvParams), 0);
            } else if (size < splitAt) {
                MemorySegment b = blocks.take();
                fillBlock(b, 0, dst);
                post(r, new Posted(true, size, seq, b, null, false),
                        ucp.tagRecv(w.worker, b.address(), 2, tag(peer, seq, 0), ~TAG_SPLIT, recvIovParams), 0);
            } else {
                MemorySegment h = takeHead();
                h.set(JAVA_LONG, 0, 0L);
                long head = ucp.tagRecv(w.worker, h.address(), headBytes, tag(peer, seq, 0), ~TAG_SPLIT, recvParams);
                long body = ucp.tagRecv(w.worker, dst.address(), size, tag(peer, seq, TAG_BODY), -1L, recvParams);
                post(r, new Posted(true, size, seq, null, h, true), head, body);
            }
        }
        return r;
    }

    /** The guard word the peer sent with a finished (or truncated) guarded receive; 0 when none or unknown. */
    private static long theirGuard(Posted p) {
        if (p.head != null) {
            return p.head.get(JAVA_LONG, 0);
        }
        if (p.small != null) {
            return p.small.get(JAVA_LONG, 0);
        }
        return p.block != null ? p.block.get(JAVA_LONG, BLOCK_GUARD) : 0;
    }

    /** Checks a finished guarded receive's word; true when it failed the request with a mismatch. */
    private boolean guardMismatch(P2pRequest r, Posted p) {
        if (r.guard() == 0) {
            return false;
        }
        long theirs = theirGuard(p);
        if (theirs != 0 && !GuardMismatchException.matches(r.guard(), theirs)) {
            GuardMismatchException e = new GuardMismatchException(peer, r.guard(), theirs);
            r.fail(e);
            if (failure == null) {
                failure = e;
            }
            return true;
        }
        return false;
    }

    /**
     * Decides a request whose UCX requests have (partly) finished: completes or fails it and returns true, or returns
     * false while it must wait for more. A split receive whose head shows a different call fails at once, its body
     * receive cancelled.
     */
    private boolean settle(P2pRequest r, Posted p) {
        if (!p.recv) {
            if (!p.headDone || (p.split && !p.bodyDone)) {
                return false;
            }
            int s = p.headStatus != Status.OK ? p.headStatus : p.split ? p.bodyStatus : Status.OK;
            if (s == Status.OK) {
                r.complete();
            } else {
                fail(r, p.what(), s);
            }
            return true;
        }
        if (!p.headDone) {
            return false;
        }
        long size = r.size();
        if (p.headStatus != Status.OK) {
            if (!guardMismatch(r, p)) {
                fail(r, p.what(), p.headStatus);
            }
            cancelBody(p);
            return true;
        }
        boolean theySplit = (p.headTag & TAG_SPLIT) != 0;
        if (!p.split) {
            if (p.block == null && p.small == null) { // unguarded: plain bytes
                if (theySplit) {
                    protocolError(r, p.what() + " got a collective's guarded message: the ranks' calls differ");
                } else if (p.headLength != size) {
                    protocolError(r, p.what() + " got a message of " + p.headLength + " B: the ranks' calls differ in size");
                } else {
                    r.complete();
                }
                return true;
            }
            if (guardMismatch(r, p)) {
                if (theySplit) {
                    drainBody(p.headTag);
                }
                return true;
            }
            if (theySplit) { // the peer's 16-byte head: its size word landed at the start of dst (of the copy's data)
                MemorySegment data = p.small != null ? p.small.asSlice(8, size) : r.segment();
                long theirs = data.byteSize() >= 8 ? data.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0) : -1;
                protocolError(r, p.what() + " got a message of " + theirs + " B: the ranks' calls differ in size");
                drainBody(p.headTag);
            } else if (p.headLength != size + 8) {
                protocolError(r, p.what() + " got a message of " + (p.headLength - 8) + " B: the ranks' calls differ in size");
            } else {
                if (p.small != null) {
                    MemorySegment.copy(p.small, 8, r.segment(), 0, size);
                }
                r.complete();
            }
            return true;
        }
        if (theySplit && !p.bodyDone) {
            // the peer sent a body, which this receive matches (cut short if larger): decide only once UCX is done
            // writing dst, so that no byte lands in memory freed after a failed call
            return false;
        }
        if (guardMismatch(r, p)) {
            cancelBody(p);
            return true;
        }
        long theirs = theySplit ? p.head.get(JAVA_LONG, 8) : p.headLength - 8;
        if (theirs != size) {
            protocolError(r, p.what() + " got a message of " + theirs + " B: the ranks' calls differ in size");
            cancelBody(p); // only an inline message's receive is still posted here: unmatched, nothing writes into it
            return true;
        }
        if (p.bodyStatus != Status.OK) {
            fail(r, p.what(), p.bodyStatus);
        } else if (p.bodyLength != size) {
            protocolError(r, p.what() + " got a message of " + p.bodyLength + " B: the ranks' calls differ in size");
        } else {
            r.complete();
        }
        return true;
    }

    /** An empty receive for a body that no receive of this rank will take (its call differed): truncated, so the peer's send completes. */
    private void drainBody(long headTag) {
        long q = ucp.tagRecv(w.worker, drainByte, 0, headTag & ~TAG_SPLIT | TAG_BODY, -1L, recvParams);
        if (Status.isRequest(q)) {
            orphans.add(q);
        }
    }

    /** Cancels a split receive's body if still pending; UCX lets go of it later (orphans). */
    private void cancelBody(Posted p) {
        if (p.body != 0) {
            ucp.cancel(w.worker, p.body);
            orphans.add(p.body);
            p.body = 0;
            p.bodyDone = true;
            p.bodyStatus = Status.ERR_CANCELED;
        }
    }

    /** Tests the UCX requests of {@code p} still running and records those that finished. */
    private void test(Posted p) {
        if (!p.headDone) {
            byte s = p.recv ? ucp.recvTest(p.request, testInfo) : ucp.checkStatus(p.request);
            if (s != Status.INPROGRESS) {
                if (p.recv) {
                    p.headLength = testInfoSeg.get(JAVA_LONG, Layouts.RECV_INFO_LENGTH);
                    p.headTag = testInfoSeg.get(JAVA_LONG, Layouts.RECV_INFO_SENDER_TAG);
                }
                ucp.free(p.request);
                p.request = 0;
                p.headDone = true;
                p.headStatus = s;
            }
        }
        if (!p.bodyDone && p.body != 0) {
            byte s = p.recv ? ucp.recvTest(p.body, testInfo) : ucp.checkStatus(p.body);
            if (s != Status.INPROGRESS) {
                if (p.recv) {
                    p.bodyLength = testInfoSeg.get(JAVA_LONG, Layouts.RECV_INFO_LENGTH);
                }
                ucp.free(p.body);
                p.body = 0;
                p.bodyDone = true;
                p.bodyStatus = s;
            }
        }
    }

    /** Returns a finished operation's buffers to their pools. */
    private void recycle(Posted p) {
        if (p.block != null) {
            blocks.give(p.block);
        }
        if (p.small != null) {
            smalls.give(p.small);
        }
        if (p.head != null) {
            heads.add(p.head);
        }
    }

    private void protocolError(P2pRequest r, String message) {
        IOException e = new IOException("UCX: rank " + rank + " <- " + peerInfo.describe() + ": " + message);
        r.fail(e);
        if (failure == null) {
            failure = e;
        }
    }

    private void fail(P2pRequest r, String what, int status) {
        String msg = "UCX: rank " + rank + (r.isSend() ? " -> " : " <- ") + peerInfo.describe() + ": " + what + " failed: "
                + Status.name(status) + (Status.isPeerFailure(status) ? " (the peer or the link to it failed)" : "");
        if (status == Status.ERR_MESSAGE_TRUNCATED) {
            msg = "UCX: rank " + rank + " <- " + peerInfo.describe() + ": " + what + " got a larger message (" + Status.name(status)
                    + "): the ranks' calls differ in size";
        }
        IOException e = new IOException(msg);
        r.fail(e);
        if (failure == null) {
            failure = e;
        }
        if (Status.isPeerFailure(status) && epStatus == 0) {
            // the endpoint is broken: its other requests (receives, which no endpoint error completes) fail with it
            epStatus = status;
        }
    }

    private void checkUsable() {
        if (closed || w.isClosedUnlocked()) {
            throw new IllegalStateException("UCX connection to " + peerInfo.describe() + " is closed");
        }
        failAllOnEndpointError();
    }

    @Override
    public int progress() throws IOException {
        synchronized (w.lock) {
            if (closed || w.isClosedUnlocked()) {
                throw new IOException("UCX connection to " + peerInfo.describe() + " is closed");
            }
            int work = w.progressLocked();
            failAllOnEndpointError();
            drainOrphans();
            if (work == 0 && w.events == testedAt && untestedPasses < TEST_ANYWAY_AFTER) {
                // Nothing progressed or was posted since every pending request was last tested: testing each again (a
                // downcall or two per request, 32 and more in a stream) would only find them unfinished.
                untestedPasses++;
                if (failure != null) {
                    throw failure; // as every pass does once the connection failed (an endpoint error just now included)
                }
                return 0;
            }
            untestedPasses = 0;
            testedAt = w.events;
            for (int i = 0; i < pending.size(); ) {
                P2pRequest r = pending.get(i);
                Posted p = (Posted) r.transportState;
                test(p);
                if (!settle(r, p)) {
                    i++;
                    continue;
                }
                r.transportState = null;
                pending.remove(i);
                work++;
                if (p.request == 0 && p.body == 0) {
                    recycle(p);
                }
            }
            failAllOnEndpointError(); // a request that failed just now may have shown the endpoint broken
            if (failure != null) {
                throw failure;
            }
            return work;
        }
    }

    @Override
    public boolean supportsPut() {
        return endpoint.onesided;
    }

    @Override
    public RemoteRegion unpack(byte[] packedKey) throws IOException {
        synchronized (w.lock) {
            checkUsable();
            return UcxRegions.unpack(this, packedKey, peer);
        }
    }

    @Override
    public P2pRequest put(MemorySegment src, RemoteRegion dst, long dstOffset) {
        synchronized (w.lock) {
            checkUsable();
            UcxRegions.Remote remote = UcxRegions.check(this, dst, dstOffset, src);
            P2pRequest r = new P2pRequest(src, true);
            long p = ucp.put(ep, src.address(), src.byteSize(), remote.base + dstOffset, remote.rkey(), sendParams);
            String what = "put of " + src.byteSize() + " B into " + dst.describe();
            post(r, p, what);
            return r;
        }
    }

    @Override
    public P2pRequest flush() {
        synchronized (w.lock) {
            checkUsable();
            P2pRequest r = new P2pRequest(MemorySegment.NULL, true);
            post(r, ucp.epFlush(ep, flushParams), "flush");
            return r;
        }
    }

    private void post(P2pRequest r, long p, String what) {
        post(r, new Posted(!r.isSend(), what, null, null, false), p, 0);
    }

    /**
     * Records UCX's answers to a posted operation (head, and body of a split message: a request, 0 for done, or an
     * error status) and completes, fails or queues it; its buffers go back to their pools when UCX is done.
     */
    private void post(P2pRequest r, Posted p, long head, long body) {
        w.events++; // a post may complete requests (a receive matched at once): the next progress tests them
        if (Status.isRequest(head)) {
            p.request = head;
        } else {
            p.headDone = true;
            p.headStatus = head == 0 ? Status.OK : Status.fromPtr(head);
        }
        if (!p.split) {
            p.bodyDone = true;
        } else if (Status.isRequest(body)) {
            p.body = body;
        } else {
            p.bodyDone = true;
            p.bodyStatus = body == 0 ? Status.OK : Status.fromPtr(body);
        }
        if (p.request == 0 && p.body == 0 && !p.recv) {
            settle(r, p);
            recycle(p);
        } else if (p.recv && p.request == 0) {
            // not with NO_IMM_CMPL (or UCX refused the receive at once)
            if (p.headStatus == Status.OK) {
                protocolError(r, p.what() + " completed at once although UCP_OP_ATTR_FLAG_NO_IMM_CMPL was set: this UCX ("
                        + ucp.version() + ") does not honour it");
            } else {
                fail(r, p.what(), p.headStatus);
            }
            cancelBody(p);
        } else {
            r.transportState = p;
            pending.add(r);
        }
    }

    Ucp ucp() {
        return ucp;
    }

    UcxEndpoint endpoint() {
        return endpoint;
    }

    /**
     * Cancels what is pending and starts closing the UCX endpoint; the worker's lock is held. Receives are
     * cancelled and progressed until UCX lets go of their buffers (bounded), so that no byte lands in memory
     * the runtime frees after an abort. Returns the close request (to progress), or 0 when done.
     */
    long startCloseLocked() {
        if (closed) {
            return 0;
        }
        closed = true;
        EpErrors.unregister(errorKey);
        for (P2pRequest r : pending) {
            Posted p = (Posted) r.transportState;
            if (p.recv) {
                for (long q : new long[] {p.request, p.body}) {
                    if (q != 0) {
                        ucp.cancel(w.worker, q);
                    }
                }
            }
        }
        for (long o : orphans) {
            ucp.cancel(w.worker, o); // a body receive kept for a peer's body that did not come
        }
        long deadline = System.nanoTime() + 1_000_000_000L;
        while ((!pending.isEmpty() || !orphans.isEmpty()) && System.nanoTime() < deadline) {
            w.progressLocked();
            drainOrphans();
            for (int i = 0; i < pending.size(); ) {
                Posted p = (Posted) pending.get(i).transportState;
                if (p.recv) {
                    test(p);
                }
                if (p.recv && (p.request != 0 || p.body != 0)) {
                    i++;
                } else {
                    for (long q : new long[] {p.request, p.body}) {
                        if (q != 0) {
                            ucp.free(q); // a send still in flight is released by UCX when it completes
                        }
                    }
                    P2pRequest r = pending.remove(i);
                    if (!r.isDone()) {
                        r.fail(new IOException("UCX connection to " + peerInfo.describe() + " closed with this request pending"));
                    }
                }
            }
        }
        return 0;
    }

    /** Starts a flush of what was sent (so that the peer gets every message before the endpoint goes); 0 when done or failed. */
    long startFlushLocked() {
        if (failure != null) {
            return 0;
        }
        long p = ucp.epFlush(ep, flushParams);
        return Status.isRequest(p) ? p : 0;
    }

    /** Force-closes the UCX endpoint (no handshake with the peer: it may be gone); returns the request to progress, or 0. */
    long forceCloseLocked() {
        long p = ucp.epClose(ep, forceCloseParams);
        return Status.isRequest(p) ? p : 0;
    }

    @Override
    public void close() {
        synchronized (w.lock) {
            if (closed || w.isClosedUnlocked()) {
                return;
            }
            startCloseLocked();
            endpoint.awaitLocked(List.of(startFlushLocked()));
            endpoint.awaitLocked(List.of(forceCloseLocked()));
            endpoint.forget(peer);
        }
    }
}
