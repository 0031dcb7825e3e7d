package org.jccl.internal.doctor;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.internal.doctor.Doctor.Finding;
import org.jccl.internal.doctor.Doctor.Input;
import org.jccl.internal.topo.CudaVisibleDevices;
import org.jccl.internal.topo.GpuMapping;
import org.jccl.internal.topo.Topology.Gpu;

/**
 * {@link Doctor}'s checks of GPUs: which GPU each local rank drives ({@code CUDA_VISIBLE_DEVICES},
 * {@code JCCL_CUDA_DEVICE}) and whether the visible GPUs can read each other's memory.
 */
final class GpuChecks extends Checks {

    GpuChecks(Input in, Config config) {
        super(in, config);
    }

    /**
     * Which GPU each local rank drives, by the rule the runtime uses ({@link GpuMapping}), and whether
     * two ranks would share one (the same {@link GpuMapping#conflicts} the ranks run at creation).
     * Every rank has the job's CUDA_VISIBLE_DEVICES, or each its own ({@link Input#perRankCvd()});
     * a doctor started inside a rank ({@link Input#localRank()}) answers for that rank.
     */
    Finding cudaVisibleDevices() {
        String id = "cuda-visible-devices";
        String raw = in.env().get("CUDA_VISIBLE_DEVICES");
        if (t.gpus().isEmpty()) {
            return skip(id, "no NVIDIA GPUs on this host" + (raw == null ? "" : " (CUDA_VISIBLE_DEVICES=" + raw + " has nothing to select)"));
        }
        int n = in.localRanks();
        boolean perRank = in.perRankCvd() != null;
        String cudaDevice = Settings.CUDA_DEVICE.getString(config);
        String deviceNote = cudaDevice == null ? "" : ", JCCL_CUDA_DEVICE=" + cudaDevice;
        String shown = perRank ? "per-rank CUDA_VISIBLE_DEVICES " + perRankText() : raw == null ? "CUDA_VISIBLE_DEVICES is unset"
                : "CUDA_VISIBLE_DEVICES=" + raw;
        shown += deviceNote;
        String indexFix = "list each GPU once, by index 0-" + (t.gpus().size() - 1) + " (PCI order, as nvidia-smi) or by UUID (nvidia-smi -L)";
        List<Integer> ranks = new ArrayList<>();
        if (in.localRank() >= 0) {
            ranks.add(in.localRank());
        } else {
            for (int r = 0; r < n; r++) {
                ranks.add(r);
            }
        }
        List<GpuMapping.Claim> claims = new ArrayList<>();
        StringBuilder map = new StringBuilder();
        List<String> unchecked = new ArrayList<>();
        Set<Gpu> used = new java.util.HashSet<>();
        List<Integer> failing = new ArrayList<>();
        String firstError = null;
        for (int r : ranks) {
            String cvdText = perRank ? in.perRankCvd().get(r) : raw;
            CudaVisibleDevices cvd = CudaVisibleDevices.resolve(t, cvdText);
            String rankLabel = perRank || in.localRank() >= 0 ? "local rank " + r + ": " : "";
            if (!cvd.problems().isEmpty()) {
                return fail(id, rankLabel + GpuMapping.cvdText(cvdText) + ": " + String.join("; ", cvd.problems()), indexFix);
            }
            if (cvd.entries().isEmpty()) {
                if (!perRank) {
                    return fail(id, shown + " hides every one of the " + t.gpus().size() + " GPUs", "unset it, or list the GPUs this job may use");
                }
            }
            GpuMapping.Result res = GpuMapping.choose(GpuMapping.devices(cvd), cudaDevice, r, n, cvdText);
            if (!res.ok()) {
                failing.add(r);
                firstError = firstError == null ? res.error() : firstError;
                continue;
            }
            GpuMapping.Choice c = res.choice();
            CudaVisibleDevices.Entry e = cvd.entries().get(c.device().ordinal());
            if (e.gpu() != null) {
                used.add(e.gpu());
            } else {
                unchecked.add(e.text());
            }
            List<String> notes = new ArrayList<>();
            notes.add(e.gpu() != null ? e.gpu().pci().address() : c.device().identity());
            if (e.mig()) {
                notes.add("MIG instance " + e.text());
            }
            if (perRank) {
                notes.add(GpuMapping.cvdText(cvdText));
            }
            if (c.reason() != GpuMapping.Reason.LOCAL_RANK) {
                notes.add(c.why());
            }
            map.append(map.isEmpty() ? "" : ", ").append("local rank ").append(r).append(" -> ")
                    .append(e.gpu() != null ? "GPU " + t.gpus().indexOf(e.gpu()) : "CUDA device " + c.device().ordinal())
                    .append(" (").append(String.join(", ", notes)).append(')');
            claims.add(GpuMapping.Claim.of(r, "this host", t.hostname().isEmpty() ? "this host" : t.hostname(), 0, r, c.device(), cvdText,
                    c.why()));
        }
        if (!failing.isEmpty()) {
            String which = failing.size() == ranks.size() && ranks.size() > 1 ? " (every local rank alike: ranks 0-" + (n - 1) + ")"
                    : failing.size() > 1 ? " (local ranks " + failing + " alike)" : "";
            int fix = firstError.indexOf(" Fix: ");
            String head = fix > 0 ? firstError.substring(0, fix) : firstError;
            head = head.endsWith(".") && !which.isEmpty() ? head.substring(0, head.length() - 1) : head;
            return fail(id, shown + ": " + head + which
                    + (map.isEmpty() ? "" : "; the others: " + map), fix > 0 ? firstError.substring(fix + 6) : "see the message");
        }
        String conflict = GpuMapping.conflicts(claims);
        if (conflict != null) {
            int fix = conflict.indexOf(" Fix: ");
            String m = conflict.substring(0, fix > 0 ? fix : conflict.length());
            String f = fix > 0 ? conflict.substring(fix + 6) : "";
            if (!perRank && in.localRank() < 0) {
                m = shown + ", the same for all " + n + " local ranks: " + m;
                f = "if the launcher gives each rank its own CUDA_VISIBLE_DEVICES (srun --gpus-per-task=1, Kubernetes, a script setting"
                        + " it from LOCAL_RANK), check that layout with --cuda-visible-devices-per-rank, or run jccl doctor inside each"
                        + " rank; otherwise " + f;
            }
            return fail(id, m, f);
        }
        List<String> hidden = perRank || in.localRank() >= 0 ? List.of() : t.gpus().stream().filter(g -> !used.contains(g))
                .map(g -> t.gpus().indexOf(g) + " (" + g.pci().address() + ")").toList();
        String hiddenNote = hidden.isEmpty() ? "" : "; hidden: GPU " + String.join(", ", hidden);
        if (!perRank && in.localRank() < 0) {
            List<Gpu> visible = CudaVisibleDevices.resolve(t, raw).visible();
            hiddenNote = visible.size() == t.gpus().size() ? "" : "; hidden: GPU " + String.join(", ", t.gpus().stream()
                    .filter(g -> !visible.contains(g)).map(g -> t.gpus().indexOf(g) + " (" + g.pci().address() + ")").toList());
        }
        String uncheckedNote = unchecked.isEmpty() ? "" : "; not checked against this host without NVML (" + in.gpuProbe().status()
                + "): " + String.join(", ", new java.util.TreeSet<>(unchecked));
        String self = in.localRank() >= 0 ? "; this doctor runs as local rank " + in.localRank() + " of " + n + " (its environment says"
                + " so): run it in every rank, or give --cuda-visible-devices-per-rank, to check the others" : "";
        boolean mixed = used.stream().map(Gpu::deviceId).distinct().count() > 1;
        String order = in.env().getOrDefault("CUDA_DEVICE_ORDER", "FASTEST_FIRST");
        if (mixed && !order.equals("PCI_BUS_ID")) {
            return warn(id, shown + ": the GPUs differ (" + used.stream().map(Gpu::deviceId).distinct().sorted().toList()
                    + ") and CUDA_DEVICE_ORDER is " + order + ", so CUDA numbers them fastest first, not in nvidia-smi's PCI order:"
                    + " ranks may land on other GPUs than listed (" + map + hiddenNote + ")", "export CUDA_DEVICE_ORDER=PCI_BUS_ID");
        }
        int visibleCount = perRank || in.localRank() >= 0 ? 0 : CudaVisibleDevices.resolve(t, raw).entries().size();
        return pass(id, shown + ": " + map + hiddenNote + uncheckedNote + self + (visibleCount > n ? "; GPUs beyond rank " + (n - 1)
                + " stay idle" : ""));
    }

    private String perRankText() {
        List<String> parts = new ArrayList<>();
        for (String c : in.perRankCvd()) {
            parts.add(c == null ? "-" : c);
        }
        return String.join(":", parts);
    }

    Finding p2p() {
        String id = "gpu-p2p";
        List<Gpu> v = CudaVisibleDevices.resolve(t, in.env().get("CUDA_VISIBLE_DEVICES")).visible();
        if (v.size() < 2) {
            return skip(id, "fewer than two visible GPUs");
        }
        if (!in.gpuProbe().available()) {
            return skip(id, "P2P access between GPUs needs NVML: " + in.gpuProbe().status());
        }
        List<String> bad = new ArrayList<>();
        int pairs = 0;
        for (int i = 0; i < v.size(); i++) {
            for (int j = 0; j < v.size(); j++) {
                if (i == j) {
                    continue;
                }
                String a = v.get(i).pci().address();
                String b = v.get(j).pci().address();
                String st = in.gpuProbe().p2pRead(a, b);
                pairs++;
                if (st == null) {
                    bad.add(a + " -> " + b + ": unknown");
                } else if (!st.equals("OK")) {
                    bad.add(a + " -> " + b + ": " + st);
                }
            }
        }
        if (!bad.isEmpty()) {
            return warn(id, bad.size() + " of " + pairs + " GPU pairs cannot read each other's memory (" + String.join("; ", bad)
                            + "): jccl-cuda stages those through host memory",
                    "check nvidia-smi topo -p2p r; in a VM enable P2P in the hypervisor, on bare metal disable ACS on the PCIe switches"
                            + " (or set JCCL_CUDA_P2P_DISABLE=1 to stage all traffic on purpose)");
        }
        long nvlinked = v.stream().filter(g -> !g.nvlinkPeers().isEmpty()).count();
        return pass(id, "all " + pairs + " GPU pairs can read each other's memory" + (nvlinked > 0 ? "; " + nvlinked
                + " GPU(s) have active NVLinks" : ""));
    }
}
