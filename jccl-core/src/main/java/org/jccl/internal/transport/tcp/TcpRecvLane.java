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
import org.jccl.spi.GuardMismatchException;
import org.jccl.spi.P2pRequest;

/**
 * The receiving half of one socket of a {@link TcpConnection}: its queue of posted receives and
 * the state of the stripe being read, with the checks of every header (magic, guard, length,
 * stripe index) and, with checksums on, of every trailer. Only the thread running the
 * communicator's operations touches it.
 *
 * <p>It stays one class: a stripe arrives either inline (a batch of small messages read into
 * {@link #recvScratch} in one {@code read}, each completed as soon as it is whole) or direct (a
 * scattering read into {@link #recvHeader} and a window on the caller's segment, then the
 * trailer), and both paths share the header check, the running CRC and the stripe's extent
 * ({@link #recvStripe}, {@link #recvOff}, {@link #recvLen}), which {@link #progress()} consults on
 * every pass; cutting the paths apart would put that state behind another object on every read.
 */
final class TcpRecvLane {
    private final TcpConnection connection;
    private final TcpErrors errors;
    private final int index;
    private final WireChannel ch;
    private final int nsocks;
    private final int peerRank;
    private final boolean checksum;
    /** The connection's test tap, or null. */
    private final TcpConnection.ReceiveTap tap;
    final ArrayDeque<P2pRequest> recvQ = new ArrayDeque<>();

    // ---- the head of recvQ, partially read
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

    TcpRecvLane(TcpConnection connection, TcpErrors errors, int index, WireChannel ch, int nsocks, int peerRank, boolean checksum,
            TcpConnection.ReceiveTap tap) {
        this.connection = connection;
        this.errors = errors;
        this.index = index;
        this.ch = ch;
        this.nsocks = nsocks;
        this.peerRank = peerRank;
        this.checksum = checksum;
        this.tap = tap;
    }

    /** Fails every posted receive with {@code e} and empties the queue. */
    void failPending(IOException e) {
        for (P2pRequest r : recvQ) {
            r.fail(e);
        }
        recvQ.clear();
    }

    /** Reads stripes for the posted receives until the socket is drained or the budget is spent. */
    long progress() throws IOException {
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
                    throw errors.peerClosed(index, r, Math.max(0, recvScratch.position() - recvStarts[recvBatchDone] - TcpWire.HEADER_BYTES),
                            recvLen);
                }
                moved += n;
                int pos = recvScratch.position();
                if (tap != null && n > 0) {
                    for (int b = recvBatchDone; b < recvBatch; b++) {
                        int from = Math.max(before, recvStarts[b] + TcpWire.HEADER_BYTES);
                        int to = Math.min(pos, recvStarts[b] + TcpWire.HEADER_BYTES + payloadOf(b));
                        if (from < to) {
                            tap.received(connection, recvScratch, from, to);
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
                    connection.completed(q);
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
            connection.stripeDone(r);
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
            recvView = connection.view(r.segment(), recvOff, 0, recvLen);
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
                    recvView = connection.view(r.segment(), recvOff, next, recvLen);
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
                throw errors.peerClosed(index, r, recvViewStart + recvView.position(), recvLen);
            }
            if (n == 0) {
                return moved;
            }
            moved += n;
            int after = recvView.position();
            if (after > before) {
                if (tap != null) {
                    tap.received(connection, recvView, (int) before, after);
                }
                if (checksum) {
                    TcpConnection.update(recvCrc, recvView, (int) before, after);
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
            throw errors.peerClosed(index, r, recvLen, recvLen);
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
            throw errors.crcMismatch(index, recvStripe, r, recvOff, recvLen, sent, got);
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
            throw errors.badMagic(index, magic, expect);
        }
        if (!GuardMismatchException.matches(r.guard(), guard)) {
            // Before the length: calls that differ are named as such, even where the sizes happen to agree.
            throw new GuardMismatchException(peerRank, r.guard(), guard);
        }
        if (length != r.size()) {
            throw errors.sizeMismatch(length, r);
        }
        if (stripe != recvStripe) {
            throw errors.outOfStep(index, stripe, recvStripe, length);
        }
        recvHeaderChecked = true;
    }
}
