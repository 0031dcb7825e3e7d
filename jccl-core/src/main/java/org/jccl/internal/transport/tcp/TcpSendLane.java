package org.jccl.internal.transport.tcp;

import static org.jccl.internal.transport.tcp.TcpConnection.BATCH;
import static org.jccl.internal.transport.tcp.TcpConnection.INLINE;
import static org.jccl.internal.transport.tcp.TcpConnection.LANE_BUDGET;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.zip.CRC32C;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.P2pRequest;

/**
 * The sending half of one socket of a {@link TcpConnection}: its queue of posted sends and the
 * state of the stripe being written. Only the thread running the communicator's operations
 * touches it.
 *
 * <p>It stays one class: a stripe goes either inline (header, payload and trailer staged in
 * {@link #sendScratch}, with the small messages queued behind it) or direct (a gathering write of
 * {@link #sendHeader} and a window on the caller's segment, then the trailer), and {@link
 * #progress()} picks the path by {@link #sendInline} and learns where the stripe stands from the
 * same buffers' positions on every pass; cutting the two paths apart would put those buffers and
 * the running CRC behind another object on every write.
 */
final class TcpSendLane {
    private final TcpConnection connection;
    private final int index;
    private final WireChannel ch;
    private final int nsocks;
    private final boolean checksum;
    final ArrayDeque<P2pRequest> sendQ = new ArrayDeque<>();

    // ---- the head of sendQ, partially written
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

    TcpSendLane(TcpConnection connection, int index, WireChannel ch, int nsocks, boolean checksum) {
        this.connection = connection;
        this.index = index;
        this.ch = ch;
        this.nsocks = nsocks;
        this.checksum = checksum;
    }

    /** Fails every queued send with {@code e} and empties the queue. */
    void failPending(IOException e) {
        for (P2pRequest r : sendQ) {
            r.fail(e);
        }
        sendQ.clear();
    }

    /** Writes stripes until the socket is full, the queue is empty or the budget is spent; returns bytes written. */
    long progress() throws IOException {
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
            connection.stripeDone(r);
            if (sendInline) {
                // The small messages that shared the head's write (startSend) left with it.
                for (int b = 1; b < sendBatch; b++) {
                    P2pRequest q = sendQ.pollFirst();
                    q.position = q.size();
                    connection.completed(q);
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
            sendView = connection.view(r.segment(), sendOff, 0, sendLen);
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
                    sendView = connection.view(r.segment(), sendOff, next, sendLen);
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
                TcpConnection.update(sendCrc, sendView, (int) before, sendView.position());
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
}
