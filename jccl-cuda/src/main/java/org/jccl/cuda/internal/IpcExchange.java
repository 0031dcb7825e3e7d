package org.jccl.cuda.internal;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.Work;
import org.jccl.internal.log.Log;

/**
 * The exchange between processes: each rank's buffers travel as CUDA IPC handles (the handle of
 * the allocation that holds the buffer, plus the offset) over a host communicator of its own; the
 * receiving side maps each allocation once with cuIpcOpenMemHandle and caches the mapping ({@link
 * IpcMappings}: a peer's freed and reallocated scratch closes the stale mapping before the new one opens).
 *
 * <p>Collectives: one fixed 192-byte record per rank and operation (epoch, the call's mismatch guard
 * word, the two buffer references), through a {@link ShmMailbox}
 * (each rank reads its peers' records of the same operation straight out of shared memory), or,
 * where that cannot be set up, one all-gather of the records over the host communicator per
 * operation. Point-to-point: the
 * receiver's record (published in the group's first phase) and the sender's request for it travel
 * together in one host group per device group ({@link #prepareSends}). Used by the thread that drives the communicator.
 */
public final class IpcExchange implements Exchange {
    /** handle, offset, size, raw address (used as is by ranks of the same process, where IPC handles cannot be opened). */
    private static final int REF_BYTES = CudaDriver.IPC_HANDLE_BYTES + 24;
    /** Identifies this JVM: ranks that share it exchange raw device pointers instead of IPC handles. */
    private static final long JVM_TOKEN = new java.security.SecureRandom().nextLong() | 1;
    /** epoch, the mismatch guard's word of the call (OpGuard), in, out. */
    private static final int RECORD_BYTES = 16 + 2 * REF_BYTES;
    private static final int REFS = 16;
    /** A receive's record: sequence number, reference, receive size. */
    private static final int P2P_BYTES = 8 + REF_BYTES + 8;

    private final Communicator host;
    private final int rank;
    private final int n;
    private final long ownSignal;
    private final long[] peerSignals;
    private final int maxBlocks;
    /** The peers' signal areas, opened once and kept until close. */
    private final java.util.List<Long> signalMaps = new java.util.ArrayList<>();
    /** The peers' buffers mapped through CUDA IPC. */
    private final IpcMappings mapped = new IpcMappings(new IpcMappings.Driver() {
        @Override
        public long open(byte[] handle) {
            return CudaDriver.ipcOpenMemHandle(handle);
        }

        @Override
        public void close(long base) {
            CudaDriver.ipcCloseMemHandle(base);
        }

        @Override
        public void quiesce() {
            CudaDriver.ctxSynchronize();
        }
    });
    /** Ranks living in this JVM (raw pointers work between them). */
    private final boolean[] sameProcess;
    /** Published, not yet resolved collectives of this rank: record, own in, own out. */
    private final java.util.ArrayDeque<Object[]> published = new java.util.ArrayDeque<>();
    private volatile boolean aborted;
    /** The per-operation records' path between the processes; null: the host communicator's all-gather. */
    private ShmMailbox mailbox;
    /** Collectives resolved so far through the mailbox (its sequence numbers). */
    private long resolved;

    private IpcExchange(Communicator host, long ownSignal, long[] peerSignals, int maxBlocks, boolean[] sameProcess) {
        this.sameProcess = sameProcess;
        this.host = host;
        this.rank = host.rank();
        this.n = host.size();
        this.ownSignal = ownSignal;
        this.peerSignals = peerSignals;
        this.maxBlocks = maxBlocks;
    }

    /**
     * Collective over {@code host}: allocates this rank's signal area, exchanges identities and
     * handles, rejects two ranks on one GPU, maps every peer's signal area. {@code contextOf}: the primary
     * context of a GPU of this process by ordinal (for peer access to the GPUs of ranks in this JVM).
     */
    public static IpcExchange create(Communicator host, Gpu device, long signalBytes, Config config,
                                     java.util.function.IntFunction<java.lang.foreign.MemorySegment> contextOf) {
        int n = host.size();
        int rank = host.rank();
        long signal = CudaDriver.memAlloc(signalBytes);
        byte[] handle = CudaDriver.ipcGetMemHandle(signal);
        // identity record: uuid (40 bytes, ASCII), sm count, IPC handle, JVM token, raw address, ordinal, PCI bus id (16)
        int idBytes = 40 + 4 + CudaDriver.IPC_HANDLE_BYTES + 8 + 8 + 4 + 16;
        byte[] me = new byte[idBytes];
        ByteBuffer b = ByteBuffer.wrap(me).order(ByteOrder.LITTLE_ENDIAN);
        byte[] uuid = device.uuid().getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        b.put(uuid, 0, Math.min(40, uuid.length));
        b.position(40);
        b.putInt(device.multiprocessors());
        b.put(handle);
        b.putLong(JVM_TOKEN);
        b.putLong(signal);
        b.putInt(device.ordinal());
        byte[] bus = device.pciBusId().getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        b.put(bus, 0, Math.min(16, bus.length));
        byte[] all = new byte[idBytes * n];
        host.allGather(Buffer.of(me), Buffer.of(all));
        long[] peers = new long[n];
        boolean[] same = new boolean[n];
        int maxBlocks = KernelArgs.MAX_BLOCKS;
        Map<String, Integer> byUuid = new HashMap<>();
        java.util.List<Long> opened = new java.util.ArrayList<>();
        // Pass 1: identities. Two ranks on one GPU are refused before anything is mapped.
        for (int q = 0; q < n; q++) {
            ByteBuffer r = ByteBuffer.wrap(all, q * idBytes, idBytes).order(ByteOrder.LITTLE_ENDIAN);
            byte[] u = new byte[40];
            r.get(u);
            String id = new String(u, java.nio.charset.StandardCharsets.US_ASCII).replace("\0", "").trim();
            maxBlocks = Math.min(maxBlocks, r.getInt());
            r.position(r.position() + CudaDriver.IPC_HANDLE_BYTES + 16);
            int ordinal = r.getInt();
            byte[] busBytes = new byte[16];
            r.get(busBytes);
            String busId = new String(busBytes, java.nio.charset.StandardCharsets.US_ASCII).replace("\0", "").trim();
            Integer other = byUuid.putIfAbsent(id, q);
            if (other != null) {
                CudaDriver.memFree(signal);
                throw new InvalidUsageException("ranks " + other + " and " + q + " are both bound to the same GPU: GPU " + ordinal
                        + " (" + busId + ", " + id + ") is used twice; every rank needs a GPU of its own. Map local ranks to GPUs"
                        + " one to one (Cuda.deviceFor), and check CUDA_VISIBLE_DEVICES="
                        + System.getenv("CUDA_VISIBLE_DEVICES") + " and the launcher's settings");
            }
        }
        // Pass 2: map every peer's area.
        for (int q = 0; q < n; q++) {
            ByteBuffer r = ByteBuffer.wrap(all, q * idBytes + 44, idBytes - 44).order(ByteOrder.LITTLE_ENDIAN);
            byte[] h = new byte[CudaDriver.IPC_HANDLE_BYTES];
            r.get(h);
            long token = r.getLong();
            long raw = r.getLong();
            int ordinal = r.getInt();
            same[q] = token == JVM_TOKEN;
            if (q == rank) {
                peers[q] = signal;
            } else if (same[q]) {
                // Same process: the pointer is valid here once peer access to that GPU is enabled.
                if (ordinal != device.ordinal()) {
                    CudaDriver.ctxEnablePeerAccess(contextOf.apply(ordinal));
                }
                peers[q] = raw;
            } else {
                peers[q] = CudaDriver.ipcOpenMemHandle(h);
                opened.add(peers[q]);
            }
        }
        IpcExchange ex = new IpcExchange(host, signal, peers, maxBlocks, same);
        ex.signalMaps.addAll(opened);
        java.nio.file.Path dir = java.nio.file.Path.of(org.jccl.internal.config.Settings.SHM_DIR.getString(config));
        if (!org.jccl.internal.config.Settings.CUDA_IPC_MAILBOX.getBool(config)) {
            Log.info(Log.Subsys.INIT, rank, "GPU collectives exchange their buffers' handles over the host communicator"
                    + " (JCCL_CUDA_IPC_MAILBOX=0)");
            return ex;
        }
        try {
            ex.mailbox = ShmMailbox.create(host, dir, RECORD_BYTES,
                    org.jccl.internal.config.Settings.CUDA_WAIT_TIMEOUT.getDuration(config).toNanos());
            Log.info(Log.Subsys.INIT, rank, "GPU collectives exchange their buffers' handles through shared memory in " + dir);
        } catch (java.io.IOException e) {
            Log.info(Log.Subsys.INIT, rank, "GPU collectives exchange their buffers' handles over the host communicator (one"
                    + " all-gather per operation; slower at mid sizes): no shared-memory mailbox in " + dir + ": " + e.getMessage());
        }
        Log.info(Log.Subsys.INIT, rank, "GPU " + device.ordinal() + " " + device.uuid() + ": mapped the signal areas of "
                + (n - 1) + " peer GPU(s) through CUDA IPC");
        return ex;
    }

    public long ownSignal() {
        return ownSignal;
    }

    public long[] peerSignals() {
        return peerSignals.clone();
    }

    public int maxBlocks() {
        return maxBlocks;
    }

    @Override
    public int size() {
        return n;
    }

    /**
     * This rank's own allocations already exported: buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID, never
     * reused within the process, so a freed and reallocated range gets a new entry) -> {base, size,
     * handle}. Saves cuMemGetAddressRange + cuIpcGetMemHandle on every operation over the same buffers.
     */
    private final Map<Long, Object[]> exported = new HashMap<>();

    /** Writes (handle of the allocation holding p, offset in it, size) at {@code at}; zeros for p == 0. */
    private void ref(byte[] rec, int at, long p) {
        ByteBuffer b = ByteBuffer.wrap(rec, at, REF_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        if (p == 0) {
            b.put(new byte[REF_BYTES]);
            return;
        }
        long id = CudaDriver.pointerBufferId(p);
        Object[] e = exported.get(id);
        long base;
        if (e == null || p < (long) e[0] || p >= (long) e[0] + (long) e[1]) {
            long[] range = CudaDriver.memGetAddressRange(p);
            e = new Object[] {range[0], range[1], CudaDriver.ipcGetMemHandle(range[0])};
            if (exported.size() >= 4096) {
                exported.clear(); // a bound: programs that allocate without end do not grow this map without end
            }
            exported.put(id, e);
        }
        base = (long) e[0];
        b.put((byte[]) e[2]);
        b.putLong(p - base);
        b.putLong((long) e[1]);
        b.putLong(p);
    }

    /** The address, mapped here, of the reference at {@code at}; 0 for a null reference. */
    private long map(byte[] rec, int at, int peer) {
        ByteBuffer b = ByteBuffer.wrap(rec, at, REF_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        byte[] h = new byte[CudaDriver.IPC_HANDLE_BYTES];
        b.get(h);
        long offset = b.getLong();
        long size = b.getLong();
        long raw = b.getLong();
        if (size == 0) {
            return 0;
        }
        if (sameProcess[peer]) {
            return raw;
        }
        int before = mapped.opened();
        long base = mapped.map(peer, h, raw - offset, size);
        if (mapped.opened() != before) {
            Log.trace(Log.Subsys.P2P, rank, "mapped " + size + " bytes of rank " + peer + " through CUDA IPC (" + mapped.held()
                    + " held, " + mapped.closedStale() + " stale closed)");
        }
        return base + offset;
    }

    @Override
    public void publishCollective(int rank, long epoch, long in, long out, long guard) {
        byte[] mine = new byte[RECORD_BYTES];
        ByteBuffer.wrap(mine).order(ByteOrder.LITTLE_ENDIAN).putLong(0, epoch).putLong(8, guard);
        long t0 = System.nanoTime();
        ref(mine, REFS, in);
        ref(mine, REFS + REF_BYTES, out);
        if (Log.enabled(Log.Level.TRACE, Log.Subsys.P2P)) {
            Log.trace(Log.Subsys.P2P, rank, "GPU collective #" + epoch + ": exporting the buffers " + (System.nanoTime() - t0) / 1000
                    + " us");
        }
        if (mailbox != null) {
            check();
            mailbox.publish(mine);
        }
        published.add(new Object[] {mine, in, out});
    }

    @Override
    public long[] resolveCollective(int rank, long epoch) {
        check();
        Object[] p = published.poll();
        if (p == null) {
            throw new IllegalStateException("resolveCollective without publishCollective");
        }
        byte[] all = new byte[RECORD_BYTES * n];
        long t0 = System.nanoTime();
        long myGuard = ByteBuffer.wrap((byte[]) p[0]).order(ByteOrder.LITTLE_ENDIAN).getLong(8);
        if (mailbox != null) {
            long seq = ++resolved;
            for (int q = 0; q < n; q++) {
                final int peer = q;
                byte[] rec;
                try {
                    rec = q == rank ? (byte[]) p[0] : mailbox.read(q, seq, () -> {
                        // A peer that ran this operation as a one-shot all-reduce publishes no record: its note says so.
                        long[] note = mailbox.noted(peer, epoch);
                        if (note != null) {
                            return Exchange.oneShotPeer(rank, epoch, peer, note[1], myGuard);
                        }
                        java.util.function.Supplier<RuntimeException> w = watcher;
                        return w == null ? null : w.get();
                    });
                } catch (JcclException x) {
                    if (x.code() == ErrorCode.MISMATCH) {
                        mailbox.consumed(seq); // the others, which fail here too, must not wait for this rank
                    }
                    throw x;
                }
                System.arraycopy(rec, 0, all, q * RECORD_BYTES, RECORD_BYTES);
            }
            mailbox.consumed(seq);
        } else {
            host.allGather(Buffer.of((byte[]) p[0]), Buffer.of(all));
        }
        long t1 = System.nanoTime();
        long[] r = new long[2 * n];
        r[2 * rank] = (long) p[1];
        r[2 * rank + 1] = (long) p[2];
        ByteBuffer recs = ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN);
        long mine = recs.getLong(rank * RECORD_BYTES + 8);
        for (int q = 0; q < n; q++) {
            long e = recs.getLong(q * RECORD_BYTES);
            long[] note = e != epoch && mailbox != null ? mailbox.noted(q, epoch) : null;
            if (note != null) {
                // its record belongs to a later operation: it ran this one as a one-shot all-reduce
                throw Exchange.oneShotPeer(rank, epoch, q, note[1], myGuard);
            }
            if (e != epoch) {
                throw new JcclException(ErrorCode.MISMATCH, "rank " + rank + ": GPU collective #" + epoch + " met rank " + q
                        + "'s collective #" + e + ": the ranks issued different sequences of GPU operations");
            }
            // Before anything is mapped: the peer's call must be this rank's.
            InvalidUsageException m = Exchange.mismatch(rank, epoch, q, recs.getLong(q * RECORD_BYTES + 8), mine);
            if (m != null) {
                throw m;
            }
        }
        mapped.beginOperation();
        for (int q = 0; q < n; q++) {
            if (q == rank) {
                continue;
            }
            r[2 * q] = map(all, q * RECORD_BYTES + REFS, q);
            r[2 * q + 1] = map(all, q * RECORD_BYTES + REFS + REF_BYTES, q);
        }
        if (Log.enabled(Log.Level.TRACE, Log.Subsys.P2P)) {
            Log.trace(Log.Subsys.P2P, rank, "GPU collective #" + epoch + ": handle exchange " + (t1 - t0) / 1000 + " us, mapping "
                    + (System.nanoTime() - t1) / 1000 + " us");
        }
        return r;
    }

    @Override
    public void noteOneShot(int rank, long epoch, long guard) {
        if (mailbox != null) {
            mailbox.note(epoch, guard);
        }
    }

    /** What this rank's waits ask when they last (Exchange#watch), or null. */
    private volatile java.util.function.Supplier<RuntimeException> watcher;

    @Override
    public void watch(int rank, java.util.function.Supplier<RuntimeException> check) {
        watcher = check;
    }

    @Override
    public void publishRecv(int rank, int src, long seq, long address, long bytes) {
        check();
        byte[] rec = new byte[P2P_BYTES];
        ByteBuffer.wrap(rec).order(ByteOrder.LITTLE_ENDIAN).putLong(0, seq);
        ref(rec, 8, address);
        // the receive size travels after the reference (whose size field is the allocation's: IpcMappings needs its range)
        ByteBuffer.wrap(rec).order(ByteOrder.LITTLE_ENDIAN).putLong(8 + REF_BYTES, bytes);
        if (src == rank) {
            selfRecv.put(seq, new long[] {address, bytes});
            return;
        }
        pendingPublish.add(new Object[] {src, rec});
    }

    /** Receive records published in this group, not yet sent: {dst rank, record}. */
    private final java.util.List<Object[]> pendingPublish = new java.util.ArrayList<>();
    /** Records received by prepareSends, by "peer:seq". */
    private final Map<String, byte[]> prepared = new HashMap<>();

    @Override
    public void prepareSends(int rank, int[] peers, long[] seqs) {
        check();
        mapped.beginOperation(); // the group's sends are resolved next, then launched as one kernel
        java.util.List<Work> works = new java.util.ArrayList<>();
        byte[][] recs = new byte[peers.length][];
        // One host group: every rank's notices and requests are posted together.
        try (org.jccl.Group g = host.group()) {
            for (Object[] p : pendingPublish) {
                works.add(host.sendAsync(Buffer.of((byte[]) p[1]), (int) p[0]));
            }
            for (int i = 0; i < peers.length; i++) {
                if (peers[i] != rank) {
                    recs[i] = new byte[P2P_BYTES];
                    works.add(host.recvAsync(Buffer.of(recs[i]), peers[i]));
                }
            }
        }
        pendingPublish.clear();
        for (Work w : works) {
            w.join();
        }
        for (int i = 0; i < peers.length; i++) {
            if (recs[i] != null) {
                prepared.put(peers[i] + ":" + seqs[i], recs[i]);
            }
        }
    }

    private final Map<Long, long[]> selfRecv = new HashMap<>();

    @Override
    public long[] resolveSend(int rank, int dst, long seq) {
        check();
        if (dst == rank) {
            long[] r = selfRecv.remove(seq);
            if (r == null) {
                throw new InvalidUsageException("rank " + rank + " sends to itself without a matching recv in the same group");
            }
            return r;
        }
        byte[] rec = prepared.remove(dst + ":" + seq);
        if (rec == null) {
            throw new IllegalStateException("resolveSend(" + dst + ", " + seq + ") without prepareSends");
        }
        ByteBuffer b = ByteBuffer.wrap(rec).order(ByteOrder.LITTLE_ENDIAN);
        long s = b.getLong(0);
        if (s != seq) {
            throw new JcclException(ErrorCode.MISMATCH, "rank " + rank + ": send #" + seq + " to rank " + dst + " met its recv #" + s);
        }
        long bytes = b.getLong(8 + REF_BYTES);
        // map() reads (handle, offset, allocation size): zero for a null buffer
        long addr = map(rec, 8, dst);
        return new long[] {addr, bytes};
    }

    private void check() {
        if (aborted) {
            throw new JcclException(ErrorCode.ABORTED, "the GPU communicator was aborted");
        }
    }

    @Override
    public void abort() {
        aborted = true;
        if (mailbox != null) {
            mailbox.abort();
        }
    }

    @Override
    public void close() {
        for (String e : mapped.closeAll()) {
            Log.warn(Log.Subsys.P2P, rank, "cuIpcCloseMemHandle: " + e);
        }
        for (long base : signalMaps) {
            try {
                CudaDriver.ipcCloseMemHandle(base);
            } catch (RuntimeException e) {
                Log.warn(Log.Subsys.P2P, rank, "cuIpcCloseMemHandle: " + e.getMessage());
            }
        }
        signalMaps.clear();
        if (mailbox != null) {
            mailbox.close();
        }
        try {
            CudaDriver.memFree(ownSignal);
        } catch (RuntimeException e) {
            Log.warn(Log.Subsys.P2P, rank, "freeing the signal area: " + e.getMessage());
        }
        // the host communicator belongs to the CudaCommunicator, which closes it
    }
}
