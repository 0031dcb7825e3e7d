package org.jccl.internal.topo;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.jccl.internal.topo.Topology.Gpu;

/**
 * The GPUs a process sees after {@code CUDA_VISIBLE_DEVICES}, as CUDA reads the variable: a comma
 * list of indices (into the driver's order, which is PCI order with {@code CUDA_DEVICE_ORDER=PCI_BUS_ID}
 * and on hosts of identical GPUs), {@code GPU-<uuid>} (a unique prefix is enough) or
 * {@code MIG-<uuid>}; CUDA stops at the first entry that is invalid and ignores the rest.
 *
 * @param raw the variable's value, null when unset
 * @param visible the visible GPUs in CUDA's order (CUDA device 0 first); MIG and unresolvable UUID entries are not in it
 * @param problems what makes the value wrong (duplicates, out-of-range indices, unknown UUIDs, garbage), each one sentence
 * @param unresolved entries that could not be checked (UUIDs without NVML, MIG instances)
 */
public record CudaVisibleDevices(String raw, List<Gpu> visible, List<String> problems, List<String> unresolved) {

    public CudaVisibleDevices {
        visible = List.copyOf(visible);
        problems = List.copyOf(problems);
        unresolved = List.copyOf(unresolved);
    }

    /** Resolves {@code raw} against the GPUs of {@code topo} (in PCI order). */
    public static CudaVisibleDevices resolve(Topology topo, String raw) {
        List<Gpu> all = topo.gpus();
        if (raw == null) {
            return new CudaVisibleDevices(null, all, List.of(), List.of());
        }
        List<Gpu> visible = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        List<String> unresolved = new ArrayList<>();
        Set<String> seen = new LinkedHashSet<>();
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
                List<Gpu> m = all.stream().filter(x -> !x.uuid().isEmpty() && x.uuid().startsWith(t)).toList();
                if (all.stream().allMatch(x -> x.uuid().isEmpty())) {
                    unresolved.add(t);
                    continue;
                }
                if (m.size() != 1) {
                    problems.add("entry '" + t + "' " + (m.isEmpty() ? "matches no GPU's UUID" : "matches " + m.size() + " GPUs' UUIDs")
                            + rest);
                    break;
                }
                g = m.getFirst();
            } else if (t.startsWith("MIG-")) {
                unresolved.add(t);
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
        }
        return new CudaVisibleDevices(raw, visible, problems, unresolved);
    }
}
