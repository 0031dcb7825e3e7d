package org.jccl.internal.topo;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.jccl.internal.net.DeviceList;
import org.jccl.internal.topo.Topology.Gpu;
import org.jccl.internal.topo.Topology.NetDevice;
import org.jccl.internal.topo.Topology.RdmaDevice;

/**
 * Which NIC(s) each local GPU uses: the nearest by PCIe distance, <b>balanced</b>, so that 8 GPUs
 * and 8 HCAs use all 8 HCAs. (Each GPU taking the first nearest NIC is what leaves half the HCAs
 * idle when two HCAs share a PCIe switch with two GPUs: both GPUs pick the first one.)
 *
 * <p>Method: a minimum-cost assignment (Hungarian algorithm) of GPUs to NIC slots, each NIC
 * offering ceil(GPUs / NICs) slots, with the cost dominated by the PCIe distance, then by the slot
 * (so load spreads before it piles up), then by how far the GPU's and NIC's positions are in their
 * lists (so GPU i gets NIC i among equals). When there are more NICs than GPUs, the NICs left over
 * are handed out the same way, each to its nearest GPU, so every NIC carries traffic.
 *
 * <p>Candidates are the RDMA devices with an ACTIVE port allowed by {@code JCCL_IB_HCA}
 * ({@link #candidates}); a host without any gets its physical network interfaces that are up.
 */
public final class NicAssignment {

    private NicAssignment() {
    }

    /**
     * A NIC that can be assigned.
     *
     * @param name RDMA device or interface name
     * @param pci where it sits
     * @param rdma whether it is an RDMA device
     */
    public record Nic(String name, PciLocation pci, boolean rdma) {
    }

    /**
     * One NIC for one GPU.
     *
     * @param nic the NIC's name
     * @param distance the PCIe path between them
     */
    public record Choice(String nic, PciDistance distance) {
        @Override
        public String toString() {
            return nic + " (" + distance + ")";
        }
    }

    /**
     * The outcome.
     *
     * @param perGpu for each GPU (in the order given), its NICs, the primary one first
     * @param unused NICs no GPU uses (only when there are no GPUs at all)
     */
    public record Result(List<List<Choice>> perGpu, List<String> unused) {
        public Result {
            perGpu = perGpu.stream().map(List::copyOf).toList();
            unused = List.copyOf(unused);
        }

        /** The distinct NICs that carry traffic. */
        public Set<String> used() {
            Set<String> s = new LinkedHashSet<>();
            perGpu.forEach(l -> l.forEach(c -> s.add(c.nic())));
            return s;
        }
    }

    /** The NICs jccl may use on {@code topo}: active RDMA devices allowed by {@code hca}, else up PCI interfaces. */
    public static List<Nic> candidates(Topology topo, DeviceList hca) {
        List<Nic> out = new ArrayList<>();
        for (RdmaDevice d : topo.rdmaDevices()) {
            if (d.ports().stream().anyMatch(p -> p.active() && hca.accepts(d.name(), p.number()))) {
                out.add(new Nic(d.name(), d.pci(), true));
            }
        }
        if (out.isEmpty()) {
            for (NetDevice n : topo.netDevices()) {
                if (n.up() && n.pci().onPci()) {
                    out.add(new Nic(n.name(), n.pci(), false));
                }
            }
        }
        return out;
    }

    /** Assigns {@code nics} to {@code gpus} (see the class comment). */
    public static Result assign(List<PciLocation> gpus, List<Nic> nics, boolean singleNumaNode) {
        Objects.requireNonNull(gpus, "gpus");
        List<List<Choice>> per = new ArrayList<>();
        for (int i = 0; i < gpus.size(); i++) {
            per.add(new ArrayList<>());
        }
        if (nics.isEmpty()) {
            return new Result(per, List.of());
        }
        if (gpus.isEmpty()) {
            return new Result(per, nics.stream().map(Nic::name).toList());
        }
        int g = gpus.size();
        int n = nics.size();
        PciDistance[][] d = new PciDistance[g][n];
        for (int i = 0; i < g; i++) {
            for (int j = 0; j < n; j++) {
                d[i][j] = gpus.get(i).distanceTo(nics.get(j).pci(), singleNumaNode);
            }
        }
        // Round 1: every GPU gets a primary NIC; each NIC offers ceil(g / n) slots.
        int cap = (g + n - 1) / n;
        long[][] cost = new long[g][n * cap];
        for (int i = 0; i < g; i++) {
            for (int s = 0; s < n * cap; s++) {
                int j = s % n;
                cost[i][s] = cost(d[i][j], s / n, i, g, j, n);
            }
        }
        int[] slotOf = hungarian(cost);
        boolean[] usedNic = new boolean[n];
        for (int i = 0; i < g; i++) {
            int j = slotOf[i] % n;
            per.get(i).add(new Choice(nics.get(j).name(), d[i][j]));
            usedNic[j] = true;
        }
        // Round 2: NICs left over (more NICs than GPUs) go to their nearest GPU, balanced the same way.
        List<Integer> left = new ArrayList<>();
        for (int j = 0; j < n; j++) {
            if (!usedNic[j]) {
                left.add(j);
            }
        }
        if (!left.isEmpty()) {
            int l = left.size();
            int cap2 = (l + g - 1) / g;
            long[][] c2 = new long[l][g * cap2];
            for (int k = 0; k < l; k++) {
                for (int s = 0; s < g * cap2; s++) {
                    c2[k][s] = cost(d[s % g][left.get(k)], s / g, left.get(k), n, s % g, g);
                }
            }
            int[] gpuSlot = hungarian(c2);
            for (int k = 0; k < l; k++) {
                int i = gpuSlot[k] % g;
                int j = left.get(k);
                per.get(i).add(new Choice(nics.get(j).name(), d[i][j]));
            }
        }
        return new Result(per, List.of());
    }

    /** Distance first, then slot (load), then position mismatch (GPU i with NIC i among equals). */
    private static long cost(PciDistance dist, int slot, int row, int rows, int col, int cols) {
        long ideal = Math.round((double) row * cols / rows);
        return dist.ordinal() * 1_000_000L + slot * 1_000L + Math.abs(ideal - col);
    }

    /**
     * Minimum-cost assignment of every row to a distinct column (rows <= columns), O(rows^2 cols).
     *
     * @return for each row, its column
     */
    static int[] hungarian(long[][] a) {
        int rows = a.length;
        int cols = a[0].length;
        if (rows > cols) {
            throw new IllegalArgumentException("more rows than columns");
        }
        long inf = Long.MAX_VALUE / 4;
        long[] u = new long[rows + 1];
        long[] v = new long[cols + 1];
        int[] p = new int[cols + 1];
        int[] way = new int[cols + 1];
        for (int i = 1; i <= rows; i++) {
            p[0] = i;
            int j0 = 0;
            long[] minv = new long[cols + 1];
            Arrays.fill(minv, inf);
            boolean[] used = new boolean[cols + 1];
            do {
                used[j0] = true;
                int i0 = p[j0];
                long delta = inf;
                int j1 = -1;
                for (int j = 1; j <= cols; j++) {
                    if (!used[j]) {
                        long cur = a[i0 - 1][j - 1] - u[i0] - v[j];
                        if (cur < minv[j]) {
                            minv[j] = cur;
                            way[j] = j0;
                        }
                        if (minv[j] < delta) {
                            delta = minv[j];
                            j1 = j;
                        }
                    }
                }
                for (int j = 0; j <= cols; j++) {
                    if (used[j]) {
                        u[p[j]] += delta;
                        v[j] -= delta;
                    } else {
                        minv[j] -= delta;
                    }
                }
                j0 = j1;
            } while (p[j0] != 0);
            do {
                int j1 = way[j0];
                p[j0] = p[j1];
                j0 = j1;
            } while (j0 != 0);
        }
        int[] out = new int[rows];
        for (int j = 1; j <= cols; j++) {
            if (p[j] != 0) {
                out[p[j] - 1] = j - 1;
            }
        }
        return out;
    }

    /**
     * {@link #forLocalRank(Topology, int, int, String, String, String)} with the local size and
     * {@code JCCL_CUDA_DEVICE} unknown.
     */
    public static List<Choice> forLocalRank(Topology topo, int localRank, String cudaVisibleDevices, String ibHca) {
        return forLocalRank(topo, localRank, -1, cudaVisibleDevices, null, ibHca);
    }

    /**
     * The NICs of local rank {@code localRank}: those of the GPU it drives ({@link GpuMapping}, the rule
     * the runtime uses), from the assignment over the GPUs it sees, or, on a host without GPUs, NIC
     * {@code r mod NICs}. A rank that the rule gives no GPU (its runtime fails and says why) is
     * answered as if it drove visible GPU {@code r mod visible}. This is the call the RDMA transport makes.
     *
     * @param localSize ranks on this host, -1 when unknown
     * @param cudaVisibleDevices the process's CUDA_VISIBLE_DEVICES, null when unset
     * @param cudaDevice JCCL_CUDA_DEVICE, null when unset
     * @param ibHca the JCCL_IB_HCA value, null when unset
     * @return the rank's NICs, primary first; empty when the host has none
     */
    public static List<Choice> forLocalRank(Topology topo, int localRank, int localSize, String cudaVisibleDevices, String cudaDevice,
            String ibHca) {
        List<Nic> nics = candidates(topo, DeviceList.parse("JCCL_IB_HCA", ibHca, true));
        if (nics.isEmpty()) {
            return List.of();
        }
        CudaVisibleDevices cvd = CudaVisibleDevices.resolve(topo, cudaVisibleDevices);
        List<Gpu> visible = cvd.visible();
        Gpu mine = drivenGpu(topo, cvd, localRank, localSize, cudaDevice);
        if (mine == null && !visible.isEmpty()) {
            mine = visible.get(Math.floorMod(localRank, visible.size()));
        }
        if (mine == null) {
            Nic nic = nics.get(Math.floorMod(localRank, nics.size()));
            return List.of(new Choice(nic.name(), PciDistance.SYS));
        }
        int all = topo.gpus().size();
        int index = visible.indexOf(mine);
        if (index < 0 || (visible.size() == 1 && all > 1)) {
            // One GPU per process (CUDA_VISIBLE_DEVICES=<r>, as Slurm and Kubernetes bind GPUs): assigned on its own, every
            // process would take the first of the NICs it ties on, and the GPUs sharing a switch would share one HCA while
            // the other idled (the "only 4 of 8 HCAs carried traffic" report). So the primary comes from the assignment of
            // all the host's GPUs, as if each process saw them all; the rest of its own list follows as spares.
            Result host = assign(topo.gpus().stream().map(Gpu::pci).toList(), nics, topo.singleNumaNode());
            List<Choice> out = new ArrayList<>(host.perGpu().get(topo.gpus().indexOf(mine)));
            for (Choice c : assign(List.of(mine.pci()), nics, topo.singleNumaNode()).perGpu().getFirst()) {
                if (out.stream().noneMatch(o -> o.nic().equals(c.nic()))) {
                    out.add(c);
                }
            }
            return List.copyOf(out);
        }
        Result r = assign(visible.stream().map(Gpu::pci).toList(), nics, topo.singleNumaNode());
        return r.perGpu().get(index);
    }

    /** The physical GPU (of {@code topo}) that {@link GpuMapping} gives the rank, or null (no choice, or not placeable in sysfs). */
    /**
     * The GPU local rank {@code localRank} of {@code localSize} (-1: unknown) drives by {@link GpuMapping}'s
     * rule, or null when the rule gives it none.
     */
    public static Gpu gpuOfLocalRank(Topology topo, int localRank, int localSize, String cudaVisibleDevices, String cudaDevice) {
        return drivenGpu(topo, CudaVisibleDevices.resolve(topo, cudaVisibleDevices), localRank, localSize, cudaDevice);
    }

    static Gpu drivenGpu(Topology topo, CudaVisibleDevices cvd, int localRank, int localSize, String cudaDevice) {
        GpuMapping.Result r = GpuMapping.choose(GpuMapping.devices(cvd), cudaDevice, localRank, localSize, cvd.raw());
        if (!r.ok()) {
            return null;
        }
        int ordinal = r.choice().device().ordinal();
        CudaVisibleDevices.Entry e = cvd.entries().get(ordinal);
        return e.gpu();
    }
}
