package org.jccl.internal.control;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jccl.CommStats;

/**
 * One communicator's counters: bytes sent to and received from each peer with the transport each
 * peer is reached through, and operations, failures and bytes per collective. Written only by the
 * thread running operations (under the communicator's execution lock), so the counters are plain
 * array elements: counting costs an array increment or two per operation (per peer for the
 * shared segment), no allocation. Readers on other threads ({@link #snapshot}, status reports)
 * may see a value a few operations old, never a torn one (64-bit stores are atomic on the 64-bit
 * JVMs jccl runs on).
 *
 * <p>What counts as sent and received: over the transports, the bytes posted to and from each
 * peer ({@code OpContext.send/recv}, the algorithms' messages, so a ring all-reduce counts what it
 * forwards); through the shared collective segment (SHM, every rank of the communicator on one
 * host), the bytes a peer reads out of this rank's area are sent to it and the bytes this rank
 * reads out of a peer's area are received from it, counted once per operation ({@link #shared}).
 */
public final class Counters {
    /** The collectives counted, in {@link CommStats}' order. */
    private static final String[] KINDS = CommStats.COLLECTIVES.toArray(String[]::new);

    private final long[] sent;
    private final long[] received;
    private final String[] transport;
    private final long[] ops = new long[KINDS.length];
    private final long[] errors = new long[KINDS.length];
    private final long[] opBytes = new long[KINDS.length];

    public Counters(String[] transportOfPeer) {
        this.transport = transportOfPeer.clone();
        this.sent = new long[transportOfPeer.length];
        this.received = new long[transportOfPeer.length];
    }

    /** Index of an operation name in {@link #KINDS}, -1 for internal operations (calibration, groups as such). */
    static int kindOf(String name) {
        return switch (name) {
            case "allReduce" -> 0;
            case "broadcast" -> 1;
            case "reduce" -> 2;
            case "allGather" -> 3;
            case "reduceScatter" -> 4;
            case "allToAll" -> 5;
            case "allToAllv" -> 6;
            case "gather" -> 7;
            case "scatter" -> 8;
            case "barrier" -> 9;
            case "send" -> 10;
            case "recv" -> 11;
            default -> -1;
        };
    }

    /** Counts a send posted to {@code peer}. */
    public void sent(int peer, long bytes) {
        sent[peer] += bytes;
    }

    /** Counts a receive posted from {@code peer}. */
    public void received(int peer, long bytes) {
        received[peer] += bytes;
    }

    /**
     * Counts one operation through the shared collective segment: {@code perPeer} bytes each way
     * between rank {@code self} and every other rank (one call per operation, not per round).
     */
    public void shared(int self, long perPeer) {
        for (int p = 0; p < sent.length; p++) {
            if (p != self) {
                sent[p] += perPeer;
                received[p] += perPeer;
            }
        }
    }

    /** Counts {@code bytes} each way between this rank and {@code peer} through the shared segment. */
    public void sharedWith(int peer, long bytes) {
        sent[peer] += bytes;
        received[peer] += bytes;
    }

    /** Counts a finished call of the collective {@code name} (an operation name; internal ones are not counted). */
    public void finished(String name, long bytes, boolean ok) {
        int k = kindOf(name);
        if (k < 0) {
            return;
        }
        ops[k]++;
        opBytes[k] += bytes;
        if (!ok) {
            errors[k]++;
        }
    }

    public long sentTo(int peer) {
        return sent[peer];
    }

    public long receivedFrom(int peer) {
        return received[peer];
    }

    public long totalSent() {
        long t = 0;
        for (long x : sent) {
            t += x;
        }
        return t;
    }

    public long totalReceived() {
        long t = 0;
        for (long x : received) {
            t += x;
        }
        return t;
    }

    /** The transport of {@code peer} ("TCP", "SHM", "LOCAL"), null for the rank itself. */
    public String transport(int peer) {
        return transport[peer];
    }

    /** An immutable copy, for {@code Communicator.stats()}. */
    public CommStats snapshot(int rank) {
        List<CommStats.CollectiveCount> cs = new ArrayList<>(KINDS.length);
        for (int k = 0; k < KINDS.length; k++) {
            cs.add(new CommStats.CollectiveCount(KINDS[k], ops[k], errors[k], opBytes[k]));
        }
        List<CommStats.PeerTraffic> ps = new ArrayList<>(sent.length);
        for (int p = 0; p < sent.length; p++) {
            if (transport[p] != null) {
                ps.add(new CommStats.PeerTraffic(p, transport[p], sent[p], received[p]));
            }
        }
        return new CommStats(rank, sent.length, cs, ps);
    }

    /** Per peer, per transport and per collective (those called), for JSON. */
    public Map<String, Object> toMap() {
        List<Object> peers = new ArrayList<>();
        Map<String, long[]> byTransport = new LinkedHashMap<>();
        for (int p = 0; p < sent.length; p++) {
            if (transport[p] == null) {
                continue;
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("peer", p);
            m.put("transport", transport[p]);
            m.put("bytes_sent", sent[p]);
            m.put("bytes_received", received[p]);
            peers.add(m);
            long[] t = byTransport.computeIfAbsent(transport[p], k -> new long[2]);
            t[0] += sent[p];
            t[1] += received[p];
        }
        Map<String, Object> tr = new LinkedHashMap<>();
        byTransport.forEach((k, v) -> tr.put(k, Map.of("bytes_sent", v[0], "bytes_received", v[1])));
        Map<String, Object> colls = new LinkedHashMap<>();
        for (int k = 0; k < KINDS.length; k++) {
            if (ops[k] != 0) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("ops", ops[k]);
                m.put("errors", errors[k]);
                m.put("bytes", opBytes[k]);
                colls.put(KINDS[k], m);
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("peers", peers);
        out.put("transports", tr);
        out.put("collectives", colls);
        return out;
    }
}
