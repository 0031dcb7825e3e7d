package org.jccl.internal.control;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The last {@code JCCL_FLIGHT_RECORDER_SIZE} operations of one communicator: sequence number,
 * collective, bytes, element type, reduction, root or peer, algorithm, transport, state and times.
 *
 * <p>Preallocated parallel arrays indexed by {@code seq % capacity}; recording an operation
 * allocates nothing (the strings are constants: operation names, {@code DataType.ncclName()},
 * algorithm tokens, transport names). Each slot is guarded by a sequence lock (a version that is
 * odd while a writer changes the slot), so the control thread can read a consistent snapshot while
 * the thread running an operation (its caller or the operation thread) writes.
 *
 * <p>Times. A large operation (over 64 KiB) is stamped when issued and when it finishes. A small
 * one is not, whether it runs at once on the caller's thread or from the queue: two clock reads
 * (24 ns each on the test VM) were about 45 of the 120-129 ns a blocking 8-byte all-reduce took on a
 * one-rank communicator, which moves nothing. It is stamped by the first clock read of its own waits (after its first
 * few dozen polls, see {@link #stamp}) or, failing that, when the control thread's stall watchdog
 * first sees it running ({@link #currentStamped}); a stamped operation reads the clock again when
 * it finishes. So every operation that waits, hangs or fails has times; one that finished within
 * its first polls has none (0, written as 0 / duration -1 in dumps).
 *
 * <p>Threading: {@link #issued} is called under the communicator's submission lock, {@link #started}
 * and {@link #finished} by whichever thread runs the operation (under its execution lock); every
 * other method from any thread.
 */
public final class FlightRecorder {

    /** Where an operation is. */
    public enum State { QUEUED, RUNNING, DONE, FAILED }

    private static final VarHandle VERSION = MethodHandles.arrayElementVarHandle(long[].class);
    private static final VarHandle LAST_ISSUED;
    private static final VarHandle LAST_FINISHED;
    private static final VarHandle OPS;
    private static final VarHandle ERRORS;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            LAST_ISSUED = l.findVarHandle(FlightRecorder.class, "lastIssued", long.class);
            LAST_FINISHED = l.findVarHandle(FlightRecorder.class, "lastFinished", long.class);
            OPS = l.findVarHandle(FlightRecorder.class, "ops", long.class);
            ERRORS = l.findVarHandle(FlightRecorder.class, "errors", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final int capacity;
    private final long[] version;
    private final long[] seq;
    private final String[] name;
    private final long[] bytes;
    private final String[] dtype;
    private final String[] redop;
    private final int[] root;
    private final String[] algorithm;
    private final String[] transport;
    private final byte[] state;
    private final long[] issuedNs;
    private final long[] startNs;
    private final long[] endNs;

    /** Wall clock of {@link #baseNs}, to turn nanoTime stamps into dates in dumps. */
    private final long baseEpochMs = System.currentTimeMillis();
    private final long baseNs = System.nanoTime();

    // The four counters below have one writer each (issued: the submission lock; the rest: the
    // execution lock), which stores them with release semantics (a plain store on x86, no fence:
    // this is every operation's path); readers on other threads read them as volatile.

    /** Highest sequence number issued, -1 before the first. */
    private volatile long lastIssued = -1;
    /** Highest sequence number finished (operations finish in issue order), -1 before the first. */
    private volatile long lastFinished = -1;
    private volatile long ops;
    private volatile long errors;
    /** When the last operation finished (nanoTime), the start of one queued behind it; execution lock only. */
    private long lastEndNs;

    public FlightRecorder(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity " + capacity);
        }
        this.capacity = capacity;
        version = new long[capacity];
        seq = new long[capacity];
        java.util.Arrays.fill(seq, -1);
        name = new String[capacity];
        bytes = new long[capacity];
        dtype = new String[capacity];
        redop = new String[capacity];
        root = new int[capacity];
        algorithm = new String[capacity];
        transport = new String[capacity];
        state = new byte[capacity];
        issuedNs = new long[capacity];
        startNs = new long[capacity];
        endNs = new long[capacity];
    }

    public int capacity() {
        return capacity;
    }

    private int slot(long s) {
        return (int) (s % capacity);
    }

    /** Takes slot {@code i}'s sequence lock; returns the (odd) version to pass to {@link #unlock}. */
    private long lock(int i) {
        while (true) {
            long v = (long) VERSION.getVolatile(version, i);
            if ((v & 1) == 0 && VERSION.compareAndSet(version, i, v, v + 1)) {
                return v + 1;
            }
            Thread.onSpinWait();
        }
    }

    private void unlock(int i, long locked) {
        VERSION.setRelease(version, i, locked + 1);
    }

    /**
     * Records an issued operation. {@code timed}: stamp its issue time now (else it is stamped
     * lazily, see the class comment). {@code running}: it starts now, on the issuing thread, and
     * {@link #started} will not be called for it. Returns the issue time it read (System.nanoTime),
     * 0 when untimed, so that the caller need not read the clock again.
     */
    public long issued(long s, String opName, long nbytes, String type, String reduce, int rootOrPeer, String via, boolean timed,
                       boolean running) {
        long now = timed ? System.nanoTime() : 0;
        int i = slot(s);
        long v = lock(i);
        seq[i] = s;
        name[i] = opName;
        bytes[i] = nbytes;
        dtype[i] = type;
        redop[i] = reduce;
        root[i] = rootOrPeer;
        algorithm[i] = null;
        transport[i] = via;
        state[i] = (byte) (running ? State.RUNNING : State.QUEUED).ordinal();
        issuedNs[i] = now;
        startNs[i] = running ? now : 0; // running at once: nothing else was pending, so it starts when issued
        endNs[i] = 0;
        unlock(i, v);
        if (s > lastIssued) {
            LAST_ISSUED.setRelease(this, s);
        }
        return now;
    }

    /**
     * Marks operation {@code s} running. Its start time is not read from the clock (System.nanoTime
     * costs ~25 ns, a few percent of an 8-byte all-reduce): operations run one at a time in issue
     * order, so {@code s} starts when it was issued or when its predecessor finished, whichever is
     * later (plus the hand-over to the thread that runs it, microseconds).
     */
    public void started(long s) {
        int i = slot(s);
        long v = lock(i);
        if (seq[i] == s) {
            state[i] = (byte) State.RUNNING.ordinal();
            startNs[i] = issuedNs[i] == 0 ? 0 : Math.max(issuedNs[i], lastEndNs);
        }
        unlock(i, v);
    }

    /**
     * Stamps running operation {@code s} with {@code nowNs} (issue and start) unless it has times
     * already: called by its own first clock read while waiting, by any thread.
     */
    public void stamp(long s, long nowNs) {
        int i = slot(s);
        long v = lock(i);
        if (seq[i] == s && startNs[i] == 0 && state[i] == State.RUNNING.ordinal()) {
            issuedNs[i] = issuedNs[i] == 0 ? nowNs : issuedNs[i];
            startNs[i] = nowNs;
        }
        unlock(i, v);
    }

    /** Marks operation {@code s} finished; {@code algo} is the algorithm the tuner chose, or null. */
    public void finished(long s, boolean ok, String algo) {
        int i = slot(s);
        long v = lock(i);
        if (seq[i] == s) {
            state[i] = (byte) (ok ? State.DONE : State.FAILED).ordinal();
            // An operation without times finished within its first polls: it stays without (class comment).
            // A failure is always stamped.
            if (startNs[i] != 0 || !ok) {
                long now = System.nanoTime();
                endNs[i] = now;
                lastEndNs = now;
            }
            algorithm[i] = algo;
        }
        unlock(i, v);
        OPS.setRelease(this, ops + 1);
        if (!ok) {
            ERRORS.setRelease(this, errors + 1);
        }
        if (s > lastFinished) {
            LAST_FINISHED.setRelease(this, s);
        }
    }

    public long lastIssued() {
        return lastIssued;
    }

    public long lastFinished() {
        return lastFinished;
    }

    public long ops() {
        return ops;
    }

    public long errors() {
        return errors;
    }

    /** One recorded operation, as read by {@link #entry} and {@link #snapshot}. */
    public record Entry(long seq, String name, long bytes, String dtype, String redop, int rootOrPeer, String algorithm,
                        String transport, State state, long issuedNs, long startNs, long endNs) {

        /** How long it has been waiting or ran, in ms, as of {@code nowNs}. */
        public long elapsedMs(long nowNs) {
            long from = startNs != 0 ? startNs : issuedNs;
            if (from == 0) {
                return 0; // not stamped yet: it started within its first polls (class comment)
            }
            long to = endNs != 0 ? endNs : nowNs;
            return Math.max(0, (to - from) / 1_000_000);
        }

        public boolean finished() {
            return state == State.DONE || state == State.FAILED;
        }
    }

    /** Operation {@code s} if the recorder still holds it, else null. */
    public Entry entry(long s) {
        if (s < 0) {
            return null;
        }
        int i = slot(s);
        for (int attempt = 0; attempt < 1000; attempt++) {
            long v0 = (long) VERSION.getAcquire(version, i);
            if ((v0 & 1) != 0) {
                Thread.onSpinWait();
                continue;
            }
            Entry e = new Entry(seq[i], name[i], bytes[i], dtype[i], redop[i], root[i], algorithm[i], transport[i],
                    State.values()[state[i]], issuedNs[i], startNs[i], endNs[i]);
            VarHandle.acquireFence();
            if ((long) VERSION.getVolatile(version, i) == v0) {
                return e.seq() == s ? e : null;
            }
        }
        return null;
    }

    /** Every operation still held, oldest first. */
    public List<Entry> snapshot() {
        long last = lastIssued;
        List<Entry> out = new ArrayList<>();
        for (long s = Math.max(0, last - capacity + 1); s <= last; s++) {
            Entry e = entry(s);
            if (e != null) {
                out.add(e);
            }
        }
        return out;
    }

    /** The oldest operation issued and not finished, or null when idle. */
    public Entry current() {
        long s = lastFinished + 1;
        return s <= lastIssued ? entry(s) : null;
    }

    /**
     * {@link #current()}, after stamping it with {@code nowNs} if it runs without times: the stall
     * watchdog's view, so an operation that runs long without waiting (a big copy, a connection
     * being set up) gets a start no later than the watchdog's first look at it.
     */
    public Entry currentStamped(long nowNs) {
        Entry e = current();
        if (e != null && e.state() == State.RUNNING && e.startNs() == 0) {
            stamp(e.seq(), nowNs);
            e = current();
        }
        return e;
    }

    /** The epoch milliseconds of a nanoTime stamp of this recorder (0 stays 0). */
    public long epochMs(long ns) {
        return ns == 0 ? 0 : baseEpochMs + (ns - baseNs) / 1_000_000;
    }

    /** An entry as a JSON-ready map (the dump format, see docs/CONTRACTS.md, "Failure detection and hang attribution"). */
    public Map<String, Object> toMap(Entry e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("seq", e.seq());
        m.put("op", e.name());
        m.put("bytes", e.bytes());
        m.put("dtype", e.dtype());
        m.put("redop", e.redop());
        m.put("root_or_peer", e.rootOrPeer());
        m.put("algorithm", e.algorithm());
        m.put("transport", e.transport());
        m.put("state", e.state().name());
        m.put("issued_ms", epochMs(e.issuedNs()));
        m.put("started_ms", epochMs(e.startNs()));
        m.put("ended_ms", epochMs(e.endNs()));
        m.put("duration_us", e.startNs() != 0 && e.endNs() != 0 ? (e.endNs() - e.startNs()) / 1000 : -1L);
        return m;
    }
}
