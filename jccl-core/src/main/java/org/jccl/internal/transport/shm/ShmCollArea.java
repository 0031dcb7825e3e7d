package org.jccl.internal.transport.shm;

import static org.jccl.internal.transport.shm.ShmCollDescriptor.ARRIVE;
import static org.jccl.internal.transport.shm.ShmCollDescriptor.INT;
import static org.jccl.internal.transport.shm.ShmCollDescriptor.LONG;
import static org.jccl.internal.transport.shm.ShmCollDescriptor.REDUCED;
import static org.jccl.internal.transport.shm.ShmCollDescriptor.STATE;
import static org.jccl.internal.transport.shm.ShmCollDescriptor.STATE_CLOSED;

import java.lang.foreign.MemorySegment;
import org.jccl.spi.PeerInfo;

/**
 * One rank's view of its communicator's shared collective segment ({@link ShmCollDescriptor}): an
 * area per rank that every rank of the host can read, and two words per rank that say how far it
 * got. Collectives on it ({@link ShmCollectives}, SHM's collective provider) move data with one copy
 * into the writer's own area and reads straight out of the peers' areas, instead of two copies
 * through a ring per peer pair, and synchronise with one release store and one acquire load per
 * peer per step, with no message, no request object and no progress engine.
 *
 * <p>Protocol, per round {@code k} (a communicator-wide counter: every rank runs the same
 * collectives in the same order, so every rank numbers the rounds alike): a rank writes only the
 * round's region of its own area, and only after every peer's {@code arrive} word has reached
 * {@code k - 1} (a peer that arrived at round k-1 has finished reading round k-2 and every round
 * before it); it then stores {@code arrive = k} with release, and reads a peer's region only after
 * loading that peer's {@code arrive >= k} with acquire. A second word, {@code reduced}, publishes the
 * slice a rank reduced in a round (two-step all-reduce) the same way. Every collective ends its
 * round having seen every peer arrive at it, so no rank runs more than one round ahead of another:
 * the inline and signature slots, two per rank, alternate by round parity.
 *
 * <p>Where a round's region lies ({@link #nextRound(long)}; the same on every rank, since it
 * depends only on the sequence of round sizes and modes): a round of at most {@link #hotBytes}
 * bytes takes one of two small regions at the start of the area, the one the previous round did not
 * use, so small operations keep rewriting the same few lines, hot in both ranks' caches. A larger
 * round takes a region of the rest of the area, a ring: in the <em>near</em> mode one of the two
 * halves of its first {@code hotWindow} bytes by round parity (4 MiB, rounds of at most 1 MiB: the
 * former two halves, whose lines stay in the caches), in the <em>far</em> mode the ring's next bytes
 * (16 MiB by default, less the hot regions; rounds of up to {@code JCCL_SHM_COLL_SLOT}), so that a
 * line is rewritten only after the whole ring has been written since.
 *
 * <p>Why two modes: a store to a line that a peer's cache still holds must first invalidate the
 * peer's copy. When the host gives the VM's two vCPUs a shared cache (near), that is cheap and the
 * small window, whose lines stay cached, is fastest. When it places them on different dies (far,
 * docs/PERFORMANCE.md "The 8 MB row"), every such store waits for a cross-die round trip: rewriting
 * the lines the peers read two rounds before ran at ~2.5 GB/s, against 15-30 GB/s near. Between two
 * writes of a ring line the peers stream the whole ring through their caches, which evicts it, so
 * the far mode does not pay that; near it costs 30-70% (the lines come from memory). Rank 0 picks
 * the mode ({@code JCCL_SHM_COLL_RING}: by default from what it measures, {@link #copiedIn}: two
 * near-mode copies into its area below {@link #FAR_BYTES_PER_NS} in a row switch to far for {@link
 * #FAR_HOLD_NANOS}, then it tries near again) and publishes it with its arrive of the round before an
 * operation, in one of two parity words; every rank reads it when the operation starts, so the mode
 * changes only between operations and is the same on every rank.
 *
 * <p>A ring round that would overlap the previous round's region (possible only after rounds of
 * different sizes or a change of mode) is preceded by a round without data that every rank arrives
 * at and waits for ({@link #needsFence}), after which no peer reads the previous region any more.
 *
 * <p><b>Threading contract:</b> the round counter and every access belong to the thread that runs
 * the communicator's operations (one at a time, under the communicator's execution lock);
 * {@link #close()} may come from any thread.
 */
public final class ShmCollArea {
    /** How often a waiting rank asks the OS whether a peer's process still exists. */
    static final long LIVENESS_PERIOD_NANOS = 50_000_000L;
    /**
     * Copy rate into the near window below which rank 0 takes the host for far: 5 GB/s, between the
     * ~2.5 GB/s of rewriting lines a far peer cached and the 10-30 GB/s of the near state.
     */
    static final double FAR_BYTES_PER_NS = 5.0;
    /** Copies smaller than this are not timed (too short to tell the states apart reliably). */
    static final long MEASURE_MIN_BYTES = 256 << 10;
    /** How long rank 0 stays in the far mode before it tries the near one again. */
    public static final long FAR_HOLD_NANOS = 500_000_000L;
    /** {@code JCCL_SHM_COLL_RING} values. */
    public static final int RING_AUTO = -1;
    public static final int RING_NEVER = 0;
    public static final int RING_ALWAYS = 1;

    private final MemorySegment file;
    private final int rank;
    private final int ranks;
    private final long areaBytes;
    private final long slotBytes;
    private final long hotBytes;
    private final long hotWindow;
    private final long hotSlot;
    /** The mode of the running operation (far: the whole ring); the same on every rank. */
    private boolean far;
    /** Rank 0: JCCL_SHM_COLL_RING, and what it publishes for the next operation. */
    private final int ringPolicy;
    private boolean wantFar;
    private int slowCopies;
    private long farUntil;
    private long farSwitches;
    private final long dataOffset;
    private final PeerInfo[] peers;
    private final boolean[] checkPid;
    private final MemorySegment[] areas;
    /** Regions of the round being run, by rank (operation thread only). */
    private final MemorySegment[] current;
    /** Start and end of the previous round's region (empty: none), the ring's next free byte. */
    private long prevStart;
    private long prevEnd;
    private long cursor;

    private final MemorySegment[][] inline;
    private long round;
    private volatile boolean closed;
    /** The signature written with every arrive while a checked collective runs (JCCL_CHECK), else null; operation thread only. */
    private MemorySegment signature;
    /** The mismatch guard's word of the running call (0: none), written with every arrive; operation thread only. */
    private long guard;

    ShmCollArea(MemorySegment file, int rank, PeerInfo[] peers, boolean[] checkPid, int ringPolicy) {
        this.file = file;
        this.ringPolicy = ringPolicy;
        this.wantFar = ringPolicy == RING_ALWAYS;
        this.rank = rank;
        this.ranks = peers.length;
        this.areaBytes = file.get(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.AREA_BYTES_OFFSET);
        this.slotBytes = file.get(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.SLOT_BYTES_OFFSET);
        this.hotBytes = file.get(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.HOT_BYTES_OFFSET);
        this.hotWindow = file.get(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.HOT_WINDOW_OFFSET);
        this.hotSlot = file.get(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.HOT_SLOT_OFFSET);
        this.dataOffset = ShmCollDescriptor.dataOffset(ranks);
        this.peers = peers.clone();
        this.checkPid = checkPid.clone();
        this.areas = new MemorySegment[ranks];
        this.current = new MemorySegment[ranks];
        this.inline = new MemorySegment[ranks][2];
        for (int q = 0; q < ranks; q++) {
            areas[q] = file.asSlice(dataOffset + q * areaBytes, areaBytes);
            for (int h = 0; h < 2; h++) {
                inline[q][h] = file.asSlice(ShmCollDescriptor.word(q, ShmCollDescriptor.INLINE) + h * ShmCollDescriptor.INLINE_BYTES,
                        ShmCollDescriptor.INLINE_BYTES);
            }
        }
        this.cursor = 2 * hotBytes;
        // Rounds continue from whatever this rank published before (zero in a fresh segment).
        this.round = (long) LONG.getAcquire(file, ShmCollDescriptor.word(rank, ARRIVE));
    }

    /** This rank. */
    public int rank() {
        return rank;
    }

    /** Ranks of the communicator (all of them map this segment). */
    public int ranks() {
        return ranks;
    }

    /** Most bytes a rank can publish in one round of the running operation (its mode's largest round). */
    public long slotBytes() {
        return far ? slotBytes : hotSlot;
    }

    /** The near mode's largest round (what every operation can count on, e.g. for the tuner). */
    public long nearSlotBytes() {
        return hotSlot;
    }

    /**
     * Starts an operation: takes the mode rank 0 published for the round that comes next (see the
     * class comment). Every rank calls it at the start of every operation that has rounds of data.
     */
    public void beginOperation() {
        long next = round + 1;
        far = (long) LONG.getAcquire(file, ShmCollDescriptor.word(0, ShmCollDescriptor.MODE) + (next & 1) * 8) != 0;
    }

    /** Whether the running operation uses the whole ring (far mode). */
    public boolean far() {
        return far;
    }

    /** Whether this rank times its copies into its area ({@link #copiedIn}): rank 0, deciding by measurement, in the near mode. */
    public boolean timesCopies() {
        return rank == 0 && ringPolicy == RING_AUTO && !far;
    }

    /**
     * Rank 0, near mode: {@code bytes} were copied into its region in {@code nanos}. Two slow copies
     * in a row ({@link #FAR_BYTES_PER_NS}) make the next operations far, for {@link #FAR_HOLD_NANOS}.
     */
    public void copiedIn(long bytes, long nanos) {
        if (bytes < MEASURE_MIN_BYTES) {
            return;
        }
        if (bytes < FAR_BYTES_PER_NS * nanos) {
            if (++slowCopies >= 2 && !wantFar) {
                wantFar = true;
                farUntil = System.nanoTime() + FAR_HOLD_NANOS;
                farSwitches++;
                if (farSwitches == 1 || org.jccl.internal.log.Log.enabled(org.jccl.internal.log.Log.Level.TRACE,
                        org.jccl.internal.log.Log.Subsys.SHM)) {
                    org.jccl.internal.log.Log.info(org.jccl.internal.log.Log.Subsys.SHM, rank, "SHM: shared collective segment: copies into"
                            + " the near window ran at " + String.format(java.util.Locale.ROOT, "%.1f", (double) bytes / nanos) + " GB/s"
                            + " (the peers' CPUs are far from this one): larger rounds use the whole ring of " + (areaBytes - 2 * hotBytes)
                            + " B for the next " + FAR_HOLD_NANOS / 1_000_000 + " ms (switch " + farSwitches + "; later ones at TRACE)");
                }
            }
        } else {
            slowCopies = 0;
        }
    }

    /** How many times rank 0 switched to the far mode (tests, logs). */
    public long farSwitches() {
        return farSwitches;
    }

    /** Rounds of at most this many bytes use the two hot regions; larger ones the ring. */
    public long hotBytes() {
        return hotBytes;
    }

    /** Bytes of each area. */
    public long areaBytes() {
        return areaBytes;
    }

    /**
     * Starts the next round, in which every rank publishes at most {@code bytes} (at most {@link
     * #slotBytes}; 0: a round without data, e.g. a barrier), places its region (see the class
     * comment) and returns the round's number (1, 2, ...).
     */
    public long nextRound(long bytes) {
        long k = ++round;
        if (bytes <= 0) {
            prevStart = prevEnd = 0;
            return k;
        }
        if (bytes > slotBytes()) {
            throw new IllegalArgumentException("a round of " + bytes + " bytes in a shared segment of rounds of at most " + slotBytes());
        }
        long start;
        long len = align(bytes);
        if (bytes <= hotBytes) {
            start = prevEnd > prevStart && prevStart == 0 ? hotBytes : 0;
        } else {
            start = ringStart(k, len);
            if (start < prevEnd && prevStart < start + len) {
                throw new IllegalStateException("round " + k + " would overlap the previous round's region (needsFence was not asked)");
            }
            if (far) {
                cursor = start + len;
            }
        }
        prevStart = start;
        prevEnd = start + len;
        for (int q = 0; q < ranks; q++) {
            current[q] = areas[q].asSlice(start, bytes);
        }
        return k;
    }

    /**
     * Whether a round of {@code bytes} would overlap the previous round's region, which the peers
     * may still be reading: then a round without data (every rank arrives and waits for all) must
     * come first. The same answer on every rank.
     */
    public boolean needsFence(long bytes) {
        if (bytes <= hotBytes || prevEnd <= prevStart) {
            return false;
        }
        long len = align(bytes);
        long start = ringStart(round + 1, len);
        return start < prevEnd && prevStart < start + len;
    }

    /**
     * Near: the start of half {@code k & 1} of the near window, as the former two halves (consecutive
     * rounds alternate, each rewrites the lines of two rounds before, hot in the caches). Far: the
     * ring's next bytes, from its start again when they do not fit.
     */
    private long ringStart(long k, long len) {
        if (!far) {
            return 2 * hotBytes + (k & 1) * (hotWindow / 2 / ShmCollDescriptor.ALIGN * ShmCollDescriptor.ALIGN);
        }
        return cursor + len <= areaBytes ? cursor : 2 * hotBytes;
    }

    private static long align(long bytes) {
        return (bytes + ShmCollDescriptor.ALIGN - 1) & -ShmCollDescriptor.ALIGN;
    }

    /** {@code q}'s region of {@code round} (the round started last): what {@code q} publishes in it. */
    public MemorySegment slot(int q, long round) {
        assert round == this.round;
        return current[q];
    }

    /** Bytes of the inline slots ({@link #inline}). */
    public static final long INLINE_BYTES = ShmCollDescriptor.INLINE_BYTES;

    /**
     * Rank {@code q}'s inline slot of {@code round}'s parity: for inputs of at most {@link
     * #INLINE_BYTES}, in the cache line of its {@code arrive} word; same rules as {@link #slot}.
     */
    public MemorySegment inline(int q, long round) {
        return inline[q][(int) (round & 1)];
    }

    /** The number of the last round this rank started (rounds after it belong to operations yet to run). */
    public long currentRound() {
        return round;
    }

    /**
     * While {@code sig} is not null, every {@link #arrive} first writes it into this rank's signature
     * slot of the round's parity ({@link ShmCollDescriptor#SIG}), published by the arrive's release store.
     */
    public void sign(MemorySegment sig) {
        this.signature = sig;
    }

    /** The signature {@code q} wrote with its arrive of {@code round}: read after an acquire load of {@code arrive >= round}. */
    public MemorySegment signatureOf(int q, long round) {
        return file.asSlice(ShmCollDescriptor.word(q, ShmCollDescriptor.SIG) + (round & 1) * ShmCollDescriptor.SIG_BYTES,
                ShmCollDescriptor.SIG_BYTES);
    }

    /**
     * Sets the mismatch guard's word of the call whose rounds come next (OpGuard; bit 0 clear; 0: none):
     * every {@link #arrive} writes it, with the round's parity in bit 0, into this rank's guard word
     * ({@link ShmCollDescriptor#GUARD}), in the line of its arrive word.
     */
    public void guard(long g) {
        this.guard = g;
    }

    /**
     * {@code q}'s guard word as it stands, read after an acquire load of its {@code arrive >= round}:
     * the guard of its call at {@code round} when bit 0 is {@code round}'s parity. Otherwise {@code q}
     * has already arrived at {@code round + 1} (no rank runs more than one round ahead), which it did
     * only after comparing this rank's guard of {@code round} with its own; so whenever two ranks' calls
     * differ at a round, at least one of them sees the other's word of that round, and neither gets past it.
     */
    public long guardOf(int q) {
        return file.get(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.word(q, ShmCollDescriptor.GUARD));
    }

    /**
     * Publishes this rank's input of {@code round} (release: the area's bytes before it). Rank 0
     * first writes the mode of an operation that would start at {@code round + 1}.
     */
    public void arrive(long round) {
        if (rank == 0) {
            if (wantFar && ringPolicy == RING_AUTO && System.nanoTime() - farUntil > 0) {
                wantFar = false;
                slowCopies = 0;
            }
            // Written only when it changes: the word shares a cache line that every peer reads at the start of
            // every operation (beginOperation), and a store would take that line from them each round (one more
            // cross-core miss per 8-byte all-reduce: 0.74 -> 0.54 us in the test host's far state, 0.30 -> 0.26 near).
            long mode = ShmCollDescriptor.word(0, ShmCollDescriptor.MODE) + ((round + 1) & 1) * 8;
            long want = wantFar ? 1L : 0L;
            if (file.get(java.lang.foreign.ValueLayout.JAVA_LONG, mode) != want) {
                file.set(java.lang.foreign.ValueLayout.JAVA_LONG, mode, want);
            }
        }
        MemorySegment sig = signature;
        if (sig != null) {
            MemorySegment.copy(sig, 0, file, ShmCollDescriptor.word(rank, ShmCollDescriptor.SIG) + (round & 1) * ShmCollDescriptor.SIG_BYTES,
                    ShmCollDescriptor.SIG_BYTES);
        }
        long g = guard;
        if (g != 0) { // 0: the guard is off on this communicator (JCCL_CHECK=none), the word stays 0 (matches anything)
            file.set(java.lang.foreign.ValueLayout.JAVA_LONG, ShmCollDescriptor.word(rank, ShmCollDescriptor.GUARD), g | (round & 1));
        }
        LONG.setRelease(file, ShmCollDescriptor.word(rank, ARRIVE), round);
    }

    /** Publishes this rank's reduced slice of {@code round}. */
    public void reduced(long round) {
        LONG.setRelease(file, ShmCollDescriptor.word(rank, REDUCED), round);
    }

    /** The last round {@code q} arrived at (acquire: its area's bytes of that round are visible after it). */
    public long arrivedOf(int q) {
        return (long) LONG.getAcquire(file, ShmCollDescriptor.word(q, ARRIVE));
    }

    /** The last round whose reduced slice {@code q} published. */
    public long reducedOf(int q) {
        return (long) LONG.getAcquire(file, ShmCollDescriptor.word(q, REDUCED));
    }

    /** Whether {@code q} closed its communicator (or aborted it). */
    public boolean closedBy(int q) {
        return (int) INT.getAcquire(file, ShmCollDescriptor.word(q, STATE)) == STATE_CLOSED;
    }

    /**
     * Null while {@code q}'s process exists (or cannot be seen from this pid namespace), else the
     * reason it is gone, worded as the SHM connections word it.
     */
    public String processGone(int q) {
        if (!checkPid[q] || ProcessHandle.of(peers[q].pid()).map(ProcessHandle::isAlive).orElse(false)) {
            return null;
        }
        return "SHM connection from rank " + rank + " to " + peers[q].describe() + " failed: process " + peers[q].pid()
                + " no longer exists (it left the shared collective segment in the middle of an operation). The peer exited or crashed";
    }

    /** Why a closed peer can no longer take part, worded as the SHM connections word it. */
    public String closedMessage(int q) {
        return "SHM connection to " + peers[q].describe() + " closed by the peer while rank " + rank + " waited for it in the shared"
                + " collective segment: it exited or crashed, or closed its communicator after an error of its own (see its log)";
    }

    /** Marks this rank's words closed, so that peers waiting for it fail at once. Idempotent; any thread. */
    void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            INT.setRelease(file, ShmCollDescriptor.word(rank, STATE), STATE_CLOSED);
        } catch (IllegalStateException alreadyUnmapped) {
            // the peers learn from the process or their own close
        }
    }

    /** For logs. */
    String describe() {
        return ranks + " areas of " + areaBytes + " B (two hot regions of " + hotBytes + " B, then a ring: near mode " + hotWindow
                + " B of it in rounds of at most " + hotSlot + " B, far mode all of it in rounds of at most " + slotBytes + " B)";
    }
}
