package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.SelectableChannel;
import java.util.concurrent.atomic.AtomicInteger;
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
 * Offloaded ({@code JCCL_SOCKET_OFFLOAD}), the lanes belong to {@link TcpIoGroup} threads instead,
 * one per stream group: {@code send}/{@code recv} post to them, {@code progress} only reports
 * completions and failures, and the operation thread waits through {@code TransportContext.wakeup()}
 * (no channels to select on). A message split over sockets of several groups completes when its
 * last stripe does ({@link #stripeDone}).
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
    /** Every socket of the connection; socket k has send lane k and receive lane k. */
    private final WireChannel[] sockets;
    /** Split ({@link TcpWire#FLAG_SPLIT}): sockets n..2n-1 carry the higher rank's messages of {@link TcpWire#OWN_DIRECTION_BYTES} and more. */
    private final boolean split;
    /** This rank is the lower of the pair (its messages all go on sockets 0..n-1). */
    private final boolean lower;
    /** Lanes: every socket (2n when split). */
    private final int lanes;
    private final TcpSendLane[] senders;
    private final TcpRecvLane[] receivers;
    private final TcpErrors errors;
    private final int nsocks;
    private long sendSeq;
    private long recvSeq;
    /** First failure; once set, every later call reports it. Written by the operation thread, or by a stream group thread when offloaded. */
    private volatile IOException failure;
    /** The stream groups' threads when offloaded, else null (the operation thread drives every lane). */
    private final TcpIoGroup[] groups;
    /** Wakes the operation thread when a request completes (offloaded only). */
    private final Runnable waker;
    /** Requests completed by the stream groups; {@link #progress()} reports the difference since its last call. */
    private final AtomicInteger events = new AtomicInteger();
    /** Offloaded: progress() has thrown the failure to the operation thread (operation thread only). */
    private boolean failureReported;
    /** Per stream group: its pending requests were failed after the connection failed (operation thread only). */
    private final boolean[] groupsFailed;
    private int seenEvents;
    private volatile boolean closed;
    /** Largest view of a caller's segment; {@link #MAX_VIEW} except in tests that exercise the windowing with small messages. */
    int maxView = MAX_VIEW;

    TcpConnection(int selfRank, PeerInfo peer, String remoteAddress, WireChannel[] sockets, boolean checksum) {
        this(selfRank, peer, remoteAddress, sockets, checksum, 0, null, false);
    }

    /**
     * @param ioThreads stream group threads (0: the operation thread drives every socket)
     * @param waker wakes the operation thread (offloaded only)
     * @param split each direction has half of {@code sockets} ({@link TcpWire#FLAG_SPLIT}): the first half carries
     *        the lower rank's messages
     */
    TcpConnection(int selfRank, PeerInfo peer, String remoteAddress, WireChannel[] sockets, boolean checksum, int ioThreads,
            Runnable waker, boolean split) {
        this.peer = peer;
        this.selfRank = selfRank;
        this.checksum = checksum;
        this.split = split;
        this.nsocks = split ? sockets.length / 2 : sockets.length;
        this.lanes = sockets.length;
        this.lower = selfRank < peer.rank();
        this.sockets = sockets.clone();
        this.errors = new TcpErrors(peer, selfRank, nsocks, checksum);
        ReceiveTap tap = receiveTap;
        this.senders = new TcpSendLane[lanes];
        this.receivers = new TcpRecvLane[lanes];
        for (int k = 0; k < lanes; k++) {
            // The lane's index within its set of n sockets is its stripe number.
            senders[k] = new TcpSendLane(this, k % nsocks, sockets[k], nsocks, checksum);
            receivers[k] = new TcpRecvLane(this, errors, k % nsocks, sockets[k], nsocks, peer.rank(), checksum, tap);
        }
        int threads = Math.min(ioThreads, nsocks);
        this.waker = waker == null ? () -> { } : waker;
        this.groups = threads > 0 ? new TcpIoGroup[threads] : null;
        this.groupsFailed = new boolean[Math.max(0, threads)];
        this.description = "TCP " + remoteAddress + " (" + (split ? nsocks + " + " + nsocks + " sockets" : nsocks + (nsocks == 1 ? " socket" : " sockets"))
                + (checksum ? ", CRC32C" : "")
                + (nsocks > 0 && sockets[0].secure() ? ", TLS" : "")
                + (threads > 0 ? ", " + threads + (threads == 1 ? " stream thread" : " stream threads") : "") + ")";
        if (groups != null) {
            startGroups(threads);
        }
    }

    /** Starts one {@link TcpIoGroup} per thread; socket i goes to group i mod threads. */
    private void startGroups(int threads) {
        try {
            for (int g = 0; g < threads; g++) {
                // Socket k (of either set) belongs to group (k mod n) mod threads.
                int count = 0;
                for (int k = 0; k < lanes; k++) {
                    count += (k % nsocks) % threads == g ? 1 : 0;
                }
                int[] mine = new int[count];
                for (int k = 0, j = 0; k < lanes; k++) {
                    if ((k % nsocks) % threads == g) {
                        mine[j++] = k;
                    }
                }
                groups[g] = new TcpIoGroup(this, g, mine, senders, receivers, sockets, sockets);
            }
        } catch (IOException e) {
            for (TcpIoGroup group : groups) {
                if (group != null) {
                    group.wake();
                }
            }
            failure = new IOException("rank " + selfRank + " cannot start the TCP stream threads for " + peer.describe() + ": " + e, e);
            failureReported = true; // no group runs: requests fail at once
            closeSockets();
            return;
        }
        for (int g = 0; g < threads; g++) {
            groups[g].start("jccl-tcp-io-r" + selfRank + "-p" + peer.rank() + "-" + g);
        }
    }

    /** Whether each direction has sockets of its own ({@link TcpWire#FLAG_SPLIT}). */
    boolean split() {
        return split;
    }

    /** Socket {@code k} of the connection (tests). */
    WireChannel socket(int k) {
        return sockets[k];
    }

    /** First socket of the set that carries this rank's messages of {@code size} bytes. */
    private int sendBase(long size) {
        return split && !lower && size >= TcpWire.OWN_DIRECTION_BYTES ? nsocks : 0;
    }

    /** First socket of the set that carries the peer's messages of {@code size} bytes. */
    private int recvBase(long size) {
        return split && lower && size >= TcpWire.OWN_DIRECTION_BYTES ? nsocks : 0;
    }

    /** Whether stream group threads drive the sockets. */
    boolean offloaded() {
        return groups != null;
    }

    @Override
    public int peer() {
        return peer.rank();
    }

    @Override
    public String describe() {
        return description;
    }

    /**
     * The sockets: the runtime blocks in a selector over them while it has nothing to do. None when
     * offloaded: the stream threads select on them and wake the runtime as requests complete.
     */
    @Override
    public SelectableChannel[] channels() {
        if (groups != null) {
            return new SelectableChannel[0];
        }
        // The receiving sockets: what wakes a waiting rank is its peer's bytes.
        // The sockets the peer's messages arrive on: all of them, except the higher rank's own large-message set.
        int n = split && !lower ? nsocks : lanes;
        SelectableChannel[] chans = new SelectableChannel[n];
        for (int k = 0; k < n; k++) {
            chans[k] = sockets[k].socket();
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
        int base = sendBase(src.byteSize());
        if (TcpWire.isSplit(src.byteSize(), nsocks)) {
            r.transportState = new AtomicInteger(nsocks);
            for (int i = 0; i < nsocks; i++) {
                queue(base + i, r, true);
            }
        } else {
            queue(base + TcpWire.socketOf(seq, nsocks), r, true);
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
        int base = recvBase(dst.byteSize());
        if (TcpWire.isSplit(dst.byteSize(), nsocks)) {
            r.transportState = new AtomicInteger(nsocks);
            for (int i = 0; i < nsocks; i++) {
                queue(base + i, r, false);
            }
        } else {
            queue(base + TcpWire.socketOf(seq, nsocks), r, false);
        }
        return r;
    }

    /** Puts a request on lane {@code i}: directly, or through the lane's stream group when offloaded. */
    private void queue(int i, P2pRequest r, boolean send) {
        if (groups != null) {
            groups[i % groups.length].post(i, r, send);
        } else if (send) {
            senders[i].sendQ.addLast(r);
        } else {
            receivers[i].recvQ.addLast(r);
        }
    }

    /**
     * A lane finished its stripe of {@code r}: completes it when that was the last one (a split
     * message counts its stripes down; a whole one has only this one).
     */
    void stripeDone(P2pRequest r) {
        if (r.transportState instanceof AtomicInteger left) {
            if (left.decrementAndGet() > 0) {
                return;
            }
            // Lanes on several threads added their stripes to position without synchronisation: set the total.
            r.position = r.size();
        }
        if (!r.isDone()) {
            completed(r);
        }
    }

    /** Completes {@code r}; offloaded, counts it and wakes the operation thread. */
    void completed(P2pRequest r) {
        r.complete();
        if (groups != null) {
            events.incrementAndGet();
            waker.run();
        }
    }

    /** Fails a request posted on a broken or closed connection at once; true when it may proceed. */
    private boolean admit(P2pRequest r) {
        IOException f = failure;
        if (f != null && (groups == null || failureReported)) {
            // Offloaded, a failure the operation thread has not yet seen thrown by progress() must reach it that
            // way first (the runtime names the peer or the mismatch from it): the request is queued and failed then.
            r.fail(f);
            return false;
        }
        if (closed) {
            r.fail(errors.closedLocally(null));
            return false;
        }
        if (groups != null && !r.segment().isAccessibleBy(groups[0].thread())) {
            // The runtime never passes such memory (Staging refuses it); a direct SPI caller might.
            r.fail(new IllegalArgumentException("rank " + selfRank + ": a " + r.size() + "-byte " + (r.isSend() ? "send" : "receive")
                    + " to " + peer.describe() + " is memory of a confined arena, but TCP stream threads (JCCL_SOCKET_OFFLOAD)"
                    + " move the bytes: allocate it with Arena.ofShared(), Arena.ofAuto() or Arena.global()"));
            return false;
        }
        return true;
    }

    @Override
    public int progress() throws IOException {
        IOException f = failure;
        if (groups != null) {
            if (f == null && closed) {
                f = errors.closedLocally(null);
            }
            if (f != null) {
                failureReported = true;
                failGroupsPending(f);
                throw f;
            }
            int e = events.get();
            int d = e - seenEvents;
            seenEvents = e;
            return d;
        }
        if (f != null) {
            throw f;
        }
        long moved = 0;
        int current = -1;
        try {
            for (int k = 0; k < lanes; k++) {
                current = k;
                sockets[k].flush(); // TLS records a previous write could not hand to the socket
                moved += senders[k].progress();
                moved += receivers[k].progress();
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
            for (int k = 0; k < lanes; k++) {
                senders[k].failPending(e);
                receivers[k].failPending(e);
            }
            closeSockets();
        }
        return failure;
    }

    /**
     * A stream group's first failure fails the connection (once): the sockets close so that the
     * peer and the other groups learn at once, and the operation thread is woken to see it.
     * Returns the failure every group fails its requests with.
     */
    synchronized IOException failFromGroup(IOException e, int socket) {
        if (failure == null) {
            failure = errors.explain(e, socket, closed);
            closeSockets();
            for (TcpIoGroup g : groups) {
                g.wake();
            }
        }
        waker.run();
        return failure;
    }

    /**
     * Offloaded, on the operation thread once the connection failed or closed and {@code f} is about to be
     * thrown: fails what the stream groups held, each once its thread has ended (a thread that does not
     * end within a second keeps its requests; its sockets are closed, so nothing more arrives there).
     */
    private void failGroupsPending(IOException f) {
        for (int g = 0; g < groups.length; g++) {
            if (groups[g] != null && !groupsFailed[g]) {
                groupsFailed[g] = groups[g].failPendingAfterEnd(f, 1000);
            }
        }
    }

    /** Whether the stream groups should stop: the connection failed or was closed. */
    boolean stopping() {
        return closed || failure != null;
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        closeSockets();
        if (groups != null) {
            for (TcpIoGroup g : groups) {
                if (g != null) {
                    g.wake();
                }
            }
            for (TcpIoGroup g : groups) {
                if (g != null) {
                    g.join(1000);
                }
            }
        }
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
