package org.jccl.internal.transport.tcp;

import java.io.IOException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.jccl.spi.P2pRequest;

/**
 * One stream group of an offloaded {@link TcpConnection} ({@code JCCL_SOCKET_OFFLOAD}): a thread of
 * its own that drives the send and receive lanes of its sockets (socket i belongs to group
 * i mod {@code JCCL_SOCKET_NTHREADS}), so that the groups' system calls run in parallel with each
 * other and with the operation thread, which meanwhile reduces what already arrived (NCCL's socket
 * helper threads, on the CPU).
 *
 * <p>The operation thread posts requests ({@link #post}) into a queue; this thread moves them onto
 * the lanes in order, writes and reads until nothing moves, spins briefly, then blocks in its own
 * selector (read interest while a receive is posted, write interest while a send waits for room)
 * until bytes can move or a post wakes it. The first failure of any group fails the connection
 * ({@link TcpConnection#failFromGroup}) and every group ends; the operation thread's next {@code
 * progress()} throws that failure and fails what the groups held ({@link #failPendingAfterEnd}).
 */
final class TcpIoGroup implements Runnable {

    /**
     * Spin this long with nothing to move before blocking in the selector: as long as the operation
     * thread's own spin ({@code JCCL_IDLE_SPIN_US}'s default), so that back-to-back small operations find
     * the thread awake instead of paying a selector wake-up each (the offload only runs where the thread
     * has a CPU of its own).
     */
    private static final long SPIN_NANOS = 200_000;
    /** Longest block in the selector before the thread looks at the connection's state again. */
    private static final long SELECT_MILLIS = 100;

    /** A request for one lane: which lane, which direction. */
    private record Post(int lane, P2pRequest request, boolean send) {
    }

    private final TcpConnection connection;
    private final int group;
    private final int[] lanes;
    private final TcpSendLane[] senders;
    private final TcpRecvLane[] receivers;
    private final org.jccl.internal.net.WireChannel[] outs;
    private final org.jccl.internal.net.WireChannel[] ins;
    private final ConcurrentLinkedQueue<Post> posted = new ConcurrentLinkedQueue<>();
    private final Selector selector;
    /** Per lane of the group: the key of its sending socket and of its receiving socket (the same key when they are one socket). */
    private final SelectionKey[] sendKeys;
    private final SelectionKey[] recvKeys;
    /** Raised while this thread is (about to be) blocked in its selector; a post then wakes it. */
    private volatile boolean sleeping;
    /** Raised once the thread has stopped driving its lanes (the connection failed or closed). */
    private volatile boolean finished;
    private volatile Thread thread;

    TcpIoGroup(TcpConnection connection, int group, int[] lanes, TcpSendLane[] senders, TcpRecvLane[] receivers,
            org.jccl.internal.net.WireChannel[] outs, org.jccl.internal.net.WireChannel[] ins) throws IOException {
        this.connection = connection;
        this.group = group;
        this.lanes = lanes;
        this.senders = senders;
        this.receivers = receivers;
        this.outs = outs;
        this.ins = ins;
        this.selector = Selector.open();
        this.sendKeys = new SelectionKey[lanes.length];
        this.recvKeys = new SelectionKey[lanes.length];
        try {
            for (int j = 0; j < lanes.length; j++) {
                recvKeys[j] = ins[lanes[j]].socket().register(selector, 0);
                sendKeys[j] = outs[lanes[j]] == ins[lanes[j]] ? recvKeys[j] : outs[lanes[j]].socket().register(selector, 0);
            }
        } catch (IOException | RuntimeException e) {
            selector.close();
            throw e;
        }
    }

    void start(String name) {
        thread = Thread.ofPlatform().daemon().name(name).unstarted(this);
        thread.start();
    }

    /** The group's thread (set before any request can be posted). */
    Thread thread() {
        return thread;
    }

    /**
     * Queues {@code r} for lane {@code lane}; the operation thread only. After the group has finished
     * (the connection failed or closed) the request stays queued: the operation thread's next {@link
     * TcpConnection#progress()} throws the failure and then fails it with everything else pending.
     */
    void post(int lane, P2pRequest r, boolean send) {
        posted.add(new Post(lane, r, send));
        if (sleeping) {
            selector.wakeup();
        }
    }

    /** Wakes the thread so that it sees the connection closed or failed; any thread. */
    void wake() {
        try {
            selector.wakeup();
        } catch (ClosedSelectorException ignored) {
            // Already finished.
        }
    }

    @Override
    public void run() {
        IOException failure = null;
        int current = -1;
        try {
            long idleSince = 0;
            while (!connection.stopping()) {
                boolean took = drain();
                long moved = 0;
                for (int j = 0; j < lanes.length; j++) {
                    current = lanes[j];
                    outs[current].flush(); // TLS records a previous write could not hand to the socket
                    if (ins[current] != outs[current]) {
                        ins[current].flush();
                    }
                    moved += senders[current].progress();
                    moved += receivers[current].progress();
                }
                current = -1;
                if (moved > 0 || took) {
                    idleSince = 0;
                    continue;
                }
                long now = System.nanoTime();
                if (idleSince == 0) {
                    idleSince = now;
                }
                if (now - idleSince < SPIN_NANOS) {
                    Thread.onSpinWait();
                    continue;
                }
                block();
                idleSince = 0;
            }
        } catch (IOException e) {
            failure = e;
        } catch (ClosedSelectorException e) {
            failure = new java.nio.channels.ClosedChannelException();
        } catch (RuntimeException | Error e) {
            failure = new IOException("TCP stream thread " + group + " failed: " + e, e);
        }
        if (failure != null) {
            connection.failFromGroup(failure, current);
        }
        // The requests stay pending: the operation thread must learn of the failure from progress() (whose
        // exception the runtime turns into the peer's failure or the mismatch), not from a request it awaits.
        try {
            selector.close();
        } catch (IOException ignored) {
            // Nothing left to release.
        }
        finished = true;
    }

    /**
     * Once the thread has ended (waits up to {@code millis} for it): fails every request this group
     * holds with {@code e}; the operation thread only. Returns false, touching nothing, when the thread
     * has not ended.
     */
    boolean failPendingAfterEnd(IOException e, long millis) {
        join(millis);
        Thread t = thread;
        if (t != null && t.isAlive()) {
            return false;
        }
        for (int lane : lanes) {
            senders[lane].failPending(e);
            receivers[lane].failPending(e);
        }
        failPosted(e);
        return true;
    }

    /** Moves posted requests onto their lanes, in order; true when there were any. */
    private boolean drain() {
        boolean any = false;
        Post p;
        while ((p = posted.poll()) != null) {
            any = true;
            if (p.send) {
                senders[p.lane].sendQ.addLast(p.request);
            } else {
                receivers[p.lane].recvQ.addLast(p.request);
            }
        }
        return any;
    }

    /** Blocks in the selector until a socket can move bytes for a queued request, a post arrives, or a while passes. */
    private void block() throws IOException {
        boolean interest = false;
        for (int j = 0; j < lanes.length; j++) {
            int write = senders[lanes[j]].sendQ.isEmpty() ? 0 : SelectionKey.OP_WRITE;
            int read = receivers[lanes[j]].recvQ.isEmpty() ? 0 : SelectionKey.OP_READ;
            interest |= (write | read) != 0;
            if (sendKeys[j] == recvKeys[j]) {
                interest(recvKeys[j], write | read);
            } else {
                interest(sendKeys[j], write);
                interest(recvKeys[j], read);
            }
        }
        sleeping = true;
        try {
            if (!posted.isEmpty() || connection.stopping()) {
                return;
            }
            selector.select(interest ? SELECT_MILLIS : SELECT_MILLIS * 10);
            selector.selectedKeys().clear();
        } finally {
            sleeping = false;
        }
    }

    private static void interest(SelectionKey key, int ops) {
        if (key.interestOps() != ops) {
            key.interestOps(ops);
        }
    }

    private void failPosted(IOException e) {
        Post p;
        while ((p = posted.poll()) != null) {
            p.request.fail(e);
        }
    }

    /** Waits up to {@code millis} for the thread to end (close). */
    void join(long millis) {
        Thread t = thread;
        if (t != null && t != Thread.currentThread()) {
            try {
                t.join(millis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
