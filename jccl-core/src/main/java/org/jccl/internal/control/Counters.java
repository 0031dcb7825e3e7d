package org.jccl.internal.control;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Bytes sent to and received from each peer by one communicator, with the transport each peer is
 * reached through. Written only by the thread running operations (under the communicator's
 * execution lock), so the counters are plain array elements; readers on other threads (status
 * reports) may see a value a few operations old, never a torn one (64-bit stores are atomic on
 * the 64-bit JVMs jccl runs on).
 */
public final class Counters {
    private final long[] sent;
    private final long[] received;
    private final String[] transport;

    public Counters(String[] transportOfPeer) {
        this.transport = transportOfPeer.clone();
        this.sent = new long[transportOfPeer.length];
        this.received = new long[transportOfPeer.length];
    }

    /** Counts a send posted to {@code peer}. */
    public void sent(int peer, long bytes) {
        sent[peer] += bytes;
    }

    /** Counts a receive posted from {@code peer}. */
    public void received(int peer, long bytes) {
        received[peer] += bytes;
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

    /** Per peer and per transport, for JSON. */
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
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("peers", peers);
        out.put("transports", tr);
        return out;
    }
}
