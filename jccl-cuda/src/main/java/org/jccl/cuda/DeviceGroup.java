package org.jccl.cuda;

import java.util.ArrayList;
import java.util.List;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;

/**
 * jccl-cuda's group ({@link CudaCommunicator#groupStart()}/{@link CudaCommunicator#groupEnd()}), per
 * thread: the collectives and point-to-point calls of every {@link CudaCommunicator} the thread
 * issues inside it, in call order, issued at the outermost end in two phases. Phase 1 publishes every
 * call (receive buffers first, so that senders find them; then every collective's buffers), phase 2
 * resolves the peers' addresses and launches. So one thread can drive several GPUs, and ranks that
 * both send first do not wait for each other. Outside a group every call is a group of its own.
 */
final class DeviceGroup {
    private static final ThreadLocal<DeviceGroup> GROUP = ThreadLocal.withInitial(DeviceGroup::new);

    /** One send or receive of a group. */
    record P2p(boolean send, DeviceBuffer buf, int peer, CudaStream stream) {
    }

    private int depth;
    private final List<Runnable> publish = new ArrayList<>();
    private final List<Runnable> launch = new ArrayList<>();
    private final List<CudaCommunicator> p2pComms = new ArrayList<>();
    private final List<List<P2p>> p2pOps = new ArrayList<>();

    private DeviceGroup() {
    }

    private List<P2p> p2p(CudaCommunicator c) {
        int i = p2pComms.indexOf(c);
        if (i < 0) {
            p2pComms.add(c);
            p2pOps.add(new ArrayList<>());
            i = p2pComms.size() - 1;
        }
        return p2pOps.get(i);
    }

    private void clear() {
        publish.clear();
        launch.clear();
        p2pComms.clear();
        p2pOps.clear();
    }

    static void start() {
        GROUP.get().depth++;
    }

    /**
     * In a group, queues a collective's two phases and returns true; outside one returns false, and the
     * caller runs them now.
     */
    static boolean enqueue(Runnable publishPhase, Runnable launchPhase) {
        DeviceGroup g = GROUP.get();
        if (g.depth == 0) {
            return false;
        }
        g.publish.add(publishPhase);
        g.launch.add(launchPhase);
        return true;
    }

    /** Adds a send or receive of {@code c} to this thread's group; outside a group, runs it as a group of its own. */
    static void addP2p(CudaCommunicator c, P2p op) {
        DeviceGroup g = GROUP.get();
        boolean implicit = g.depth == 0;
        if (implicit) {
            g.depth = 1;
        }
        try {
            g.p2p(c).add(op);
        } finally {
            if (implicit) {
                end();
            }
        }
    }

    static void end() {
        DeviceGroup g = GROUP.get();
        if (g.depth == 0) {
            throw new InvalidUsageException("groupEnd() without groupStart() on this thread");
        }
        if (--g.depth > 0) {
            return;
        }
        try {
            g.run();
        } finally {
            g.clear();
        }
    }

    private void run() {
        int stagedP2p = 0;
        for (CudaCommunicator c : p2pComms) {
            stagedP2p += c.stagedBecause() != null ? 1 : 0;
        }
        if (stagedP2p > 1) {
            throw new InvalidUsageException("send/recv staged through host memory (" + p2pComms.get(0).stagedBecause()
                    + ") needs one thread per GPU; this thread's group holds the sends/receives of " + stagedP2p + " GPUs");
        }
        // Phase 1: publish every call (receive buffers first, so that senders find them).
        List<long[]> seqs = new ArrayList<>();
        for (int i = 0; i < p2pComms.size(); i++) {
            seqs.add(p2pComms.get(i).publishRecvs(p2pOps.get(i)));
        }
        for (Runnable r : publish) {
            r.run();
        }
        for (CudaCommunicator c : p2pComms) {
            c.flushExchange();
        }
        // Phase 2: resolve the peers' addresses and launch. A mismatch found for one communicator does not stop the
        // others' launches: each reaches its own verdict (its call fails on the host, or its one-shot kernel finds the
        // mismatch), so none is left unaware with a peer that failed; the first mismatch is thrown after them.
        JcclException mismatch = null;
        for (Runnable r : launch) {
            try {
                r.run();
            } catch (JcclException x) {
                if (x.code() != ErrorCode.MISMATCH) {
                    throw x;
                }
                mismatch = mismatch == null ? x : mismatch;
            }
        }
        if (mismatch != null) {
            throw mismatch;
        }
        for (int i = 0; i < p2pComms.size(); i++) {
            p2pComms.get(i).runP2p(p2pOps.get(i), seqs.get(i));
        }
    }
}
