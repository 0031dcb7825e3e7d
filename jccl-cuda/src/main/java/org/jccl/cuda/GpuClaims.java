package org.jccl.cuda;

import java.util.List;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.InvalidUsageException;
import org.jccl.internal.log.Log;
import org.jccl.internal.runtime.HostPeers;
import org.jccl.internal.topo.GpuMapping;
import org.jccl.internal.topo.GpuMapping.Claim;

/**
 * The first step of every multi-process GPU communicator's creation ({@link CudaCommunicator#create},
 * {@link NcclCommunicator#create}), before any memory is allocated, exchanged or mapped: each rank
 * publishes its GPU (UUID, PCI bus id, CUDA ordinal), its host identity (the host communicator's,
 * which honours JCCL_HOSTID), its CUDA_VISIBLE_DEVICES and why it drives that GPU, in one all-gather.
 * Every rank then judges the same table ({@link GpuMapping#conflicts}), so two ranks of one host on
 * one GPU fail on every rank with the same message, and none is left waiting.
 */
final class GpuClaims {
    private GpuClaims() {
    }

    /**
     * Exchanges the claims over {@code comm} (collective), checks them, logs this rank's INIT line.
     *
     * @param what the creating call, for the error ("CudaCommunicator.create")
     * @return every rank's claim, in rank order
     * @throws InvalidUsageException on every rank when two ranks of one host claim one GPU
     */
    static List<Claim> exchange(Communicator comm, CudaDevice device, Config config, String what) {
        int rank = comm.rank();
        int n = comm.size();
        HostPeers.Layout layout = HostPeers.of(comm);
        int[] place = Cuda.localPlace(comm, config);
        String cvd = System.getenv("CUDA_VISIBLE_DEVICES");
        Claim mine = Claim.of(rank, layout.hostHash(), layout.host(), ProcessHandle.current().pid(), place[0], device.mappingDevice(),
                cvd, device.chosenBecause(place[0]));
        byte[] all = new byte[Claim.BYTES * n];
        comm.allGather(Buffer.of(mine.encode()), Buffer.of(all));
        List<Claim> table = Claim.decodeAll(all, n);
        String conflict = GpuMapping.conflicts(table);
        if (conflict != null) {
            throw new InvalidUsageException("rank " + rank + ": " + what + ": " + conflict);
        }
        if (Log.enabled(Log.Level.INFO, Log.Subsys.INIT)) {
            Log.info(Log.Subsys.INIT, rank, line(rank, place[0], place[1], device, cvd));
        }
        return table;
    }

    /** "rank 2 (local rank 2 of 4) -> GPU 2 (0000:33:00.0, GPU-...), by local rank 2 of 4 (...); CUDA_VISIBLE_DEVICES unset". */
    static String line(int rank, int localRank, int localSize, CudaDevice device, String cvd) {
        return "rank " + rank + " (local rank " + (localRank < 0 ? "unknown" : localRank + (localSize > 0 ? " of " + localSize : ""))
                + ") -> GPU " + device.ordinal() + " (" + device.mappingDevice().identity() + ", " + device.name() + "): "
                + device.chosenBecause(localRank) + "; " + GpuMapping.cvdText(cvd);
    }
}
