package org.jccl.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.CudaDriver;
import org.jccl.cuda.internal.DeviceArgs;
import org.jccl.cuda.internal.Exchange;
import org.jccl.cuda.internal.InProcessExchange;
import org.jccl.cuda.internal.IpcExchange;
import org.jccl.cuda.internal.KernelArgs;
import org.jccl.cuda.internal.KernelStatus;
import org.jccl.cuda.internal.Kernels;
import org.jccl.cuda.internal.SignalArea;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.topo.GpuMapping;

/**
 * jccl's GPU communicator: collectives between GPUs of one host through peer-mapped memory
 * (NVLink or PCIe peer-to-peer) with jccl's own kernels, enqueued on the caller's stream.
 *
 * <p>Algorithms (each one kernel, bracketed by a start and an end barrier among the ranks'
 * kernels, see jccl_kernels.cu): all-reduce one-shot (every GPU reads every peer's input and
 * reduces; small messages, out of place) or two-shot (GPU r reduces slice r from every peer and
 * writes the result into every peer's output), or for large messages a ring (every GPU stores only
 * to its successor: reduce-scatter, then all-gather); reduce-scatter and reduce by the same slice scheme;
 * all-gather, broadcast and all-to-all as pushes (stores into the peers' outputs); send/recv as
 * pushes after the receiver's kernel says its buffer is free.
 *
 * <p>Layouts: {@link #createAll} (one process, several GPUs: peers' pointers are used as they
 * are) and {@link #create} (one process per GPU: buffers are mapped with CUDA IPC, handles travel
 * over the host communicator, and mappings are cached).
 *
 * <p>Every kernel that waits for a peer polls an abort word and a deadline
 * ({@code JCCL_CUDA_WAIT_TIMEOUT}); a kernel that gives up records why in host-mapped memory, and
 * the next call on the communicator throws a {@link CudaException} naming the operation, its
 * sequence number and the peer.
 *
 * <p>Thread safety: one thread per communicator at a time (calls are synchronized); a group
 * ({@link #groupStart()}) belongs to the thread that opened it.
 */
public final class CudaCommunicator implements DeviceCommunicator {
    private static final int MAX_RANKS = KernelArgs.MAX_RANKS;
    /** Broadcasts up to this many bytes use the spread kernel by default. */
    private static final long BCAST_PULL_MIN = 512 << 10;
    /** Bytes per block per round of the pipelined broadcast. */
    private static final long BCAST_PART = 64 * 1024;
    /** Bytes per block per round of the chain-async broadcast (JCCL_CUDA_BCAST_PART=0). */
    private static final long BCAST_ASYNC_PART = 64 * 1024;
    /** Most blocks of the warp chain broadcast: 16 warps each, one SIG_PIPE flag per warp (1792 words). */
    private static final int BCAST_WARP_BLOCKS = 112;

    private static final ThreadLocal<GroupState> GROUP = ThreadLocal.withInitial(GroupState::new);

    private final int rank;
    private final int size;
    private final CudaDevice device;
    private final Kernels kernels;
    private final Exchange exchange;
    private final long signal;
    private final long[] peerSignal;
    private final MemorySegment hostWords;
    private final long abortDev;
    private final long statusDev;
    private final Arena arena = Arena.ofShared();
    private final KernelArgs args;
    private final KernelArgs p2pArgs;
    private final KernelArgs oneShotArgs;
    private final KernelArgs pushArgs;
    private final KernelArgs flags;
    private final long pushSlot;
    private final SignalArea area;
    private final long ringSlice;
    private final long bcastPart;
    private final String allReduceAlgo;
    private final String broadcastAlgo;
    private final String allToAllAlgo;
    private final String reduceScatterAlgo;
    private final long ceChunk;
    private final int ceLanes;
    /** Copy-engine streams, events and scratch, created by the first copy-engine operation. */
    private CeLanes ce;
    private final int maxBlocks;
    private final long timeoutNs;
    private final int nblocksOverride;
    private final long oneshotMax;
    private final String name;

    /** The dup of the host communicator this rank owns (create()), closed with it; null for createAll. */
    private Communicator ownedHost;
    /** Non-null when collectives are staged through pinned host memory and this host communicator. */
    private final Communicator staging;
    private final String stagingWhy;
    private final List<MemorySegment> pinned = new ArrayList<>();
    private int pinnedNext;

    private long epoch;
    private final long[] sendSeq;
    private final long[] recvSeq;
    private long p2pBlocks;
    private long scratch;
    private long scratchBytes;
    private volatile boolean aborted;
    private volatile boolean closed;
    private final List<String> history = new ArrayList<>();

    private CudaCommunicator(int rank, int size, CudaDevice device, Exchange exchange, long signal, long[] peerSignal,
                             MemorySegment hostWords, int maxBlocks, Config config, String name) {
        this(rank, size, device, exchange, signal, peerSignal, hostWords, maxBlocks, config, name, null, null);
    }

    private CudaCommunicator(int rank, int size, CudaDevice device, Exchange exchange, long signal, long[] peerSignal,
                             MemorySegment hostWords, int maxBlocks, Config config, String name, Communicator staging,
                             String stagingWhy) {
        this.staging = staging;
        this.stagingWhy = stagingWhy;
        this.rank = rank;
        this.size = size;
        this.device = device;
        this.exchange = exchange;
        this.signal = signal;
        this.peerSignal = peerSignal;
        this.hostWords = hostWords;
        this.abortDev = CudaDriver.memHostGetDevicePointer(hostWords);
        this.statusDev = abortDev + 8;
        this.kernels = staging == null ? Kernels.on(device) : null;
        this.maxBlocks = maxBlocks;
        this.timeoutNs = Settings.CUDA_WAIT_TIMEOUT.getDuration(config).toNanos();
        this.nblocksOverride = Settings.CUDA_NBLOCKS.getInt(config);
        this.oneshotMax = oneshotMax(config);
        this.guardOn = Settings.checkLevel(config) != Settings.CHECK_NONE;
        this.name = name;
        this.sendSeq = new long[size];
        this.recvSeq = new long[size];
        this.epoch = 0;
        this.args = KernelArgs.collective(arena);
        this.p2pArgs = KernelArgs.p2p(arena);
        this.pushSlot = pushSlot(config);
        this.area = new SignalArea(oneshotMax, pushSlot, size);
        this.allReduceAlgo = choice(Settings.CUDA_ALLREDUCE, config, "auto", "oneshot", "twoshot", "push", "push-serial", "ce", "ring");
        this.reduceScatterAlgo = choice(Settings.CUDA_REDUCE_SCATTER, config, "auto", "load", "ce");
        this.ceChunk = Settings.CUDA_CE_CHUNK.getLong(config) / 256 * 256;
        this.ceLanes = Settings.CUDA_CE_LANES.getInt(config);
        this.ringSlice = Settings.CUDA_RING_SLICE.getLong(config) / 256 * 256;
        this.bcastPart = roundUp(Settings.CUDA_BCAST_PART.getLong(config), 16);
        this.broadcastAlgo = choice(Settings.CUDA_BROADCAST, config, "auto", "chain", "warp-chain", "chain-async", "pipe", "pull", "spread", "ce");
        this.allToAllAlgo = choice(Settings.CUDA_ALLTOALL, config, "auto", "split", "serial");
        this.pushArgs = KernelArgs.push(arena);
        this.flags = KernelArgs.flags(arena);
        flags.clear();
        flags.flagCommon(abortDev, statusDev, timeoutNs);
        pushArgs.clear();
        pushArgs.pushCommon(abortDev, statusDev, timeoutNs, rank, size);
        this.oneShotArgs = KernelArgs.oneShot(arena);
        oneShotArgs.clear();
        oneShotArgs.oneShotCommon(abortDev, statusDev, timeoutNs, rank, size);
        args.clear();
        p2pArgs.clear();
        for (int q = 0; q < size; q++) {
            args.signal(q, peerSignal[q]);
            p2pArgs.p2pSignal(q, peerSignal[q]);
            oneShotArgs.oneShotSignal(q, peerSignal[q]);
            pushArgs.pushSignal(q, peerSignal[q]);
        }
        args.common(abortDev, statusDev, timeoutNs, rank, size);
        p2pArgs.p2pCommon(abortDev, statusDev, timeoutNs, rank);
        if (staging == null) {
            // A wait on the host for a peer's record ends when this rank's kernels have failed (the one-shot's guard found
            // a mismatch): the peer failed at that operation too and publishes nothing more.
            exchange.watch(rank, () -> {
                JcclException f = failureNow();
                return f == null ? null : reportFailure("GPU collective", f);
            });
        }
    }

    // ================================================================== creation

    /** JCCL_CUDA_ONESHOT_MAX rounded to 256 bytes and capped at 8 MiB (the inbox holds 2 x 8 slots of it). */
    private static long oneshotMax(Config config) {
        long v = Settings.CUDA_ONESHOT_MAX.getLong(config);
        return Math.min(8L << 20, (v + 255) / 256 * 256);
    }

    private static long pushSlot(Config config) {
        return Settings.CUDA_PUSH_SLOT.getLong(config) / 256 * 256;
    }

    private static String choice(org.jccl.internal.config.Setting setting, Config config, String... allowed) {
        String a = setting.getString(config).trim().toLowerCase(java.util.Locale.ROOT);
        if (!List.of(allowed).contains(a)) {
            throw new org.jccl.ConfigException(setting.name() + "=" + a + " is not one of " + String.join(", ", allowed));
        }
        return a;
    }

    /** Bytes of each rank's peer-mapped area ({@link SignalArea}). */
    private static long areaBytes(Config config, int n) {
        return new SignalArea(oneshotMax(config), pushSlot(config), n).bytes();
    }

    private long pushScratch(long a, int src) {
        return area.pushScratch(a, src);
    }

    private long inbox(long a, long parity, int src) {
        return area.inbox(a, parity, src);
    }

    /**
     * One process driving several GPUs (like ncclCommInitAll): rank i runs on {@code devices.get(i)}.
     * Every pair must be able to map each other's memory; a device listed twice is an error.
     */
    public static List<CudaCommunicator> createAll(List<CudaDevice> devices) {
        return createAll(devices, Config.fromEnvironment());
    }

    public static List<CudaCommunicator> createAll(List<CudaDevice> devices, Config config) {
        int n = devices.size();
        if (n < 1) {
            throw new IllegalArgumentException("createAll needs at least one GPU");
        }
        if (n > MAX_RANKS) {
            throw new IllegalArgumentException("jccl's GPU communicator spans at most " + MAX_RANKS + " GPUs (one NVLink domain);"
                    + " got " + n);
        }
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < n; i++) {
            CudaDevice d = devices.get(i);
            if (!seen.add(d.ordinal())) {
                int first = devices.indexOf(d);
                throw new InvalidUsageException("ranks " + first + " and " + i + " are both bound to " + d
                        + ": every rank needs a GPU of its own (NCCL would hang here)");
            }
        }
        String why = Settings.CUDA_P2P_DISABLE.getBool(config) ? "JCCL_CUDA_P2P_DISABLE=1 (or NCCL_P2P_DISABLE=1) is set" : null;
        for (CudaDevice a : devices) {
            for (CudaDevice b : devices) {
                if (why == null && a != b && !a.canAccessPeer(b)) {
                    why = a + " cannot map the memory of " + b + " (cuDeviceCanAccessPeer = 0: no NVLink or PCIe peer-to-peer"
                            + " path between them)";
                }
            }
        }
        if (why != null) {
            return stagedAll(devices, config, why);
        }
        for (CudaDevice a : devices) {
            a.makeCurrent();
            for (CudaDevice b : devices) {
                if (a != b) {
                    CudaDriver.ctxEnablePeerAccess(b.context());
                }
            }
        }
        int maxBlocks = KernelArgs.MAX_BLOCKS;
        for (CudaDevice d : devices) {
            maxBlocks = Math.min(maxBlocks, d.multiprocessorCount());
        }
        long[] signals = new long[n];
        MemorySegment[] words = new MemorySegment[n];
        for (int i = 0; i < n; i++) {
            CudaDevice d = devices.get(i);
            d.makeCurrent();
            signals[i] = CudaDriver.memAlloc(areaBytes(config, n));
            zero(signals[i], SignalArea.WORDS_BYTES);
            words[i] = hostWords();
        }
        long timeoutNs = Settings.CUDA_WAIT_TIMEOUT.getDuration(config).toNanos();
        InProcessExchange ex = new InProcessExchange(n, timeoutNs);
        List<CudaCommunicator> comms = new ArrayList<>(n);
        String name = "gpucomm-" + Long.toHexString(System.nanoTime() & 0xffffff);
        for (int i = 0; i < n; i++) {
            comms.add(new CudaCommunicator(i, n, devices.get(i), ex, signals[i], signals.clone(), words[i], maxBlocks, config, name));
        }
        for (CudaCommunicator c : comms) {
            String failed = c.selfTest();
            if (failed != null) {
                for (CudaCommunicator d : comms) {
                    d.close();
                }
                return stagedAll(devices, config, failed);
            }
        }
        for (CudaCommunicator c : comms) {
            Log.info(Log.Subsys.INIT, c.rank, "GPU communicator " + name + ": rank " + c.rank + " of " + n + " on " + c.device
                    + " " + c.device.uuid() + ", peers via CUDA P2P (one process)");
        }
        return comms;
    }

    /**
     * Collective over {@code host}: each rank of the host communicator brings one GPU; ranks are
     * usually separate processes (jccl run, torchrun, mpirun); {@link Cuda#deviceFor(Communicator)}
     * picks each rank's GPU by jccl's rule. First, before any memory is exchanged, every rank
     * publishes its GPU and host identity in one all-gather: two ranks of one host on one GPU fail on
     * every rank, naming both ranks, the GPU and each rank's CUDA_VISIBLE_DEVICES.
     */
    public static CudaCommunicator create(Communicator host, CudaDevice device) {
        return create(host, device, Config.fromEnvironment());
    }

    public static CudaCommunicator create(Communicator host, CudaDevice device, Config config) {
        int n = host.size();
        int rank = host.rank();
        if (n > MAX_RANKS) {
            throw new IllegalArgumentException("jccl's GPU communicator spans at most " + MAX_RANKS + " GPUs (one NVLink domain);"
                    + " the host communicator has " + n + " ranks");
        }
        Communicator own = host.dup();
        try {
            device.makeCurrent();
            // Before any memory is allocated or mapped: every rank's GPU and host identity in one all-gather; two ranks of one
            // host on one GPU fail here, on every rank alike.
            List<GpuMapping.Claim> claims = GpuClaims.exchange(own, device, config, "CudaCommunicator.create");
            // Every rank must take the same path: agree on one host and on peer access first.
            String why = Settings.CUDA_P2P_DISABLE.getBool(config) ? "JCCL_CUDA_P2P_DISABLE=1 (or NCCL_P2P_DISABLE=1) is set" : null;
            for (int q = 0; q < n && why == null; q++) {
                if (!claims.get(q).hostKey().equals(claims.get(rank).hostKey())) {
                    why = "rank " + q + " runs on another host (" + claims.get(q).host() + (claims.get(q).host().equals(
                            claims.get(rank).host()) ? ", another host identity by JCCL_HOSTID" : "") + "); GPUDirect RDMA between"
                            + " hosts is not built yet";
                }
            }
            int[] disabled = {why == null ? 0 : 1};
            own.allReduce(disabled, ReduceOp.MAX);
            if (disabled[0] != 0) {
                return staged(own, device, config, why != null ? why : "another rank cannot use peer-to-peer (see its log)");
            }
            IpcExchange ex = IpcExchange.create(own, device, areaBytes(config, n), config);
            long signal = ex.ownSignal();
            zero(signal, SignalArea.WORDS_BYTES);
            long[] peerSignal = ex.peerSignals();
            own.barrier(); // every signal area is zeroed before anyone writes into it
            MemorySegment words = hostWords();
            CudaCommunicator c = new CudaCommunicator(rank, n, device, ex, signal, peerSignal, words, ex.maxBlocks(), config,
                    "gpucomm-" + Integer.toHexString(own.hashCode()));
            String failed = c.selfTest();
            int[] bad = {failed == null ? 0 : 1};
            own.allReduce(bad, ReduceOp.MAX);
            if (bad[0] != 0) {
                c.close();
                return staged(own, device, config, failed != null ? failed : "the peer-to-peer self-test failed on another rank");
            }
            c.ownedHost = own;
            Log.info(Log.Subsys.INIT, rank, "GPU communicator: rank " + rank + " of " + n + " on " + device + " " + device.uuid()
                    + ", peers via CUDA IPC + P2P");
            return c;
        } catch (RuntimeException e) {
            own.abort();
            throw e;
        }
    }

    /** createAll without peer access: ranks exchange through pinned host memory and in-process host communicators. */
    private static List<CudaCommunicator> stagedAll(List<CudaDevice> devices, Config config, String why) {
        List<Communicator> hosts = org.jccl.Jccl.initLocal(devices.size(), config);
        List<CudaCommunicator> comms = new ArrayList<>();
        for (int i = 0; i < devices.size(); i++) {
            comms.add(staged(hosts.get(i), devices.get(i), config, why));
        }
        return comms;
    }

    private static CudaCommunicator staged(Communicator host, CudaDevice device, Config config, String why) {
        device.makeCurrent();
        Log.warn(Log.Subsys.INIT, host.rank(), "GPU collectives of rank " + host.rank() + " on " + device + " are staged through"
                + " pinned host memory and the CPU transports (slower), because " + why);
        MemorySegment words = hostWords();
        CudaCommunicator c = new CudaCommunicator(host.rank(), host.size(), device, new InProcessExchange(1, 1), 0,
                new long[host.size()], words, 1, config, "gpucomm-staged", host, why);
        c.ownedHost = host;
        return c;
    }

    /** Whether collectives go through host memory, and why (null when they use peer-to-peer). */
    public String stagedBecause() {
        return stagingWhy;
    }

    private static void zero(long dptr, long bytes) {
        MemorySegment z = Arena.global().allocate(bytes);
        CudaDriver.memcpyHtoD(dptr, z, bytes);
    }

    /** Host memory the kernels can read (abort word) and write (status words): word 0 abort, 1..4 status. */
    private static MemorySegment hostWords() {
        MemorySegment w = CudaDriver.memHostAlloc(64, CudaDriver.MEMHOSTALLOC_PORTABLE | CudaDriver.MEMHOSTALLOC_DEVICEMAP);
        w.fill((byte) 0);
        return w;
    }

    /**
     * Writes a pattern into every peer's signal area through the peer mapping and reads it back:
     * IOMMU/ACS setups that report peer access but do not deliver the writes fail here, at
     * creation, instead of hanging the first collective.
     */
    private String selfTest() {
        device.makeCurrent();
        MemorySegment stream = CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment pattern = a.allocate(16);
            long tag = 0x6a63636cL << 32 | (rank * 131L + 7);
            pattern.set(ValueLayout.JAVA_LONG, 0, tag);
            pattern.set(ValueLayout.JAVA_LONG, 8, ~tag);
            long local = SignalArea.word(signal, SignalArea.SELFTEST_OWN);
            long back = local + 16;
            CudaDriver.memcpyHtoD(local, pattern, 16);
            for (int q = 0; q < size; q++) {
                if (q == rank) {
                    continue;
                }
                long remote = SignalArea.word(peerSignal[q], SignalArea.selfTestFrom(rank));
                copyKernel(local, remote, 16, stream);
                copyKernel(remote, back, 16, stream);
                CudaDriver.streamSynchronize(stream);
                MemorySegment got = a.allocate(16);
                CudaDriver.memcpyDtoH(got, back, 16);
                if (got.get(ValueLayout.JAVA_LONG, 0) != tag || got.get(ValueLayout.JAVA_LONG, 8) != ~tag) {
                    return "the peer-to-peer self-test between rank " + rank + " (" + device + ") and rank " + q
                            + " failed: data written through the peer mapping did not read back (IOMMU or PCIe ACS settings can"
                            + " block GPU peer-to-peer traffic; check `nvidia-smi topo -p2p rw`, disable ACS or boot with iommu=pt)";
                }
            }
            return null;
        } catch (CudaException e) {
            return "the peer-to-peer self-test of rank " + rank + " failed: " + e.getMessage();
        } finally {
            CudaDriver.streamDestroy(stream);
        }
    }

    private void copyKernel(long src, long dst, long bytes, MemorySegment stream) {
        args.src(0, src);
        args.dst(0, dst);
        args.op(bytes, 0, 1, 1, 0, 1);
        CudaDriver.launchKernel(kernels.copy, 1, Kernels.THREADS, 0, stream, args.params(), "jccl_copy self-test");
    }

    // ================================================================== identity

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
        return "jccl";
    }

    @Override
    public String toString() {
        return name + " rank " + rank + "/" + size + " on " + device;
    }

    // ================================================================== collectives

    @Override
    public void allReduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        checkUsable("allReduce");
        long count = DeviceArgs.checkAllReduce(this, send, recv, op, stream);
        if (staging != null) {
            DataType t0 = send.type();
            staged("allReduce", send, t0.bytes(count), recv, t0.bytes(count), stream,
                    (in, out) -> staging.allReduceAsync(org.jccl.Buffer.of(in, count, t0), org.jccl.Buffer.of(out, count, t0), op));
            return;
        }
        DataType t = send.type();
        // ce only when asked: 240-270 GB/s against push's 351 at 1-8 GB on 4x H200 (copy-engine reads from
        // peers are slower than SM stores; docs/PERFORMANCE.md)
        if (size > 1 && count > 0 && allReduceAlgo.equals("ce")) {
            ceReduce("allReduce", send, recv, op, stream, count, t, true);
            return;
        }
        // auto: the ring from 64 MB on 3+ GPUs (4x H200: level with push at 64 MB, ahead from 128 MB, 366 against push's
        // 352 and NCCL's 361-363 GB/s at 4-8 GB), from 512 MB on 2 (behind push to 128 MB, ahead at 512 MB-8 GB)
        boolean autoRing = allReduceAlgo.equals("auto") && t.bytes(count) >= (size == 2 ? RING_MIN_2 : RING_MIN);
        if (size > 1 && count > 0 && (allReduceAlgo.equals("ring") || autoRing)) {
            allReduceRing(send, recv, op, stream, count, t);
            return;
        }
        boolean fitsOneShot = t.bytes(count) <= oneshotMax && size > 1;
        boolean oneShot = allReduceAlgo.equals("oneshot") ? fitsOneShot : allReduceAlgo.equals("auto") && fitsOneShot;
        // auto: one-shot up to JCCL_CUDA_ONESHOT_MAX, then push (measured ahead of twoshot at every
        // size from 512 KB on 4x H200: twoshot's loads of rotating peer buffers pay remote TLB misses).
        boolean push = allReduceAlgo.startsWith("push") || allReduceAlgo.equals("auto") && !fitsOneShot;
        if (push && size > 1 && count > 0) {
            allReducePush(send, recv, op, stream, count, t);
            return;
        }
        int es = t.size();
        MemorySegment fn = kernels.reduce(t, op);
        if (oneShot) {
            // No peer reads this rank's buffers: nothing to exchange but the epoch. The kernels compare the guard words
            // (jccl_kernels.cu, oneshot_body); the exchange gets a note, for peers whose call exchanges records.
            MemorySegment os = kernels.oneShot(t, op);
            long g = guard("allReduce", count, t, op, -1);
            submitCollective("allReduce", g, 0, 0, stream, peers -> {
                long e = currentEpoch;
                long parity = e & 1;
                for (int q = 0; q < size; q++) {
                    oneShotArgs.oneShotInbox(q, q == rank ? 0 : inbox(peerSignal[q], parity, rank),
                            q == rank ? send.address() : inbox(signal, parity, q));
                }
                boolean vec = (send.address() | recv.address()) % 16 == 0;
                oneShotArgs.oneShotOp(send.address(), recv.address(), count, e, vec, g);
                CudaDriver.launchKernel(os, blocksFor(t.bytes(count)), Kernels.THREADS, 0, stream.handle(), oneShotArgs.params(),
                        "allReduce one-shot");
            });
            return;
        }
        submitCollective("allReduce", guard("allReduce", count, t, op, -1), send.address(), recv.address(), stream, peers -> {
            args.clear0();
            {
                long slice = roundUp(ceilDiv(count, size), 16 / es);
                long lo = Math.min(rank * slice, count);
                long hi = Math.min(lo + slice, count);
                boolean aligned = true;
                for (int q = 0; q < size; q++) {
                    args.src(q, in(peers, q) + lo * es);
                    args.dst(q, out(peers, q) + lo * es);
                    aligned &= (in(peers, q) | out(peers, q)) % 16 == 0;
                }
                int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | (aligned ? KernelArgs.MODE_VEC : 0);
                launchReduce(fn, hi - lo, size, size, mode, t.bytes(slice), stream, "allReduce two-shot");
            }
        });
    }

    /** Two-shot by stores only, in chunks of at most size() x JCCL_CUDA_PUSH_SLOT bytes (one kernel and epoch each). */
    private void allReducePush(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream, long count, DataType t) {
        int es = t.size();
        long per = 16 / es;
        long slotElems = pushSlot / es / per * per;
        long chunkMax = slotElems * size;
        int chunks = (int) ceilDiv(count, chunkMax);
        MemorySegment fn = kernels.push(t, op);
        // push-serial only when asked: ahead in one sitting on 4x H200 (356 against 351 GB/s from 256 MB),
        // behind in two others (308-346); see docs/PERFORMANCE.md
        boolean serial = allReduceAlgo.equals("push-serial");
        submitCollective("allReduce", guard("allReduce", count, t, op, -1), send.address(), recv.address(), stream, chunks, peers -> {
            for (int k = 0; k < chunks; k++) {
                long off = k * chunkMax;
                long c = Math.min(chunkMax, count - off);
                long slice = roundUp(ceilDiv(c, size), per);
                boolean vec = true;
                for (int q = 0; q < size; q++) {
                    long po = out(peers, q) + off * es;
                    pushArgs.pushPeer(q, pushScratch(peerSignal[q], rank), pushScratch(signal, q), po);
                    vec &= po % 16 == 0;
                }
                long in = send.address() + off * es;
                vec &= in % 16 == 0;
                pushArgs.pushOp(in, recv.address() + off * es, c, slice, currentEpoch + k, vec, serial);
                CudaDriver.launchKernel(fn, blocksFor(t.bytes(slice)), Kernels.THREADS, 0, stream.handle(), pushArgs.params(),
                        "allReduce push");
            }
        });
    }

    /** Smallest all-reduce (bytes) auto runs as a ring, on 3 or more GPUs and on 2. */
    private static final long RING_MIN = 64L << 20;
    private static final long RING_MIN_2 = 512L << 20;

    /**
     * Ring all-reduce (jccl_kernels.cu, ring_body): one kernel; every GPU stores only to its successor,
     * partial sums through SignalArea.RING_SLOTS slots per block in the successor's push scratch, the completed
     * chunks straight into the successor's output. Slices: JCCL_CUDA_RING_SLICE per block and step,
     * capped so that every block's slots fit the push scratch region (ranks x JCCL_CUDA_PUSH_SLOT).
     */
    private void allReduceRing(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream, long count, DataType t) {
        int es = t.size();
        long chunkBytes = t.bytes(ceilDiv(count, size));
        int blocks = blocksFor(chunkBytes);
        long region = (long) size * pushSlot;
        long sliceBytes = Math.min(ringSlice, region / ((long) blocks * SignalArea.RING_SLOTS)) / 256 * 256;
        if (sliceBytes < 256) {
            throw new CudaException("ring all-reduce: " + blocks + " blocks x " + SignalArea.RING_SLOTS + " slots do not fit the push scratch of "
                    + region + " bytes (JCCL_CUDA_PUSH_SLOT x ranks); raise JCCL_CUDA_PUSH_SLOT or lower JCCL_CUDA_NBLOCKS");
        }
        long slice = sliceBytes / es;
        int succ = (rank + 1) % size;
        MemorySegment fn = kernels.ring(t, op);
        submitCollective("allReduce", guard("allReduce", count, t, op, -1), send.address(), recv.address(), stream, peers -> {
            for (int q = 0; q < size; q++) {
                pushArgs.pushPeer(q, pushScratch(peerSignal[q], 0), pushScratch(signal, 0), out(peers, q));
            }
            boolean vec = (send.address() | recv.address() | out(peers, succ)) % 16 == 0;
            pushArgs.pushOp(send.address(), recv.address(), count, slice, currentEpoch, vec, false);
            CudaDriver.launchKernel(fn, blocks, Kernels.THREADS, 0, stream.handle(), pushArgs.params(), "allReduce ring");
        });
    }

    /**
     * Copy-engine reduce-scatter (and all-reduce = reduce-scatter + all-gather), for large messages;
     * every byte crosses NVLink as a copy-engine write (copy engines write to peers faster than SMs
     * store, and far faster than they read from peers: docs/PERFORMANCE.md). Rank r owns one range of
     * the elements (all-reduce: slice r of the buffer; reduce-scatter: block r of the input), cut in
     * pieces of at most JCCL_CUDA_CE_CHUNK bytes. For each peer q, JCCL_CUDA_CE_LANES streams of r
     * (consecutive pieces alternate between them, so copies overlap the flag kernels in between) copy
     * the pieces of q's range from r's input into q's push scratch (SignalArea.CE_SLOTS rotating slots per
     * source) and, after each piece, a one-block flags kernel raises q's "arrived from r on this
     * lane" word. On r's own stream,
     * for each piece of its range, a flags kernel waits until every peer's piece arrived (and tells
     * every peer that the slot of the piece before is free again), a kernel reduces the slots and
     * r's input in rank order into r's output, and (all-reduce) the lanes of each peer copy the
     * reduced piece into that peer's output. A sender waits for "slot free" before it refills a slot.
     * The end: every rank raises "done" at every peer after its last copy and waits for everyone's
     * "done", so its output is complete and no slot of the next operation is still being read.
     * No start barrier: a peer's output and slots are written only after that peer's own stream
     * reached this operation (its "arrived" words come from streams that waited for it). Every wait
     * is a kernel that polls the abort word and the deadline.
     *
     * @param count all-reduce: elements of the buffer; reduce-scatter: elements of each rank's block
     */
    private void ceReduce(String what, DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream, long count, DataType t,
                          boolean gather) {
        int es = t.size();
        long per = 16 / es;
        long slice = gather ? roundUp(ceilDiv(count, size), per) : count;
        long[] lo = new long[size];
        long[] hi = new long[size];
        for (int q = 0; q < size; q++) {
            lo[q] = Math.min(q * slice, gather ? count : q * count);
            hi[q] = gather ? Math.min(lo[q] + slice, count) : lo[q] + count;
        }
        long slotBytes = pushSlot / SignalArea.CE_SLOTS / 256 * 256;
        long pieceElems = Math.max(per, Math.min(ceChunk, slotBytes) / es / per * per);
        int[] pieces = new int[size];
        int most = 0;
        for (int q = 0; q < size; q++) {
            pieces[q] = (int) ceilDiv(hi[q] - lo[q], pieceElems);
            most = Math.max(most, pieces[q]);
        }
        final int mostPieces = most;
        MemorySegment fn = kernels.reduce(t, op);
        submitCollective(what, guard(what, gather ? count : count * size, t, op, -1), send.address(), recv.address(), stream, peers -> {
            CeLanes l = lanes();
            long e = currentEpoch;
            MemorySegment main = stream.handle();
            CudaDriver.eventRecord(l.start, main);
            for (int q = 0; q < size; q++) {
                for (int j = 0; j < ceLanes && q != rank; j++) {
                    CudaDriver.streamWaitEvent(l.pull[j][q], l.start);
                    CudaDriver.streamWaitEvent(l.push[j][q], l.start);
                }
            }
            // output offset of input element i: all-reduce the same place, reduce-scatter block-relative
            long outShift = gather ? 0 : lo[rank];
            for (int k = 0; k < mostPieces; k++) {
                // phase 1: piece k of every peer's range into that peer's slot for me, on lane k % lanes
                for (int q = 0; q < size; q++) {
                    if (q == rank || k >= pieces[q]) {
                        continue;
                    }
                    int lane = k % ceLanes;
                    long p = lo[q] + k * pieceElems;
                    long len = Math.min(pieceElems, hi[q] - p);
                    CudaDriver.memcpyDtoDAsync(ceSlot(peerSignal[q], rank, k, slotBytes), send.address() + p * es, len * es,
                            l.pull[lane][q]);
                    // raise "arrived"; before this lane's next piece, wait until q freed the slot it refills
                    flags.flagReset(e);
                    flags.flagSet(SignalArea.word(peerSignal[q], SignalArea.ceArrived(lane, rank)), ceTag(e, k));
                    int next = k + ceLanes;
                    if (next < pieces[q] && next >= SignalArea.CE_SLOTS) {
                        flags.flagWait(SignalArea.word(signal, SignalArea.ceFreed(q)), ceTag(e, next - SignalArea.CE_SLOTS), q);
                    }
                    launchFlags(l.pull[lane][q], what + " copy-engine arrived");
                }
                if (k >= pieces[rank]) {
                    continue;
                }
                // my piece k: wait until every peer's piece arrived, free the slots of piece k - 1, reduce
                flags.flagReset(e);
                args.clear0();
                long p = lo[rank] + k * pieceElems;
                long len = Math.min(pieceElems, hi[rank] - p);
                boolean vec = true;
                for (int q = 0; q < size; q++) {
                    long src = q == rank ? send.address() + p * es : ceSlot(signal, q, k, slotBytes);
                    if (q != rank) {
                        flags.flagWait(SignalArea.word(signal, SignalArea.ceArrived((k % ceLanes), q)), ceTag(e, k), q);
                        if (k > 0) {
                            flags.flagSet(SignalArea.word(peerSignal[q], SignalArea.ceFreed(rank)), ceTag(e, k - 1));
                        }
                    }
                    args.src(q, src);
                    vec &= src % 16 == 0;
                }
                launchFlags(main, what + " copy-engine wait");
                long dst = recv.address() + (p - outShift) * es;
                args.dst(0, dst);
                vec &= dst % 16 == 0;
                launchReduce(fn, len, size, 1, vec ? KernelArgs.MODE_VEC : 0, t.bytes(len), stream, what + " copy-engine reduce");
                if (gather) {
                    CudaDriver.eventRecord(l.reduced, main);
                    for (int j = 1; j < size; j++) {
                        int q = (rank + j) % size;
                        MemorySegment lane = l.push[k % ceLanes][q];
                        CudaDriver.streamWaitEvent(lane, l.reduced);
                        CudaDriver.memcpyDtoDAsync(out(peers, q) + p * es, dst, len * es, lane);
                    }
                }
            }
            // every copy of mine has landed: raise "done" at every peer, wait for every peer's
            for (int q = 0; q < size; q++) {
                for (int j = 0; j < ceLanes && q != rank; j++) {
                    CudaDriver.eventRecord(l.pushed[j][q], l.push[j][q]);
                    CudaDriver.streamWaitEvent(main, l.pushed[j][q]);
                    CudaDriver.eventRecord(l.pulled[j][q], l.pull[j][q]);
                    CudaDriver.streamWaitEvent(main, l.pulled[j][q]);
                }
            }
            flags.flagReset(e);
            for (int q = 0; q < size; q++) {
                if (q != rank) {
                    flags.flagSet(SignalArea.word(peerSignal[q], SignalArea.ceDone(rank)), e);
                    flags.flagWait(SignalArea.word(signal, SignalArea.ceDone(q)), e, q);
                }
            }
            launchFlags(main, what + " copy-engine done");
        });
    }


    /** Flag value for piece {@code k} of operation {@code e}: grows with both, so waits are ">=". */
    private static long ceTag(long e, int k) {
        return (e << 24) | (k + 1L);
    }

    /** The slot of piece {@code k} from {@code src} in the push scratch of the area at {@code area}. */
    private long ceSlot(long area, int src, int k, long slotBytes) {
        return pushScratch(area, src) + (k % SignalArea.CE_SLOTS) * slotBytes;
    }

    private void launchFlags(MemorySegment stream, String what) {
        CudaDriver.launchKernel(kernels.flags, 1, 32, 0, stream, flags.params(), what);
    }

    /** Side streams (JCCL_CUDA_CE_LANES per peer and direction) and events of the copy-engine operations. */
    private final class CeLanes {
        final MemorySegment[][] pull = new MemorySegment[ceLanes][size];
        final MemorySegment[][] push = new MemorySegment[ceLanes][size];
        final MemorySegment[][] pulled = new MemorySegment[ceLanes][size];
        final MemorySegment[][] pushed = new MemorySegment[ceLanes][size];
        final MemorySegment start = CudaDriver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);
        final MemorySegment reduced = CudaDriver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);

        CeLanes() {
            for (int j = 0; j < ceLanes; j++) {
                for (int q = 0; q < size; q++) {
                    if (q != rank) {
                        pull[j][q] = CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
                        push[j][q] = CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
                        pulled[j][q] = CudaDriver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);
                        pushed[j][q] = CudaDriver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);
                    }
                }
            }
            Log.info(Log.Subsys.ALLOC, rank, name + ": copy-engine lanes: " + 2 * ceLanes * (size - 1) + " streams; pieces of at"
                    + " most " + (Math.min(ceChunk, pushSlot / SignalArea.CE_SLOTS) >> 10) + " KiB through " + SignalArea.CE_SLOTS + " slots of each"
                    + " source's push scratch (JCCL_CUDA_CE_CHUNK, JCCL_CUDA_PUSH_SLOT, JCCL_CUDA_CE_LANES)");
        }

        void close() {
            for (int j = 0; j < ceLanes; j++) {
                for (int q = 0; q < size; q++) {
                    if (q != rank) {
                        CudaDriver.streamDestroy(pull[j][q]);
                        CudaDriver.streamDestroy(push[j][q]);
                        CudaDriver.eventDestroy(pulled[j][q]);
                        CudaDriver.eventDestroy(pushed[j][q]);
                    }
                }
            }
            CudaDriver.eventDestroy(reduced);
            CudaDriver.eventDestroy(start);
        }
    }

    private CeLanes lanes() {
        if (ce == null) {
            ce = new CeLanes();
        }
        return ce;
    }

    @Override
    public void reduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream stream) {
        checkUsable("reduce");
        long count = DeviceArgs.checkReduce(this, send, recv, op, root, stream);
        if (staging != null) {
            DataType t0 = send.type();
            boolean isRoot = rank == root;
            staged("reduce", send, t0.bytes(count), isRoot ? recv : null, isRoot ? t0.bytes(count) : 0, stream,
                    (in, out) -> staging.reduceAsync(org.jccl.Buffer.of(in, count, t0),
                            isRoot ? org.jccl.Buffer.of(out, count, t0) : null, op, root));
            return;
        }
        DataType t = send.type();
        int es = t.size();
        MemorySegment fn = kernels.reduce(t, op);
        long out = rank == root ? recv.address() : 0;
        submitCollective("reduce", guard("reduce", count, t, op, root), send.address(), out, stream, peers -> {
            args.clear0();
            long slice = roundUp(ceilDiv(count, size), 16 / es);
            long lo = Math.min(rank * slice, count);
            long hi = Math.min(lo + slice, count);
            boolean aligned = out(peers, root) % 16 == 0;
            for (int q = 0; q < size; q++) {
                args.src(q, in(peers, q) + lo * es);
                aligned &= in(peers, q) % 16 == 0;
            }
            args.dst(0, out(peers, root) + lo * es);
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | (aligned ? KernelArgs.MODE_VEC : 0);
            launchReduce(fn, hi - lo, size, 1, mode, t.bytes(slice), stream, "reduce");
        });
    }

    @Override
    public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
        checkUsable("reduceScatter");
        long c = DeviceArgs.checkReduceScatter(this, send, recv, op, stream);
        if (staging != null) {
            DataType t0 = send.type();
            staged("reduceScatter", send, t0.bytes(c * size), recv, t0.bytes(c), stream,
                    (in, out) -> staging.reduceScatterAsync(org.jccl.Buffer.of(in, c * size, t0), org.jccl.Buffer.of(out, c, t0), op));
            return;
        }
        DataType t = send.type();
        int es = t.size();
        if (size > 1 && c > 0 && reduceScatterAlgo.equals("ce")) { // only when asked: slower than load (docs/PERFORMANCE.md)
            ceReduce("reduceScatter", send, recv, op, stream, c, t, false);
            return;
        }
        MemorySegment fn = kernels.reduce(t, op);
        submitCollective("reduceScatter", guard("reduceScatter", c * size, t, op, -1), send.address(), recv.address(), stream, peers -> {
            args.clear0();
            boolean aligned = recv.address() % 16 == 0;
            for (int q = 0; q < size; q++) {
                long s = in(peers, q) + (long) rank * c * es;
                args.src(q, s);
                aligned &= s % 16 == 0;
            }
            args.dst(0, recv.address());
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | (aligned ? KernelArgs.MODE_VEC : 0);
            launchReduce(fn, c, size, 1, mode, t.bytes(c), stream, "reduceScatter");
        });
    }

    @Override
    public void allGather(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        checkUsable("allGather");
        long c = DeviceArgs.checkAllGather(this, send, recv, stream);
        if (staging != null) {
            DataType t0 = send.type();
            staged("allGather", send, t0.bytes(c), recv, t0.bytes(c * size), stream,
                    (in, out) -> staging.allGatherAsync(org.jccl.Buffer.of(in, c, t0), org.jccl.Buffer.of(out, c * size, t0)));
            return;
        }
        long bytes = send.type().bytes(c);
        submitCollective("allGather", guard("allGather", c * size, send.type(), null, -1), send.address(), recv.address(), stream,
                peers -> {
            args.clear0();
            args.src(0, send.address());
            boolean aligned = send.address() % 16 == 0;
            for (int q = 0; q < size; q++) {
                long d = out(peers, q) + rank * bytes;
                args.dst(q, d);
                aligned &= d % 16 == 0;
            }
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | KernelArgs.MODE_MULTI_DST | (aligned ? KernelArgs.MODE_VEC : 0);
            launchCopy(bytes, 1, size, mode, bytes, stream, "allGather");
        });
    }

    @Override
    public void broadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream) {
        checkUsable("broadcast");
        DeviceArgs.checkBroadcast(this, send, recv, root, stream);
        if (staging != null) {
            DataType t0 = recv.type();
            long c = recv.count();
            boolean isRoot = rank == root;
            staged("broadcast", isRoot ? send : null, isRoot ? t0.bytes(c) : 0, recv, t0.bytes(c), stream,
                    (in, out) -> staging.broadcastAsync(isRoot ? org.jccl.Buffer.of(in, c, t0) : null, org.jccl.Buffer.of(out, c, t0), root));
            return;
        }
        long total = recv.byteSize();
        long in = rank == root ? send.address() : 0;
        String algo = broadcastAlgo.equals("auto") ? autoBroadcast(total) : broadcastAlgo;
        if (size == 1) {
            algo = "spread";
        }
        String how = algo;
        if (how.equals("ce")) {
            ceBroadcast(send, recv, root, stream, total);
            return;
        }
        submitCollective("broadcast", guard("broadcast", recv.count(), recv.type(), null, root), in, recv.address(), stream, peers -> {
            args.clear0();
            boolean aligned = in(peers, root) % 16 == 0;
            for (int q = 0; q < size; q++) {
                aligned &= out(peers, q) % 16 == 0;
            }
            int vec = aligned ? KernelArgs.MODE_VEC : 0;
            int se = KernelArgs.MODE_START | KernelArgs.MODE_END;
            if (how.equals("spread")) {
                // Rank r loads slice r of the root's buffer and stores it into every rank's output.
                long slice = roundUp(ceilDiv(total, size), 16);
                long lo = Math.min(rank * slice, total);
                long hi = Math.min(lo + slice, total);
                args.src(0, in(peers, root) + lo);
                for (int q = 0; q < size; q++) {
                    args.dst(q, out(peers, q) + lo);
                }
                launchCopy(hi - lo, 1, size, se | KernelArgs.MODE_MULTI_DST | vec, slice, stream, "broadcast spread");
                return;
            }
            if (how.equals("warp-chain")) {
                // The chain with one pipeline per warp (own part, own flag): about 32 rounds, parts of
                // 512 B to 64 KiB per warp; 32 blocks (measured best of 16-132 from 64 MB to 512 MB on 4x H200:
                // more warps mean smaller parts, and every part pays a release fence), at most 112 (1792 warps:
                // the SIG_PIPE flags).
                int blocks = Math.min(nblocksOverride > 0 ? blocksFor(total) : Math.min(blocksFor(total), 32), BCAST_WARP_BLOCKS);
                long warps = (long) blocks * (Kernels.THREADS / 32);
                long part = Math.max(512, Math.min(BCAST_PART, roundUp(ceilDiv(total, warps * 32L), 16)));
                args.src(0, in(peers, root));
                for (int q = 0; q < size; q++) {
                    args.dst(q, out(peers, q));
                }
                args.op(total, currentEpoch, root, size, se | vec | KernelArgs.MODE_CHAIN | KernelArgs.MODE_WARPS, (int) part);
                CudaDriver.launchKernel(kernels.bcast, blocks, Kernels.THREADS, 0, stream.handle(), args.params(),
                        "broadcast warp chain");
                return;
            }
            if (how.equals("chain-async")) {
                // The block chain with roles per block (copying warps, a poller, two signallers): the per-round
                // release store no longer stalls the copies. 64 blocks unless JCCL_CUDA_NBLOCKS (32 capped the
                // rate at ~315 GB/s on 4x H200, 48 and 96 measured slower than 64); parts of 64 KiB per block
                // and round unless JCCL_CUDA_BCAST_PART (16 KiB: a round's barriers and flags cost as much as
                // its copy; a fixed number of rounds instead: the pipeline fill grows with the size).
                // Pairwise start (the successor says its kernel runs), no end barrier.
                int blocks = nblocksOverride > 0 ? blocksFor(total) : Math.min(blocksFor(total), 64);
                long part = bcastPart > 0 ? bcastPart : BCAST_ASYNC_PART;
                args.src(0, in(peers, root));
                for (int q = 0; q < size; q++) {
                    args.dst(q, out(peers, q));
                }
                args.op(total, currentEpoch, root, size, vec | KernelArgs.MODE_CHAIN | KernelArgs.MODE_ROLES, (int) part);
                CudaDriver.launchKernel(kernels.bcast, blocks, Kernels.THREADS, 0, stream.handle(), args.params(),
                        "broadcast chain-async");
                return;
            }
            if (how.equals("chain")) {
                // A pipelined chain: every GPU stores to its successor only; about 32 rounds or more.
                // Each round costs every block a flag wait whose price grows with the number of blocks,
                // so mid sizes run on fewer, larger blocks (measured on 4x H200: 32 blocks best at 64 MB,
                // 64 at 256 MB-1 GB, all SMs from 4 GB).
                int blocks = blocksFor(total);
                if (nblocksOverride == 0) {
                    blocks = Math.min(blocks, total <= (128L << 20) ? 32 : total <= (2L << 30) ? 64 : maxBlocks);
                }
                long part = Math.max(16, Math.min(BCAST_PART, roundUp(ceilDiv(total, blocks * 32L), 16)));
                part = Math.max(part, Math.min(4096, roundUp(ceilDiv(total, blocks), 16)));
                args.src(0, in(peers, root));
                for (int q = 0; q < size; q++) {
                    args.dst(q, out(peers, q));
                }
                args.op(total, currentEpoch, root, size, se | vec | KernelArgs.MODE_CHAIN, (int) part);
                CudaDriver.launchKernel(kernels.bcast, blocks, Kernels.THREADS, 0, stream.handle(), args.params(), "broadcast chain");
                return;
            }
            // pipe and pull: n-1 slices, one per non-root rank; the root's links carry each byte once.
            long slice = roundUp(ceilDiv(total, size - 1), 16);
            if (how.equals("pipe")) {
                int blocks = blocksFor(slice);
                long part = Math.min(BCAST_PART, roundUp(ceilDiv(slice, blocks), 16));
                args.src(0, in(peers, root));
                for (int q = 0; q < size; q++) {
                    args.dst(q, out(peers, q));
                }
                args.op(total, currentEpoch, root, size, se | vec, (int) part);
                CudaDriver.launchKernel(kernels.bcast, blocks, Kernels.THREADS, 0, stream.handle(), args.params(), "broadcast pipe");
                return;
            }
            if (rank == root) {
                args.src(0, in(peers, root));
                args.dst(0, out(peers, root));
                launchCopy(total, 1, 1, se | KernelArgs.MODE_MULTI_DST | vec, slice, stream, "broadcast pull");
                return;
            }
            int j = rank < root ? rank : rank - 1;
            long lo = Math.min(j * slice, total);
            long hi = Math.min(lo + slice, total);
            args.src(0, in(peers, root) + lo);
            int nd = 0;
            for (int q = 0; q < size; q++) {
                if (q != root) {
                    args.dst(nd++, out(peers, q) + lo);
                }
            }
            launchCopy(hi - lo, 1, nd, se | KernelArgs.MODE_MULTI_DST | vec, slice, stream, "broadcast pull");
        });
    }

    /**
     * Copy-engine chain broadcast: root -> root+1 -> ... -> root-1, every GPU's copy engines writing
     * to its successor only, in pieces (JCCL_CUDA_CE_LANES streams alternating, so one piece's copy
     * overlaps the flag kernel between the next two). A piece is forwarded as soon as it arrived;
     * each rank first tells its predecessor "ready" (its stream reached this operation, so its
     * output is free), and the predecessor's lanes wait for that before their first copy. The last
     * rank's lanes only wait for the pieces. No slots: pieces land straight in the outputs.
     */
    private void ceBroadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream, long total) {
        long in = rank == root ? send.address() : 0;
        long piece = Math.min(Math.max(ceChunk, 256), Math.max(1L << 20, roundUp(ceilDiv(total, 32), 256)));
        int pieces = (int) ceilDiv(total, piece);
        int pos = (rank - root + size) % size;
        int succ = (rank + 1) % size;
        int pred = (rank - 1 + size) % size;
        boolean last = pos == size - 1;
        submitCollective("broadcast", guard("broadcast", recv.count(), recv.type(), null, root), in, recv.address(), stream, peers -> {
            CeLanes l = lanes();
            long e = currentEpoch;
            MemorySegment main = stream.handle();
            flags.flagReset(e);
            if (pos > 0) {
                flags.flagSet(SignalArea.word(peerSignal[pred], SignalArea.ceDone(rank)), e); // ready: my output is free
            }
            if (flags.flagAny()) {
                launchFlags(main, "broadcast copy-engine ready");
            }
            if (rank == root && send.address() != recv.address()) {
                CudaDriver.memcpyDtoDAsync(recv.address(), send.address(), total, main);
            }
            CudaDriver.eventRecord(l.start, main);
            int lanes = Math.min(ceLanes, pieces);
            for (int j = 0; j < lanes; j++) {
                CudaDriver.streamWaitEvent(l.pull[j][succ], l.start);
            }
            long src = rank == root ? send.address() : recv.address();
            long dst = out(peers, succ);
            for (int k = 0; k < pieces; k++) {
                MemorySegment lane = l.pull[k % lanes][succ];
                // before the lane's copy of piece k: the piece is here (not the root), the successor is ready (first round)
                flags.flagReset(e);
                if (k >= lanes && !last) {
                    flags.flagSet(SignalArea.word(peerSignal[succ], SignalArea.ceArrived((k % lanes), rank)), ceTag(e, k - lanes));
                }
                if (pos > 0) {
                    flags.flagWait(SignalArea.word(signal, SignalArea.ceArrived((k % lanes), pred)), ceTag(e, k), pred);
                }
                if (k < lanes && !last) {
                    flags.flagWait(SignalArea.word(signal, SignalArea.ceDone(succ)), e, succ);
                }
                if (flags.flagAny()) {
                    launchFlags(lane, "broadcast copy-engine piece");
                }
                if (!last) {
                    long off = k * piece;
                    CudaDriver.memcpyDtoDAsync(dst + off, src + off, Math.min(piece, total - off), lane);
                }
            }
            for (int j = 0; j < lanes; j++) {
                MemorySegment lane = l.pull[j][succ];
                if (!last) {
                    // the lane's last piece
                    int k = j + (pieces - 1 - j) / lanes * lanes;
                    flags.flagReset(e);
                    flags.flagSet(SignalArea.word(peerSignal[succ], SignalArea.ceArrived(j, rank)), ceTag(e, k));
                    launchFlags(lane, "broadcast copy-engine arrived");
                }
                CudaDriver.eventRecord(l.pulled[j][succ], lane);
                CudaDriver.streamWaitEvent(main, l.pulled[j][succ]);
            }
        });
    }

    /**
     * The broadcast kernel auto picks for {@code bytes} (more than one rank), from the 4x H200
     * measurements in docs/PERFORMANCE.md: spread while latency dominates, pull up to 8 MB, the
     * chain above, with a pipeline per warp above 32 MB and the chain-async (signalling off the copying
     * warps' path) from 64 MB to 512 MB (the two-stage pipe was not reliably ahead of any of them anywhere).
     */
    private static String autoBroadcast(long bytes) {
        if (bytes <= BCAST_PULL_MIN) {
            return "spread";
        }
        if (bytes <= (8L << 20)) {
            return "pull";
        }
        // the warp chain (32 blocks) measured ahead of the block chain from 64 MB to 128 MB on 4x H200 (256 against 226
        // GB/s and 302 against 259, two sittings), level at 32 MB, behind from 256 MB (docs/PERFORMANCE.md, sittings J/K)
        // chain-async (64 blocks, 64 KiB parts) measured 0.95x NCCL at 64 MB where the warp chain was 0.78-0.80x, 0.98x
        // at 128 MB, 0.98x at 256 MB, level with the chain at 512 MB and behind it from 4 GB (sittings N/O)
        if (bytes >= (64L << 20) && bytes <= (512L << 20)) {
            return "chain-async";
        }
        return bytes > (32L << 20) && bytes < (64L << 20) ? "warp-chain" : "chain";
    }

    @Override
    public void allToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
        checkUsable("allToAll");
        DeviceArgs.checkAllToAll(this, send, recv, stream);
        if (staging != null) {
            DataType t0 = send.type();
            long c = send.count();
            staged("allToAll", send, t0.bytes(c), recv, t0.bytes(c), stream,
                    (in, out) -> staging.allToAllAsync(org.jccl.Buffer.of(in, c, t0), org.jccl.Buffer.of(out, c, t0)));
            return;
        }
        long blk = send.type().bytes(send.count() / size);
        boolean inPlace = overlaps(send.address(), send.byteSize(), recv.address(), recv.byteSize());
        submitCollective("allToAll", guard("allToAll", send.count(), send.type(), null, -1), send.address(), recv.address(), stream,
                peers -> {
            long src = send.address();
            if (inPlace) {
                // Peers write into this buffer while it is read: send from a copy.
                src = scratch(send.byteSize());
                CudaDriver.memcpyDtoDAsync(src, send.address(), send.byteSize(), stream.handle());
            }
            args.clear0();
            boolean aligned = src % 16 == 0 && blk % 16 == 0;
            for (int q = 0; q < size; q++) {
                args.src(q, src + q * blk);
                long d = out(peers, q) + rank * blk;
                args.dst(q, d);
                aligned &= d % 16 == 0;
            }
            int mode = KernelArgs.MODE_START | KernelArgs.MODE_END | (aligned ? KernelArgs.MODE_VEC : 0);
            if (allToAllAlgo.equals("serial")) {
                launchCopy(blk, size, 0, mode, blk * size, stream, "allToAll serial");
                return;
            }
            // split: the grid is a multiple of size() and each group of blocks copies one block of the
            // buffer, so every rank writes to all its peers at once.
            int per = nblocksOverride > 0 ? Math.max(1, blocksFor(blk) / size) : Math.max(1, Math.min(blocksFor(blk), maxBlocks / size));
            args.op(blk, currentEpoch, size, 0, mode | KernelArgs.MODE_SPLIT, size);
            CudaDriver.launchKernel(kernels.copy, per * size, Kernels.THREADS, 0, stream.handle(), args.params(), "allToAll split");
        });
    }

    // ================================================================== send / recv

    @Override
    public void send(DeviceBuffer buf, int peer, CudaStream stream) {
        checkUsable("send");
        DeviceArgs.checkPointToPoint(this, "send", buf, peer, stream);
        p2p(new P2p(true, buf, peer, stream));
    }

    @Override
    public void recv(DeviceBuffer buf, int peer, CudaStream stream) {
        checkUsable("recv");
        DeviceArgs.checkPointToPoint(this, "recv", buf, peer, stream);
        p2p(new P2p(false, buf, peer, stream));
    }

    private record P2p(boolean send, DeviceBuffer buf, int peer, CudaStream stream) {
    }

    private void p2p(P2p op) {
        GroupState g = GROUP.get();
        boolean implicit = g.depth == 0;
        if (implicit) {
            g.depth = 1;
        }
        try {
            g.p2p(this).add(op);
        } finally {
            if (implicit) {
                groupEnd();
            }
        }
    }

    /** Runs a group's sends and receives of this communicator as one kernel. Called in the launch phase. */
    private synchronized void launchP2p(List<P2p> ops, long[] recvSeqs) {
        checkUsable("send/recv");
        CudaStream stream = ops.get(0).stream;
        for (P2p o : ops) {
            if (o.stream.handle().address() != stream.handle().address()) {
                throw new IllegalArgumentException("the sends and receives of one group on a communicator must use one stream");
            }
        }
        device.makeCurrent();
        p2pArgs.clear0p2p();
        int nsend = 0;
        int nrecv = 0;
        int ri = 0;
        for (P2p o : ops) {
            if (!o.send) {
                if (nrecv == MAX_RANKS) {
                    throw new IllegalArgumentException("at most " + MAX_RANKS + " receives per communicator in one group");
                }
                p2pArgs.recv(nrecv++, o.peer, recvSeqs[ri++]);
            }
        }
        boolean vec = true;
        long maxBytes = 0;
        long scratchNeed = 0;
        for (P2p o : ops) {
            if (o.send && sendOverlapsRecv(o, ops)) {
                scratchNeed += roundUp(o.buf.byteSize(), 256);
            }
        }
        long scratchAt = scratchNeed > 0 ? scratch(scratchNeed) : 0;
        int sends = 0;
        for (P2p o : ops) {
            sends += o.send ? 1 : 0;
        }
        if (sends > MAX_RANKS) {
            throw new IllegalArgumentException("at most " + MAX_RANKS + " sends per communicator in one group");
        }
        int[] sendPeers = new int[sends];
        long[] sendSeqs = new long[sends];
        int k = 0;
        for (P2p o : ops) {
            if (o.send) {
                sendPeers[k] = o.peer;
                sendSeqs[k++] = ++sendSeq[o.peer];
            }
        }
        exchange.prepareSends(rank, sendPeers, sendSeqs);
        for (P2p o : ops) {
            if (!o.send) {
                continue;
            }
            long seq = sendSeqs[nsend];
            long[] dst = exchange.resolveSend(rank, o.peer, seq);
            long bytes = o.buf.byteSize();
            if (dst[1] != bytes) {
                fail(ErrorCode.MISMATCH, "send #" + seq + " to rank " + o.peer + ": this rank sends " + bytes + " bytes but rank "
                        + o.peer + " posted a recv of " + dst[1] + " bytes; sizes and types of matching send/recv must agree");
            }
            long src = o.buf.address();
            if (sendOverlapsRecv(o, ops)) {
                CudaDriver.memcpyDtoDAsync(scratchAt, src, bytes, stream.handle());
                src = scratchAt;
                scratchAt += roundUp(bytes, 256);
            }
            vec &= (src | dst[0] | bytes) % 16 == 0;
            maxBytes = Math.max(maxBytes, bytes);
            p2pArgs.send(nsend++, o.peer, src, dst[0], bytes, seq);
        }
        int grid = nsend == 0 ? 1 : blocksFor(maxBytes);
        p2pArgs.p2pOp(nsend, nrecv, vec, p2pBlocks);
        if (nsend > 0) {
            p2pBlocks += grid;
        }
        CudaDriver.launchKernel(kernels.p2p, grid, Kernels.THREADS, 0, stream.handle(), p2pArgs.params(), "jccl_p2p");
    }

    private static boolean sendOverlapsRecv(P2p send, List<P2p> ops) {
        for (P2p r : ops) {
            if (!r.send && overlaps(send.buf.address(), send.buf.byteSize(), r.buf.address(), r.buf.byteSize())) {
                return true;
            }
        }
        return false;
    }

    // ================================================================== staged through host memory

    private interface HostOp {
        org.jccl.Work start(MemorySegment in, MemorySegment out);
    }

    /**
     * One collective through pinned host memory: wait for the stream (its earlier work produced the
     * input), copy in, start the host collective (publish phase); join it and copy the result to
     * the GPU (launch phase). The call returns once the result is on the GPU.
     */
    private void staged(String what, DeviceBuffer src, long inBytes, DeviceBuffer dst, long outBytes, CudaStream stream, HostOp op) {
        GroupState g = GROUP.get();
        MemorySegment[] bufs = new MemorySegment[2];
        org.jccl.Work[] work = new org.jccl.Work[1];
        Runnable publish = () -> {
            synchronized (this) {
                checkUsable(what);
                stream.synchronize();
                bufs[0] = pinned(Math.max(inBytes, 16));
                bufs[1] = pinned(Math.max(outBytes, 16));
                if (src != null && inBytes > 0) {
                    device.makeCurrent();
                    CudaDriver.memcpyDtoH(bufs[0], src.address(), inBytes);
                }
            }
            work[0] = op.start(bufs[0], bufs[1]);
        };
        Runnable launch = () -> {
            try {
                work[0].join();
            } catch (JcclException e) {
                abort();
                throw e;
            }
            synchronized (this) {
                if (dst != null && outBytes > 0) {
                    device.makeCurrent();
                    CudaDriver.memcpyHtoD(dst.address(), bufs[1], outBytes);
                }
                pinnedDone();
            }
        };
        if (g.depth > 0) {
            g.publish.add(publish);
            g.launch.add(launch);
        } else {
            publish.run();
            launch.run();
        }
    }

    private int pinnedInUse;

    /** The next pinned staging buffer of at least {@code bytes} (page-locked: copies run at full PCIe speed). */
    private MemorySegment pinned(long bytes) {
        pinnedInUse++;
        int i = pinnedNext++;
        if (i < pinned.size() && pinned.get(i).byteSize() >= bytes) {
            return pinned.get(i);
        }
        device.makeCurrent();
        if (i < pinned.size()) {
            CudaDriver.memFreeHost(pinned.get(i));
        }
        long n = Math.max(Long.highestOneBit(bytes - 1) << 1, 4096);
        MemorySegment m = CudaDriver.memHostAlloc(n, CudaDriver.MEMHOSTALLOC_PORTABLE);
        if (i < pinned.size()) {
            pinned.set(i, m);
        } else {
            pinned.add(m);
        }
        return m.asSlice(0, bytes);
    }

    private void pinnedDone() {
        pinnedInUse -= 2;
        if (pinnedInUse <= 0) {
            pinnedInUse = 0;
            pinnedNext = 0;
        }
    }

    /** A group's sends and receives through host memory: copy out, host group, copy in. */
    private void stagedP2p(List<P2p> ops) {
        synchronized (this) {
            checkUsable("send/recv");
            for (P2p o : ops) {
                o.stream.synchronize();
            }
        }
        MemorySegment[] bufs = new MemorySegment[ops.size()];
        List<org.jccl.Work> works = new ArrayList<>();
        synchronized (this) {
            device.makeCurrent();
            for (int i = 0; i < ops.size(); i++) {
                P2p o = ops.get(i);
                bufs[i] = pinned(Math.max(o.buf.byteSize(), 16));
                pinnedInUse++; // pinned() counts one per buffer; pinnedDone() releases two
                if (o.send) {
                    CudaDriver.memcpyDtoH(bufs[i], o.buf.address(), o.buf.byteSize());
                }
            }
        }
        try (org.jccl.Group hg = staging.group()) {
            for (int i = 0; i < ops.size(); i++) {
                P2p o = ops.get(i);
                org.jccl.Buffer b = org.jccl.Buffer.of(bufs[i], o.buf.count(), o.buf.type());
                works.add(o.send ? staging.sendAsync(b, o.peer) : staging.recvAsync(b, o.peer));
            }
        }
        for (org.jccl.Work w : works) {
            w.join();
        }
        synchronized (this) {
            device.makeCurrent();
            for (int i = 0; i < ops.size(); i++) {
                P2p o = ops.get(i);
                if (!o.send) {
                    CudaDriver.memcpyHtoD(o.buf.address(), bufs[i], o.buf.byteSize());
                }
                pinnedDone();
            }
        }
    }

    // ================================================================== groups

    /** Per-thread group: collectives and point-to-point calls of every communicator, in call order. */
    private static final class GroupState {
        int depth;
        final List<Runnable> publish = new ArrayList<>();
        final List<Runnable> launch = new ArrayList<>();
        final List<CudaCommunicator> p2pComms = new ArrayList<>();
        final List<List<P2p>> p2pOps = new ArrayList<>();

        List<P2p> p2p(CudaCommunicator c) {
            int i = p2pComms.indexOf(c);
            if (i < 0) {
                p2pComms.add(c);
                p2pOps.add(new ArrayList<>());
                i = p2pComms.size() - 1;
            }
            return p2pOps.get(i);
        }

        void clear() {
            publish.clear();
            launch.clear();
            p2pComms.clear();
            p2pOps.clear();
        }
    }

    @Override
    public void groupStart() {
        GROUP.get().depth++;
    }

    @Override
    public void groupEnd() {
        GroupState g = GROUP.get();
        if (g.depth == 0) {
            throw new InvalidUsageException("groupEnd() without groupStart() on this thread");
        }
        if (--g.depth > 0) {
            return;
        }
        try {
            int stagedP2p = 0;
            for (CudaCommunicator c : g.p2pComms) {
                stagedP2p += c.staging != null ? 1 : 0;
            }
            if (stagedP2p > 1) {
                throw new InvalidUsageException("send/recv staged through host memory (" + g.p2pComms.get(0).stagingWhy
                        + ") needs one thread per GPU; this thread's group holds the sends/receives of " + stagedP2p + " GPUs");
            }
            // Phase 1: publish every call (receive buffers first, so that senders find them).
            List<long[]> seqs = new ArrayList<>();
            for (int i = 0; i < g.p2pComms.size(); i++) {
                CudaCommunicator c = g.p2pComms.get(i);
                if (c.staging != null) {
                    seqs.add(null);
                    continue;
                }
                List<P2p> ops = g.p2pOps.get(i);
                long[] s = new long[ops.size()];
                int k = 0;
                for (P2p o : ops) {
                    if (!o.send) {
                        long seq = ++c.recvSeq[o.peer];
                        s[k++] = seq;
                        c.exchange.publishRecv(c.rank, o.peer, seq, o.buf.address(), o.buf.byteSize());
                    }
                }
                seqs.add(s);
            }
            for (Runnable r : g.publish) {
                r.run();
            }
            for (CudaCommunicator c : g.p2pComms) {
                if (c.staging == null) {
                    c.exchange.flush(c.rank);
                }
            }
            // Phase 2: resolve the peers' addresses and launch. A mismatch found for one communicator does not stop the
            // others' launches: each reaches its own verdict (its call fails on the host, or its one-shot kernel finds the
            // mismatch), so none is left unaware with a peer that failed; the first mismatch is thrown after them.
            JcclException mismatch = null;
            for (Runnable r : g.launch) {
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
            for (int i = 0; i < g.p2pComms.size(); i++) {
                CudaCommunicator c = g.p2pComms.get(i);
                if (c.staging != null) {
                    c.stagedP2p(g.p2pOps.get(i));
                } else {
                    c.launchP2p(g.p2pOps.get(i), seqs.get(i));
                }
            }
        } finally {
            g.clear();
        }
    }

    private interface Launch {
        void launch(long[] peers);
    }

    private void submitCollective(String what, long guard, long in, long out, CudaStream stream, Launch l) {
        submitCollective(what, guard, in, out, stream, 1, l);
    }

    /**
     * Queues (in a group) or runs one collective that uses {@code epochs} consecutive epochs (one per
     * kernel). {@code guard}: the mismatch guard's word of the call ({@link #guard}), published with
     * the buffers and compared by every rank before it launches. The one-shot all-reduce (in = out = 0)
     * exchanges nothing: its kernels compare the words, and the exchange gets a note of the call, which
     * a peer whose call exchanges records finds while it waits for this rank's (see docs/ARCHITECTURE.md
     * "The mismatch guard"). A mismatch found on the host fails the communicator and releases the
     * peers' one-shot kernels that may wait for this rank at that operation ({@link #releaseOneShots}).
     */
    private void submitCollective(String what, long guard, long in, long out, CudaStream stream, int epochs, Launch l) {
        GroupState g = GROUP.get();
        long e;
        synchronized (this) {
            e = epoch + 1;
            epoch += epochs;
        }
        // Operations that read and write only this rank's buffers (one-shot all-reduce) exchange nothing.
        boolean exchanged = in != 0 || out != 0;
        Runnable publish = () -> {
            if (exchanged) {
                exchange.publishCollective(rank, e, in, out, guard);
            } else if (guard != 0) {
                exchange.noteOneShot(rank, e, guard);
            }
        };
        Runnable launch = () -> {
            long[] peers = null;
            if (exchanged) {
                try {
                    peers = exchange.resolveCollective(rank, e);
                } catch (JcclException x) {
                    if (x.code() == ErrorCode.MISMATCH && failure == null) {
                        mismatchOnHost(x, e, guard, stream);
                    }
                    throw x;
                }
            }
            synchronized (this) {
                checkUsable(what);
                device.makeCurrent();
                current = what + " #" + e;
                currentEpoch = e;
                currentStream = stream;
                l.launch(peers);
            }
        };
        if (g.depth > 0) {
            g.publish.add(publish);
            g.launch.add(launch);
        } else {
            publish.run();
            exchange.flush(rank);
            launch.run();
        }
    }

    /** JCCL_CHECK is not "none": exchanged collectives carry the mismatch guard's word. */
    private final boolean guardOn;

    /** The mismatch guard's word of a call (org.jccl.internal.guard.OpGuard), 0 with JCCL_CHECK=none. */
    private long guard(String name, long count, DataType t, ReduceOp op, int root) {
        return guardOn ? org.jccl.internal.guard.OpGuard.collective(name, count, t, op, root) : 0;
    }

    private String current;
    private long currentEpoch;
    private CudaStream currentStream;

    private void launchReduce(MemorySegment fn, long count, int nsrc, int ndst, int mode, long gridBytes, CudaStream stream,
                              String what) {
        args.op(count, currentEpoch, nsrc, ndst, mode, size);
        CudaDriver.launchKernel(fn, blocksFor(gridBytes), Kernels.THREADS, 0, stream.handle(), args.params(), what);
    }

    private void launchCopy(long bytes, int ntask, int ndst, int mode, long gridBytes, CudaStream stream, String what) {
        args.op(bytes, currentEpoch, ntask, ndst, mode, size);
        CudaDriver.launchKernel(kernels.copy, blocksFor(gridBytes), Kernels.THREADS, 0, stream.handle(), args.params(), what);
    }

    /** Blocks for a kernel whose busiest rank moves {@code bytes}: the same on every rank (it depends on the count only). */
    private int blocksFor(long bytes) {
        if (nblocksOverride > 0) {
            return Math.min(nblocksOverride, KernelArgs.MAX_BLOCKS);
        }
        long vecs = ceilDiv(Math.max(bytes, 1), 16);
        long b = ceilDiv(vecs, Kernels.THREADS * 2L);
        return (int) Math.max(1, Math.min(b, maxBlocks));
    }

    private static long in(long[] peers, int q) {
        return peers[2 * q];
    }

    private static long out(long[] peers, int q) {
        return peers[2 * q + 1];
    }

    /** A device scratch area of at least {@code bytes}, grown on demand (growing waits for the device). */
    private long scratch(long bytes) {
        if (bytes > scratchBytes) {
            if (scratch != 0) {
                CudaDriver.ctxSynchronize();
                CudaDriver.memFree(scratch);
                scratch = 0;
            }
            long n = Long.highestOneBit(Math.max(bytes, 1 << 20) - 1) << 1;
            scratch = CudaDriver.memAlloc(n);
            scratchBytes = n;
        }
        return scratch;
    }

    // ================================================================== checks

    /**
     * Throws when the communicator cannot take {@code what}: closed, aborted, or failed. A failure (a
     * kernel's, recorded in the status words, or a mismatch found on the host) is thrown as it is by
     * the first call that meets it; later calls throw an exception of the same kind naming it.
     */
    private void checkUsable(String what) {
        if (closed) {
            throw new InvalidUsageException(what + ": the GPU communicator is closed");
        }
        JcclException f = failureNow();
        if (f != null) {
            throw reportFailure(what, f);
        }
        if (aborted) {
            throw new JcclException(ErrorCode.ABORTED, what + ": the GPU communicator was aborted");
        }
    }

    /**
     * The communicator's failure: the one recorded first, else one a kernel has recorded in the status
     * words by now (recorded here), else null. After abort() by the user, kernels that gave up are no
     * failure.
     */
    private JcclException failureNow() {
        JcclException f = failure;
        if (f != null || aborted) {
            return f;
        }
        if (KernelStatus.code(hostWords) == 0) {
            return null;
        }
        return recordFailure(KernelStatus.decode(hostWords, rank, device.toString(), timeoutNs));
    }

    /** Makes {@code f} the communicator's failure unless one is recorded already; returns the one recorded. */
    private synchronized JcclException recordFailure(JcclException f) {
        if (failure == null) {
            failure = f;
            aborted = true;
            if (f.code() != ErrorCode.MISMATCH) {
                // waits on the host for peers that may never come end now (a mismatch: every rank finds it itself)
                exchange.abort();
            }
        }
        return failure;
    }

    /** The exception a call meeting failure {@code f} throws: {@code f} itself the first time, then one naming it. */
    private synchronized JcclException reportFailure(String what, JcclException f) {
        if (!failureThrown) {
            failureThrown = true;
            return f;
        }
        String m = what + ": the GPU communicator of rank " + rank + " failed earlier and is unusable (create a new one): "
                + f.getMessage();
        if (f instanceof CudaException) {
            return new CudaException(m);
        }
        if (f instanceof InvalidUsageException) {
            return new InvalidUsageException(f.code(), m);
        }
        return new JcclException(f.code(), m);
    }

    /** The first failure (null: none yet); set once, by {@link #recordFailure}. */
    private volatile JcclException failure;
    /** Whether a call has thrown {@link #failure} itself (later ones throw an exception naming it). */
    private boolean failureThrown;

    /**
     * The host found a mismatch at operation {@code e} (this rank's guard word {@code guard}): fails the
     * communicator and, when a peer ran that operation as a one-shot all-reduce ({@link
     * Exchange.OneShotPeer}: its kernel waits for this rank), releases the peers' one-shot kernels.
     */
    private void mismatchOnHost(JcclException x, long e, long guard, CudaStream stream) {
        synchronized (this) {
            recordFailure(x);
            failureThrown = true;
        }
        if (x instanceof Exchange.OneShotPeer) {
            releaseOneShots(e, guard, stream);
        }
    }

    /**
     * Queues jccl_oneshot_release on {@code stream} (after this rank's earlier kernels): every peer's
     * one-shot kernel of operation {@code e}, which waits for a flag this rank will never store, finds
     * this rank's word with {@link KernelStatus#RELEASED} instead, writes nothing and records the
     * mismatch. Every rank whose call of that operation exchanges records waits for the one-shot
     * peer's record, finds its note and fails there, so no other kernel of {@code e} runs anywhere and
     * the flags stored for {@code e} meet only one-shot kernels. Nothing with JCCL_CHECK=none (guard 0),
     * alone, or staged.
     */
    private synchronized void releaseOneShots(long e, long guard, CudaStream stream) {
        if (guard == 0 || size < 2 || kernels == null || closed) {
            return;
        }
        try {
            device.makeCurrent();
            args.op(guard | KernelStatus.RELEASED, e, 0, 0, 0, size);
            CudaDriver.launchKernel(kernels.oneShotRelease, 1, KernelArgs.MAX_BLOCKS, 0, stream.handle(), args.params(),
                    "jccl_oneshot_release");
        } catch (CudaException c) {
            Log.warn(Log.Subsys.COLL, rank, "releasing the peers' one-shot kernels of GPU operation #" + e + " failed: " + c.getMessage()
                    + "; they end at JCCL_CUDA_WAIT_TIMEOUT");
        }
    }

    private void fail(ErrorCode code, String message) {
        hostWords.set(ValueLayout.JAVA_LONG, 0, 1);
        JcclException x = new JcclException(code, "rank " + rank + ": " + message);
        synchronized (this) {
            recordFailure(x);
            failureThrown = true;
        }
        exchange.abort();
        throw x;
    }

    private static boolean overlaps(long a, long alen, long b, long blen) {
        return a < b + blen && b < a + alen && alen > 0 && blen > 0;
    }

    private static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    private static long roundUp(long a, long m) {
        return ceilDiv(a, m) * m;
    }

    // ================================================================== lifecycle

    /**
     * The communicator's failure, or null; does not throw and does not wait (ncclCommGetAsyncError's
     * analogue). GPU calls return before their kernels run, so a failure found by a kernel shows here
     * once the kernel has recorded it: a {@link CudaException} when a kernel gave up waiting for a peer
     * (JCCL_CUDA_WAIT_TIMEOUT), an {@link InvalidUsageException} with {@link ErrorCode#MISMATCH} when
     * the mismatch guard found that ranks called different collectives (in the one-shot all-reduce
     * kernel, or on the host). Null after {@link #abort()} without another failure.
     */
    public JcclException asyncError() {
        return failureNow();
    }

    @Override
    public void abort() {
        if (!aborted) {
            aborted = true;
            hostWords.set(ValueLayout.JAVA_LONG, 0, 1); // kernels waiting on peers see it and return
            exchange.abort();
            if (ownedHost != null) {
                ownedHost.abort();
            }
        }
    }

    /**
     * Releases the communicator once the device is idle. A failure that its kernels recorded and that
     * no call has reported yet (e.g. a mismatched one-shot all-reduce as the last call) is thrown here,
     * after everything is released, so that it is never silent.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        JcclException unreported = null;
        try {
            device.makeCurrent();
            // Kernels that wait on peers return once they see the abort word, a failure in the status words or the deadline.
            CudaDriver.ctxSynchronize();
            JcclException f = failureNow();
            unreported = f != null && !failureThrown ? f : null;
            if (scratch != 0) {
                CudaDriver.memFree(scratch);
            }
            if (ce != null) {
                ce.close();
                ce = null;
            }
            exchange.close();
            if (exchange instanceof InProcessExchange && signal != 0) {
                CudaDriver.memFree(signal);
            }
            CudaDriver.memFreeHost(hostWords);
            for (MemorySegment m : pinned) {
                CudaDriver.memFreeHost(m);
            }
            pinned.clear();
            if (ownedHost != null) {
                if (aborted) {
                    ownedHost.abort();
                }
                ownedHost.close();
            }
        } finally {
            arena.close();
        }
        if (unreported != null) {
            failureThrown = true;
            throw unreported;
        }
    }
}
