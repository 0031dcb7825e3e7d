package org.jccl.internal.runtime;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.ErrorCode;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;

/**
 * The full signature check of {@code JCCL_CHECK=1} ({@link OpSignature}): every collective's
 * signature travels ahead of its first message on each connection it uses and around the ring
 * (and with every step of a collective provider that carries it, e.g. the shared segment's arrives), and is compared as it
 * arrives. Used by the thread
 * running operations.
 */
final class SignatureCheck {
    private final CommunicatorImpl comm;
    private final OpContext ctx;
    private final RingConfirmations conf;

    SignatureCheck(CommunicatorImpl comm, OpContext ctx, RingConfirmations conf) {
        this.comm = comm;
        this.ctx = ctx;
        this.conf = conf;
    }

    /** Checked collectives run so far on this communicator (the same count on every rank). */
    private long collSeq;
    /** Number of the running checked collective (0: none runs), compared with the per-peer marks below. */
    private long signing;
    private long[] signedTo;
    private long[] signedFrom;
    private Arena sigArena;  // ofAuto: see beginCheck
    private MemorySegment sigMine;
    /** The signature each peer sent for the running collective, 32 bytes per peer. */
    private MemorySegment sigTheirs;
    private final List<P2pRequest> sigSends = new ArrayList<>();
    /** Peers whose signature was received or is awaited and not compared yet, with their requests. */
    private final List<Integer> sigPeers = new ArrayList<>();
    private final List<P2pRequest> sigRecvs = new ArrayList<>();

    /**
     * Starts the signature check of a collective ({@code JCCL_CHECK=1}). Each connection the
     * operation uses carries this rank's signature as the first message of the operation in each
     * direction (posted just before the operation's first send or receive on it; connections match
     * messages in order), so no data from a peer that called something else is ever taken as this
     * operation's. On top, every rank signs to the next rank of the ring and reads the previous one's,
     * so that a mismatch is found during the operation even where a collective only sends (a
     * broadcast's root). Signatures are compared as soon as they arrive, while the algorithm waits
     * ({@link OpContext#await}), and at the latest in {@link #end}: a mismatch is an error naming both
     * ranks and what differs. On two ranks the ring covers both directions: one extra message each way.
     */
    void begin(Op op) {
        long seq = collSeq++;
        int n = comm.size();
        if (n < 2) {
            return;
        }
        if (sigArena == null) {
            // Automatic, not closed with the connections: the in-JVM transport copies from the sender's
            // memory, and a peer may still be copying this rank's signature when this rank aborts.
            sigArena = Arena.ofAuto();
            sigMine = sigArena.allocate(OpSignature.BYTES, 8);
            sigTheirs = sigArena.allocate((long) OpSignature.BYTES * n, 8);
            signedTo = new long[n];
            signedFrom = new long[n];
        }
        OpSignature.encode(op, seq, sigMine);
        signing = seq + 1;
        signFrom((comm.rank() + n - 1) % n);
        signTo((comm.rank() + 1) % n);
    }

    void signTo(int peer) {
        if (conf.sendsHeldFor(peer)) {
            conf.handSends();
        }
        signedTo[peer] = signing;
        // No guard word on the signature itself (JCCL_CHECK=1): the signature, which says more, is compared instead.
        sigSends.add(ctx.connection(peer).send(sigMine, 0));
    }

    void signFrom(int peer) {
        if (conf.recvsHeldFor(peer)) {
            conf.handRecvs();
        }
        signedFrom[peer] = signing;
        sigPeers.add(peer);
        sigRecvs.add(ctx.connection(peer).recv(theirs(peer), 0));
    }

    /** Whether the running checked collective has not signed to {@code peer} yet (its first message to it comes next). */
    boolean unsignedTo(int peer) {
        return signing != 0 && signedTo[peer] != signing;
    }

    /** Whether the running checked collective has not posted the receive of {@code peer}'s signature yet. */
    boolean unsignedFrom(int peer) {
        return signing != 0 && signedFrom[peer] != signing;
    }

    /** Whether signatures are awaited or not compared yet. */
    boolean awaiting() {
        return !sigRecvs.isEmpty();
    }

    /**
     * This rank's signature of the running checked collective, null when none runs: collectives through a provider send no
     * messages, so the provider publishes it with its steps (ProviderCall#signature).
     */
    MemorySegment signature() {
        return signing != 0 ? sigMine : null;
    }

    /** The operation ended (or failed): forgets the running check. */
    void reset() {
        if (signing != 0) {
            signing = 0;
            sigSends.clear();
            sigPeers.clear();
            sigRecvs.clear();
        }
    }

    /** The connections close: forgets everything. */
    void clear() {
        if (sigArena != null) {
            sigArena = null;
            signing = 0;
            sigSends.clear();
            sigPeers.clear();
            sigRecvs.clear();
        }
    }

    private MemorySegment theirs(int peer) {
        return sigTheirs.asSlice((long) peer * OpSignature.BYTES, OpSignature.BYTES);
    }

    /** Waits for every signature message of the running collective and compares (see {@link #beginCheck}). */
    void end() {
        while (!sigRecvs.isEmpty()) {
            P2pRequest r = sigRecvs.getFirst();
            int idle = 0;
            while (!r.isDone()) {
                idle = ctx.progressOrIdle(idle);
            }
            if (r.error() != null) {
                ctx.check(r);
            }
            poll();
        }
        for (P2pRequest s : sigSends) {
            ctx.await(s);
        }
        sigSends.clear();
        signing = 0;
    }

    /** Compares the signatures that arrived with this rank's; throws the first mismatch. Cheap when none is pending. */
    void poll() {
        for (int i = 0; i < sigRecvs.size(); i++) {
            P2pRequest r = sigRecvs.get(i);
            if (r.isDone() && r.error() == null) {
                int peer = sigPeers.remove(i);
                sigRecvs.remove(i);
                i--;
                verify(peer);
            }
        }
    }

    void verify(int peer) {
        MemorySegment theirs = theirs(peer);
        PeerInfo from = comm.peerInfo(peer);
        String where = "rank " + comm.rank() + ": " + ctx.describeOp();
        if (!OpSignature.valid(theirs)) {
            throw new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, where + " failed: the first message from " + from.describe()
                    + " was not an operation signature. JCCL_CHECK must have the same value on every rank, and every rank must"
                    + " call the same collectives in the same order");
        }
        List<String> diff = OpSignature.differences(theirs, sigMine);
        if (!diff.isEmpty()) {
            throw new org.jccl.InvalidUsageException(ErrorCode.MISMATCH, where + " failed: mismatched collective calls: rank " + peer
                    + " (" + from.host() + " pid " + from.pid() + ") called " + OpSignature.describe(theirs) + " but rank " + comm.rank()
                    + " called " + OpSignature.describe(sigMine) + "; they differ in " + String.join(", ", diff)
                    + ". Every rank must call the same collectives in the same order, with the same count, data type, op and root");
        }
    }

    /** Compares the signature {@code q} published through a collective provider for the running collective (its arrive in the shared segment). */
    void verifyProvided(int q, MemorySegment theirs) {
        List<String> diff = OpSignature.differences(theirs, sigMine);
        if (!OpSignature.valid(theirs) || !diff.isEmpty()) {
            MemorySegment copy = theirs(q);
            MemorySegment.copy(theirs, 0, copy, 0, OpSignature.BYTES);
            verify(q);
        }
    }
}
