package org.jccl.internal.transport.shm;

import static org.jccl.internal.transport.shm.ShmRingDescriptor.HEAD_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.INT;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.LONG;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.META_CHUNK_BYTES;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.META_GUARD;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.META_MESSAGE_BYTES;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.RECEIVER_CLOSED;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.RECEIVER_STATE_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.RECEIVER_WAITING_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.SENDER_CLOSED;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.SENDER_STATE_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.SENDER_WAITING_OFFSET;
import static org.jccl.internal.transport.shm.ShmRingDescriptor.TAIL_OFFSET;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import org.jccl.spi.Connection;
import org.jccl.spi.GuardMismatchException;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.RemoteRegion;

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
 *
 * <p>Waking: after {@code raiseAfterNanos} without progress, the connection raises its waiting
 * flag(s) in the rings; the peer rings the doorbell socket ({@link #channels()}, watched by the
 * runtime's idle selector) when it lowers one, so a rank blocked in the selector wakes at once
 * instead of at the selector's timeout (see {@link ShmRingDescriptor}). Without a doorbell (the
 * socket could not be made) the selector's 1-50 ms timeout is the fallback.
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
    /** The endpoint's regions: unpacking peers' keys and putting into their mapped files. */
    private final ShmRegions regions;
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

    /** The doorbell to and from the peer (non-blocking), or null. */
    private final SocketChannel doorbell;
    private final long raiseAfterNanos;
    private final ByteBuffer ding = ByteBuffer.allocateDirect(1);
    private final ByteBuffer drain = ByteBuffer.allocateDirect(64);
    /** This side's waiting flags are up (in {@code in}: for data; in {@code out}: for space). */
    private boolean waitingForData;
    private boolean waitingForSpace;
    /** Doorbell bytes the peer has rung (or is ringing) that are not read yet. */
    private int owed;
    /** Start of the current stretch without progress, 0 when there is none. */
    private long idleSince;

    ShmConnection(int selfRank, PeerInfo peer, MemorySegment in, MemorySegment out, boolean checkPid, SocketChannel doorbell,
                  long raiseAfterNanos, ShmRegions regions) {
        this.regions = regions;
        this.doorbell = doorbell;
        this.raiseAfterNanos = raiseAfterNanos;
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
    public boolean inMemory() {
        return true;
    }

    @Override
    public String describe() {
        return "SHM (" + outSlots + " x " + outSlotBytes + " B ring out, " + inSlots + " x " + inSlotBytes + " B ring in)";
    }

    @Override
    public SelectableChannel[] channels() {
        return doorbell == null ? new SelectableChannel[0] : new SelectableChannel[] {doorbell};
    }

    @Override
    public P2pRequest send(MemorySegment src) {
        return send(src, 0);
    }

    @Override
    public P2pRequest send(MemorySegment src, long guard) {
        P2pRequest r = new P2pRequest(src, true, guard);
        sends.add(r);
        return r;
    }

    @Override
    public boolean supportsPut() {
        return true;
    }

    /** Maps the peer's region file (once per file: later unpacks share the mapping). */
    @Override
    public RemoteRegion unpack(byte[] packedKey) throws IOException {
        requireOpen();
        return regions.unpack(packedKey, this, peer);
    }

    /** One copy into the peer's mapped file, done before this returns (see ShmRegions). */
    @Override
    public P2pRequest put(MemorySegment src, RemoteRegion dst, long dstOffset) {
        requireOpen();
        return regions.put(this, src, dst, dstOffset);
    }

    @Override
    public P2pRequest flush() {
        requireOpen();
        return ShmRegions.flushed();
    }

    private void requireOpen() {
        if (closed) {
            throw new IllegalStateException("SHM connection from rank " + selfRank + " to " + peer.describe() + " is closed");
        }
    }

    @Override
    public P2pRequest recv(MemorySegment dst) {
        return recv(dst, 0);
    }

    @Override
    public P2pRequest recv(MemorySegment dst, long guard) {
        P2pRequest r = new P2pRequest(dst, false, guard);
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
            int pushed = pushSends();
            int pulled = pullRecvs();
            work = pushed + pulled;
            if (doorbell != null) {
                if (work > 0) {
                    // Store-load fence: the counter stores above come before reading the peer's flags.
                    VarHandle.fullFence();
                    if (pushed > 0) {
                        wake(out, RECEIVER_WAITING_OFFSET);
                    }
                    if (pulled > 0) {
                        wake(in, SENDER_WAITING_OFFSET);
                    }
                }
                work += settleOwnFlags(work);
            }
            if (work == 0 && !(sends.isEmpty() && recvs.isEmpty())) {
                Runnable hook = beforeCheckPeer;
                if (hook != null) {
                    hook.run();
                }
                work += checkPeer();
            }
        } catch (IllegalStateException e) {
            // The mapping was unmapped under us: abort() closed the endpoint from another thread.
            throw closedLocally(e);
        }
        return work;
    }

    /** Rings the peer's doorbell if it is (about to be) blocked waiting on {@code flag} of {@code ring}. */
    private void wake(MemorySegment ring, long flag) {
        if ((int) INT.getVolatile(ring, flag) == 1 && INT.compareAndSet(ring, flag, 1, 0)) {
            try {
                ding.clear();
                doorbell.write(ding); // 0 bytes written = the socket is full of rings already: the peer wakes anyway
            } catch (IOException peerGone) {
                // the liveness check reports it with the peer's name
            }
        }
    }

    /**
     * Raises this side's waiting flags after a while without progress, and after progress lowers
     * them again; a flag the peer lowered means a doorbell byte to drain. Returns extra work done
     * (chunks moved by the re-check after raising a flag).
     */
    private int settleOwnFlags(int work) throws IOException {
        if (work > 0) {
            idleSince = 0;
            if (waitingForData) {
                waitingForData = false;
                if (!INT.compareAndSet(in, RECEIVER_WAITING_OFFSET, 1, 0)) {
                    owed++; // the peer lowered it first: its doorbell byte is (about to be) in the socket
                }
            }
            if (waitingForSpace) {
                waitingForSpace = false;
                if (!INT.compareAndSet(out, SENDER_WAITING_OFFSET, 1, 0)) {
                    owed++;
                }
            }
            drainDoorbell();
            return 0;
        }
        if (waitingForData && (int) INT.getAcquire(in, RECEIVER_WAITING_OFFSET) == 0) {
            waitingForData = false;
            owed++;
        }
        if (waitingForSpace && (int) INT.getAcquire(out, SENDER_WAITING_OFFSET) == 0) {
            waitingForSpace = false;
            owed++;
        }
        drainDoorbell();
        if (sends.isEmpty() && recvs.isEmpty()) {
            idleSince = 0;
            return 0;
        }
        long now = System.nanoTime();
        if (idleSince == 0) {
            idleSince = now;
            return 0;
        }
        if (now - idleSince < raiseAfterNanos) {
            return 0;
        }
        boolean raised = false;
        if (!recvs.isEmpty() && !waitingForData) {
            INT.setVolatile(in, RECEIVER_WAITING_OFFSET, 1);
            waitingForData = true;
            raised = true;
        }
        if (!sends.isEmpty() && !waitingForSpace) {
            INT.setVolatile(out, SENDER_WAITING_OFFSET, 1);
            waitingForSpace = true;
            raised = true;
        }
        int extra = 0;
        if (raised) {
            // Re-check after raising (volatile store, then these loads): whatever the peer published
            // before seeing the flag is found here; whatever it publishes after, it rings for.
            extra = pushSends() + pullRecvs();
            if (extra > 0) {
                VarHandle.fullFence();
                wake(out, RECEIVER_WAITING_OFFSET);
                wake(in, SENDER_WAITING_OFFSET);
            }
        }
        return extra;
    }

    /**
     * Reads the doorbell bytes the peer owes us (one per flag it lowered), so that none is left to
     * make the idle selector return at once forever. A byte not written yet is read on a later call.
     */
    private void drainDoorbell() {
        while (owed > 0) {
            drain.clear();
            int n;
            try {
                n = doorbell.read(drain);
            } catch (IOException peerGone) {
                owed = 0; // reported by the liveness check
                return;
            }
            if (n <= 0) {
                if (n < 0) {
                    owed = 0;
                }
                return;
            }
            owed = Math.max(0, owed - n);
        }
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
                out.set(ValueLayout.JAVA_LONG, meta + META_GUARD, r.guard());
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
                long guard = in.get(ValueLayout.JAVA_LONG, meta + META_GUARD);
                if (!GuardMismatchException.matches(r.guard(), guard)) {
                    // Before the size: calls that differ are named as such, even where the sizes happen to agree.
                    GuardMismatchException e = new GuardMismatchException(peer.rank(), r.guard(), guard);
                    r.fail(e);
                    throw e;
                }
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

    /**
     * Nothing moved while requests are pending: fails if the peer closed or its process is gone. The ring is
     * read once more first: the peer publishes its last message (TAIL) before its closed state, so a message
     * that arrived between this round's read and the flag's is taken, not lost to a "closed by the peer".
     * Returns the work that read did.
     */
    private int checkPeer() throws IOException {
        boolean peerClosed = (int) INT.getAcquire(out, RECEIVER_STATE_OFFSET) == RECEIVER_CLOSED
                || (int) INT.getAcquire(in, SENDER_STATE_OFFSET) == SENDER_CLOSED;
        if (peerClosed || checkPid && System.nanoTime() - nextLivenessCheck >= 0) {
            int late = pullRecvs();
            if (late > 0) {
                return late;
            }
        }
        if (peerClosed) {
            // The TCP transport's wording, so that errors read the same whatever the transport.
            throw new IOException("SHM connection to " + peer.describe() + " closed by the peer with " + recvs.size() + " receive(s) and "
                    + sends.size() + " send(s) of rank " + selfRank + " pending: it exited or crashed, or closed its communicator after an"
                    + " error of its own (see its log)");
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
        return 0;
    }

    /** Tests only: runs in progress() right before the peer's state is checked (a round that moved nothing). */
    static volatile Runnable beforeCheckPeer;

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
        regions.closeRemotes(this);
        try {
            INT.setRelease(out, SENDER_STATE_OFFSET, SENDER_CLOSED);
            INT.setRelease(in, RECEIVER_STATE_OFFSET, RECEIVER_CLOSED);
        } catch (IllegalStateException alreadyUnmapped) {
            // the endpoint was closed first; the peer learns from the process or its own close
        }
    }
}
