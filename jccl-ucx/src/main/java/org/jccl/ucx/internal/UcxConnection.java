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
    private IOException failure;
    private boolean closed;

    /** The UCX request of a posted operation, kept in {@link P2pRequest#transportState}. */
    private static final class Posted {
        final long request;
        final boolean recv;
        final String what;
        /** The IOV block of a guarded message (returned to the pool when UCX is done with it), or null. */
        final MemorySegment block;

        Posted(long request, boolean recv, String what, MemorySegment block) {
            this.request = request;
            this.recv = recv;
            this.what = what;
            this.block = block;
        }
    }

    /** Bytes of one IOV block: two ucp_dt_iov_t entries, then the 8-byte guard word. */
    private static final long BLOCK = 2 * Layouts.DT_IOV_SIZE + 8;
    private static final long BLOCK_GUARD = 2 * Layouts.DT_IOV_SIZE;
    private static final int BLOCKS_PER_CHUNK = 64;
    /** Free IOV blocks (a guarded message in flight holds one). */
    private final java.util.ArrayDeque<MemorySegment> blocks = new java.util.ArrayDeque<>();
    /** ucp_request_param_t with DATATYPE = IOV, for guarded sends and (with NO_IMM_CMPL) guarded receives. */
    private final long sendIovParams;
    private final long recvIovParams;

    private MemorySegment takeBlock() {
        MemorySegment b = blocks.poll();
        if (b == null) {
            MemorySegment chunk = w.arena.allocate(BLOCK * BLOCKS_PER_CHUNK, 16);
            for (int i = 1; i < BLOCKS_PER_CHUNK; i++) {
                blocks.add(chunk.asSlice(i * BLOCK, BLOCK));
            }
            b = chunk.asSlice(0, BLOCK);
        }
        return b;
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

    UcxConnection(UcxEndpoint endpoint, int rank, int peer, PeerInfo peerInfo, long ep, long errorKey) {
        this.errorKey = errorKey;
        this.endpoint = endpoint;
        this.w = endpoint.worker;
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
            if (p.recv) {
                ucp.cancel(w.worker, p.request);
                orphans.add(p.request);
            } else {
                ucp.free(p.request);
            }
            if (p.block != null) {
                blocks.add(p.block);
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

    static long tag(int sender, long seq) {
        return ((long) sender << SEQ_BITS) | (seq & SEQ_MASK);
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
            String what = "send of " + size + " B (message " + seq + ")";
            if (guard == 0) {
                post(r, ucp.tagSend(ep, src.address(), size, tag(rank, seq), sendParams), what, null);
            } else {
                MemorySegment b = takeBlock();
                fillBlock(b, guard, src);
                post(r, ucp.tagSend(ep, b.address(), 2, tag(rank, seq), sendIovParams), what, b);
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
            String what = "receive of " + size + " B (message " + seq + ")";
            long p;
            MemorySegment b = null;
            if (guard == 0) {
                p = ucp.tagRecv(w.worker, dst.address(), size, tag(peer, seq), -1L, recvParams);
            } else {
                b = takeBlock();
                fillBlock(b, 0, dst);
                p = ucp.tagRecv(w.worker, b.address(), 2, tag(peer, seq), -1L, recvIovParams);
            }
            if (p == 0) {
                // not with NO_IMM_CMPL; were a UCX to do it anyway, the length would be unknown
                if (b != null) {
                    blocks.add(b);
                }
                protocolError(r, what + " completed at once although UCP_OP_ATTR_FLAG_NO_IMM_CMPL was set: this UCX ("
                        + ucp.version() + ") does not honour it");
            } else {
                post(r, p, what, b);
            }
        }
        return r;
    }

    /** Checks a completed (or truncated) guarded receive's word; true when it failed the request with a mismatch. */
    private boolean guardMismatch(P2pRequest r, MemorySegment block) {
        if (block == null || r.guard() == 0) {
            return false;
        }
        long theirs = block.get(JAVA_LONG, BLOCK_GUARD);
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

    private void finishRecv(P2pRequest r, String what, long got, MemorySegment block) {
        if (guardMismatch(r, block)) {
            return;
        }
        long want = r.size() + (block != null ? 8 : 0);
        if (got != want) {
            got -= block != null ? 8 : 0;
            protocolError(r, what + " got a message of " + got + " B: the ranks' calls differ in size");
        } else {
            r.complete();
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
            for (int i = 0; i < pending.size(); ) {
                P2pRequest r = pending.get(i);
                Posted p = (Posted) r.transportState;
                byte s = p.recv ? ucp.recvTest(p.request, testInfo) : ucp.checkStatus(p.request);
                if (s == Status.INPROGRESS) {
                    i++;
                    continue;
                }
                ucp.free(p.request);
                r.transportState = null;
                pending.remove(i);
                work++;
                if (s == Status.OK) {
                    if (p.recv) {
                        finishRecv(r, p.what, testInfoSeg.get(JAVA_LONG, Layouts.RECV_INFO_LENGTH), p.block);
                    } else {
                        r.complete();
                    }
                } else if (!(p.recv && guardMismatch(r, p.block))) {
                    fail(r, p.what, s);
                }
                if (p.block != null) {
                    blocks.add(p.block);
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
        post(r, p, what, null);
    }

    /** Completes, fails or queues a posted operation by UCX's answer; the block (if any) goes back when UCX is done. */
    private void post(P2pRequest r, long p, String what, MemorySegment block) {
        if (p == 0) {
            r.complete();
            if (block != null) {
                blocks.add(block);
            }
        } else if (Status.isError(p)) {
            fail(r, what, Status.fromPtr(p));
            if (block != null) {
                blocks.add(block);
            }
        } else {
            r.transportState = new Posted(p, !r.isSend(), what, block);
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
                ucp.cancel(w.worker, p.request);
            }
        }
        long deadline = System.nanoTime() + 1_000_000_000L;
        while ((!pending.isEmpty() || !orphans.isEmpty()) && System.nanoTime() < deadline) {
            w.progressLocked();
            drainOrphans();
            for (int i = 0; i < pending.size(); ) {
                Posted p = (Posted) pending.get(i).transportState;
                byte s = p.recv ? ucp.recvTest(p.request, testInfo) : ucp.checkStatus(p.request);
                if (s == Status.INPROGRESS && p.recv) {
                    i++;
                } else {
                    ucp.free(p.request); // a send still in flight is released by UCX when it completes
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
