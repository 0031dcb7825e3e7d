package org.jccl.internal.topo;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.internal.topo.Topology.Gpu;

/**
 * The GPUs a process sees after {@code CUDA_VISIBLE_DEVICES}, as CUDA reads the variable: a comma
 * list of indices (into the driver's order, which is PCI order with {@code CUDA_DEVICE_ORDER=PCI_BUS_ID}
 * and on hosts of identical GPUs), {@code GPU-<uuid>} (a unique prefix is enough), {@code MIG-<uuid>}
 * or the older {@code MIG-GPU-<uuid>/<gi>/<ci>}; CUDA stops at the first entry that is invalid and
 * ignores the rest.
 *
 * <p>This reads the variable against a {@link Topology} (sysfs, and NVML's UUIDs when it was there),
 * for {@code jccl doctor}, the NIC assignment and the launcher's CPU binding. A process that has the
 * CUDA driver asks it instead (jccl-cuda's {@code Cuda}: what CUDA enumerates, with cuDeviceGetUuid and
 * the PCI bus id); both feed the same {@link GpuMapping}.
 *
 * @param raw the variable's value, null when unset
 * @param visible the visible physical GPUs in CUDA's order (CUDA device 0 first); MIG instances and unresolvable UUID entries are not in it
 * @param problems what makes the value wrong (duplicates, out-of-range indices, unknown UUIDs, garbage), each one sentence
 * @param unresolved entries that could not be checked (UUIDs without NVML, MIG instances)
 * @param entries every device CUDA would enumerate, in its order (CUDA device i is entry i), resolved or not
 */
public record CudaVisibleDevices(String raw, List<Gpu> visible, List<String> problems, List<String> unresolved, List<Entry> entries) {

    /**
     * One device CUDA would enumerate.
     *
     * @param text the entry as written (an index, a UUID or a MIG name); for an unset variable, the GPU's index
     * @param gpu the physical GPU it is, or of which it is a MIG instance; null when that cannot be known here
     * @param mig whether it is a MIG instance (a slice of {@code gpu}, when known)
     */
    public record Entry(String text, Gpu gpu, boolean mig) {
    }

    /** {@code MIG-GPU-<uuid>/<gi>/<ci>}: a MIG instance named by its GPU's UUID and its instance ids (CUDA 11.0-11.3). */
    private static final Pattern OLD_MIG = Pattern.compile("MIG-(GPU-[0-9a-fA-F-]+)/(\\d+)/(\\d+)");

    public CudaVisibleDevices {
        visible = List.copyOf(visible);
        problems = List.copyOf(problems);
        unresolved = List.copyOf(unresolved);
        entries = List.copyOf(entries);
    }

    /** Resolves {@code raw} against the GPUs of {@code topo} (in PCI order). */
    public static CudaVisibleDevices resolve(Topology topo, String raw) {
        List<Gpu> all = topo.gpus();
        if (raw == null) {
            List<Entry> entries = new ArrayList<>();
            for (int i = 0; i < all.size(); i++) {
                entries.add(new Entry(Integer.toString(i), all.get(i), false));
            }
            return new CudaVisibleDevices(null, all, List.of(), List.of(), entries);
        }
        List<Gpu> visible = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        List<String> unresolved = new ArrayList<>();
        List<Entry> entries = new ArrayList<>();
        Set<String> seen = new LinkedHashSet<>();
        boolean noUuids = all.stream().allMatch(x -> x.uuid().isEmpty());
        String[] parts = raw.trim().isEmpty() ? new String[0] : raw.split(",");
        for (int i = 0; i < parts.length; i++) {
            String t = parts[i].trim();
            String rest = i + 1 < parts.length ? " (CUDA ignores it and everything after it)" : " (CUDA ignores it)";
            Gpu g = null;
            if (t.matches("\\d+")) {
                int idx = Integer.parseInt(t);
                if (idx >= all.size()) {
                    problems.add("entry '" + t + "' is not a GPU index: this host has " + all.size() + " GPU(s), 0-" + (all.size() - 1) + rest);
                    break;
                }
                g = all.get(idx);
            } else if (t.startsWith("GPU-")) {
                if (noUuids) {
                    unresolved.add(t);
                    entries.add(new Entry(t, null, false));
                    continue;
                }
                List<Gpu> m = all.stream().filter(x -> !x.uuid().isEmpty() && x.uuid().startsWith(t)).toList();
                if (m.size() != 1) {
                    problems.add("entry '" + t + "' " + (m.isEmpty() ? "matches no GPU's UUID" : "matches " + m.size() + " GPUs' UUIDs")
                            + rest);
                    break;
                }
                g = m.getFirst();
            } else if (t.startsWith("MIG-")) {
                // A MIG instance: its own UUID needs NVML's MIG queries; the old form names its GPU, which sysfs can place.
                Matcher old = OLD_MIG.matcher(t);
                Gpu parent = null;
                if (old.matches() && !noUuids) {
                    List<Gpu> m = all.stream().filter(x -> x.uuid().equalsIgnoreCase(old.group(1))).toList();
                    parent = m.size() == 1 ? m.getFirst() : null;
                }
                unresolved.add(t);
                if (!seen.add(t)) {
                    problems.add("MIG instance " + t + " is listed twice: ranks meant for two devices would share one, and CUDA may"
                            + " refuse the list");
                    continue;
                }
                entries.add(new Entry(t, parent, true));
                continue;
            } else {
                problems.add("entry '" + t + "' is neither an index, GPU-<uuid> nor MIG-<uuid>" + rest);
                break;
            }
            if (!seen.add(g.pci().address())) {
                problems.add("GPU " + g.pci().address() + " is listed twice ('" + t + "'): ranks meant for two GPUs would share one,"
                        + " and CUDA may refuse the list");
                continue;
            }
            visible.add(g);
            entries.add(new Entry(t, g, false));
        }
        return new CudaVisibleDevices(raw, visible, problems, unresolved, entries);
    }
}
