package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.SelectableChannel;
import java.util.zip.CRC32C;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;

/**
 * A {@link Connection} over one or more non-blocking TCP sockets to one peer. Messages are cut into
 * stripes as {@link TcpWire} describes; each socket carries its stripes in message
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
 * <p><b>Roles:</b> this class is the {@link Connection}: it numbers the posted sends and receives,
 * queues each on the socket(s) the striping rule names, drives every socket in {@link #progress()},
 * and owns the first failure and closing. Each socket's two directions are separate state
 * machines with nothing in common but the socket: {@link TcpSendLane} writes stripes, {@link
 * TcpRecvLane} reads and checks them; {@link TcpErrors} words every failure.
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
    static final long LANE_BUDGET = 8L << 20;

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
    private final String description;
    private final WireChannel[] sockets;
    private final TcpSendLane[] senders;
    private final TcpRecvLane[] receivers;
    private final TcpErrors errors;
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
        this.sockets = sockets.clone();
        this.errors = new TcpErrors(peer, selfRank, nsocks, checksum);
        ReceiveTap tap = receiveTap;
        this.senders = new TcpSendLane[nsocks];
        this.receivers = new TcpRecvLane[nsocks];
        for (int i = 0; i < nsocks; i++) {
            senders[i] = new TcpSendLane(this, i, sockets[i], nsocks, checksum);
            receivers[i] = new TcpRecvLane(this, errors, i, sockets[i], nsocks, peer.rank(), checksum, tap);
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
    public SelectableChannel[] channels() {
        SelectableChannel[] chans = new SelectableChannel[nsocks];
        for (int i = 0; i < nsocks; i++) {
            chans[i] = sockets[i].socket();
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
            for (TcpSendLane lane : senders) {
                lane.sendQ.addLast(r);
            }
        } else {
            senders[TcpWire.socketOf(seq, nsocks)].sendQ.addLast(r);
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
            for (TcpRecvLane lane : receivers) {
                lane.recvQ.addLast(r);
            }
        } else {
            receivers[TcpWire.socketOf(seq, nsocks)].recvQ.addLast(r);
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
            r.fail(errors.closedLocally(null));
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
        int current = -1;
        try {
            for (int i = 0; i < nsocks; i++) {
                current = i;
                sockets[i].flush(); // TLS records a previous write could not hand to the socket
                moved += senders[i].progress();
                moved += receivers[i].progress();
            }
        } catch (IOException e) {
            throw fail(errors.explain(e, current, closed));
        }
        return (int) Math.min(moved, Integer.MAX_VALUE);
    }

    /** Records the first failure, fails every pending request, and closes the sockets so the peer learns at once. */
    private IOException fail(IOException e) {
        if (failure == null) {
            failure = e;
            for (int i = 0; i < nsocks; i++) {
                senders[i].failPending(e);
                receivers[i].failPending(e);
            }
            closeSockets();
        }
        return failure;
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
        for (WireChannel ch : sockets) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // Closing a socket that already failed: nothing left to release.
            }
        }
    }

    @Override
    public String toString() {
        return "rank " + selfRank + " -> " + peer.describe() + " via " + description;
    }

    /** Adds bytes [from, to) of {@code b} to {@code crc}, leaving the buffer's position and limit as they were. */
    static void update(CRC32C crc, ByteBuffer b, int from, int to) {
        int pos = b.position();
        int lim = b.limit();
        b.limit(to).position(from);
        crc.update(b);
        b.limit(lim).position(pos);
    }

    /** A window of at most {@link #maxView} bytes on stripe [off, off+len) of {@code seg}, starting {@code from} bytes in. */
    ByteBuffer view(MemorySegment seg, long off, long from, long len) {
        long n = Math.min(len - from, maxView);
        return seg.asSlice(off + from, n).asByteBuffer();
    }
}
