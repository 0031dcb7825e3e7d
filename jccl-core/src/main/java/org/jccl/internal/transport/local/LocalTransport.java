package org.jccl.internal.transport.local;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.HexFormat;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.GuardMismatchException;
import org.jccl.spi.LinkCosts;
import org.jccl.spi.MemoryType;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.RemoteRegion;
import org.jccl.spi.Transport;
import org.jccl.spi.TransportContext;

/**
 * Ranks that are threads of one JVM ({@code Jccl.initLocal}) move messages by a single memory copy:
 * a sender posts its request in the receiver's mailbox, and the receiver, when it has a matching
 * receive posted, copies straight from the sender's memory and completes both. No sockets, no
 * staging; the sender's request carries its call's guard word, which the receiver compares with its
 * own before it copies. Chosen first (priority 0) for peers with the same JVM process id; off with
 * {@code JCCL_LOCAL_DISABLE=1}, which makes such ranks use TCP over loopback instead. Registration
 * and one-sided puts: {@link LocalRegions} (a put is one copy, a flush is immediate).
 */
public final class LocalTransport implements Transport {
    /** Open endpoints of this JVM, by "commIdHex:rank". */
    private static final ConcurrentHashMap<String, LocalEndpoint> ENDPOINTS = new ConcurrentHashMap<>();

    @Override
    public String name() {
        return "LOCAL";
    }

    /*
     * Measured on this project's 2-core development machine (Linux x86_64, Temurin 25) on
     * 2026-11-21 ~08:25 UTC with TunerCalibration (jccl-core test scope; how to run it is in its
     * javadoc): two ranks of one JVM ping-pong inside one operation, alpha = half the 8-byte round
     * trip, beta = the slope of half the round trip between 1 MiB and 16 MiB, each the least of
     * three medians. Other jobs kept the load average at ~11 during the run: a second run agreed
     * within ~20%, except the 8-byte time, 202 us whenever both ranks' threads shared one core (the
     * receiver spins 200 us before it yields), which is the host's oversubscription, not the
     * transport. 1.0 us, 20.9 GB/s.
     */
    /** What a message costs between two ranks of one JVM. */
    public static final LinkCosts COSTS = new LinkCosts(1.01e-6, 4.79e-11, "ping-pong, TunerCalibration, 2026-11-21");

    @Override
    public LinkCosts costs() {
        return COSTS;
    }

    @Override
    public int priority() {
        return 0;
    }

    @Override
    public boolean isEnabled(Config config) {
        return !Settings.LOCAL_DISABLE.getBool(config);
    }

    @Override
    public Endpoint open(TransportContext ctx) {
        // Unique per endpoint: two ranks claiming the same rank number are reported by bootstrap (MISMATCH),
        // not refused here with an internal error.
        String key = key(ctx.commId(), ctx.rank()) + ":" + java.util.UUID.randomUUID();
        LocalEndpoint e = new LocalEndpoint(ctx, key);
        ENDPOINTS.put(key, e);
        return e;
    }

    @Override
    public boolean canConnect(PeerInfo self, PeerInfo peer) {
        // Same process, and same host identity: JCCL_HOSTID can make ranks of one JVM stand for ranks of
        // different hosts, which must then talk as remote ranks do.
        return self.processId().equals(peer.processId()) && self.hostHash().equals(peer.hostHash())
                && peer.addresses().containsKey(name());
    }

    private static String key(byte[] commId, int rank) {
        return HexFormat.of().formatHex(commId) + ":" + rank;
    }

    /** Sends posted to one receiver by one sender, in order. */
    private static final class Mailbox {
        final ConcurrentLinkedQueue<P2pRequest> sends = new ConcurrentLinkedQueue<>();
        volatile boolean closed;
    }

    private static final class LocalEndpoint implements Endpoint {
        private final TransportContext ctx;
        private final String key;
        /** inbox[p]: what rank p sends to this rank. */
        private final Mailbox[] inbox;
        private final LocalConnection[] connections;
        private final LocalRegions regions;
        private volatile boolean closed;

        LocalEndpoint(TransportContext ctx, String key) {
            this.ctx = ctx;
            this.key = key;
            this.regions = new LocalRegions(ctx);
            this.inbox = new Mailbox[ctx.size()];
            for (int i = 0; i < inbox.length; i++) {
                inbox[i] = new Mailbox();
            }
            this.connections = new LocalConnection[ctx.size()];
        }

        @Override
        public byte[] address() {
            return key.getBytes(StandardCharsets.US_ASCII);
        }

        @Override
        public synchronized Connection connect(int peerRank) throws IOException {
            if (closed) {
                throw new IOException("in-JVM endpoint of rank " + ctx.rank() + " is closed");
            }
            LocalConnection c = connections[peerRank];
            if (c != null) {
                return c;
            }
            String peerKey = new String(ctx.peer(peerRank).addresses().get("LOCAL"), StandardCharsets.US_ASCII);
            LocalEndpoint peer = ENDPOINTS.get(peerKey);
            if (peer == null) {
                throw new IOException("rank " + peerRank + " has already closed its communicator (in-JVM endpoint " + peerKey + " is gone)");
            }
            c = new LocalConnection(peerRank, inbox[peerRank], peer.inbox[ctx.rank()], peer.ctx, regions);
            connections[peerRank] = c;
            return c;
        }

        @Override
        public String transportName() {
            return "LOCAL";
        }

        @Override
        public boolean canRegister(MemoryType type) {
            return type == MemoryType.HOST;
        }

        @Override
        public boolean canAllocate() {
            return true;
        }

        @Override
        public RegisteredRegion register(MemorySegment memory) {
            requireOpen();
            return regions.register(memory);
        }

        @Override
        public RegisteredRegion allocate(long length) {
            requireOpen();
            return regions.allocate(length);
        }

        private void requireOpen() {
            if (closed) {
                throw new IllegalStateException("in-JVM endpoint of rank " + ctx.rank() + " is closed");
            }
        }

        @Override
        public void close() {
            synchronized (this) {
                if (closed) {
                    return;
                }
                closed = true;
            }
            ENDPOINTS.remove(key, this);
            for (LocalConnection c : connections) {
                if (c != null) {
                    c.close();
                }
            }
            for (Mailbox m : inbox) {
                m.closed = true;
            }
            regions.close();
        }
    }

    private static final class LocalConnection implements Connection {
        private final int peer;
        private final Mailbox in;
        private final Mailbox out;
        private final ArrayDeque<P2pRequest> recvs = new ArrayDeque<>();
        private final ArrayDeque<P2pRequest> sends = new ArrayDeque<>();
        private final TransportContext peerContext;
        private final LocalRegions regions;
        private volatile boolean closed;

        LocalConnection(int peer, Mailbox in, Mailbox out, TransportContext peerContext, LocalRegions regions) {
            this.peer = peer;
            this.in = in;
            this.out = out;
            this.peerContext = peerContext;
            this.regions = regions;
        }

        @Override
        public boolean supportsPut() {
            return true;
        }

        @Override
        public RemoteRegion unpack(byte[] packedKey) {
            requireOpen();
            return regions.unpack(packedKey, this, peer, peerContext);
        }

        @Override
        public P2pRequest put(MemorySegment src, RemoteRegion dst, long dstOffset) {
            requireOpen();
            return regions.put(this, src, dst, dstOffset);
        }

        @Override
        public P2pRequest flush() {
            requireOpen();
            return LocalRegions.flushed();
        }

        private void requireOpen() {
            if (closed) {
                throw new IllegalStateException("the LOCAL connection to rank " + peer + " is closed");
            }
        }

        @Override
        public int peer() {
            return peer;
        }

        @Override
        public boolean inMemory() {
            return true;
        }

        @Override
        public String describe() {
            return "LOCAL (same JVM, one copy)";
        }

        @Override
        public P2pRequest send(MemorySegment src) {
            return send(src, 0);
        }

        @Override
        public P2pRequest send(MemorySegment src, long guard) {
            P2pRequest r = new P2pRequest(src, true, guard);
            sends.add(r);
            out.sends.add(r);
            peerContext.wakeup();
            return r;
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
            int work = 0;
            while (!recvs.isEmpty()) {
                P2pRequest s = in.sends.peek();
                if (s == null) {
                    break;
                }
                P2pRequest r = recvs.peek();
                if (!GuardMismatchException.matches(r.guard(), s.guard())) {
                    // Before the size: calls that differ are named as such, even where the sizes happen to agree.
                    GuardMismatchException e = new GuardMismatchException(peer, r.guard(), s.guard());
                    r.fail(e);
                    throw e;
                }
                if (s.size() != r.size()) {
                    IOException e = new IOException("rank " + peer + " sent a message of " + s.size() + " bytes where this rank expected "
                            + r.size() + ": the ranks called collectives (or send/recv) with different counts or types");
                    r.fail(e);
                    throw e;
                }
                try {
                    MemorySegment.copy(s.segment(), 0, r.segment(), 0, s.size());
                } catch (IllegalStateException closedMemory) {
                    // The sender's staging memory was freed under us: it failed or was aborted meanwhile.
                    IOException e = new IOException("rank " + peer + " closed its communicator (failed or was aborted) while this rank"
                            + " copied its message of " + s.size() + " bytes");
                    r.fail(e);
                    throw e;
                }
                in.sends.poll();
                recvs.poll();
                // Completing the sender's request releases its buffer: the copy above happened first.
                s.complete();
                r.complete();
                peerContext.wakeup();
                work++;
            }
            while (!sends.isEmpty() && sends.peek().isDone()) {
                sends.poll();
                work++;
            }
            if ((in.closed && !recvs.isEmpty()) || (out.closed && !sends.isEmpty())) {
                throw new IOException("rank " + peer + " closed its communicator (exited, failed or was aborted) with "
                        + recvs.size() + " receive(s) and " + sends.size() + " send(s) of this rank pending");
            }
            return work;
        }

        @Override
        public void close() {
            closed = true;
            in.closed = true;
            out.closed = true;
            regions.closeRemotes(this);
            peerContext.wakeup();
        }
    }
}
