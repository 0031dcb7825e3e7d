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
import org.jccl.InvalidUsageException;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.CudaDriver;
import org.jccl.cuda.internal.GpuSettings;
import org.jccl.cuda.internal.HostSplit;
import org.jccl.cuda.internal.InProcessExchange;
import org.jccl.cuda.internal.IpcExchange;
import org.jccl.cuda.internal.KernelArgs;
import org.jccl.cuda.internal.KernelLauncher;
import org.jccl.cuda.internal.KernelStatus;
import org.jccl.cuda.internal.SignalArea;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.topo.GpuMapping;
import org.jccl.internal.topo.NicAssignment;
import org.jccl.internal.topo.Topologies;

/**
 * Creation of {@link CudaCommunicator}s: the checks of the device list, the choice between peer
 * access and host staging (every rank takes the same path), the exchange (in one process the peers'
 * pointers as they are, between processes CUDA IPC), the signal areas and host-mapped words, and
 * the peer-to-peer self-test that sends every rank to staging where peer writes do not arrive.
 */
final class CommunicatorFactory {
    private static final int MAX_RANKS = KernelArgs.MAX_RANKS;

    private CommunicatorFactory() {
    }

    static List<CudaCommunicator> createAll(List<CudaDevice> devices, Config config) {
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
        GpuSettings settings = GpuSettings.from(config);
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
            signals[i] = CudaDriver.memAlloc(settings.area(n).bytes());
            zero(signals[i], SignalArea.WORDS_BYTES);
            words[i] = hostWords();
        }
        InProcessExchange ex = new InProcessExchange(n, settings.timeoutNs());
        List<PeerCommunicator> comms = new ArrayList<>(n);
        String name = "gpucomm-" + Long.toHexString(System.nanoTime() & 0xffffff);
        for (int i = 0; i < n; i++) {
            comms.add(new PeerCommunicator(i, n, devices.get(i), ex, signals[i], signals.clone(), words[i], maxBlocks, settings, name));
        }
        for (PeerCommunicator c : comms) {
            String failed = selfTest(c);
            if (failed != null) {
                for (PeerCommunicator d : comms) {
                    d.close();
                }
                return stagedAll(devices, config, failed);
            }
        }
        for (PeerCommunicator c : comms) {
            Log.info(Log.Subsys.INIT, c.rank, "GPU communicator " + name + ": rank " + c.rank + " of " + n + " on " + c.device
                    + " " + c.device.uuid() + ", peers via CUDA P2P (one process)");
        }
        return new ArrayList<>(comms);
    }

    static CudaCommunicator create(Communicator host, CudaDevice device, Config config) {
        int n = host.size();
        int rank = host.rank();
        Communicator own = host.dup();
        try {
            device.makeCurrent();
            // Before any memory is allocated or mapped: every rank's GPU and host identity in one all-gather; two ranks of one
            // host on one GPU fail here, on every rank alike.
            List<GpuMapping.Claim> claims = GpuClaims.exchange(own, device, config, "CudaCommunicator.create");
            List<String> keys = new ArrayList<>();
            for (GpuMapping.Claim c : claims) {
                keys.add(c.hostKey());
            }
            HostSplit split = HostSplit.of(rank, keys);
            int[] hierOff = {Settings.CUDA_HIER.getBool(config) ? 0 : 1};
            if (split.multiHost()) {
                own.allReduce(hierOff, ReduceOp.MAX); // every rank takes the same path
                if (hierOff[0] == 0) {
                    return hier(own, device, config, split);
                }
            }
            if (n > MAX_RANKS && !split.multiHost()) {
                throw new IllegalArgumentException("jccl's GPU communicator spans at most " + MAX_RANKS + " GPUs of one host (one NVLink"
                        + " domain); the host communicator has " + n + " ranks on one host");
            }
            // Every rank must take the same path: agree on one host and on peer access first.
            String why = Settings.CUDA_P2P_DISABLE.getBool(config) ? "JCCL_CUDA_P2P_DISABLE=1 (or NCCL_P2P_DISABLE=1) is set" : null;
            for (int q = 0; q < n && why == null; q++) {
                if (!claims.get(q).hostKey().equals(claims.get(rank).hostKey())) {
                    why = "rank " + q + " runs on another host (" + claims.get(q).host() + (claims.get(q).host().equals(
                            claims.get(rank).host()) ? ", another host identity by JCCL_HOSTID" : "") + ") and JCCL_CUDA_HIER=0";
                }
            }
            int[] disabled = {why == null ? 0 : 1};
            own.allReduce(disabled, ReduceOp.MAX);
            if (disabled[0] != 0) {
                return staged(own, device, config, why != null ? why : "another rank cannot use peer-to-peer (see its log)");
            }
            GpuSettings settings = GpuSettings.from(config);
            IpcExchange ex = IpcExchange.create(own, device.gpu(), settings.area(n).bytes(), config, o -> Cuda.device(o).context());
            long signal = ex.ownSignal();
            zero(signal, SignalArea.WORDS_BYTES);
            long[] peerSignal = ex.peerSignals();
            own.barrier(); // every signal area is zeroed before anyone writes into it
            MemorySegment words = hostWords();
            PeerCommunicator c = new PeerCommunicator(rank, n, device, ex, signal, peerSignal, words, ex.maxBlocks(), settings,
                    "gpucomm-" + Integer.toHexString(own.hashCode()));
            String failed = selfTest(c);
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

    /**
     * The hierarchical communicator of ranks on several hosts: the host communicator {@code own} split
     * into the local group (host index, by rank) and the cross-host group (local index, by host index),
     * a GPU communicator over the local group (CUDA IPC + P2P, or staged where peers cannot map each
     * other), the cross-host legs over the host transports. {@code own} becomes the whole group's host
     * communicator (alltoall, send/recv between hosts, failure watch).
     */
    private static CudaCommunicator hier(Communicator own, CudaDevice device, Config config, HostSplit split) {
        int rank = split.rank();
        int localMax = 0;
        for (int h = 0; h < split.hosts(); h++) {
            localMax = Math.max(localMax, split.members(h).length);
        }
        if (localMax > MAX_RANKS) {
            throw new IllegalArgumentException("jccl's GPU communicator spans at most " + MAX_RANKS + " GPUs per host (one NVLink domain);"
                    + " " + split.describe() + " has " + localMax + " on one host");
        }
        GpuSettings.from(config); // bad JCCL_CUDA_* values fail here, as on the other paths
        Communicator localHost = own.split(split.localColorKey()[0], split.localColorKey()[1]);
        Communicator cross = own.split(split.crossColorKey()[0], split.crossColorKey()[1]);
        CudaCommunicator local = null;
        try {
            if (split.localSize() > 1) {
                local = create(localHost, device, config);
            }
        } finally {
            localHost.close(); // create() works on a dup of its own
        }
        long chunk = Settings.CUDA_HIER_CHUNK.getLong(config);
        int slots = Settings.CUDA_HIER_SLOTS.getInt(config);
        long wholeMax = Settings.CUDA_HIER_WHOLE_MAX.getLong(config);
        String how = "GPU communicator: rank " + rank + " of " + split.size() + " on " + device + " " + device.uuid() + "; "
                + split.describe() + "; " + split.groups() + "; in the host "
                + (local == null ? "alone" : local.stagedBecause() == null ? "CUDA IPC + P2P kernels" : "staged (" + local.stagedBecause() + ")")
                + "; across hosts jccl's host transports; " + nic(config, split) + "; " + gpuDirect()
                + "; steps of at most " + chunk + " bytes, " + slots + " in flight";
        device.makeCurrent();
        HierCommunicator c = new HierCommunicator(split, device, local, cross, own, chunk, slots, wholeMax, how);
        Log.info(Log.Subsys.INIT, rank, how);
        return c;
    }

    /** This rank's NIC by jccl's assignment (the GPU's nearest), for the INFO line. */
    private static String nic(Config config, HostSplit split) {
        try {
            List<NicAssignment.Choice> c = NicAssignment.forLocalRank(Topologies.forHost(config), split.myLocal(), split.localSize(),
                    System.getenv("CUDA_VISIBLE_DEVICES"), Settings.CUDA_DEVICE.getString(config), Settings.IB_HCA.getString(config));
            return c.isEmpty() ? "NIC: none found on this host (the host transports pick their own interface)" : "NIC " + c.get(0);
        } catch (RuntimeException e) {
            return "NIC unknown (" + e.getMessage() + ")";
        }
    }

    /** Why the cross-host legs stage through pinned host memory. */
    static String gpuDirect() {
        return "staging through pinned host memory, no GPUDirect RDMA: no jccl transport takes GPU memory yet (Endpoint.memoryTypes"
                + " is HOST for LOCAL, SHM and TCP)";
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

    /** The staged communicator over {@code host}, which it owns. */
    private static CudaCommunicator staged(Communicator host, CudaDevice device, Config config, String why) {
        device.makeCurrent();
        Log.warn(Log.Subsys.INIT, host.rank(), "GPU collectives of rank " + host.rank() + " on " + device + " are staged through"
                + " pinned host memory and the CPU transports (slower), because " + why);
        GpuSettings.from(config); // the same settings are checked on every path: a bad JCCL_CUDA_* value fails here too
        return new StagedCommunicator(host, device, why);
    }

    private static void zero(long dptr, long bytes) {
        MemorySegment z = Arena.global().allocate(bytes);
        CudaDriver.memcpyHtoD(dptr, z, bytes);
    }

    /** Host memory the kernels can read (abort word) and write (status words): word 0 abort, 1..6 status ({@link KernelStatus}). */
    private static MemorySegment hostWords() {
        MemorySegment w = CudaDriver.memHostAlloc(KernelStatus.BYTES, CudaDriver.MEMHOSTALLOC_PORTABLE | CudaDriver.MEMHOSTALLOC_DEVICEMAP);
        w.fill((byte) 0);
        return w;
    }

    /**
     * Writes a pattern into every peer's signal area through the peer mapping and reads it back:
     * IOMMU/ACS setups that report peer access but do not deliver the writes fail here, at
     * creation, instead of hanging the first collective. Returns why it failed, or null.
     */
    private static String selfTest(PeerCommunicator c) {
        int rank = c.rank;
        KernelLauncher k = c.launcher;
        c.device.makeCurrent();
        MemorySegment stream = CudaDriver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment pattern = a.allocate(16);
            long tag = 0x6a63636cL << 32 | (rank * 131L + 7);
            pattern.set(ValueLayout.JAVA_LONG, 0, tag);
            pattern.set(ValueLayout.JAVA_LONG, 8, ~tag);
            long local = SignalArea.word(k.signal(), SignalArea.SELFTEST_OWN);
            long back = local + 16;
            CudaDriver.memcpyHtoD(local, pattern, 16);
            for (int q = 0; q < c.size; q++) {
                if (q == rank) {
                    continue;
                }
                long remote = SignalArea.word(k.signal(q), SignalArea.selfTestFrom(rank));
                k.copy(local, remote, 16, stream, "jccl_copy self-test");
                k.copy(remote, back, 16, stream, "jccl_copy self-test");
                CudaDriver.streamSynchronize(stream);
                MemorySegment got = a.allocate(16);
                CudaDriver.memcpyDtoH(got, back, 16);
                if (got.get(ValueLayout.JAVA_LONG, 0) != tag || got.get(ValueLayout.JAVA_LONG, 8) != ~tag) {
                    return "the peer-to-peer self-test between rank " + rank + " (" + c.device + ") and rank " + q
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
}
