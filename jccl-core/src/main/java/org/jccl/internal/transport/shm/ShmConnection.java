package org.jccl.internal.transport.shm;

import static org.jccl.internal.transport.shm.ShmRingDescriptor.HEAD_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.INT;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.LONG;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.META_CHUNK_BYTES;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.META_MESSAGE_BYTES;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.RECEIVER_CLOSED;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.RECEIVER_STATE_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.SENDER_CLOSED;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.SENDER_STATE_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.TAIL_OFFSET;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;

/**
 * A link to one same-host peer through two single-producer single-consumer rings in shared memory
 * ({@link ShmRingDescriptor}): this rank is the only producer of {@code out} and the only consumer
 * of {@code in}. A send is copied into free slots chunk by chunk and each chunk published with a
 * release store of the tail; the peer copies chunks out and frees them with a release store of the
 * head. Up to {@code slotCount} chunks are in flight, so the peer's copy-out overlaps this rank's
 * copy-in (two copies per byte, pipelined).
 *
 * <p><b>Threading contract:</b> single-threaded; every method but {@link #close()} runs on the
 * owning communicator's operation thread (the ring is correct for one producer thread and one
 * consumer thread only). The peer's liveness is checked while waiting with nothing to do.
 */
final class ShmConnection implements Connection {
    /** How often a waiting connection asks the OS whether the peer's process still exists. */
    private static final long LIVENESS_PERIOD_NANOS = 50_000_000L;

    private final int selfRank;
    private final PeerInfo peer;
    private final MemorySegment in;
    private final MemorySegment out;
    private final int inSlots;
    private final long inSlotBytes;
    private final long inData;
    private final int outSlots;
    private final long outSlotBytes;
    private final long outData;
    private final boolean checkPid;
    private final ArrayDeque<P2pRequest> sends = new ArrayDeque<>();
    private final ArrayDeque<P2pRequest> recvs = new ArrayDeque<>();

    /** Producer side: chunks published into {@code out}, and the last head seen (a full ring re-reads it). */
    private long tail;
    private long cachedHead;
    /** Consumer side: chunks consumed from {@code in}, and the last tail seen (an empty ring re-reads it). */
    private long head;
    private long cachedTail;
    private long nextLivenessCheck;
    private volatile boolean closed;

    ShmConnection(int selfRank, PeerInfo peer, MemorySegment in, MemorySegment out, boolean checkPid) {
        this.selfRank = selfRank;
        this.peer = peer;
        this.in = in;
        this.out = out;
        this.inSlots = ShmRingDescriptor.slotCount(in);
        this.inSlotBytes = ShmRingDescriptor.slotBytes(in);
        this.inData = ShmRingDescriptor.dataOffset(inSlots);
        this.outSlots = ShmRingDescriptor.slotCount(out);
        this.outSlotBytes = ShmRingDescriptor.slotBytes(out);
        this.outData = ShmRingDescriptor.dataOffset(outSlots);
        this.checkPid = checkPid;
        // Fresh rings of a fresh communicator: both counters are zero.
        this.tail = (long) LONG.getAcquire(out, TAIL_OFFSET);
        this.cachedHead = (long) LONG.getAcquire(out, HEAD_OFFSET);
        this.head = (long) LONG.getAcquire(in, HEAD_OFFSET);
        this.cachedTail = head;
    }

    @Override
    public int peer() {
        return peer.rank();
    }

    @Override
    public String describe() {
        return "SHM (" + outSlots + " x " + outSlotBytes + " B ring out, " + inSlots + " x " + inSlotBytes + " B ring in)";
    }

    @Override
    public P2pRequest send(MemorySegment src) {
        P2pRequest r = new P2pRequest(src, true);
        sends.add(r);
        return r;
    }

    @Override
    public P2pRequest recv(MemorySegment dst) {
        P2pRequest r = new P2pRequest(dst, false);
        recvs.add(r);
        return r;
    }

    @Override
    public int progress() throws IOException {
        if (closed) {
            if (sends.isEmpty() && recvs.isEmpty()) {
                return 0;
            }
            throw closedLocally(null);
        }
        int work;
        try {
            work = pushSends() + pullRecvs();
            if (work == 0 && !(sends.isEmpty() && recvs.isEmpty())) {
                checkPeer();
            }
        } catch (IllegalStateException e) {
            // The mapping was unmapped under us: abort() closed the endpoint from another thread.
            throw closedLocally(e);
        }
        return work;
    }

    /** Copies pending sends into free slots; returns the chunks published. */
    private int pushSends() {
        int work = 0;
        while (!sends.isEmpty()) {
            P2pRequest r = sends.peek();
            long size = r.size();
            // A message of 0 bytes still takes one (empty) chunk, so that matching stays in step.
            while (r.position < size || (size == 0 && r.transportState == null)) {
                if (tail - cachedHead >= outSlots) {
                    cachedHead = (long) LONG.getAcquire(out, HEAD_OFFSET);
                    if (tail - cachedHead >= outSlots) {
                        return work;
                    }
                }
                int slot = (int) (tail % outSlots);
                long n = Math.min(outSlotBytes, size - r.position);
                MemorySegment.copy(r.segment(), r.position, out, outData + slot * outSlotBytes, n);
                long meta = ShmRingDescriptor.slotMetaOffset(slot);
                out.set(ValueLayout.JAVA_LONG, meta + META_MESSAGE_BYTES, size);
                out.set(ValueLayout.JAVA_LONG, meta + META_CHUNK_BYTES, n);
                // Release: the chunk and its meta are visible to whoever reads this tail with acquire.
                LONG.setRelease(out, TAIL_OFFSET, ++tail);
                r.position += n;
                r.transportState = Boolean.TRUE;
                work++;
            }
            sends.poll();
            r.complete();
        }
        return work;
    }

    /** Copies published chunks into pending receives; returns the chunks consumed. */
    private int pullRecvs() throws IOException {
        int work = 0;
        while (!recvs.isEmpty()) {
            P2pRequest r = recvs.peek();
            while (true) {
                if (head == cachedTail) {
                    cachedTail = (long) LONG.getAcquire(in, TAIL_OFFSET);
                    if (head == cachedTail) {
                        return work;
                    }
                }
                int slot = (int) (head % inSlots);
                long meta = ShmRingDescriptor.slotMetaOffset(slot);
                long message = in.get(ValueLayout.JAVA_LONG, meta + META_MESSAGE_BYTES);
                long n = in.get(ValueLayout.JAVA_LONG, meta + META_CHUNK_BYTES);
                if (message != r.size()) {
                    IOException e = new IOException("rank " + peer.rank() + " sent a message of " + message + " bytes where this rank expected "
                            + r.size() + ": the ranks called collectives (or send/recv) with different counts or types");
                    r.fail(e);
                    throw e;
                }
                if (n < 0 || n > inSlotBytes || n > r.size() - r.position) {
                    IOException e = new IOException("SHM connection from rank " + selfRank + " to " + peer.describe()
                            + ": corrupt ring (chunk of " + n + " bytes at offset " + r.position + " of a " + r.size() + "-byte message)");
                    r.fail(e);
                    throw e;
                }
                MemorySegment.copy(in, inData + slot * inSlotBytes, r.segment(), r.position, n);
                // Release: the slot is free again only after the copy above has read it.
                LONG.setRelease(in, HEAD_OFFSET, ++head);
                r.position += n;
                work++;
                if (r.position == r.size()) {
                    recvs.poll();
                    r.complete();
                    break;
                }
            }
        }
        return work;
    }

    /** Nothing moved while requests are pending: fails if the peer closed or its process is gone. */
    private void checkPeer() throws IOException {
        boolean peerClosed = (int) INT.getAcquire(out, RECEIVER_STATE_OFFSET) == RECEIVER_CLOSED
                || (int) INT.getAcquire(in, SENDER_STATE_OFFSET) == SENDER_CLOSED;
        if (peerClosed) {
            throw new IOException("rank " + peer.rank() + " closed its communicator (exited, failed or was aborted) with "
                    + recvs.size() + " receive(s) and " + sends.size() + " send(s) of this rank pending");
        }
        long now = System.nanoTime();
        if (checkPid && now - nextLivenessCheck >= 0) {
            nextLivenessCheck = now + LIVENESS_PERIOD_NANOS;
            boolean alive = ProcessHandle.of(peer.pid()).map(ProcessHandle::isAlive).orElse(false);
            if (!alive) {
                throw new IOException("SHM connection from rank " + selfRank + " to " + peer.describe() + " failed: process " + peer.pid()
                        + " no longer exists, with " + recvs.size() + " receive(s) and " + sends.size()
                        + " send(s) of this rank pending. The peer exited or crashed");
            }
        }
    }

    private IOException closedLocally(Throwable cause) {
        return new IOException("SHM connection from rank " + selfRank + " to " + peer.describe()
                + " was closed by this rank (its communicator was closed or aborted)", cause);
    }

    /** Tells the peer this side is gone; the endpoint unmaps the rings. Idempotent; any thread. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            INT.setRelease(out, SENDER_STATE_OFFSET, SENDER_CLOSED);
            INT.setRelease(in, RECEIVER_STATE_OFFSET, RECEIVER_CLOSED);
        } catch (IllegalStateException alreadyUnmapped) {
            // the endpoint was closed first; the peer learns from the process or its own close
        }
    }
}
