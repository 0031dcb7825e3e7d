package org.jccl.ucx.internal;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One UCX context and one worker: what one rank of one communicator owns (the research notes' "one worker
 * per communicator"). Made with {@code UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP}, the worker
 * in {@code UCS_THREAD_MODE_SERIALIZED} (the runtime drives a connection from one thread at a time, not
 * always the same one). Every call on the worker holds {@link #lock}, so that a close from another thread
 * (an abort) never destroys the worker under a progress call.
 */
final class UcxWorker implements AutoCloseable {
    final Ucp ucp;
    final Object lock = new Object();
    final Arena arena = Arena.ofShared();
    final MemorySegment context;
    final long worker;
    final int efd;
    final byte[] address;
    /** The UCX configuration applied (what UCX printed after ucp_config_modify): for the INFO line and tests. */
    final Map<String, String> applied;
    /** The transports and devices UCX found for this context ("tcp/eth0", "posix/memory"). */
    final List<String> resources;
    /** ucp_context_query's memory types bitmap (bit 0 host, bit 1 CUDA). */
    final long memoryTypes;
    private boolean closed;
    /**
     * Counts the worker's events (the caller holds {@link #lock}): a progress call that reported work, or an operation
     * posted on any of its endpoints. A connection that tested its requests at one count and finds it unchanged has,
     * as far as UCX said, nothing new to find (UcxConnection#progress).
     */
    long events;

    private UcxWorker(Ucp ucp, MemorySegment context, long worker, int efd, byte[] address, Map<String, String> applied,
                      List<String> resources, long memoryTypes) {
        this.ucp = ucp;
        this.context = context;
        this.worker = worker;
        this.efd = efd;
        this.address = address;
        this.applied = applied;
        this.resources = resources;
        this.memoryTypes = memoryTypes;
    }

    /**
     * Reads UCX's configuration from the environment, applies {@code settings}, makes the context and the
     * worker, and reads the worker's address and event fd.
     *
     * @param name for UCX's own logs ("jccl-r3")
     * @param localeFix whether to set LC_NUMERIC to "C" again first (false only in the hazard test)
     */
    static UcxWorker open(Ucp ucp, Map<String, String> settings, String name, boolean localeFix) {
        if (localeFix) {
            UcxLibrary.numericLocaleC();
        }
        MemorySegment context = null;
        long worker = 0;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment config = ucp.configRead(a);
            Map<String, String> applied;
            try {
                for (Map.Entry<String, String> e : settings.entrySet()) {
                    byte s = ucp.configModify(config, UcxSettings.modifyKey(e.getKey(), ucp.major, ucp.minor), e.getValue());
                    if (s != Status.OK) {
                        throw new UcxException("ucp_config_modify(" + e.getKey() + "=" + e.getValue() + ") returned " + Status.name(s), s);
                    }
                }
                applied = ucp.configPrint(config);
                MemorySegment params = a.allocate(Layouts.STRUCT_BYTES, 8);
                params.set(JAVA_LONG, Layouts.PARAMS_FIELD_MASK, Layouts.UCP_PARAM_FIELD_FEATURES | Layouts.UCP_PARAM_FIELD_NAME);
                params.set(JAVA_LONG, Layouts.PARAMS_FEATURES, Layouts.UCP_FEATURE_TAG | Layouts.UCP_FEATURE_RMA | Layouts.UCP_FEATURE_WAKEUP);
                MemorySegment cname = a.allocateFrom(name);
                params.set(java.lang.foreign.ValueLayout.ADDRESS, Layouts.PARAMS_NAME, cname);
                context = ucp.init(params, config, a);
            } finally {
                ucp.configRelease(config);
            }
            long memoryTypes = ucp.memoryTypes(context);
            MemorySegment wp = a.allocate(Layouts.STRUCT_BYTES, 8);
            wp.set(JAVA_LONG, Layouts.WORKER_FIELD_MASK, Layouts.UCP_WORKER_PARAM_FIELD_THREAD_MODE);
            wp.set(JAVA_INT, Layouts.WORKER_THREAD_MODE, Layouts.UCS_THREAD_MODE_SERIALIZED);
            worker = ucp.workerCreate(context, wp);
            int efd = ucp.efd(worker);
            byte[] address = ucp.workerAddress(worker);
            List<String> resources = resources(ucp, context);
            return new UcxWorker(ucp, context, worker, efd, address, applied, resources, memoryTypes);
        } catch (RuntimeException e) {
            if (worker != 0) {
                ucp.workerDestroy(worker);
            }
            if (context != null) {
                ucp.cleanup(context);
            }
            throw e;
        }
    }

    /** "tcp/eth0" for every resource line of ucp_context_print_info. */
    private static List<String> resources(Ucp ucp, MemorySegment context) {
        List<String> out = new ArrayList<>();
        for (String line : ucp.contextInfo(context).split("\n")) {
            int r = line.indexOf("resource");
            int flags = line.indexOf("flags");
            if (r >= 0 && flags > r) {
                String[] words = line.substring(flags).trim().split("\\s+");
                out.add(words[words.length - 1]);
            }
        }
        return out;
    }

    /** Whether UCX can take CUDA memory here (built with CUDA, ucp_context_query). */
    boolean cudaMemory() {
        return (memoryTypes & (1L << Layouts.UCS_MEMORY_TYPE_CUDA)) != 0;
    }

    /**
     * One {@code ucp_worker_progress}; the worker's lock must be held. One call, as ucx_perftest's loop makes: over tcp
     * each call polls the sockets (an epoll_wait), so "progress until nothing moves" cost a second, empty poll per
     * look; the runtime calls again when it waits.
     */
    int progressLocked() {
        int n = ucp.progress(worker);
        if (n != 0) {
            events++;
        }
        return n;
    }

    /** Whether closed; the caller holds {@link #lock}. */
    boolean isClosedUnlocked() {
        return closed;
    }

    boolean isClosed() {
        synchronized (lock) {
            return closed;
        }
    }

    /** Marks the worker closed; the caller then releases endpoints and calls {@link #destroyLocked()}. */
    boolean markClosed() {
        synchronized (lock) {
            if (closed) {
                return false;
            }
            closed = true;
            return true;
        }
    }

    void destroyLocked() {
        ucp.workerDestroy(worker);
        ucp.cleanup(context);
        arena.close();
    }

    @Override
    public void close() {
        synchronized (lock) {
            if (markClosed()) {
                destroyLocked();
            }
        }
    }
}
