package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.zip.CRC32C;
import org.jccl.internal.config.Settings;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.Connection;
import org.jccl.spi.GuardMismatchException;
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
 * Small messages queued back to back on one socket share that buffer (up to {@value #BATCH} of them,
 * {@value #INLINE} bytes and their headers in all): they leave in one {@code write}, and posted
 * receives of small messages back to back take them in one {@code read}, never past the last posted
 * one (the mismatch guard's ring confirmation and the message after it, for instance).
 *
 * <p>With checksums on ({@code JCCL_CHECKSUM=1}, negotiated in the hello) every stripe carries a
 * CRC32C trailer over its payload (see {@link TcpWire}): the sender computes it as the payload
 * leaves, the receiver as it lands, and a mismatch fails the connection with an error naming the
 * peer, so corrupted bytes are never returned as a result. {@link #receiveTap} lets a test corrupt
 * received bytes on a real socket (Aeron's LossGenerator idea) to prove it.
 *
 * <p><b>Threading:</b> {@code send}, {@code recv} and {@code progress} belong to the communicator's
 * operation thread (see {@link Connection}). {@link #close()} may come from any thread; the
 * operation thread then sees an {@code IOException} saying the connection was closed locally.
 */
final class TcpConnection implements Connection {

    /** Stripes up to this size are staged through the per-socket scratch buffers. */
    static final int INLINE = 8 * 1024;
    /** Most small messages one write or read of a scratch buffer carries. */
    static final int BATCH = 16;
    /** Largest ByteBuffer view taken of a caller's segment (a ByteBuffer stops at 2 GiB). */
    static final int MAX_VIEW = 1 << 30;
    /** Bytes one lane moves per direction per {@link #progress()} call, so one busy socket cannot starve the others. */
    private static final long LANE_BUDGET = 8L << 20;

    /**
     * Test hook: sees every range of payload bytes right after it was read from a socket and before
     * any check, and may change them, as a faulty network would. Read once per connection when it is
     * made; null (no cost beyond a null check per read) outside tests.
     */
    interface ReceiveTap {
        void received(TcpConnection connection, ByteBuffer buffer, int from, int to);
    }

    /** The tap connections made from now on use; set by tests only. */
    static volatile ReceiveTap receiveTap;

    private final PeerInfo peer;
    private final int selfRank;
    /** Stripes carry a CRC32C trailer (JCCL_CHECKSUM, as the lower rank of the pair announced it). */
    private final boolean checksum;
    private final ReceiveTap tap = receiveTap;
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

    TcpConnection(int selfRank, PeerInfo peer, String remoteAddress, WireChannel[] sockets, boolean checksum) {
        this.peer = peer;
        this.selfRank = selfRank;
        this.checksum = checksum;
        this.nsocks = sockets.length;
        this.lanes = new Lane[nsocks];
        for (int i = 0; i < nsocks; i++) {
            lanes[i] = new Lane(i, sockets[i]);
        }
        this.description = "TCP " + remoteAddress + " (" + nsocks + (nsocks == 1 ? " socket" : " sockets") + (checksum ? ", CRC32C" : "")
                + (nsocks > 0 && sockets[0].secure() ? ", TLS" : "") + ")";
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
            chans[i] = lanes[i].ch.socket();
        }
        return chans;
    }

    /** Whether stripes carry a CRC32C trailer. */
    boolean checksummed() {
        return checksum;
    }

    /** Number of sockets this connection stripes over. */
    int sockets() {
        return nsocks;
    }

    @Override
    public P2pRequest send(MemorySegment src) {
        return send(src, 0);
    }

    @Override
    public P2pRequest send(MemorySegment src, long guard) {
        P2pRequest r = new P2pRequest(src, true, guard);
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
        return recv(dst, 0);
    }

    @Override
    public P2pRequest recv(MemorySegment dst, long guard) {
        P2pRequest r = new P2pRequest(dst, false, guard);
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
                lane.ch.flush(); // TLS records a previous write could not hand to the socket
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
        if (e instanceof TcpLinkException || e instanceof GuardMismatchException) {
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
        final WireChannel ch;
        final ArrayDeque<P2pRequest> sendQ = new ArrayDeque<>();
        final ArrayDeque<P2pRequest> recvQ = new ArrayDeque<>();

        // ---- send side: the head of sendQ, partially written
        private boolean sendActive;
        private boolean sendInline;
        /** Requests the scratch buffer's write carries (the head and the small messages queued right after it). */
        private int sendBatch;
        private long sendOff;                 // stripe start in the message
        private long sendLen;                 // stripe length
        private long sendViewStart;           // stripe-relative offset where sendView begins
        private ByteBuffer sendView;          // window on the caller's segment, or null
        private final ByteBuffer sendHeader = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES);
        private final ByteBuffer sendScratch = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES + INLINE + TcpWire.TRAILER_BYTES);
        private final CRC32C sendCrc = new CRC32C();
        /** The CRC32C trailer of a direct stripe; limit 0 until the payload is out and the value is known. */
        private final ByteBuffer sendTrailer = ByteBuffer.allocateDirect(TcpWire.TRAILER_BYTES);
        private final MemorySegment sendScratchSeg = MemorySegment.ofBuffer(sendScratch);
        private final ByteBuffer[] gather = new ByteBuffer[2];

        // ---- receive side: the head of recvQ, partially read
        private boolean recvActive;
        private boolean recvInline;
        /** Inline batch: receives it holds, how many completed, and where each one's header starts in the scratch buffer. */
        private int recvBatch;
        private int recvBatchDone;
        private final int[] recvStarts = new int[BATCH + 1];
        private boolean recvHeaderChecked;
        private int recvStripe;
        private long recvOff;
        private long recvLen;
        private long recvViewStart;
        private ByteBuffer recvView;
        private final ByteBuffer recvHeader = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES);
        private final ByteBuffer recvScratch = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES + INLINE + TcpWire.TRAILER_BYTES);
        private final CRC32C recvCrc = new CRC32C();
        private final ByteBuffer recvTrailer = ByteBuffer.allocateDirect(TcpWire.TRAILER_BYTES);
        /** The stripe's trailer has been read and matched (always true without checksums). */
        private boolean recvTrailerChecked;
        private final MemorySegment recvScratchSeg = MemorySegment.ofBuffer(recvScratch);
        private final ByteBuffer[] scatter = new ByteBuffer[2];

        Lane(int index, WireChannel ch) {
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
                    if (sendHeader.hasRemaining() || sendViewStart + sendView.position() < sendLen
                            || (checksum && (sendTrailer.limit() == 0 || sendTrailer.hasRemaining()))) {
                        break;
                    }
                }
                sendActive = false;
                sendQ.pollFirst();
                if (r.position == r.size() && !r.isDone()) {
                    r.complete();
                }
                if (sendInline) {
                    // The small messages that shared the head's write (startSend) left with it.
                    for (int b = 1; b < sendBatch; b++) {
                        P2pRequest q = sendQ.pollFirst();
                        q.position = q.size();
                        q.complete();
                    }
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
                int end = stage(0, stripe, size, r, sendOff, sendLen);
                sendBatch = 1;
                if (stripe == 0 && sendOff == 0) {
                    // Small whole messages queued right behind it on this socket join the write.
                    java.util.Iterator<P2pRequest> it = sendQ.iterator();
                    it.next();
                    while (sendBatch < BATCH && it.hasNext()) {
                        P2pRequest q = it.next();
                        long qs = q.size();
                        int need = TcpWire.HEADER_BYTES + (int) Math.min(qs, Integer.MAX_VALUE) + (checksum ? TcpWire.TRAILER_BYTES : 0);
                        if (qs > INLINE || TcpWire.isSplit(qs, nsocks) || end + need > sendScratch.capacity()) {
                            break;
                        }
                        end = stage(end, 0, qs, q, 0, qs);
                        sendBatch++;
                    }
                }
                sendScratch.limit(end).position(0);
            } else {
                TcpWire.putHeader(sendHeader, stripe, size, checksum, r.guard());
                sendHeader.clear();
                sendCrc.reset();
                sendTrailer.clear().limit(0);
                sendViewStart = 0;
                sendView = view(r.segment(), sendOff, 0, sendLen);
            }
            sendActive = true;
        }

        /**
         * Puts one stripe (header, payload, CRC32C trailer with checksums) into the send scratch buffer at
         * {@code at}; returns where it ends.
         */
        private int stage(int at, int stripe, long size, P2pRequest r, long off, long len) {
            sendScratch.limit(sendScratch.capacity());
            TcpWire.putHeader(sendScratch, at, stripe, size, checksum, r.guard());
            int payload = at + TcpWire.HEADER_BYTES;
            MemorySegment.copy(r.segment(), off, sendScratchSeg, payload, len);
            int end = payload + (int) len;
            if (checksum) {
                sendCrc.reset();
                sendScratch.limit(end).position(payload);
                sendCrc.update(sendScratch);
                sendScratch.limit(end + TcpWire.TRAILER_BYTES);
                sendScratch.putInt(end, (int) sendCrc.getValue());
                end += TcpWire.TRAILER_BYTES;
            }
            return end;
        }

        /** Gathering write of header and payload while the header is pending, then payload only. */
        private long writeDirect(P2pRequest r) throws IOException {
            long moved = 0;
            while (moved < LANE_BUDGET) {
                if (!sendView.hasRemaining()) {
                    long next = sendViewStart + sendView.position();
                    if (next >= sendLen) {
                        if (!sendHeader.hasRemaining()) {
                            return moved + writeTrailer();
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
                if (checksum) {
                    update(sendCrc, sendView, (int) before, sendView.position());
                }
                r.position += sendView.position() - before;
            }
            return moved;
        }

        /** Once a direct stripe's payload is out: writes its CRC32C trailer (no-op without checksums); returns bytes written. */
        private long writeTrailer() throws IOException {
            if (!checksum) {
                return 0;
            }
            if (sendTrailer.limit() == 0) {
                sendTrailer.clear();
                sendTrailer.putInt(0, (int) sendCrc.getValue());
            }
            return sendTrailer.hasRemaining() ? ch.write(sendTrailer) : 0;
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
                    int before = recvScratch.position();
                    int n = ch.read(recvScratch);
                    if (n < 0) {
                        throw peerClosed(this, r, Math.max(0, recvScratch.position() - recvStarts[recvBatchDone] - TcpWire.HEADER_BYTES),
                                recvLen);
                    }
                    moved += n;
                    int pos = recvScratch.position();
                    if (tap != null && n > 0) {
                        for (int b = recvBatchDone; b < recvBatch; b++) {
                            int from = Math.max(before, recvStarts[b] + TcpWire.HEADER_BYTES);
                            int to = Math.min(pos, recvStarts[b] + TcpWire.HEADER_BYTES + payloadOf(b));
                            if (from < to) {
                                tap.received(TcpConnection.this, recvScratch, from, to);
                            }
                        }
                    }
                    // Every message of the batch that is whole now completes, in order; each header is checked
                    // (guard first) as soon as it is in, before any byte after it is used.
                    while (true) {
                        P2pRequest q = recvQ.peekFirst();
                        int start = recvStarts[recvBatchDone];
                        if (!recvHeaderChecked) {
                            if (pos - start < TcpWire.HEADER_BYTES) {
                                break;
                            }
                            checkHeader(recvScratch, start, q);
                        }
                        int len = payloadOf(recvBatchDone);
                        if (pos < recvStarts[recvBatchDone + 1]) {
                            break;
                        }
                        int payload = start + TcpWire.HEADER_BYTES;
                        if (checksum) {
                            int end = payload + len;
                            recvCrc.reset();
                            recvScratch.limit(end).position(payload);
                            recvCrc.update(recvScratch);
                            recvScratch.limit(recvStarts[recvBatch]).position(pos);
                            verify(q, recvScratch.getInt(end));
                        }
                        MemorySegment.copy(recvScratchSeg, payload, q.segment(), recvBatchDone == 0 ? recvOff : 0, len);
                        q.position += len;
                        recvHeaderChecked = false;
                        if (++recvBatchDone == recvBatch) {
                            break; // the head: completed below
                        }
                        recvQ.pollFirst();
                        q.complete();
                    }
                    if (recvBatchDone < recvBatch) {
                        break;
                    }
                    r = recvQ.peekFirst();
                } else {
                    long n = readDirect(r);
                    moved += n;
                    if (!recvHeaderChecked || recvViewStart + recvView.position() < recvLen || !recvTrailerChecked) {
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
            recvTrailerChecked = !checksum;
            if (recvInline) {
                // Read exactly this stripe (header + payload + trailer), and the small whole messages posted right
                // after it on this socket: never past the expected end of the last posted message.
                int trailer = checksum ? TcpWire.TRAILER_BYTES : 0;
                recvBatch = 1;
                recvBatchDone = 0;
                recvStarts[0] = 0;
                recvStarts[1] = TcpWire.HEADER_BYTES + (int) recvLen + trailer;
                if (recvStripe == 0 && recvOff == 0) {
                    java.util.Iterator<P2pRequest> it = recvQ.iterator();
                    it.next();
                    while (recvBatch < BATCH && it.hasNext()) {
                        long qs = it.next().size();
                        int end = recvStarts[recvBatch];
                        if (qs > INLINE || TcpWire.isSplit(qs, nsocks) || end + TcpWire.HEADER_BYTES + qs + trailer > recvScratch.capacity()) {
                            break;
                        }
                        recvStarts[++recvBatch] = end + TcpWire.HEADER_BYTES + (int) qs + trailer;
                    }
                }
                recvScratch.limit(recvStarts[recvBatch]).position(0);
            } else {
                recvHeader.clear();
                recvCrc.reset();
                recvTrailer.clear();
                recvViewStart = 0;
                recvView = view(r.segment(), recvOff, 0, recvLen);
            }
            recvActive = true;
        }

        /** Payload bytes of message {@code b} of the inline receive batch. */
        private int payloadOf(int b) {
            return recvStarts[b + 1] - recvStarts[b] - TcpWire.HEADER_BYTES - (checksum ? TcpWire.TRAILER_BYTES : 0);
        }

        /** Scattering read into header and the caller's segment while the header is pending, then payload only. */
        private long readDirect(P2pRequest r) throws IOException {
            long moved = 0;
            while (moved < LANE_BUDGET) {
                if (!recvHeader.hasRemaining() && !recvHeaderChecked) {
                    checkHeader(recvHeader, 0, r);
                }
                if (!recvView.hasRemaining()) {
                    long next = recvViewStart + recvView.position();
                    if (next >= recvLen) {
                        if (!recvHeader.hasRemaining()) {
                            return moved + readTrailer(r);
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
                int after = recvView.position();
                if (after > before) {
                    if (tap != null) {
                        tap.received(TcpConnection.this, recvView, (int) before, after);
                    }
                    if (checksum) {
                        update(recvCrc, recvView, (int) before, after);
                    }
                }
                r.position += after - before;
            }
            return moved;
        }

        /** Once a direct stripe's payload is in: reads and checks its CRC32C trailer; returns bytes read. */
        private long readTrailer(P2pRequest r) throws IOException {
            if (recvTrailerChecked) {
                return 0;
            }
            int n = ch.read(recvTrailer);
            if (n < 0) {
                throw peerClosed(this, r, recvLen, recvLen);
            }
            if (!recvTrailer.hasRemaining()) {
                verify(r, recvTrailer.getInt(0));
                recvTrailerChecked = true;
            }
            return n;
        }

        /** Compares the CRC32C computed over the received payload with the one the peer sent. */
        private void verify(P2pRequest r, int sent) throws TcpLinkException {
            int got = (int) recvCrc.getValue();
            if (got != sent) {
                throw new TcpLinkException("TCP data from " + peer.describe() + " failed its CRC32C check (" + Settings.CHECKSUM.name()
                        + "=1): stripe " + recvStripe + " of a " + r.size() + "-byte message (bytes " + recvOff + ".." + (recvOff + recvLen)
                        + "), socket " + index + " of " + nsocks + ", rank " + selfRank + " receiving; the peer sent CRC 0x"
                        + Integer.toHexString(sent) + ", the bytes received give 0x" + Integer.toHexString(got) + ". The data was"
                        + " corrupted between the two processes (NIC, cable, switch, driver or memory); the operation fails instead"
                        + " of returning it");
            }
        }

        /** Checks magic, guard, message length and stripe index of a complete header at positions {@code at..at+23} of {@code b}. */
        private void checkHeader(ByteBuffer b, int at, P2pRequest r) throws IOException {
            int magic = b.getInt(at);
            int stripe = b.getInt(at + 4);
            long length = b.getLong(at + 8);
            long guard = b.getLong(at + TcpWire.GUARD_OFFSET);
            int expect = checksum ? TcpWire.MAGIC_CHECKSUM : TcpWire.MAGIC;
            if (magic != expect) {
                boolean old = magic == TcpWire.MAGIC_V1 || magic == TcpWire.MAGIC_CHECKSUM_V1;
                throw new TcpLinkException("TCP stream from " + peer.describe() + " is corrupt: stripe header magic 0x"
                        + Integer.toHexString(magic) + " where 0x" + Integer.toHexString(expect) + " was expected (socket "
                        + index + " of " + nsocks + ", rank " + selfRank + " receiving); "
                        + (old ? "the peer runs an older jccl (stripe header version 1): every rank of a job must run the same jccl"
                        : "mixed jccl versions in one job, or a bug: please report it with both ranks' logs") + transitHint());
            }
            if (!GuardMismatchException.matches(r.guard(), guard)) {
                // Before the length: calls that differ are named as such, even where the sizes happen to agree.
                throw new GuardMismatchException(peer.rank(), r.guard(), guard);
            }
            if (length != r.size()) {
                throw new TcpLinkException(peer.describe() + " sent " + length + " bytes where rank " + selfRank + " expected "
                        + r.size() + ": ranks called collectives with different counts/types (or send/recv sizes differ)" + transitHint());
            }
            if (stripe != recvStripe) {
                throw new TcpLinkException("TCP stream from " + peer.describe() + " is out of step: stripe " + stripe
                        + " arrived on socket " + index + " of " + nsocks + " where stripe " + recvStripe + " was expected (a "
                        + length + "-byte message, rank " + selfRank + " receiving); this is a bug: please report it with both"
                        + " ranks' logs" + transitHint());
            }
            recvHeaderChecked = true;
        }
    }

    /** With checksums on, a header that does not match may also have been corrupted in transit: say so. */
    private String transitHint() {
        return checksum ? " (or the stripe header was corrupted in transit: with " + Settings.CHECKSUM.name() + "=1 every header"
                + " field is checked exactly)" : "";
    }

    /** Adds bytes [from, to) of {@code b} to {@code crc}, leaving the buffer's position and limit as they were. */
    private static void update(CRC32C crc, ByteBuffer b, int from, int to) {
        int pos = b.position();
        int lim = b.limit();
        b.limit(to).position(from);
        crc.update(b);
        b.limit(lim).position(pos);
    }

    /** A window of at most {@link #maxView} bytes on stripe [off, off+len) of {@code seg}, starting {@code from} bytes in. */
    private ByteBuffer view(MemorySegment seg, long off, long from, long len) {
        long n = Math.min(len - from, maxView);
        return seg.asSlice(off + from, n).asByteBuffer();
    }
}
