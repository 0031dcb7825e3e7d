package org.jccl.testing;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HexFormat;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.transport.local.LocalTransport;
import org.jccl.spi.CollectiveCall;
import org.jccl.spi.CollectiveProvider;
import org.jccl.spi.Endpoint;
import org.jccl.spi.LinkCosts;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.jccl.spi.TransportContext;

/**
 * A transport the runtime knows only through the SPI (registered for ServiceLoader in this module's test resources),
 * named {@value #NAME}: ranks of one JVM, its messages carried by an in-JVM endpoint (LocalTransport's, opened under
 * this name), and a collective provider of its own ({@link Board}: every rank's input in memory all ranks of the JVM
 * read) that counts its calls. It takes all-reduces, all-gathers and barriers of at most {@link #MAX_BYTES}, declines
 * reduce-scatter and larger sizes (an infinite cost), so tests see both the provider's path and the fallback.
 *
 * <p>Off unless a test turns it on ({@link #enable}): every test of this module loads it, and while off it
 * takes no part (isEnabled is false). Priority -1: before LOCAL, so it carries every pair of ranks of one JVM.
 */
public final class ProviderTransport implements Transport {
    public static final String NAME = "TESTCOLL";
    /** Largest call the provider takes, in bytes (the vector of an all-reduce, the whole output of an all-gather). */
    public static final long MAX_BYTES = 4096;

    private static final AtomicBoolean ENABLED = new AtomicBoolean();
    /** Calls the providers ran, by collective, over all communicators and ranks since the last {@link #enable}. */
    private static final Map<CollectiveProvider.Collective, AtomicInteger> CALLS = new ConcurrentHashMap<>();
    /** The context each endpoint was opened with (the provider needs the communicator, rank and size). */
    private static final Map<Endpoint, TransportContext> CONTEXTS = java.util.Collections.synchronizedMap(new WeakHashMap<>());

    private final LocalTransport local = new LocalTransport();

    /** Turns the transport on (true) or off for communicators made from now on, and zeroes the call counts. */
    public static void enable(boolean on) {
        ENABLED.set(on);
        CALLS.clear();
    }

    /** How many calls of {@code c} the providers ran (each rank counts its own). */
    public static int calls(CollectiveProvider.Collective c) {
        AtomicInteger n = CALLS.get(c);
        return n == null ? 0 : n.get();
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return -1;
    }

    @Override
    public boolean isEnabled(Config config) {
        return ENABLED.get();
    }

    @Override
    public LinkCosts costs() {
        return LocalTransport.COSTS;
    }

    /** LocalTransport's endpoint, which finds its peers' endpoints under the name LOCAL: this transport's addresses are shown to it so. */
    @Override
    public Endpoint open(TransportContext ctx) throws IOException {
        Endpoint e = local.open(new LocalAlias(NAME, ctx, ctx::wakeup));
        CONTEXTS.put(e, ctx);
        return e;
    }

    @Override
    public boolean canConnect(PeerInfo self, PeerInfo peer) {
        return self.processId().equals(peer.processId()) && self.hostHash().equals(peer.hostHash()) && peer.addresses().containsKey(NAME);
    }

    @Override
    public CollectiveProvider openCollectives(Endpoint endpoint) {
        TransportContext ctx = CONTEXTS.get(endpoint);
        String comm = HexFormat.of().formatHex(ctx.commId());
        Board b = BOARDS.computeIfAbsent(comm, k -> new Board(ctx.size()));
        return new BoardProvider(b, ctx.rank(), ctx.size(), () -> BOARDS.remove(comm, b));
    }

    private static final Map<String, Board> BOARDS = new ConcurrentHashMap<>();

    /** One communicator's shared memory: a slot, an arrive, a done, a guard word and a closed flag per rank. */
    private static final class Board {
        final MemorySegment[] slots;
        final MemorySegment[] signatures;
        final AtomicLongArray arrived;
        final AtomicLongArray done;
        final AtomicLongArray guards;
        final AtomicLongArray closed;
        final AtomicInteger open;

        Board(int n) {
            Arena arena = Arena.ofAuto();
            slots = new MemorySegment[n];
            signatures = new MemorySegment[n];
            for (int q = 0; q < n; q++) {
                slots[q] = arena.allocate(MAX_BYTES, 64);
                signatures[q] = arena.allocate(CollectiveCall.SIGNATURE_BYTES, 8);
            }
            arrived = new AtomicLongArray(n);
            done = new AtomicLongArray(n);
            guards = new AtomicLongArray(n);
            closed = new AtomicLongArray(n);
            open = new AtomicInteger(n);
        }
    }

    /**
     * Call k: copy the input into this rank's slot, publish the guard (and signature) and arrive = k, wait for every peer's
     * arrive (comparing its guard and signature), combine the slots in rank order, publish done = k, wait for every peer's done (then nobody reads slot k any
     * more, so call k + 1 may overwrite it).
     */
    private static final class BoardProvider implements CollectiveProvider {
        private final Board b;
        private final int rank;
        private final int n;
        private final Runnable release;
        private long k;
        private boolean closed;

        BoardProvider(Board b, int rank, int n, Runnable release) {
            this.b = b;
            this.rank = rank;
            this.n = n;
            this.release = release;
        }

        @Override
        public String describe() {
            return NAME + " test board";
        }

        @Override
        public boolean supports(Collective kind, DataType type, ReduceOp op) {
            return kind != Collective.REDUCE_SCATTER;
        }

        @Override
        public double cost(Collective kind, long bytes) {
            return bytes <= MAX_BYTES ? 1e-9 : Double.POSITIVE_INFINITY;
        }

        private void count(Collective c) {
            CALLS.computeIfAbsent(c, x -> new AtomicInteger()).incrementAndGet();
        }

        @Override
        public void allReduce(CollectiveCall call, MemorySegment src, MemorySegment dst, long count, DataType type, ReduceOp op) {
            count(Collective.ALL_REDUCE);
            long bytes = type.bytes(count);
            MemorySegment.copy(src, 0, b.slots[rank], 0, bytes);
            arrive(call);
            MemorySegment.copy(b.slots[0], 0, dst, 0, bytes);
            for (int q = 1; q < n; q++) {
                call.reduce(dst, dst, b.slots[q].asSlice(0, bytes), count);
            }
            finish(call);
            call.moved(bytes);
        }

        @Override
        public void allGather(CollectiveCall call, MemorySegment dst, long bytesPerRank) {
            count(Collective.ALL_GATHER);
            MemorySegment.copy(dst, rank * bytesPerRank, b.slots[rank], 0, bytesPerRank);
            arrive(call);
            for (int q = 0; q < n; q++) {
                MemorySegment.copy(b.slots[q], 0, dst, q * bytesPerRank, bytesPerRank);
            }
            finish(call);
            call.moved(bytesPerRank);
        }

        @Override
        public void reduceScatter(CollectiveCall call, MemorySegment src, MemorySegment dst, long count, DataType type, ReduceOp op) {
            throw new IllegalStateException("the runtime called reduceScatter, which this provider does not support");
        }

        @Override
        public void barrier(CollectiveCall call) {
            count(Collective.BARRIER);
            arrive(call);
            finish(call);
        }

        private void arrive(CollectiveCall call) {
            k++;
            MemorySegment sig = call.signature();
            if (sig != null) {
                MemorySegment.copy(sig, 0, b.signatures[rank], 0, CollectiveCall.SIGNATURE_BYTES);
            }
            b.guards.set(rank, call.guard());
            b.arrived.set(rank, k); // volatile: the slot, signature and guard before it
            for (int q = 0; q < n; q++) {
                if (q != rank) {
                    await(call, b.arrived, q);
                    if (sig != null) {
                        call.checkSignature(q, b.signatures[q]);
                    }
                    call.checkGuard(q, b.guards.get(q));
                }
            }
        }

        private void finish(CollectiveCall call) {
            b.done.set(rank, k);
            for (int q = 0; q < n; q++) {
                if (q != rank) {
                    await(call, b.done, q);
                }
            }
        }

        private void await(CollectiveCall call, AtomicLongArray words, int q) {
            boolean started = false;
            while (words.get(q) < k) {
                call.checkAborted();
                if (b.closed.get(q) != 0) {
                    throw call.peerFailed(q, new IOException(NAME + ": rank " + q + " closed its provider"));
                }
                call.idle(!started);
                started = true;
            }
        }

        @Override
        public synchronized void close() {
            if (!closed) {
                closed = true;
                b.closed.set(rank, 1);
                if (b.open.decrementAndGet() == 0) {
                    release.run();
                }
            }
        }
    }

}
