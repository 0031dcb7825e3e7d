package org.jccl.internal.runtime;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.PeerFailedException;
import org.jccl.ReduceOp;
import org.jccl.internal.control.Counters;
import org.jccl.internal.guard.OpGuard;
import org.jccl.internal.reduce.Reductions;
import org.jccl.spi.CollectiveCall;

/**
 * The runtime's side of a call through the communicator's collective provider ({@link
 * org.jccl.spi.CollectiveProvider}; SHM's shared segment): one per communicator, reused for every call,
 * used only by the thread running operations ({@link OpContext#providerCall} sets the call's type and
 * operator). Its idle step is what {@link OpContext}'s waits on connections do while nothing moves,
 * with a timed park instead of the selector (nothing can ring a provider's waiter awake): progress for
 * earlier calls' confirmations and the running call's signatures, the flight recorder's first clock
 * read, held confirmations handed, the guard's backstop probe, other communicators' late operations.
 */
final class ProviderCall implements CollectiveCall {
    /**
     * Pure polling (no PAUSE) at the start of the idle strategy; the provider's own polls between idle
     * steps are its business (SHM's matches this).
     */
    static final long HOT_SPIN_NANOS = 5_000;

    private final CommunicatorImpl comm;
    private final OpContext ctx;
    private final MismatchGuard guard;
    private final RingConfirmations conf;
    private final SignatureCheck sig;
    private final Counters counters;
    /** Spin (pure for HOT_SPIN_NANOS), yield, then park 2 us doubling to 1 ms. */
    private final Backoff backoff;
    private DataType type;
    private ReduceOp op;
    /** The current wait's next backstop probe (relative to its start) and whether it looked for late operations. */
    private long probeAt;
    private boolean nudged;

    ProviderCall(CommunicatorImpl comm, OpContext ctx, MismatchGuard guard, RingConfirmations conf, SignatureCheck sig, Counters counters,
                 Backoff backoff) {
        this.comm = comm;
        this.ctx = ctx;
        this.guard = guard;
        this.conf = conf;
        this.sig = sig;
        this.counters = counters;
        this.backoff = backoff;
    }

    /** This object for a call of {@code type} and {@code op} (null for those without a reduction). */
    ProviderCall of(DataType type, ReduceOp op) {
        this.type = type;
        this.op = op;
        return this;
    }

    @Override
    public int rank() {
        return comm.rank();
    }

    @Override
    public int size() {
        return comm.size();
    }

    @Override
    public void checkAborted() {
        comm.checkNotAborted(ctx.current());
    }

    @Override
    public long idle(boolean start) {
        if (sig.awaiting()) {
            ctx.progress();
            sig.poll();
        } else if (!conf.empty()) {
            ctx.progress(); // confirmations of earlier calls move while this rank waits in the provider
        }
        long now = System.nanoTime();
        Backoff idle = backoff;
        if (start) {
            ctx.stamp(now);
            idle.reset(now);
            probeAt = MismatchGuard.GUARD_PROBE_NANOS;
            nudged = false;
        }
        long waited = idle.waited(now);
        if (waited >= RingConfirmations.HAND_AFTER_NANOS && conf.anyHeld()) {
            conf.handAll();
        }
        if (waited >= probeAt) {
            probeAt += MismatchGuard.GUARD_PROBE_NANOS;
            guard.probeGuard();
        }
        if (!nudged && waited >= OpContext.NUDGE_AFTER_NANOS) {
            nudged = true;
            Executor.nudgeLate(OpContext.NUDGE_AFTER_NANOS);
        }
        idle.idle(now);
        return waited;
    }

    @Override
    public PeerFailedException peerFailed(int peer, IOException cause) {
        return ctx.peerFailed(peer, cause);
    }

    /** The guard word of the running collective call; 0 with JCCL_CHECK=none (or outside a collective call). */
    @Override
    public long guard() {
        return guard.callIndex >= 0 ? guard.guard : 0;
    }

    @Override
    public void checkGuard(int peer, long theirs) {
        long mine = guard.guard;
        if (OpGuard.mismatch(theirs, mine)) {
            throw guard.guardMismatch(peer, theirs, mine);
        }
    }

    @Override
    public MemorySegment signature() {
        return sig.signature();
    }

    @Override
    public void checkSignature(int peer, MemorySegment theirs) {
        sig.verifyProvided(peer, theirs);
    }

    @Override
    public void reduce(MemorySegment dst, MemorySegment a, MemorySegment b, long count) {
        Reductions.reduce(dst, a, b, count, type, op);
    }

    @Override
    public void moved(long perPeer) {
        counters.shared(comm.rank(), perPeer);
    }

    @Override
    public void movedWith(int peer, long bytes) {
        counters.sharedWith(peer, bytes);
    }
}
