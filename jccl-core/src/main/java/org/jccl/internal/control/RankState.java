package org.jccl.internal.control;

import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Where one rank of a communicator is, as exchanged on the control channel for stall reports and
 * {@code jccl status}: the operations it issued and finished, the one it waits in (the oldest
 * unfinished), and its totals.
 *
 * @param rank the rank
 * @param lastIssued sequence number of its last issued operation, -1 when none
 * @param lastName collective of that operation ("" when none)
 * @param lastFinished sequence number of its last finished operation, -1 when none
 * @param curSeq its oldest unfinished operation, -1 when idle
 * @param curName that operation's collective ("" when idle)
 * @param curBytes its bytes
 * @param curType its element type ("" when none)
 * @param curRedop its reduction ("" when none)
 * @param curRoot its root or peer, -1 when none
 * @param curRunning whether it runs (else it is queued behind another)
 * @param curWaitMs how long it has waited, in ms
 * @param ops operations finished
 * @param errors operations failed
 * @param bytesSent bytes posted to peers
 * @param bytesReceived bytes posted from peers
 */
public record RankState(int rank, long lastIssued, String lastName, long lastFinished, long curSeq, String curName, long curBytes,
                        String curType, String curRedop, int curRoot, boolean curRunning, long curWaitMs, long ops, long errors,
                        long bytesSent, long bytesReceived) {

    /** This rank's state now, from its recorder and counters. */
    public static RankState of(int rank, FlightRecorder rec, Counters counters) {
        long nowNs = System.nanoTime();
        long issued = rec.lastIssued();
        FlightRecorder.Entry last = rec.entry(issued);
        FlightRecorder.Entry cur = rec.current();
        long sent = counters == null ? 0 : counters.totalSent();
        long recv = counters == null ? 0 : counters.totalReceived();
        return new RankState(rank, issued, last == null ? "" : last.name(), rec.lastFinished(),
                cur == null ? -1 : cur.seq(), cur == null ? "" : cur.name(), cur == null ? 0 : cur.bytes(),
                cur == null || cur.dtype() == null ? "" : cur.dtype(), cur == null || cur.redop() == null ? "" : cur.redop(),
                cur == null ? -1 : cur.rootOrPeer(), cur != null && cur.state() == FlightRecorder.State.RUNNING,
                cur == null ? 0 : cur.elapsedMs(nowNs), rec.ops(), rec.errors(), sent, recv);
    }

    /** Whether this rank waits in an operation. */
    public boolean busy() {
        return curSeq >= 0;
    }

    /** "all_reduce 4096 B float32 sum" / "broadcast 8 B int8 root 0": what must agree across ranks at one sequence number. */
    public String signature() {
        StringBuilder sb = new StringBuilder(ControlWire.collName(curName)).append(' ').append(curBytes).append(" B");
        if (!curType.isEmpty()) {
            sb.append(' ').append(curType);
        }
        if (!curRedop.isEmpty()) {
            sb.append(' ').append(curRedop);
        }
        if (curRoot >= 0) {
            sb.append(curName.equals("send") || curName.equals("recv") ? " peer " : " root ").append(curRoot);
        }
        return sb.toString();
    }

    void write(ByteBuffer b) {
        b.putInt(rank).putLong(lastIssued);
        ControlWire.putString(b, lastName);
        b.putLong(lastFinished).putLong(curSeq);
        ControlWire.putString(b, curName);
        b.putLong(curBytes);
        ControlWire.putString(b, curType);
        ControlWire.putString(b, curRedop);
        b.putInt(curRoot).put((byte) (curRunning ? 1 : 0)).putLong(curWaitMs).putLong(ops).putLong(errors).putLong(bytesSent)
                .putLong(bytesReceived);
    }

    static RankState read(ByteBuffer b) {
        int rank = b.getInt();
        long lastIssued = b.getLong();
        String lastName = ControlWire.getString(b);
        long lastFinished = b.getLong();
        long curSeq = b.getLong();
        String curName = ControlWire.getString(b);
        long curBytes = b.getLong();
        String curType = ControlWire.getString(b);
        String curRedop = ControlWire.getString(b);
        int curRoot = b.getInt();
        boolean running = b.get() != 0;
        return new RankState(rank, lastIssued, lastName, lastFinished, curSeq, curName, curBytes, curType, curRedop, curRoot, running,
                b.getLong(), b.getLong(), b.getLong(), b.getLong(), b.getLong());
    }

    /** As JSON-ready map. */
    public Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("rank", rank);
        m.put("last_issued", lastIssued);
        m.put("last_issued_op", ControlWire.collName(lastName));
        m.put("last_finished", lastFinished);
        if (busy()) {
            m.put("current_seq", curSeq);
            m.put("current", signature());
            m.put("current_state", curRunning ? "RUNNING" : "QUEUED");
            m.put("current_wait_ms", curWaitMs);
        }
        m.put("ops", ops);
        m.put("errors", errors);
        m.put("bytes_sent", bytesSent);
        m.put("bytes_received", bytesReceived);
        return m;
    }
}
