package org.jccl.cuda.testing;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import org.jccl.DataType;
import org.jccl.cuda.CudaDevice;
import org.jccl.cuda.CudaException;
import org.jccl.cuda.CudaStream;
import org.jccl.cuda.DeviceBuffer;
import org.jccl.cuda.DeviceCommunicator;

/**
 * The ranks of one communicator set under test, with what each rank needs: its GPU, a stream, a
 * thread of its own, and reusable device and host scratch ("areas") grown on demand, so that a sweep
 * of thousands of cases allocates nothing per case.
 *
 * <p>No call can hang a test: {@link #run} waits for the ranks' calls and then for their streams
 * with a deadline; when it passes, every communicator is aborted, the set is marked unusable and
 * {@link Broken} names what was still running (with the rank threads' stacks). A CUDA error seen
 * while waiting (a sticky error such as an illegal address) marks the set unusable the same way.
 *
 * <p>Threading: one test thread drives a set; each rank's calls run on that rank's own thread
 * ({@code gpu-rank-R}, a daemon, so a thread stuck in a native call cannot keep the JVM alive).
 */
public final class RankSet implements AutoCloseable {

    /** What one rank does with its communicator and stream. */
    @FunctionalInterface
    public interface RankCall {
        void call(int rank, DeviceCommunicator comm, CudaStream stream) throws Exception;
    }

    /** The set cannot be used any more (hang, sticky CUDA error, or aborted). */
    public static final class Broken extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public Broken(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private final Backend backend;
    private final List<CudaDevice> devices;
    private final List<DeviceCommunicator> comms;
    private final CudaStream[] streams;
    private final ExecutorService[] threads;
    private final DeviceBuffer[] sendArea;
    private final DeviceBuffer[] recvArea;
    private final MemorySegment[] hostIn;
    private final MemorySegment[] hostSend;
    private final MemorySegment[] hostRecv;
    private volatile String broken;
    private boolean closed;

    private RankSet(Backend backend, List<CudaDevice> devices, List<DeviceCommunicator> comms) {
        int n = devices.size();
        if (comms.size() != n) {
            throw new IllegalArgumentException(comms.size() + " communicators for " + n + " devices");
        }
        this.backend = backend;
        this.devices = List.copyOf(devices);
        this.comms = List.copyOf(comms);
        this.streams = new CudaStream[n];
        this.threads = new ExecutorService[n];
        this.sendArea = new DeviceBuffer[n];
        this.recvArea = new DeviceBuffer[n];
        this.hostIn = new MemorySegment[n];
        this.hostSend = new MemorySegment[n];
        this.hostRecv = new MemorySegment[n];
        for (int r = 0; r < n; r++) {
            streams[r] = devices.get(r).createStream();
            String name = "gpu-rank-" + r;
            threads[r] = Executors.newSingleThreadExecutor(task -> {
                Thread t = new Thread(task, name);
                t.setDaemon(true);
                return t;
            });
        }
    }

    /** Wraps communicators made elsewhere (rank i on devices.get(i)); the set closes them. */
    public static RankSet of(Backend backend, List<CudaDevice> devices, List<DeviceCommunicator> comms) {
        return new RankSet(backend, devices, comms);
    }

    /**
     * {@link Backend#createAll} over {@code devices}, on a helper thread, failing (instead of hanging)
     * when it takes longer than {@code timeout}.
     */
    public static RankSet create(Backend backend, List<CudaDevice> devices, Duration timeout) {
        List<DeviceCommunicator> comms = withDeadline("createAll(" + devices.size() + " GPUs) of " + backend, timeout,
                () -> backend.createAll(devices));
        return new RankSet(backend, devices, comms);
    }

    /** Runs {@code body} on a daemon thread and waits at most {@code timeout}; its exception is rethrown as is. */
    public static <T> T withDeadline(String what, Duration timeout, Callable<T> body) {
        ExecutorService ex = Executors.newSingleThreadExecutor(task -> {
            Thread t = new Thread(task, "gpu-helper");
            t.setDaemon(true);
            return t;
        });
        try {
            Future<T> f = ex.submit(body);
            try {
                return f.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                throw new AssertionError(what + " did not return within " + timeout.toSeconds() + " s; stacks:\n" + stacks());
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                if (c instanceof RuntimeException re) {
                    throw re;
                }
                if (c instanceof Error err) {
                    throw err;
                }
                throw new RuntimeException(c);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting for " + what, e);
            }
        } finally {
            ex.shutdownNow();
        }
    }

    public Backend backend() {
        return backend;
    }

    public int size() {
        return devices.size();
    }

    public List<CudaDevice> devices() {
        return devices;
    }

    public DeviceCommunicator comm(int rank) {
        return comms.get(rank);
    }

    public List<DeviceCommunicator> comms() {
        return comms;
    }

    public CudaStream stream(int rank) {
        return streams[rank];
    }

    /** Null while usable; else why not. */
    public String brokenReason() {
        return broken;
    }

    public boolean usable() {
        return broken == null && !closed;
    }

    /** "jccl x4 (GPUs 0,1,2,3)". */
    public String describe() {
        StringBuilder sb = new StringBuilder(backend + " x" + size() + " (GPU");
        sb.append(size() == 1 ? " " : "s ");
        for (int r = 0; r < size(); r++) {
            sb.append(r == 0 ? "" : ",").append(devices.get(r).ordinal());
        }
        return sb.append(')').toString();
    }

    // ------------------------------------------------------------------ scratch

    /** Makes every rank's send and receive area at least this many bytes (contents undefined). */
    public void ensureDevice(long sendBytes, long recvBytes) {
        for (int r = 0; r < size(); r++) {
            sendArea[r] = grow(r, sendArea[r], sendBytes);
            recvArea[r] = grow(r, recvArea[r], recvBytes);
        }
    }

    private DeviceBuffer grow(int rank, DeviceBuffer old, long bytes) {
        if (old != null && old.byteSize() >= bytes) {
            return old;
        }
        long size = Math.max(bytes, old == null ? 1 << 20 : old.byteSize() * 2);
        if (old != null) {
            streams[rank].synchronize();
            old.close();
        }
        return devices.get(rank).allocate(size, DataType.UINT8);
    }

    /** The send area of a rank, as bytes. */
    public DeviceBuffer sendArea(int rank) {
        return sendArea[rank];
    }

    /** The receive area of a rank, as bytes. */
    public DeviceBuffer recvArea(int rank) {
        return recvArea[rank];
    }

    /** Host scratch for a rank's input: at least {@code bytes}. */
    public MemorySegment hostIn(int rank, long bytes) {
        return hostIn[rank] = growHost(hostIn[rank], bytes);
    }

    /** Host scratch for reading back a rank's send area. */
    public MemorySegment hostSend(int rank, long bytes) {
        return hostSend[rank] = growHost(hostSend[rank], bytes);
    }

    /** Host scratch for reading back a rank's receive area. */
    public MemorySegment hostRecv(int rank, long bytes) {
        return hostRecv[rank] = growHost(hostRecv[rank], bytes);
    }

    private static MemorySegment growHost(MemorySegment old, long bytes) {
        if (old != null && old.byteSize() >= bytes) {
            return old;
        }
        long size = Math.max(Math.max(bytes, 1 << 20), old == null ? 0 : old.byteSize() * 2);
        return Arena.ofAuto().allocate(size, 256);
    }

    // ------------------------------------------------------------------ running calls

    /**
     * Issues {@code call} for every rank, in {@code style}, and waits until every call has returned
     * and every rank's stream is idle, at most {@code timeout} in all.
     *
     * @return the exceptions thrown by calls, by "rank R" (or "group" for the group driver); empty
     *         when all succeeded
     * @throws Broken when the deadline passed (the set is then aborted) or a CUDA error made the set
     *         unusable
     */
    public Map<String, Throwable> run(Style style, RankCall call, Duration timeout) {
        requireUsable();
        long deadline = System.nanoTime() + timeout.toNanos();
        int n = size();
        Map<String, Throwable> errors = new LinkedHashMap<>();
        List<Future<?>> futures = new ArrayList<>();
        List<String> names = new ArrayList<>();
        if (style == Style.THREADS) {
            for (int r = 0; r < n; r++) {
                int rank = r;
                futures.add(threads[r].submit(() -> {
                    // As an application thread that owns a GPU would (cudaSetDevice); the group style does not.
                    devices.get(rank).makeCurrent();
                    call.call(rank, comms.get(rank), streams[rank]);
                    return null;
                }));
                names.add("rank " + r);
            }
        } else {
            futures.add(threads[0].submit(() -> {
                Map<String, Throwable> inGroup = new LinkedHashMap<>();
                comms.get(0).groupStart();
                for (int r = 0; r < n; r++) {
                    try {
                        call.call(r, comms.get(r), streams[r]);
                    } catch (Exception | Error e) {
                        inGroup.put("rank " + r, e); // keep issuing the others: groupEnd must still come
                    }
                }
                try {
                    comms.get(0).groupEnd();
                } catch (RuntimeException | Error e) {
                    inGroup.put("groupEnd", e);
                }
                synchronized (errors) {
                    errors.putAll(inGroup);
                }
                return null;
            }));
            names.add("group driver");
        }
        for (int i = 0; i < futures.size(); i++) {
            try {
                futures.get(i).get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                synchronized (errors) {
                    errors.put(names.get(i), e.getCause());
                }
            } catch (TimeoutException e) {
                List<String> stuck = new ArrayList<>();
                for (int j = i; j < futures.size(); j++) {
                    if (!futures.get(j).isDone()) {
                        stuck.add(names.get(j));
                    }
                }
                String why = "the " + (style == Style.THREADS ? "calls of " : "") + String.join(", ", stuck)
                        + " did not return within " + timeout.toSeconds() + " s (host side blocked); stacks:\n" + stacks();
                abort(why);
                throw new Broken(why, null);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                abort("interrupted");
                throw new Broken("interrupted while waiting for the ranks' calls", e);
            }
        }
        // A rank whose call failed leaves its peers' kernels waiting for it: do not wait the full time.
        long idleDeadline = errors.isEmpty() ? deadline : Math.min(deadline, System.nanoTime() + Duration.ofSeconds(5).toNanos());
        awaitIdle(idleDeadline, timeout);
        synchronized (errors) {
            return new LinkedHashMap<>(errors);
        }
    }

    /** Waits until every rank's stream is idle, or aborts the set and throws {@link Broken}. */
    public void awaitIdle(Duration timeout) {
        awaitIdle(System.nanoTime() + timeout.toNanos(), timeout);
    }

    private void awaitIdle(long deadline, Duration nominal) {
        int n = size();
        boolean[] idle = new boolean[n];
        int remaining = n;
        long spins = 0;
        while (true) {
            for (int r = 0; r < n; r++) {
                if (!idle[r]) {
                    try {
                        if (streams[r].isIdle()) {
                            idle[r] = true;
                            remaining--;
                        }
                    } catch (CudaException e) {
                        String why = "rank " + r + "'s stream reported a CUDA error (the GPU context is unusable now): " + e.getMessage();
                        abort(why);
                        throw new Broken(why, e);
                    }
                }
            }
            if (remaining == 0) {
                return;
            }
            if (System.nanoTime() - deadline > 0) {
                List<String> busy = new ArrayList<>();
                for (int r = 0; r < n; r++) {
                    if (!idle[r]) {
                        busy.add(Integer.toString(r));
                    }
                }
                String why = "the streams of rank(s) " + String.join(",", busy) + " were still busy after "
                        + nominal.toSeconds() + " s (a kernel waiting for a peer that never came?); every communicator was aborted";
                abort(why);
                throw new Broken(why, null);
            }
            if (++spins > 200) {
                LockSupport.parkNanos(20_000);
            } else {
                Thread.onSpinWait();
            }
        }
    }

    private void requireUsable() {
        if (closed) {
            throw new IllegalStateException(describe() + " is closed");
        }
        if (broken != null) {
            throw new Broken(describe() + " is unusable after an earlier failure: " + broken, null);
        }
    }

    /** Aborts every communicator (each at most 10 s, from a helper thread) and marks the set unusable. */
    public void abort(String why) {
        if (broken == null) {
            broken = why;
        }
        Thread t = new Thread(() -> {
            for (DeviceCommunicator c : comms) {
                try {
                    c.abort();
                } catch (RuntimeException | Error e) {
                    System.err.println("abort of " + backend + " rank failed: " + e);
                }
            }
        }, "gpu-abort");
        t.setDaemon(true);
        t.start();
        try {
            t.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Releases everything. After a failure (the set is broken) only the communicators are aborted and
     * the threads stopped: device memory may still be in use by kernels that never finished.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (broken == null) {
            try {
                awaitIdle(Duration.ofSeconds(30));
            } catch (Broken e) {
                // broken is set now; fall through to the careful path
            }
        }
        if (broken == null) {
            List<Throwable> problems = new ArrayList<>();
            for (DeviceCommunicator c : comms) {
                try {
                    c.close();
                } catch (RuntimeException | Error e) {
                    problems.add(e);
                }
            }
            for (int r = 0; r < size(); r++) {
                for (AutoCloseable a : new AutoCloseable[] {sendArea[r], recvArea[r], streams[r]}) {
                    if (a != null) {
                        try {
                            a.close();
                        } catch (Exception e) {
                            problems.add(e);
                        }
                    }
                }
            }
            if (!problems.isEmpty()) {
                System.err.println("closing " + describe() + ": " + problems);
            }
        } else {
            abort(broken);
        }
        for (ExecutorService t : threads) {
            t.shutdownNow();
        }
    }

    /** The stacks of this test's rank and helper threads, for hang reports (idle pool threads in one line). */
    public static String stacks() {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            String name = e.getKey().getName();
            if (name.startsWith("gpu-") || name.startsWith("jccl")) {
                StackTraceElement[] st = e.getValue();
                boolean idle = false;
                for (StackTraceElement f : st) {
                    idle |= f.getClassName().endsWith("ThreadPoolExecutor") && f.getMethodName().equals("getTask");
                }
                sb.append("  ").append(name).append(' ').append(idle ? "idle" : e.getKey().getState().toString()).append('\n');
                for (int i = 0; !idle && i < Math.min(st.length, 14); i++) {
                    sb.append("      at ").append(st[i]).append('\n');
                }
            }
        }
        return sb.toString();
    }
}
