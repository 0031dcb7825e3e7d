package org.jccl.internal.runtime;

import java.util.List;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.internal.control.CollectiveEvent;
import org.jccl.internal.control.ControlPlane;
import org.jccl.internal.control.Counters;
import org.jccl.internal.control.FlightRecorder;
import org.jccl.internal.log.Log;
import org.jccl.internal.tune.Tuner;

/**
 * Runs a communicator's operations for its {@link Executor} (on whichever thread holds the
 * execution lock) and looks after what lies between them: one operation from its first message to
 * its completion or failure (flight recorder, JFR event, counters, the copy-back of staged memory,
 * a failure turned into the report that names its cause, and the abort it brings), and the held
 * ring confirmations of the mismatch guard while the communicator is idle, at close() and at exit.
 */
final class OpRunner implements Executor.Host {
    /**
     * Operations up to this size are not stamped with the clock unless they wait (FlightRecorder's class
     * comment), whether they run inline or from the queue: for them clock reads are a measurable part of
     * the call (the queued path's three were about 0.1 of an 8-byte all-reduce's 0.4 us).
     */
    private static final long UNTIMED_INLINE_BYTES = 64 << 10;

    private final CommunicatorImpl comm;
    private final OpContext ctx;
    private final Routing routing;
    private final FlightRecorder recorder;
    private final Counters counters;
    private final Tuner tuner;
    /** JCCL_CHECK=1: exchange a signature of every collective (OpSignature) and report mismatches. */
    private final boolean checkSignatures;
    /** The executor this runner serves (set once, right after both are made). */
    private Executor executor;

    OpRunner(CommunicatorImpl comm, OpContext ctx, Routing routing, FlightRecorder recorder, Counters counters, Tuner tuner,
             boolean checkSignatures) {
        this.comm = comm;
        this.ctx = ctx;
        this.routing = routing;
        this.recorder = recorder;
        this.counters = counters;
        this.tuner = tuner;
        this.checkSignatures = checkSignatures;
    }

    void executor(Executor e) {
        this.executor = e;
    }

    /**
     * How often the idle operation thread looks at outstanding ring confirmations (RingConfirmations#idle): a
     * mismatch one shows is found within about two of these even when the program makes no more calls.
     */
    static final long IDLE_CONFIRM_MILLIS = 50;
    /** OpContext#callsEnded at the operation thread's last idle look (its own field). */
    private long idleSeenEnded = -1;

    /** What the control plane asks of this communicator: aborts, the guard words of calls for its comparisons, the exit hook. */
    ControlPlane.Host controlHost() {
        return new ControlPlane.Host() {
            @Override
            public void fail(JcclException cause) {
                comm.abort(cause);
            }

            @Override
            public long guardAt(long index) {
                return ctx.guard().guardAt(index);
            }

            @Override
            public JcclException atExit() {
                return confirmAtExit();
            }

            @Override
            public long callsStarted() {
                return ctx.guard().callsStarted();
            }

            @Override
            public void doomedAt(long index, String report) {
                ctx.guard().doomedAt(index, report);
            }

            @Override
            public long mismatchAt() {
                return ctx.guard().mismatchAt();
            }
        };
    }

    // ------------------------------------------------------------------------------------------ Executor.Host

    @Override
    public void ensureUsable() {
        comm.ensureUsable();
    }

    @Override
    public long issued(Op op, boolean inline) {
        return recorder.issued(op.seq, op.name, op.bytes, op.type == null ? null : op.type.ncclName(),
                op.reduceOp == null ? null : op.reduceOp.ncclName(), op.rootOrPeer, routing.transportOf(op),
                op.bytes > UNTIMED_INLINE_BYTES, inline);
    }

    @Override
    public void discard(Op op) {
        op.work.fail(comm.aborted(op));
        comm.delivered();
    }

    @Override
    public boolean aborted() {
        return comm.abortCause() != null;
    }

    @Override
    public boolean idleTick() {
        return confirmWhileIdle();
    }

    @Override
    public void released() {
        ctx.closeAll();
    }

    /**
     * The operation thread found nothing queued for a while: when ring confirmations are outstanding and no
     * call ended since its last look (a running program's next call progresses them anyway), it drives them
     * itself, so that a mismatch is found, and every rank told, although this rank makes no more calls.
     * Returns true when that aborted the communicator.
     */
    private boolean confirmWhileIdle() {
        if (comm.abortCause() != null || !ctx.confirmations().outstanding()) {
            idleSeenEnded = -1;
            return false;
        }
        long ended = ctx.confirmations().callsEnded();
        if (ended != idleSeenEnded) {
            idleSeenEnded = ended;
            return false;
        }
        try {
            if (comm.abortCause() == null) {
                ctx.confirmations().idle();
            }
        } catch (RuntimeException e) {
            confirmationFailed(e);
            return true;
        }
        return false;
    }

    /** How long a JVM that exits without close() waits for the held ring confirmations. */
    private static final long EXIT_CONFIRM_NANOS = 300_000_000L;

    /**
     * The JVM exits and this communicator was not closed (ControlPlane's shutdown hook): hands the held ring
     * confirmations on and waits up to {@link #EXIT_CONFIRM_NANOS} for them, so that a mismatch in calls that
     * returned still shows (the hook then exits with status 1) and the peers get what they wait for. Returns
     * the MISMATCH found, else null (another failure is logged).
     */
    JcclException confirmAtExit() {
        if (comm.abortCause() != null || comm.closing() || !ctx.confirmations().outstanding()) {
            return null;
        }
        try {
            if (!executor.tryLock(100)) {
                return null; // a call is running (another thread): it settles them or fails
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
        try {
            Backoff idle = Backoff.parkingEvery(50_000L);
            long now = System.nanoTime();
            idle.reset(now);
            while (comm.abortCause() == null && ctx.confirmations().outstanding() && idle.waited(now) < EXIT_CONFIRM_NANOS) {
                ctx.confirmations().idle();
                idle.idle(now);
                now = System.nanoTime();
            }
        } catch (RuntimeException e) {
            confirmationFailed(e);
        } finally {
            executor.unlock();
        }
        JcclException cause = comm.abortCause();
        return cause != null && cause.code() == ErrorCode.MISMATCH && !comm.abortDelivered() && !comm.userAborted() ? cause : null;
    }

    /** At close(), on the operation thread: waits for the outstanding ring confirmations (RingConfirmations#drain). */
    @Override
    public void drainAtClose() {
        try {
            if (comm.abortCause() == null) {
                ctx.confirmations().drain();
            }
        } catch (RuntimeException e) {
            if (comm.abortCause() == null || !comm.userAborted()) {
                confirmationFailed(e);
            }
        }
    }

    /** A ring confirmation failed after its call had returned: abort with it (the control plane tells every rank); close() reports it. */
    private void confirmationFailed(RuntimeException e) {
        JcclException cause = comm.abortCause();
        if (cause != null) {
            return; // already aborted (a peer's report, abort()): that cause stands
        }
        JcclException je = e instanceof JcclException j ? j : new JcclException(ErrorCode.INTERNAL, "rank " + comm.rank()
                + ": the ring confirmation of communicator " + comm.idShort() + " failed unexpectedly: " + e, e);
        ControlPlane cp = comm.control();
        if (cp != null && je.code() != ErrorCode.MISMATCH) {
            je = cp.explain(je);
        }
        Log.warn(Log.Subsys.COLL, comm.rank(), je.getMessage());
        comm.abort(je);
    }

    /** Runs {@code op} (or fails it when aborted); the caller holds the execution lock. */
    @Override
    public void execute(Op op) {
        if (comm.abortCause() != null) {
            op.work.fail(comm.aborted(op));
            comm.delivered();
        } else {
            runOne(op);
        }
    }

    /**
     * Consecutive sends and receives taken from the queue together: each is started as its own call (its
     * guard word, its flight-recorder start) and posted, in issue order, before any is waited for; then each
     * is waited for and completed (or failed, as {@link #runOne} would) in that order. What goes on the wire,
     * and in which order, is what running them one by one posts; only the waits move after the posts, so a
     * stream of asynchronous sends keeps its window in flight. A post that throws ends the posting: that
     * operation and those after it then run one by one (an abort meanwhile fails them).
     */
    @Override
    public void executeBatch(List<Op> ops) {
        if (comm.abortCause() != null) {
            for (Op op : ops) {
                execute(op);
            }
            return;
        }
        int n = ops.size();
        org.jccl.spi.P2pRequest[] posted = new org.jccl.spi.P2pRequest[n];
        for (int i = 0; i < n; i++) {
            P2pOp op = (P2pOp) ops.get(i);
            ctx.begin(op);
            recorder.started(op.seq);
            try {
                ctx.guard().beginCall(op, false);
                posted[i] = op.post(ctx);
                ctx.guard().endCall();
            } catch (Throwable t) {
                break; // run one by one from here: runOne posts it again and reports the failure as usual
            } finally {
                ctx.begin(null);
            }
        }
        for (int i = 0; i < n; i++) {
            Op op = ops.get(i);
            if (posted[i] == null) {
                execute(op); // not posted: runs alone (or fails at once when aborted meanwhile)
            } else if (comm.abortCause() != null) {
                // Posted, and an earlier one failed and aborted the communicator (which closes the connections): fails
                // with that cause, once, as queued operations do, and the flight recorder sees it end.
                recorder.finished(op.seq, false, null);
                counters.finished(op.name, op.bytes, false);
                op.work.fail(comm.aborted(op));
                comm.delivered();
            } else {
                runOne(op, posted[i]);
            }
        }
    }

    private void runOne(Op op) {
        runOne(op, null);
    }

    /** Runs {@code op}; with {@code posted} (a batch's send or receive, already started and posted) only waits for it. */
    private void runOne(Op op, org.jccl.spi.P2pRequest posted) {
        ctx.begin(op);
        if (!op.startedAtIssue && posted == null) {
            recorder.started(op.seq);
        }
        CollectiveEvent ev = new CollectiveEvent();
        ev.begin();
        Throwable failure = null;
        try {
            if (posted != null) {
                ctx.await(posted); // started and posted by executeBatch, as its own call
            } else {
                boolean signed = checkSignatures && OpSignature.checked(op);
                boolean call = !(op instanceof FusedOp); // a group starts a call per member (FusedOp)
                if (call) {
                    ctx.guard().beginCall(op, signed);
                }
                if (signed) {
                    ctx.signatures().begin(op);
                }
                op.run(ctx);
                if (signed) {
                    ctx.signatures().end();
                }
                if (call) {
                    ctx.guard().endCall();
                }
            }
            if (op.finisher != null) {
                op.finisher.run();
            }
        } catch (Throwable t) {
            failure = t;
        }
        try {
            recordFinished(op, ev, failure == null);
            if (failure == null) {
                completeAll(op);
                if (op.releaser != null) {
                    op.releaser.run(); // staging buffers back to the pool only after a success
                }
                return;
            }
            Throwable t = failure;
            JcclException e = asJccl(op, t);
            ControlPlane cp = comm.control();
            if (cp != null && comm.abortCause() == null) {
                e = cp.explain(e); // a consequence of another rank's failure names that rank
                if (e instanceof org.jccl.PeerFailedException pf && cp.closedNormally(pf.peerRank()) && comm.abortCause() == null) {
                    // A peer closed its communicator normally while this collective call needed it: it never made this
                    // call, or made another that returned without this rank (a rooted one): the hub's comparison of
                    // every rank's word of the call says which, rather than blaming the peer for closing.
                    JcclException exact = ctx.guard().verdictOfFailedCall();
                    if (exact != null) {
                        e = exact;
                    }
                }
            }
            JcclException meanwhile = comm.abortCause();
            if (meanwhile != null && meanwhile.code() == ErrorCode.MISMATCH && e.code() != ErrorCode.MISMATCH) {
                // The control plane aborted this communicator with another rank's report of mismatched calls while this
                // operation was failing (its link to that rank broke): the report is the cause, not the broken link.
                e = asJccl(op, t);
            }
            e.at(comm.rank(), -1, op.name, op.seq);
            failAll(op, e);
            if (!(t instanceof InvalidUsageException) || e.code() == ErrorCode.MISMATCH || comm.abortCause() != null) {
                // A failure inside a collective leaves peers in an unknown state: abort so nothing waits forever.
                Log.warn(Log.Subsys.COLL, comm.rank(), e.getMessage());
                comm.abort(e);
            }
            comm.delivered();
        } finally {
            ctx.begin(null);
            Thread.interrupted();
        }
    }

    /** Flight recorder and JFR entry of a finished operation (the algorithm is the tuner's last choice). */
    private void recordFinished(Op op, CollectiveEvent ev, boolean ok) {
        String algo = tuner.takeChoice();
        recorder.finished(op.seq, ok, algo);
        if (op instanceof FusedOp f) {
            List<Op> members = f.ops();
            for (int i = 0; i < members.size(); i++) {
                Op o = members.get(i);
                counters.finished(o.name, o.bytes, ok);
            }
        } else {
            counters.finished(op.name, op.bytes, ok);
        }
        if (ev.shouldCommit()) {
            ev.comm = comm.idShort();
            ev.rank = comm.rank();
            ev.ranks = comm.size();
            ev.seq = op.seq;
            ev.op = op.name;
            ev.bytes = op.bytes;
            ev.dtype = op.type == null ? null : op.type.ncclName();
            ev.algorithm = algo;
            ev.transport = routing.transportOf(op);
            ev.ok = ok;
            ev.commit();
        }
    }

    private static void completeAll(Op op) {
        if (op instanceof FusedOp f) {
            for (Op o : f.ops()) {
                o.work.complete();
            }
        }
        op.work.complete();
    }

    private static void failAll(Op op, JcclException e) {
        if (op instanceof FusedOp f) {
            for (Op o : f.ops()) {
                o.work.fail(e);
            }
        }
        op.work.fail(e);
    }

    private JcclException asJccl(Op op, Throwable t) {
        JcclException cause = comm.abortCause();
        if (cause != null && cause.code() != ErrorCode.ABORTED && !(t instanceof JcclException je0 && je0.getCause() == cause)) {
            // Aborted from outside while this operation ran (a peer's failure reported on the control channel):
            // its connections broke because of that, so report the cause rather than the broken link.
            return comm.aborted(op);
        }
        boolean abortedByUser = cause != null && cause.code() == ErrorCode.ABORTED;
        if (t instanceof JcclException je) {
            // Connections or segments closed under us by abort() surface as I/O or state failures: report the abort instead.
            return abortedByUser && je != cause && je.getCause() != cause ? comm.aborted(op) : je;
        }
        if (abortedByUser) {
            return comm.aborted(op);
        }
        return new JcclException(ErrorCode.INTERNAL, "rank " + comm.rank() + ": " + op.describe() + " on communicator " + comm.idShort()
                + " failed unexpectedly: " + t, t);
    }
}
