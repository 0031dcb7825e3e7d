package org.jccl;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A snapshot of one communicator's counters on this rank, from {@link Communicator#stats()}:
 * operations, failures and bytes per collective, and bytes sent to and received from each peer
 * with the transport that peer is reached through (so also per transport). Immutable; taking one
 * copies a few arrays, counting itself costs the operations an increment or two and allocates
 * nothing.
 *
 * <p>What is counted:
 * <ul>
 * <li>Per collective ({@link #COLLECTIVES}): calls that ran, counted when they finish; those that
 *     failed; and their bytes as the flight recorder records them (the vector for allReduce,
 *     broadcast and reduce, the whole receive buffer for allGather, gather and allToAll, the send
 *     buffer for reduceScatter and scatter, 0 for barrier). Each call inside a {@link Group} counts
 *     as itself. Calls that never ran because the communicator was aborted first are not counted.</li>
 * <li>Per peer: over the transports, the bytes posted to and from that peer, i.e. what the chosen
 *     algorithms really moved (a ring all-reduce of B bytes on n ranks sends about 2(n-1)/n x B to
 *     its successor); through the shared collective segment of ranks on one host (transport
 *     {@code SHM}), the bytes the peer read out of this rank's area (sent) and this rank read out
 *     of the peer's area (received).</li>
 * </ul>
 * Counters start at zero when the communicator is created (split and dup children have their own)
 * and are never reset; subtract two snapshots to measure an interval. A snapshot taken on another
 * thread while an operation runs may lag that operation.
 *
 * @param rank the rank these counters belong to
 * @param size the communicator's size
 * @param collectives one entry per name of {@link #COLLECTIVES}, in that order
 * @param peers one entry per other rank, in rank order
 */
public record CommStats(int rank, int size, List<CollectiveCount> collectives, List<PeerTraffic> peers) {

    /** The collectives counted, by their method names, in the order of {@link #collectives()}. */
    public static final List<String> COLLECTIVES = List.of("allReduce", "broadcast", "reduce", "allGather", "reduceScatter", "allToAll",
            "allToAllv", "gather", "scatter", "barrier", "send", "recv");

    /**
     * Calls of one collective.
     *
     * @param name the collective ("allReduce", ...)
     * @param operations calls that ran (successfully or not)
     * @param errors calls that failed
     * @param bytes their bytes (see {@link CommStats})
     */
    public record CollectiveCount(String name, long operations, long errors, long bytes) {
        public CollectiveCount {
            Objects.requireNonNull(name, "name");
        }
    }

    /**
     * Traffic with one peer.
     *
     * @param rank the peer
     * @param transport its transport ("SHM", "TCP", "LOCAL", ...)
     * @param bytesSent bytes to it
     * @param bytesReceived bytes from it
     */
    public record PeerTraffic(int rank, String transport, long bytesSent, long bytesReceived) {
        public PeerTraffic {
            Objects.requireNonNull(transport, "transport");
        }
    }

    /**
     * Traffic over one transport, the sum over the peers reached through it.
     *
     * @param transport its name
     * @param bytesSent bytes sent through it
     * @param bytesReceived bytes received through it
     */
    public record TransportTraffic(String transport, long bytesSent, long bytesReceived) {
    }

    public CommStats {
        collectives = List.copyOf(collectives);
        peers = List.copyOf(peers);
    }

    /** Calls that ran, all collectives together. */
    public long operations() {
        return collectives.stream().mapToLong(CollectiveCount::operations).sum();
    }

    /** Calls that failed, all collectives together. */
    public long errors() {
        return collectives.stream().mapToLong(CollectiveCount::errors).sum();
    }

    /** Bytes sent to every peer together. */
    public long bytesSent() {
        return peers.stream().mapToLong(PeerTraffic::bytesSent).sum();
    }

    /** Bytes received from every peer together. */
    public long bytesReceived() {
        return peers.stream().mapToLong(PeerTraffic::bytesReceived).sum();
    }

    /**
     * The counts of collective {@code name}.
     *
     * @throws IllegalArgumentException when {@code name} is not one of {@link #COLLECTIVES}
     */
    public CollectiveCount collective(String name) {
        for (CollectiveCount c : collectives) {
            if (c.name().equals(name)) {
                return c;
            }
        }
        throw new IllegalArgumentException("no collective '" + name + "': the counted ones are " + COLLECTIVES);
    }

    /**
     * The traffic with rank {@code peer}.
     *
     * @throws IllegalArgumentException when {@code peer} is this rank or outside [0, size)
     */
    public PeerTraffic peer(int peer) {
        for (PeerTraffic p : peers) {
            if (p.rank() == peer) {
                return p;
            }
        }
        throw new IllegalArgumentException("rank " + rank + " has no peer " + peer + " (peers are the other ranks of [0, " + size + "))");
    }

    /** Traffic per transport, in the order the transports first appear among the peers. */
    public List<TransportTraffic> transports() {
        Map<String, long[]> m = new LinkedHashMap<>();
        for (PeerTraffic p : peers) {
            long[] t = m.computeIfAbsent(p.transport(), k -> new long[2]);
            t[0] += p.bytesSent();
            t[1] += p.bytesReceived();
        }
        List<TransportTraffic> out = new ArrayList<>(m.size());
        m.forEach((k, v) -> out.add(new TransportTraffic(k, v[0], v[1])));
        return List.copyOf(out);
    }

    /** Traffic over transport {@code name}; zeros when no peer uses it. */
    public TransportTraffic transport(String name) {
        for (TransportTraffic t : transports()) {
            if (t.transport().equals(name)) {
                return t;
            }
        }
        return new TransportTraffic(name, 0, 0);
    }

    /** "rank 0/4: 12 ops (0 failed): allReduce 10, barrier 2; sent 98304 B, received 98304 B (SHM 98304 B / 98304 B)". */
    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("rank ").append(rank).append('/').append(size).append(": ").append(operations())
                .append(" ops (").append(errors()).append(" failed)");
        String sep = ": ";
        for (CollectiveCount c : collectives) {
            if (c.operations() != 0) {
                sb.append(sep).append(c.name()).append(' ').append(c.operations());
                sep = ", ";
            }
        }
        sb.append("; sent ").append(bytesSent()).append(" B, received ").append(bytesReceived()).append(" B");
        sep = " (";
        for (TransportTraffic t : transports()) {
            sb.append(sep).append(t.transport()).append(' ').append(t.bytesSent()).append(" B / ").append(t.bytesReceived()).append(" B");
            sep = ", ";
        }
        return sb.append(sep.equals(", ") ? ")" : "").toString();
    }
}
