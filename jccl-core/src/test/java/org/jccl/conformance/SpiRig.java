package org.jccl.conformance;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.jccl.testing.TestTransportContext;

/**
 * One rank of a transport-level test: its endpoint of a {@link Transport}, opened with a {@link
 * TestTransportContext} that the rig fills in as bootstrap would, its connections to every peer, and
 * helpers that move small messages over them (carrying remote keys and notifications). Used the same
 * way whether the ranks are threads of this JVM ({@link OneSidedConformance}) or processes
 * ({@link SpiRankServer}).
 */
final class SpiRig {
    /** How long any one wait of a scenario may take before it fails instead of hanging. */
    static final long DEADLINE_MILLIS = 60_000;

    private final int rank;
    private final int size;
    private final Endpoint endpoint;
    private final Connection[] connections;
    private final TestTransportContext ctx;

    private SpiRig(TestTransportContext ctx, Endpoint endpoint) {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.size = ctx.size();
        this.endpoint = endpoint;
        this.connections = new Connection[size];
    }

    int rank() {
        return rank;
    }

    int size() {
        return size;
    }

    Endpoint endpoint() {
        return endpoint;
    }

    Connection connection(int peer) {
        return connections[peer];
    }

    String transport() {
        return endpoint.transportName();
    }

    /** Opens this rank's endpoint; the peers' infos come later ({@link #setPeers}). */
    static SpiRig open(Transport t, byte[] commId, byte[] secret, int rank, int size, Config config) throws IOException {
        TestTransportContext c = new TestTransportContext(commId, rank, size, secret, config);
        return new SpiRig(c, t.open(c));
    }

    /** The peer table, as bootstrap would hand it to every rank; {@code peers[r]} is rank r's info. */
    void setPeers(PeerInfo[] peers) {
        for (int r = 0; r < size; r++) {
            ctx.setPeer(r, peers[r]);
        }
    }

    /** What this rank publishes at bootstrap: its endpoint address under the transport's name. */
    PeerInfo info(Transport t, String hostId, long pid, String processId) {
        return new PeerInfo(rank, "testhost", pid, hostId, processId, Map.of(t.name(), endpoint.address()));
    }

    /**
     * Prepares the endpoint for every peer, connects to each, and then exchanges one message with every
     * peer (blocks until the peers do the same). The exchange is what communicator creation's closing
     * barrier gives the runtime: no rank starts a scenario, and so none can close its endpoint, before
     * every peer has connected. Without it a rank whose scenario sends nothing (registerProcessMemory over
     * SHM) could close, unlinking the ring it published, before a slower peer process mapped that ring.
     */
    void connectAll() throws IOException {
        int[] peers = new int[size - 1];
        for (int r = 0, i = 0; r < size; r++) {
            if (r != rank) {
                peers[i++] = r;
            }
        }
        endpoint.prepare(peers);
        for (int p : peers) {
            connections[p] = endpoint.connect(p);
        }
        Map<Integer, byte[]> hello = new HashMap<>();
        for (int p : peers) {
            hello.put(p, new byte[] {(byte) rank, (byte) p});
        }
        Map<Integer, byte[]> got = exchange(hello, peers);
        for (int p : peers) {
            byte[] b = got.get(p);
            if (b.length != 2 || b[0] != (byte) p || b[1] != (byte) rank) {
                throw new IOException("rank " + rank + ": the connection to rank " + p + " delivered " + Arrays.toString(b)
                        + " as its first message, not [" + (byte) p + ", " + (byte) rank + "]");
            }
        }
    }

    /** Spins progress on every connection of this rank until all requests are done; fails on a request error or after the deadline. */
    void drive(List<P2pRequest> reqs) throws IOException {
        TestTransportContext.drive("rank " + rank + ": ", DEADLINE_MILLIS, Arrays.asList(connections), reqs);
    }

    void drive(P2pRequest... reqs) throws IOException {
        drive(List.of(reqs));
    }

    /**
     * Sends {@code out.get(p)} to every peer p in the map and receives one byte string from every peer in
     * {@code from}: an 8-byte length, then the bytes (receives posted before sends, so no order deadlocks).
     */
    Map<Integer, byte[]> exchange(Map<Integer, byte[]> out, int... from) throws IOException {
        // Shared: the in-JVM transport's receiver copies straight from the sender's memory, on its own thread.
        try (Arena a = Arena.ofShared()) {
            Map<Integer, MemorySegment> lengths = new HashMap<>();
            List<P2pRequest> reqs = new ArrayList<>();
            for (int p : from) {
                MemorySegment l = a.allocate(8);
                lengths.put(p, l);
                reqs.add(connections[p].recv(l));
            }
            for (Map.Entry<Integer, byte[]> e : out.entrySet()) {
                MemorySegment l = a.allocate(8);
                l.set(ValueLayout.JAVA_LONG, 0, e.getValue().length);
                reqs.add(connections[e.getKey()].send(l));
            }
            drive(reqs);
            reqs.clear();
            Map<Integer, MemorySegment> bodies = new HashMap<>();
            for (int p : from) {
                MemorySegment b = a.allocate(Math.max(1, lengths.get(p).get(ValueLayout.JAVA_LONG, 0)))
                        .asSlice(0, lengths.get(p).get(ValueLayout.JAVA_LONG, 0));
                bodies.put(p, b);
                reqs.add(connections[p].recv(b));
            }
            for (Map.Entry<Integer, byte[]> e : out.entrySet()) {
                MemorySegment b = a.allocate(Math.max(1, e.getValue().length)).asSlice(0, e.getValue().length);
                MemorySegment.copy(MemorySegment.ofArray(e.getValue()), 0, b, 0, e.getValue().length);
                reqs.add(connections[e.getKey()].send(b));
            }
            drive(reqs);
            Map<Integer, byte[]> in = new HashMap<>();
            for (int p : from) {
                in.put(p, bodies.get(p).toArray(ValueLayout.JAVA_BYTE));
            }
            return in;
        }
    }

    /** Sends {@code bytes} to {@code peer} and waits until it is taken. */
    void send(int peer, byte[] bytes) throws IOException {
        exchange(Map.of(peer, bytes));
    }

    /** Receives one byte string from {@code peer}. */
    byte[] recv(int peer) throws IOException {
        return exchange(Map.of(), peer).get(peer);
    }

    /** Closes the endpoint (and every connection and region it made). */
    void close() {
        endpoint.close();
    }
}
