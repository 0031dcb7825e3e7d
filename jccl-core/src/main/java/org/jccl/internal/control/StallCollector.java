package org.jccl.internal.control;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.internal.log.Log;

/**
 * The stall watchdog and the exchange of rank states behind stall reports and {@code jccl status}.
 *
 * <p>When this rank's oldest unfinished operation has waited {@code JCCL_STALL_WARN}
 * ({@link #watch}), it asks the hub (REQUEST); the hub collects every rank's {@link RankState}
 * (COLLECT, STATE) until all open ranks answered or the collection's deadline passed, and sends the
 * report (REPORT) to every rank for a stall, to the ranks that asked for a status. On a stall
 * report each rank waiting in an operation logs one line ({@link StallReport}) and every rank dumps
 * its flight recorder ({@link FlightDumps#dump}); status clients waiting get the report either way.
 * Requests that come while a collection runs join it; a stall request within the collection time
 * of the last stall report is answered by that report.
 *
 * <p>Threading: the control thread, except {@link #lastStallLine()} (any thread).
 */
final class StallCollector {

    /** The control plane's links, as the collector uses them (control thread). */
    interface Links {
        /** The link to {@code peer} (at the hub: any rank; elsewhere: 0, the hub). */
        FailureDetector.Link link(int peer);

        /** Sends {@code frame} to {@code peer} if its link is open. */
        void send(int peer, ByteBuffer frame);

        /** Sends a copy of {@code frame} to every peer whose link is open. */
        void broadcast(ByteBuffer frame);

        /** The hub closed its communicator and only supervises (it answers "closed" for itself). */
        boolean lingering();

        /** The hub left (closed or aborted): no more reports. */
        boolean hubGone();

        /** A fault was declared: no more stall requests. */
        boolean failed();

        /** A report came: status clients waiting get it. */
        void reportArrived(RankState[] states, int[] how);
    }

    private final String comm;
    private final int rank;
    private final int size;
    private final Peers peers;
    private final FlightRecorder recorder;
    private final FlightDumps dumps;
    private final long stallWarnNs;
    private final long collectNs;
    private final Links links;

    private long requestedSeq = -1;
    private long reportedSeq = -1;
    private long nextId = 1;
    private volatile String lastStallLine;

    // Hub: the collection in progress.
    private long collectId;
    private long collectDeadline;
    private RankState[] collectStates;
    private int[] collectHow;
    private boolean collectForStall;
    private final List<Integer> collectRequesters = new ArrayList<>();
    private boolean collectForSelf;
    private long lastStallReport = System.nanoTime() - java.util.concurrent.TimeUnit.DAYS.toNanos(1);

    StallCollector(ControlPlane.Params p, Peers peers, FlightDumps dumps, long stallWarnNs, long collectNs, Links links) {
        this.comm = p.idShort();
        this.rank = p.rank();
        this.size = p.size();
        this.peers = peers;
        this.recorder = p.recorder();
        this.dumps = dumps;
        this.stallWarnNs = stallWarnNs;
        this.collectNs = collectNs;
        this.links = links;
    }

    /** The last stall line this rank logged, or null. */
    String lastStallLine() {
        return lastStallLine;
    }

    /** The tick: the stall watchdog, and (hub) the end of a collection whose deadline passed. */
    void watch(long now) {
        FlightRecorder.Entry cur = recorder.currentStamped(now);
        if (cur != null && !links.hubGone() && !links.failed() && cur.elapsedMs(now) * 1_000_000L >= stallWarnNs
                && cur.seq() != requestedSeq && cur.seq() != reportedSeq) {
            requestedSeq = cur.seq();
            request(ControlWire.PURPOSE_STALL);
        }
        if (rank == 0 && collectStates != null && now - collectDeadline >= 0) {
            finishCollection();
        }
    }

    /** Asks for every rank's state ({@link ControlWire#PURPOSE_STALL} or {@code PURPOSE_STATUS}): the hub collects itself, a rank asks the hub. */
    void request(int purpose) {
        if (rank == 0) {
            startCollection(purpose == ControlWire.PURPOSE_STALL, -1, true);
        } else if (links.link(0) == FailureDetector.Link.OPEN) {
            ByteBuffer f = ControlWire.frame(ControlWire.REQUEST, 9);
            f.putLong(nextId++).put((byte) purpose);
            links.send(0, ControlWire.seal(f));
        }
    }

    /**
     * A REQUEST, COLLECT, STATE or REPORT frame from {@code peer}.
     *
     * @throws JcclException (PROTOCOL) for a report that does not fit the communicator
     */
    void onFrame(int peer, int type, ByteBuffer b) {
        switch (type) {
            case ControlWire.REQUEST -> {
                b.getLong();
                int purpose = b.get();
                if (rank == 0) {
                    if (purpose == ControlWire.PURPOSE_STALL && System.nanoTime() - lastStallReport < collectNs) {
                        return; // the report that answers it went to every rank a moment ago
                    }
                    startCollection(purpose == ControlWire.PURPOSE_STALL, peer, false);
                }
            }
            case ControlWire.COLLECT -> {
                long id = b.getLong();
                RankState s = dumps.self();
                ByteBuffer f = ControlWire.frame(ControlWire.STATE, 8 + ControlWire.stateBytes(s));
                f.putLong(id);
                s.write(f);
                links.send(peer, ControlWire.seal(f));
            }
            case ControlWire.STATE -> {
                long id = b.getLong();
                RankState s = RankState.read(b);
                if (rank == 0 && collectStates != null && id == collectId && s.rank() == peer) {
                    collectStates[peer] = s;
                    collectHow[peer] = ControlWire.HOW_ANSWERED;
                    if (Arrays.stream(collectHow).noneMatch(h -> h == ControlWire.HOW_SILENT)) {
                        finishCollection();
                    }
                }
            }
            case ControlWire.REPORT -> {
                b.getLong();
                int purpose = b.get();
                int n = b.getInt();
                if (n != size) {
                    throw new JcclException(ErrorCode.PROTOCOL, "REPORT of " + n + " ranks, the communicator has " + size);
                }
                RankState[] states = new RankState[n];
                int[] how = new int[n];
                for (int r = 0; r < n; r++) {
                    how[r] = b.get();
                    if (how[r] == ControlWire.HOW_ANSWERED) {
                        states[r] = RankState.read(b);
                    }
                }
                onReport(purpose == ControlWire.PURPOSE_STALL, states, how);
            }
            default -> throw new IllegalArgumentException("not a stall frame: " + type);
        }
    }

    /** Hub: starts a collection, or joins the one in progress; {@code requester}: the rank that asked (-1: none), {@code self}: the hub asked. */
    private void startCollection(boolean forStall, int requester, boolean self) {
        collectForStall |= forStall;
        if (requester >= 0 && !collectRequesters.contains(requester)) {
            collectRequesters.add(requester);
        }
        collectForSelf |= self;
        if (collectStates != null) {
            return; // joins the collection in progress
        }
        collectId = nextId++;
        collectDeadline = System.nanoTime() + collectNs;
        collectStates = new RankState[size];
        collectHow = new int[size];
        Arrays.fill(collectHow, ControlWire.HOW_SILENT);
        collectStates[0] = dumps.self();
        collectHow[0] = links.lingering() ? ControlWire.HOW_CLOSED : ControlWire.HOW_ANSWERED;
        ByteBuffer f = ControlWire.seal(ControlWire.frame(ControlWire.COLLECT, 8).putLong(collectId));
        for (int r = 1; r < size; r++) {
            switch (links.link(r)) {
                case OPEN -> links.send(r, f.duplicate());
                case CLOSED -> collectHow[r] = ControlWire.HOW_CLOSED;
                case ABORTED -> collectHow[r] = ControlWire.HOW_ABORTED;
                case DEAD -> { }
            }
        }
        if (Arrays.stream(collectHow).noneMatch(h -> h == ControlWire.HOW_SILENT)) {
            finishCollection();
        }
    }

    private void finishCollection() {
        RankState[] states = collectStates;
        int[] how = collectHow;
        boolean forStall = collectForStall;
        List<Integer> requesters = new ArrayList<>(collectRequesters);
        boolean self = collectForSelf;
        collectStates = null;
        collectHow = null;
        collectForStall = false;
        collectForSelf = false;
        collectRequesters.clear();
        int bytes = 8 + 1 + 4;
        for (int r = 0; r < size; r++) {
            bytes += 1 + (how[r] == ControlWire.HOW_ANSWERED ? ControlWire.stateBytes(states[r]) : 0);
        }
        ByteBuffer f = ControlWire.frame(ControlWire.REPORT, bytes);
        f.putLong(collectId).put((byte) (forStall ? ControlWire.PURPOSE_STALL : ControlWire.PURPOSE_STATUS)).putInt(size);
        for (int r = 0; r < size; r++) {
            f.put((byte) how[r]);
            if (how[r] == ControlWire.HOW_ANSWERED) {
                states[r].write(f);
            }
        }
        ControlWire.seal(f);
        if (forStall) {
            lastStallReport = System.nanoTime();
            links.broadcast(f);
        } else {
            for (int r : requesters) {
                links.send(r, f.duplicate());
            }
        }
        if (forStall || self) {
            onReport(forStall, states, how);
        }
    }

    private void onReport(boolean forStall, RankState[] states, int[] how) {
        links.reportArrived(states, how);
        if (!forStall) {
            return;
        }
        long now = System.nanoTime();
        FlightRecorder.Entry cur = recorder.current();
        String line = null;
        if (cur != null && cur.seq() != reportedSeq) {
            reportedSeq = cur.seq();
            line = StallReport.line(cur.name(), cur.seq(), cur.elapsedMs(now), states, how, peers.table());
            lastStallLine = line;
            Log.warn(Log.Subsys.COLL, rank, "comm " + comm + " " + line);
        }
        if (line == null && cur != null && cur.seq() == reportedSeq) {
            line = lastStallLine;
        }
        dumps.dump(line != null ? line : "stall reported by another rank", states, how);
    }
}
