package org.jccl.cuda;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import org.jccl.Communicator;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.Nccl;

/**
 * NCCL ({@code libnccl.so.2} through FFM) behind the {@link DeviceCommunicator} interface, for
 * side-by-side measurements with jccl's own kernels and for jobs that want NCCL itself. Every call
 * maps to the NCCL call of the same name (all-to-all: see {@link #allToAll}); arguments are
 * checked first ({@link DeviceArgs}), then the communicator's GPU is made current on the calling
 * thread and the operation is enqueued on the caller's stream.
 *
 * <p>The library is looked up the first time this class is asked for it, never at start-up:
 * {@code JCCL_NCCL_LIBRARY} when set (a path that does not load is an error), else {@code
 * libnccl.so.2} through the system loader, else the {@code nvidia-nccl-cu*} Python wheels'
 * directories, else {@code python3 -c "import nvidia.nccl"}. {@link #isAvailable()} and {@link
 * #unavailableReason()} report the outcome, naming every place tried.
 *
 * <p>Errors: bad arguments throw {@link IllegalArgumentException} before NCCL is called; an NCCL
 * failure throws {@link CudaException} naming the call, its arguments, NCCL's error and its last
 * message. After {@link #abort()} calls throw a {@link JcclException} with {@link
 * ErrorCode#ABORTED}; after {@link #close()} an {@link InvalidUsageException}. {@link #abort()}
 * may be called from any thread; a call that another thread has already begun when the
 * communicator is aborted is NCCL's to end (ncclCommAbort frees the communicator).
 */
public final class NcclCommunicator implements DeviceCommunicator {
    private static final int OPEN = 0;
    private static final int ABORTED = 1;
    private static final int CLOSED = 2;

    private final MemorySegment comm;
    private final int rank;
    private final int size;
    private final CudaDevice device;
    private final AtomicInteger state = new AtomicInteger(OPEN);

    private NcclCommunicator(MemorySegment comm, int rank, int size, CudaDevice device) {
        this.comm = comm;
        this.rank = rank;
        this.size = size;
        this.device = device;
    }

    // ------------------------------------------------------------------ library

    /** Whether libnccl.so.2 was found and loaded, and CUDA sees a GPU. */
    public static boolean isAvailable() {
        return Nccl.available() && Cuda.isAvailable();
    }

    /** Why {@link #isAvailable()} is false (naming the places where NCCL was looked for), or null when it is true. */
    public static String unavailableReason() {
        if (!Nccl.available()) {
            return Nccl.problem();
        }
        if (!Cuda.isAvailable()) {
            return "NCCL " + Nccl.version() + " loaded from " + Nccl.path() + ", but CUDA is not usable: " + Cuda.unavailableReason();
        }
        return null;
    }

    /** The loaded NCCL's version, e.g. "2.28.9" (ncclGetVersion). */
    public static String version() {
        requireLibrary();
        return Nccl.version();
    }

    /** The file NCCL was loaded from. */
    public static String libraryPath() {
        requireLibrary();
        return Nccl.path();
    }

    /** The places NCCL was looked for, in order, each with what was found there. */
    public static List<String> librarySearch() {
        return Nccl.tried();
    }

    private static void requireLibrary() {
        if (!Nccl.available()) {
            throw new CudaException("NCCL is not available: " + Nccl.problem());
        }
    }

    private static void requireAvailable() {
        String why = unavailableReason();
        if (why != null) {
            throw new CudaException("NCCL cannot be used here: " + why);
        }
    }

    // ------------------------------------------------------------------ creation

    /**
     * Collective over {@code host}: rank 0 makes the ncclUniqueId and broadcasts it over the host
     * communicator, then every rank calls ncclCommInitRank(host.size(), id, host.rank()) on
     * {@code device}. Every rank of {@code host} must call this; a rank that cannot use NCCL makes
     * every rank fail (after one host all-reduce) rather than leave the others waiting, and so do two
     * ranks of one host on one GPU (one all-gather of every rank's GPU before NCCL starts).
     */
    public static NcclCommunicator create(Communicator host, CudaDevice device) {
        Objects.requireNonNull(host, "host");
        Objects.requireNonNull(device, "device");
        int rank = host.rank();
        int size = host.size();
        CudaException local = null;
        try {
            requireAvailable();
            device.makeCurrent();
        } catch (CudaException e) {
            local = e;
        }
        int[] ok = {local == null ? 1 : 0};
        host.allReduce(ok, ReduceOp.MIN);
        if (local != null) {
            throw local;
        }
        if (ok[0] == 0) {
            throw new CudaException("NcclCommunicator.create: rank " + rank + " can use NCCL, but another rank cannot (see"
                    + " its error); no communicator was made");
        }
        // Two ranks of one host on one GPU: NCCL would fail late ("Duplicate GPU detected") or hang; refused here on every rank.
        GpuClaims.exchange(host, device, org.jccl.Config.fromEnvironment(), "NcclCommunicator.create");
        // One status byte, then the 128-byte ncclUniqueId.
        byte[] msg = new byte[1 + Nccl.UNIQUE_ID_BYTES];
        CudaException idFailure = null;
        if (rank == 0) {
            try {
                byte[] id = Nccl.getUniqueId();
                System.arraycopy(id, 0, msg, 1, id.length);
                msg[0] = 1;
            } catch (CudaException e) {
                idFailure = e;
            }
        }
        host.broadcast(msg, 0);
        if (idFailure != null) {
            throw idFailure;
        }
        if (msg[0] != 1) {
            throw new CudaException("NcclCommunicator.create: rank 0 could not make the ncclUniqueId (see its error);"
                    + " no communicator was made on rank " + rank);
        }
        byte[] id = new byte[Nccl.UNIQUE_ID_BYTES];
        System.arraycopy(msg, 1, id, 0, id.length);
        device.makeCurrent();
        MemorySegment c = Nccl.commInitRank(size, id, rank);
        return new NcclCommunicator(c, rank, size, device);
    }

    /**
     * One process, several GPUs (ncclCommInitAll): rank i runs on {@code devices.get(i)}. The
     * communicators are then driven one thread per GPU, or from one thread inside {@link
     * #groupStart()}/{@link #groupEnd()}.
     */
    public static List<NcclCommunicator> createAll(List<CudaDevice> devices) {
        Objects.requireNonNull(devices, "devices");
        if (devices.isEmpty()) {
            throw new IllegalArgumentException("createAll: no devices given");
        }
        Map<Integer, Integer> seen = new HashMap<>();
        int[] ordinals = new int[devices.size()];
        for (int i = 0; i < ordinals.length; i++) {
            CudaDevice d = devices.get(i);
            if (d == null) {
                throw new IllegalArgumentException("createAll: devices[" + i + "] is null");
            }
            Integer before = seen.putIfAbsent(d.ordinal(), i);
            if (before != null) {
                throw new IllegalArgumentException("createAll: GPU " + d.ordinal() + " is listed twice (devices[" + before
                        + "] and devices[" + i + "]); NCCL needs one GPU per rank");
            }
            ordinals[i] = d.ordinal();
        }
        requireAvailable();
        devices.get(0).makeCurrent();
        MemorySegment[] comms = Nccl.commInitAll(ordinals);
        List<NcclCommunicator> out = new ArrayList<>(comms.length);
        for (int i = 0; i < comms.length; i++) {
            out.add(new NcclCommunicator(comms[i], i, comms.length, devices.get(i)));
        }
        return List.copyOf(out);
    }

    // ------------------------------------------------------------------ identity

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public CudaDevice device() {
        return device;
    }

    @Override
    public String backend() {
        return "nccl";
    }

    /** The ncclComm_t, for code that calls NCCL itself (valid until {@link #close()} or {@link #abort()}). */
    public MemorySegment handle() {
        return comm;
    }

    /**
     * ncclCommGetAsyncError: 0 (ncclSuccess), 7 (ncclInProgress), or the ncclResult_t of an error
     * the communicator hit in the background (a peer failed, a network error); NCCL's text for it
     * is in the message of the next failing call. jccl does not call it after every enqueue
     * (about 0.24 us with makeCurrent on an H200 host): NCCL itself checks it at the start of
     * every enqueue (ncclCommEnsureReady), so a communicator in error fails its next call anyway.
     */
    public int asyncError() {
        MemorySegment c = enter("asyncError");
        return Nccl.commGetAsyncError(c);
    }

    /** Makes the GPU current and returns the comm, or throws when the communicator is closed or aborted. */
    private MemorySegment enter(String call) {
        int s = state.get();
        if (s != OPEN) {
            throw unusable(call, s);
        }
        device.makeCurrent();
        return comm;
    }

    private JcclException unusable(String call, int s) {
        String who = "NCCL rank " + rank + " of " + size + " on GPU " + device.ordinal() + ": " + call + ": ";
        return s == ABORTED ? new JcclException(ErrorCode.ABORTED, who + "the communicator was aborted by abort()")
                : new InvalidUsageException(who + "the communicator is closed");
    }

    // ------------------------------------------------------------------ collectives

    @Override
    public void allReduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        long count = DeviceArgs.checkAllReduce(this, send, recv, op, stream);
        MemorySegment c = enter("allReduce");
        Nccl.allReduce(send.address(), recv.address(), count, Nccl.dataType(send.type()), Nccl.redOp(op), c, stream.handle());
    }

    @Override
    public void broadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream) {
        long count = DeviceArgs.checkBroadcast(this, send, recv, root, stream);
        MemorySegment c = enter("broadcast");
        // send is read only on the root; NCCL ignores it elsewhere.
        long s = rank == root ? send.address() : 0L;
        Nccl.broadcast(s, recv.address(), count, Nccl.dataType(recv.type()), root, c, stream.handle());
    }

    @Override
    public void reduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream stream) {
        long count = DeviceArgs.checkReduce(this, send, recv, op, root, stream);
        MemorySegment c = enter("reduce");
        // recv may be NULL except on the root (nccl.h).
        long r = rank == root ? recv.address() : 0L;
        Nccl.reduce(send.address(), r, count, Nccl.dataType(send.type()), Nccl.redOp(op), root, c, stream.handle());
    }

    @Override
    public void allGather(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        long count = DeviceArgs.checkAllGather(this, send, recv, stream);
        MemorySegment c = enter("allGather");
        Nccl.allGather(send.address(), recv.address(), count, Nccl.dataType(send.type()), c, stream.handle());
    }

    @Override
    public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        long count = DeviceArgs.checkReduceScatter(this, send, recv, op, stream);
        MemorySegment c = enter("reduceScatter");
        Nccl.reduceScatter(send.address(), recv.address(), count, Nccl.dataType(send.type()), Nccl.redOp(op), c, stream.handle());
    }

    /**
     * As nccl-tests runs it: ncclAlltoAll where the library has it (NCCL 2.28 and later), else one
     * ncclSend and one ncclRecv per peer inside ncclGroupStart/End ({@link #allToAllSendRecv}).
     * Not in place: send and recv must not overlap (nccl-tests does not check in-place all-to-all
     * results either).
     */
    @Override
    public void allToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        long block = checkAllToAll(send, recv, stream);
        MemorySegment c = enter("allToAll");
        if (Nccl.hasAlltoAll()) {
            Nccl.alltoAll(send.address(), recv.address(), block, Nccl.dataType(send.type()), c, stream.handle());
        } else {
            sendRecvAllToAll(send, recv, block, c, stream);
        }
    }

    /**
     * All-to-all as one ncclSend(send + r x block) and one ncclRecv(recv + r x block) per peer r
     * inside ncclGroupStart/End: the form nccl-tests uses before NCCL 2.28, kept for comparisons.
     * Same arguments as {@link #allToAll}.
     */
    public void allToAllSendRecv(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        long block = checkAllToAll(send, recv, stream);
        MemorySegment c = enter("allToAll");
        sendRecvAllToAll(send, recv, block, c, stream);
    }

    private long checkAllToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        long block = DeviceArgs.checkAllToAll(this, send, recv, stream);
        if (block > 0 && DeviceArgs.inPlace(send, recv, 0)) {
            throw new IllegalArgumentException("allToAll: send and recv are the same memory, but NCCL's all-to-all is not"
                    + " in place; use separate buffers");
        }
        return block;
    }

    private void sendRecvAllToAll(DeviceBuffer send, DeviceBuffer recv, long block, MemorySegment c, CudaStream stream) {
        int type = Nccl.dataType(send.type());
        long step = send.type().bytes(block);
        MemorySegment s = stream.handle();
        Nccl.groupStart();
        RuntimeException failure = null;
        try {
            for (int r = 0; r < size; r++) {
                Nccl.send(send.address() + r * step, block, type, r, c, s);
                Nccl.recv(recv.address() + r * step, block, type, r, c, s);
            }
        } catch (RuntimeException e) {
            failure = e;
        }
        // Always closed, so the thread's NCCL group depth stays balanced; after a failed call NCCL
        // reports the error here and launches nothing.
        try {
            Nccl.groupEnd();
        } catch (RuntimeException e) {
            if (failure == null) {
                throw e;
            }
            failure.addSuppressed(e);
        }
        if (failure != null) {
            throw failure;
        }
    }

    @Override
    public void send(DeviceBuffer buf, int peer, CudaStream stream) {
        long count = DeviceArgs.checkPointToPoint(this, "send", buf, peer, stream);
        MemorySegment c = enter("send");
        Nccl.send(buf.address(), count, Nccl.dataType(buf.type()), peer, c, stream.handle());
    }

    @Override
    public void recv(DeviceBuffer buf, int peer, CudaStream stream) {
        long count = DeviceArgs.checkPointToPoint(this, "recv", buf, peer, stream);
        MemorySegment c = enter("recv");
        Nccl.recv(buf.address(), count, Nccl.dataType(buf.type()), peer, c, stream.handle());
    }

    // ------------------------------------------------------------------ groups and lifecycle

    /** ncclGroupStart: per thread, spanning every NCCL communicator (nestable). */
    @Override
    public void groupStart() {
        enter("groupStart");
        Nccl.groupStart();
    }

    /**
     * ncclGroupEnd: at the outermost end, every call of the group is issued. Always calls NCCL,
     * even on a closed or aborted communicator, so the thread's group depth stays balanced.
     */
    @Override
    public void groupEnd() {
        device.makeCurrent();
        Nccl.groupEnd();
    }

    /** ncclCommAbort, once; later calls throw ABORTED. Any thread; idempotent; nothing after {@link #close()}. */
    @Override
    public void abort() {
        if (state.compareAndSet(OPEN, ABORTED)) {
            device.makeCurrent();
            Nccl.commAbort(comm);
        }
    }

    /** ncclCommDestroy, once (it waits for the communicator's enqueued work). Idempotent; nothing after {@link #abort()}. */
    @Override
    public void close() {
        if (state.compareAndSet(OPEN, CLOSED)) {
            device.makeCurrent();
            Nccl.commDestroy(comm);
        }
    }

    @Override
    public String toString() {
        String s = switch (state.get()) {
            case OPEN -> "";
            case ABORTED -> ", aborted";
            default -> ", closed";
        };
        return "NcclCommunicator[rank " + rank + " of " + size + " on GPU " + device.ordinal() + s + "]";
    }
}
