package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;

/**
 * A {@link Connection} over one or more non-blocking TCP sockets to one peer. Messages are cut into
 * stripes as {@link TcpWire} describes; each socket (a {@link Lane}) carries its stripes in message
 * order, so matching needs no tags: the k-th posted receive takes the k-th message.
 *
 * <p>Data moves straight between the sockets and the caller's segments (views of at most
 * {@value #MAX_VIEW} bytes, since a {@code ByteBuffer} cannot address 2 GiB). Stripes of at most
 * {@value #INLINE} bytes instead go through a per-socket scratch buffer: header and payload leave in
 * one {@code write} and arrive in one {@code read}, and no buffer view is allocated for them, so
 * small-message traffic allocates nothing after warm-up beyond the {@link P2pRequest}s themselves.
 *
 * <p><b>Threading:</b> {@code send}, {@code recv} and {@code progress} belong to the communicator's
 * operation thread (see {@link Connection}). {@link #close()} may come from any thread; the
 * operation thread then sees an {@code IOException} saying the connection was closed locally.
 */
final class TcpConnection implements Connection {

    /** Stripes up to this size are staged through the per-socket scratch buffers. */
    static final int INLINE = 8 * 1024;
    /** Largest ByteBuffer view taken of a caller's segment (a ByteBuffer stops at 2 GiB). */
    static final int MAX_VIEW = 1 << 30;
    /** Bytes one lane moves per direction per {@link #progress()} call, so one busy socket cannot starve the others. */
    private static final long LANE_BUDGET = 8L << 20;

    private final PeerInfo peer;
    private final int selfRank;
    private final String description;
    private final Lane[] lanes;
    private final int nsocks;
    private long sendSeq;
    private long recvSeq;
    /** First failure; once set, every later call reports it. Written only by the operation thread. */
    private IOException failure;
    private volatile boolean closed;
    /** Largest view of a caller's segment; {@link #MAX_VIEW} except in tests that exercise the windowing with small messages. */
    int maxView = MAX_VIEW;

    TcpConnection(int selfRank, PeerInfo peer, String remoteAddress, SocketChannel[] sockets) {
        this.peer = peer;
        this.selfRank = selfRank;
        this.nsocks = sockets.length;
        this.lanes = new Lane[nsocks];
        for (int i = 0; i < nsocks; i++) {
            lanes[i] = new Lane(i, sockets[i]);
        }
        this.description = "TCP " + remoteAddress + " (" + nsocks + (nsocks == 1 ? " socket)" : " sockets)");
    }

    @Override
    public int peer() {
        return peer.rank();
    }

    @Override
    public String describe() {
        return description;
    }

    /** The sockets: the runtime blocks in a selector over them while it has nothing to do. */
    @Override
    public java.nio.channels.SelectableChannel[] channels() {
        java.nio.channels.SelectableChannel[] chans = new java.nio.channels.SelectableChannel[nsocks];
        for (int i = 0; i < nsocks; i++) {
            chans[i] = lanes[i].ch;
        }
        return chans;
    }

    /** Number of sockets this connection stripes over. */
    int sockets() {
        return nsocks;
    }

    @Override
    public P2pRequest send(MemorySegment src) {
        P2pRequest r = new P2pRequest(src, true);
        if (!admit(r)) {
            return r;
        }
        long seq = sendSeq++;
        if (TcpWire.isSplit(src.byteSize(), nsocks)) {
            for (Lane lane : lanes) {
                lane.sendQ.addLast(r);
            }
        } else {
            lanes[TcpWire.socketOf(seq, nsocks)].sendQ.addLast(r);
        }
        return r;
    }

    @Override
    public P2pRequest recv(MemorySegment dst) {
        P2pRequest r = new P2pRequest(dst, false);
        if (!admit(r)) {
            return r;
        }
        long seq = recvSeq++;
        if (TcpWire.isSplit(dst.byteSize(), nsocks)) {
            for (Lane lane : lanes) {
                lane.recvQ.addLast(r);
            }
        } else {
            lanes[TcpWire.socketOf(seq, nsocks)].recvQ.addLast(r);
        }
        return r;
    }

    /** Fails a request posted on a broken or closed connection at once; true when it may proceed. */
    private boolean admit(P2pRequest r) {
        if (failure != null) {
            r.fail(failure);
            return false;
        }
        if (closed) {
            r.fail(closedLocally(null));
            return false;
        }
        return true;
    }

    @Override
    public int progress() throws IOException {
        if (failure != null) {
            throw failure;
        }
        long moved = 0;
        Lane current = null;
        try {
            for (Lane lane : lanes) {
                current = lane;
                moved += lane.progressSend();
                moved += lane.progressRecv();
            }
        } catch (IOException e) {
            throw fail(explain(e, current));
        }
        return (int) Math.min(moved, Integer.MAX_VALUE);
    }

    /** Records the first failure, fails every pending request, and closes the sockets so the peer learns at once. */
    private IOException fail(IOException e) {
        if (failure == null) {
            failure = e;
            for (Lane lane : lanes) {
                for (P2pRequest r : lane.sendQ) {
                    r.fail(e);
                }
                for (P2pRequest r : lane.recvQ) {
                    r.fail(e);
                }
                lane.sendQ.clear();
                lane.recvQ.clear();
            }
            closeSockets();
        }
        return failure;
    }

    /** Turns a socket-level exception into one naming the peer, the socket and what the cause means. */
    private IOException explain(IOException e, Lane lane) {
        if (e instanceof TcpLinkException) {
            return e;
        }
        if (closed || e instanceof ClosedChannelException) {
            return closedLocally(e);
        }
        String where = lane == null ? "" : " (socket " + lane.index + " of " + nsocks + ")";
        return new IOException("TCP connection from rank " + selfRank + " to " + peer.describe() + " failed" + where + ": "
                + e.getMessage() + ". The peer exited or crashed, or the network between the hosts dropped the connection", e);
    }

    private IOException closedLocally(Throwable cause) {
        return new IOException("TCP connection from rank " + selfRank + " to " + peer.describe()
                + " was closed by this rank (its communicator was closed or aborted)", cause);
    }

    private TcpLinkException peerClosed(Lane lane, P2pRequest r, long received, long expected) {
        String what = received == 0 ? "before the next message (" + r.size() + " bytes) arrived"
                : "after " + received + " of " + expected + " bytes of a " + r.size() + "-byte message";
        return new TcpLinkException("TCP connection to " + peer.describe() + " closed by the peer " + what + " (socket " + lane.index
                + " of " + nsocks + ", rank " + selfRank + " receiving): it exited or crashed, or closed its communicator after an"
                + " error of its own (see its log)");
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        closeSockets();
    }

    private void closeSockets() {
        for (Lane lane : lanes) {
            try {
                lane.ch.close();
            } catch (IOException ignored) {
                // Closing a socket that already failed: nothing left to release.
            }
        }
    }

    @Override
    public String toString() {
        return "rank " + selfRank + " -> " + peer.describe() + " via " + description;
    }

    /**
     * A failure whose message already names the peer, the socket and the cause (peer closed, size
     * mismatch, corrupt stream), so {@link #progress()} passes it on unchanged.
     */
    static final class TcpLinkException extends IOException {
        private static final long serialVersionUID = 1L;

        TcpLinkException(String message) {
            super(message);
        }
    }

    /**
     * One socket of the connection with its queues and in-flight stripe state, one per direction.
     * Only the operation thread touches it.
     */
    private final class Lane {
        final int index;
        final SocketChannel ch;
        final ArrayDeque<P2pRequest> sendQ = new ArrayDeque<>();
        final ArrayDeque<P2pRequest> recvQ = new ArrayDeque<>();

        // ---- send side: the head of sendQ, partially written
        private boolean sendActive;
        private boolean sendInline;
        private long sendOff;                 // stripe start in the message
        private long sendLen;                 // stripe length
        private long sendViewStart;           // stripe-relative offset where sendView begins
        private ByteBuffer sendView;          // window on the caller's segment, or null
        private final ByteBuffer sendHeader = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES);
        private final ByteBuffer sendScratch = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES + INLINE);
        private final MemorySegment sendScratchSeg = MemorySegment.ofBuffer(sendScratch);
        private final ByteBuffer[] gather = new ByteBuffer[2];

        // ---- receive side: the head of recvQ, partially read
        private boolean recvActive;
        private boolean recvInline;
        private boolean recvHeaderChecked;
        private int recvStripe;
        private long recvOff;
        private long recvLen;
        private long recvViewStart;
        private ByteBuffer recvView;
        private final ByteBuffer recvHeader = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES);
        private final ByteBuffer recvScratch = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES + INLINE);
        private final MemorySegment recvScratchSeg = MemorySegment.ofBuffer(recvScratch);
        private final ByteBuffer[] scatter = new ByteBuffer[2];

        Lane(int index, SocketChannel ch) {
            this.index = index;
            this.ch = ch;
        }

        /** Writes stripes until the socket is full, the queue is empty or the budget is spent; returns bytes written. */
        long progressSend() throws IOException {
            long moved = 0;
            while (moved < LANE_BUDGET && !sendQ.isEmpty()) {
                P2pRequest r = sendQ.peekFirst();
                if (!sendActive) {
                    startSend(r);
                }
                if (sendInline) {
                    moved += ch.write(sendScratch);
                    if (sendScratch.hasRemaining()) {
                        break;
                    }
                    r.position += sendLen;
                } else {
                    long w = writeDirect(r);
                    moved += w;
                    if (sendHeader.hasRemaining() || sendViewStart + sendView.position() < sendLen) {
                        break;
                    }
                }
                sendActive = false;
                sendQ.pollFirst();
                if (r.position == r.size() && !r.isDone()) {
                    r.complete();
                }
            }
            return moved;
        }

        private void startSend(P2pRequest r) {
            long size = r.size();
            int stripe;
            if (TcpWire.isSplit(size, nsocks)) {
                stripe = index;
                sendOff = TcpWire.stripeOffset(size, nsocks, index);
                sendLen = TcpWire.stripeLength(size, nsocks, index);
            } else {
                stripe = 0;
                sendOff = 0;
                sendLen = size;
            }
            sendInline = sendLen <= INLINE;
            if (sendInline) {
                // Header and payload in one buffer: one write, and no view of the caller's segment.
                TcpWire.putHeader(sendScratch, stripe, size);
                MemorySegment.copy(r.segment(), sendOff, sendScratchSeg, TcpWire.HEADER_BYTES, sendLen);
                sendScratch.limit(TcpWire.HEADER_BYTES + (int) sendLen).position(0);
            } else {
                TcpWire.putHeader(sendHeader, stripe, size);
                sendHeader.clear();
                sendViewStart = 0;
                sendView = view(r.segment(), sendOff, 0, sendLen);
            }
            sendActive = true;
        }

        /** Gathering write of header and payload while the header is pending, then payload only. */
        private long writeDirect(P2pRequest r) throws IOException {
            long moved = 0;
            while (moved < LANE_BUDGET) {
                if (!sendView.hasRemaining()) {
                    long next = sendViewStart + sendView.position();
                    if (next >= sendLen) {
                        if (!sendHeader.hasRemaining()) {
                            return moved;
                        }
                    } else {
                        sendViewStart = next;
                        sendView = view(r.segment(), sendOff, next, sendLen);
                    }
                }
                long w;
                long before = sendView.position();
                if (sendHeader.hasRemaining()) {
                    gather[0] = sendHeader;
                    gather[1] = sendView;
                    w = ch.write(gather);
                } else {
                    w = ch.write(sendView);
                }
                if (w == 0) {
                    return moved;
                }
                moved += w;
                r.position += sendView.position() - before;
            }
            return moved;
        }

        /** Reads stripes for the posted receives until the socket is drained or the budget is spent. */
        long progressRecv() throws IOException {
            long moved = 0;
            while (moved < LANE_BUDGET && !recvQ.isEmpty()) {
                P2pRequest r = recvQ.peekFirst();
                if (!recvActive) {
                    startRecv(r);
                }
                if (recvInline) {
                    int n = ch.read(recvScratch);
                    if (n < 0) {
                        throw peerClosed(this, r, Math.max(0, recvScratch.position() - TcpWire.HEADER_BYTES), recvLen);
                    }
                    moved += n;
                    if (!recvHeaderChecked && recvScratch.position() >= TcpWire.HEADER_BYTES) {
                        checkHeader(recvScratch, r);
                    }
                    if (recvScratch.hasRemaining()) {
                        break;
                    }
                    MemorySegment.copy(recvScratchSeg, TcpWire.HEADER_BYTES, r.segment(), recvOff, recvLen);
                    r.position += recvLen;
                } else {
                    long n = readDirect(r);
                    moved += n;
                    if (!recvHeaderChecked || recvViewStart + recvView.position() < recvLen) {
                        break;
                    }
                }
                recvActive = false;
                recvQ.pollFirst();
                if (r.position == r.size() && !r.isDone()) {
                    r.complete();
                }
            }
            return moved;
        }

        private void startRecv(P2pRequest r) {
            long size = r.size();
            if (TcpWire.isSplit(size, nsocks)) {
                recvStripe = index;
                recvOff = TcpWire.stripeOffset(size, nsocks, index);
                recvLen = TcpWire.stripeLength(size, nsocks, index);
            } else {
                recvStripe = 0;
                recvOff = 0;
                recvLen = size;
            }
            recvInline = recvLen <= INLINE;
            recvHeaderChecked = false;
            if (recvInline) {
                // Read exactly this stripe (header + payload): never past the expected end of the message.
                recvScratch.limit(TcpWire.HEADER_BYTES + (int) recvLen).position(0);
            } else {
                recvHeader.clear();
                recvViewStart = 0;
                recvView = view(r.segment(), recvOff, 0, recvLen);
            }
            recvActive = true;
        }

        /** Scattering read into header and the caller's segment while the header is pending, then payload only. */
        private long readDirect(P2pRequest r) throws IOException {
            long moved = 0;
            while (moved < LANE_BUDGET) {
                if (!recvHeader.hasRemaining() && !recvHeaderChecked) {
                    checkHeader(recvHeader, r);
                }
                if (!recvView.hasRemaining()) {
                    long next = recvViewStart + recvView.position();
                    if (next >= recvLen) {
                        if (!recvHeader.hasRemaining()) {
                            return moved;
                        }
                    } else {
                        recvViewStart = next;
                        recvView = view(r.segment(), recvOff, next, recvLen);
                    }
                }
                long n;
                long before = recvView.position();
                if (recvHeader.hasRemaining()) {
                    scatter[0] = recvHeader;
                    scatter[1] = recvView;
                    n = ch.read(scatter);
                } else {
                    n = ch.read(recvView);
                }
                if (n < 0) {
                    throw peerClosed(this, r, recvViewStart + recvView.position(), recvLen);
                }
                if (n == 0) {
                    return moved;
                }
                moved += n;
                r.position += recvView.position() - before;
            }
            return moved;
        }

        /** Checks magic, message length and stripe index of a complete header at positions 0..15 of {@code b}. */
        private void checkHeader(ByteBuffer b, P2pRequest r) throws TcpLinkException {
            int magic = b.getInt(0);
            int stripe = b.getInt(4);
            long length = b.getLong(8);
            if (magic != TcpWire.MAGIC) {
                throw new TcpLinkException("TCP stream from " + peer.describe() + " is corrupt: stripe header magic 0x"
                        + Integer.toHexString(magic) + " where 0x" + Integer.toHexString(TcpWire.MAGIC) + " was expected (socket "
                        + index + " of " + nsocks + ", rank " + selfRank + " receiving); mixed jccl versions in one job, or a bug:"
                        + " please report it with both ranks' logs");
            }
            if (length != r.size()) {
                throw new TcpLinkException(peer.describe() + " sent " + length + " bytes where rank " + selfRank + " expected "
                        + r.size() + ": ranks called collectives with different counts/types (or send/recv sizes differ)");
            }
            if (stripe != recvStripe) {
                throw new TcpLinkException("TCP stream from " + peer.describe() + " is out of step: stripe " + stripe
                        + " arrived on socket " + index + " of " + nsocks + " where stripe " + recvStripe + " was expected (a "
                        + length + "-byte message, rank " + selfRank + " receiving); this is a bug: please report it with both"
                        + " ranks' logs");
            }
            recvHeaderChecked = true;
        }
    }

    /** A window of at most {@link #maxView} bytes on stripe [off, off+len) of {@code seg}, starting {@code from} bytes in. */
    private ByteBuffer view(MemorySegment seg, long off, long from, long len) {
        long n = Math.min(len - from, maxView);
        return seg.asSlice(off + from, n).asByteBuffer();
    }
}
