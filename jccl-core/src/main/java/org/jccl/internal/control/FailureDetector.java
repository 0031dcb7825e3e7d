package org.jccl.internal.control;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;

/**
 * What the control plane knows about its peers' liveness, as pure logic: it is fed timestamps
 * ({@code System.nanoTime()} values, or any others in tests) and reads no clock, owns no socket and
 * starts no thread. The control thread tells it when it heard from or wrote to a peer, when a
 * connection was lost, when a peer said goodbye or aborted, and ticks it; each tick answers which
 * peers need a heartbeat and which one, if any, is to be declared failed now.
 *
 * <p>The rules, with T = {@code JCCL_PEER_TIMEOUT}:
 * <ul>
 *   <li>Heartbeats every T/4 in both directions ({@link #heartbeatNs}); any frame counts as one.</li>
 *   <li>An open link heard nothing for more than T: {@link Cause#SILENT} (a timeout of that peer).</li>
 *   <li>A link lost without a goodbye: {@link Cause#CLOSED_WITHOUT_GOODBYE} once a grace of
 *       min(1 s, T/4) has passed ({@link #graceNs}), so that a data transport which saw the same
 *       death reports it first with its own, more specific message. A goodbye (BYE) or an abort
 *       (GONE, FAULT) before the loss makes the loss harmless.</li>
 *   <li>A tick more than T/2 after the previous one means the control thread itself was not
 *       scheduled (GC pause, overloaded host): every link counts as heard at that tick.</li>
 *   <li>A peer whose queued, unwritten frames pass a bound reads nothing: it counts as silent
 *       for the whole timeout ({@link #backlogged}).</li>
 *   <li>At most one verdict per tick, the first peer in rank order; heartbeats due to the peers
 *       before it are asked for first.</li>
 *   <li>The hub after its {@code close()} lingers ({@link #startLinger}) until no link is open or
 *       {@code JCCL_CONTROL_LINGER} has passed ({@link #lingerCheck}).</li>
 * </ul>
 *
 * <p>Threading: owned by the control thread, except {@link #silentHubVerdictDue}, which any thread
 * may call (it reads only final fields and the volatile time the hub was last heard).
 */
final class FailureDetector {

    /** The state of the link to one peer. */
    enum Link {
        /** Connected and supervised. */
        OPEN,
        /** The peer said goodbye (BYE): it closed its communicator. */
        CLOSED,
        /** The peer aborted its communicator (GONE, FAULT, a mismatch it found). */
        ABORTED,
        /** The connection broke or closed without a goodbye. */
        DEAD
    }

    /** Why a peer is declared failed. */
    enum Cause {
        /** Nothing heard for more than the timeout. */
        SILENT,
        /** The connection closed without a goodbye, and the grace has passed. */
        CLOSED_WITHOUT_GOODBYE
    }

    /** A peer to declare failed now; {@code silentNs}: how long nothing was heard from it. */
    record Suspect(int peer, Cause cause, long silentNs) {
    }

    /** What {@link #lingerCheck} found. */
    enum LingerEnd {
        /** Not lingering, or links are still open and the linger has time left. */
        GO_ON,
        /** Every link has closed: the hub stops. */
        ALL_CLOSED,
        /** The linger has passed with links still open ({@link #openPeers}). */
        EXPIRED
    }

    private final int rank;
    private final long timeoutNs;
    private final long heartbeatNs;
    private final long graceNs;
    private final long tickMs;
    /** Index = peer rank; null where this rank has no link (itself; at a rank other than the hub, every rank but 0). */
    private final Link[] link;
    private final long[] lastHeard;
    private final long[] lastSent;
    private final long[] lostAt;
    /** A loss whose verdict is still to come (cleared when the tick declares it). */
    private final boolean[] lossPending;
    private long lastTick;
    /** When this rank (not the hub) last heard the hub, for {@link #silentHubVerdictDue} on other threads. */
    private volatile long hubHeardAt;
    private boolean lingering;
    private long lingerUntil;

    /**
     * @param rank this rank (0: the hub, linked to every other rank; else linked to the hub only)
     * @param size ranks of the communicator
     * @param timeoutNs {@code JCCL_PEER_TIMEOUT}
     * @param now when the control plane was created: the first tick measures its gap from here
     */
    FailureDetector(int rank, int size, long timeoutNs, long now) {
        this.rank = rank;
        this.timeoutNs = timeoutNs;
        this.heartbeatNs = timeoutNs / 4;
        this.graceNs = Math.min(TimeUnit.SECONDS.toNanos(1), timeoutNs / 4);
        this.tickMs = tickMs(timeoutNs);
        this.link = new Link[size];
        this.lastHeard = new long[size];
        this.lastSent = new long[size];
        this.lostAt = new long[size];
        this.lossPending = new boolean[size];
        this.lastTick = now;
        this.hubHeardAt = now;
    }

    /** How often the control thread ticks: T/8, within [20 ms, 250 ms]. */
    static long tickMs(long timeoutNs) {
        return Math.max(20, Math.min(250, TimeUnit.NANOSECONDS.toMillis(timeoutNs) / 8));
    }

    long timeoutNs() {
        return timeoutNs;
    }

    long heartbeatNs() {
        return heartbeatNs;
    }

    long graceNs() {
        return graceNs;
    }

    long tickMs() {
        return tickMs;
    }

    // ------------------------------------------------------------------------------------------ events

    /** The connection to {@code peer} was made at {@code at}: it counts as heard and written then. */
    void connected(int peer, long at) {
        link[peer] = Link.OPEN;
        lastHeard[peer] = at;
        lastSent[peer] = at;
    }

    /** A frame from {@code peer} arrived at {@code at}. */
    void heard(int peer, long at) {
        lastHeard[peer] = at;
        if (peer == 0) {
            hubHeardAt = at;
        }
    }

    /** A frame to {@code peer} was handed to its connection at {@code at}. */
    void sent(int peer, long at) {
        lastSent[peer] = at;
    }

    /** {@code peer} reads nothing (its unwritten frames passed the bound) at {@code now}: it counts as silent for the whole timeout. */
    void backlogged(int peer, long now) {
        heard(peer, Math.min(lastHeard[peer], now - timeoutNs - 1));
    }

    /**
     * The connection to {@code peer} closed or broke at {@code at}. After a goodbye or an abort this
     * is harmless; on an open link it is a failure, declared by the first tick after the grace.
     */
    void lost(int peer, long at) {
        if (link[peer] == Link.OPEN) {
            link[peer] = Link.DEAD;
            lostAt[peer] = at;
            lossPending[peer] = true;
        }
    }

    /** {@code peer} said goodbye (BYE): it closed its communicator; nothing it does later is a failure. */
    void saidGoodbye(int peer) {
        link[peer] = Link.CLOSED;
    }

    /** {@code peer} aborted its communicator (GONE, FAULT, a mismatch it found): nothing it does later is a failure. */
    void aborted(int peer) {
        link[peer] = Link.ABORTED;
    }

    // ------------------------------------------------------------------------------------------ answers

    /** The link to {@code peer}, or null where this rank has none. */
    Link link(int peer) {
        return link[peer];
    }

    boolean open(int peer) {
        return link[peer] == Link.OPEN;
    }

    /**
     * The tick at {@code now}: forgives the silence of a tick gap over T/2, then, peer by peer in rank
     * order, asks {@code heartbeat} to send to each open peer that was sent nothing for T/4, and
     * returns the first peer due for a verdict (the loop stops there), or null. A loss is declared
     * once.
     */
    Suspect tick(long now, IntConsumer heartbeat) {
        if (now - lastTick > timeoutNs / 2) {
            // This thread was not scheduled for half the timeout (GC pause, overloaded host): whatever
            // silence it measured is its own, not the peers'.
            for (int r = 0; r < link.length; r++) {
                if (link[r] != null) {
                    heard(r, now);
                }
            }
        }
        lastTick = now;
        for (int r = 0; r < link.length; r++) {
            Link l = link[r];
            if (l == null) {
                continue;
            }
            if (l == Link.DEAD && lossPending[r] && now - lostAt[r] >= graceNs) {
                lossPending[r] = false;
                return new Suspect(r, Cause.CLOSED_WITHOUT_GOODBYE, now - lastHeard[r]);
            }
            if (l != Link.OPEN) {
                continue;
            }
            if (now - lastHeard[r] > timeoutNs) {
                return new Suspect(r, Cause.SILENT, now - lastHeard[r]);
            }
            if (now - lastSent[r] >= heartbeatNs) {
                heartbeat.accept(r);
            }
        }
        return null;
    }

    /**
     * When this rank's own timer will name a silent hub, if the hub has missed its heartbeats: a
     * neighbour that closed its link meanwhile most likely timed out on the same hub a little
     * earlier (the hub's last heartbeats to the ranks are up to a quarter of the timeout apart, and
     * timeouts may differ per rank), and a stopped hub cannot relay why it left. Waiting for this
     * rank's own verdict then names the stopped rank rather than the neighbour. At most the timeout
     * from {@code start}; {@code Long.MIN_VALUE} when the hub was heard within T/4 + grace before
     * {@code now}, or this rank is the hub. Any thread.
     */
    long silentHubVerdictDue(long start, long now) {
        if (rank == 0) {
            return Long.MIN_VALUE;
        }
        long heardAt = hubHeardAt;
        if (now - heardAt <= heartbeatNs + graceNs) {
            return Long.MIN_VALUE;
        }
        long due = heardAt + timeoutNs + graceNs + 2 * TimeUnit.MILLISECONDS.toNanos(tickMs);
        return due - (start + timeoutNs) > 0 ? start + timeoutNs : due;
    }

    // ------------------------------------------------------------------------------------------ the hub's linger

    /** The hub closed its communicator at {@code now}: it supervises the open links for at most {@code lingerNs} more. */
    void startLinger(long now, long lingerNs) {
        lingering = true;
        lingerUntil = now + lingerNs;
    }

    boolean lingering() {
        return lingering;
    }

    /** Whether the hub's linger ends at {@code now}, and why. */
    LingerEnd lingerCheck(long now) {
        if (!lingering) {
            return LingerEnd.GO_ON;
        }
        if (openPeers().isEmpty()) {
            return LingerEnd.ALL_CLOSED;
        }
        return now - lingerUntil >= 0 ? LingerEnd.EXPIRED : LingerEnd.GO_ON;
    }

    /** The peers whose links are open, in rank order. */
    List<Integer> openPeers() {
        List<Integer> open = new ArrayList<>();
        for (int r = 0; r < link.length; r++) {
            if (link[r] == Link.OPEN) {
                open.add(r);
            }
        }
        return open;
    }
}
