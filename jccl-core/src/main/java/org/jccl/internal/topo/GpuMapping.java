package org.jccl.internal.topo;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jccl.InvalidUsageException;

/**
 * Which GPU a process drives: the one rule that the runtime (jccl-cuda's {@code Cuda.deviceFor},
 * {@code jccl perf --device cuda}), {@code jccl doctor}, the INIT line's GPU and NIC, and
 * {@code jccl run}'s CPU binding all use, so they always agree. In order:
 * <ol>
 *   <li>an explicit device wins: the program's argument, or {@code JCCL_CUDA_DEVICE} (an index into the
 *       GPUs this process sees, or a UUID or unique prefix of one, {@code GPU-...} / {@code MIG-...});</li>
 *   <li>a process that sees exactly one GPU uses it (Slurm's {@code --gpus-per-task=1}, Kubernetes'
 *       device plugin, {@code CUDA_VISIBLE_DEVICES=$LOCAL_RANK} scripts);</li>
 *   <li>a process that sees at least as many GPUs as there are ranks on its host takes GPU
 *       number local rank of those it sees (every rank sees them all, in the same order);</li>
 *   <li>anything else is an error naming the local rank, the local size, the visible GPUs and
 *       {@code CUDA_VISIBLE_DEVICES}, with the fixes.</li>
 * </ol>
 * Every rank then publishes its GPU in a {@link Claim}; all ranks check the same gathered table with
 * {@link #conflicts}, so two ranks of one host on one GPU fail on every rank with the same message.
 *
 * <p>Pure functions: the runtime passes what CUDA enumerates (cuDeviceGetUuid, the PCI bus id), the
 * doctor and the launcher what {@link CudaVisibleDevices} reads from sysfs ({@link #devices}).
 */
public final class GpuMapping {

    /** The setting that names a device explicitly. */
    public static final String SETTING = "JCCL_CUDA_DEVICE";

    private GpuMapping() {
    }

    /**
     * One GPU as the process sees it.
     *
     * @param ordinal CUDA's device number in this process (0 = the first that CUDA_VISIBLE_DEVICES leaves visible)
     * @param busId PCI bus id, lower case ({@code 0000:1b:00.0}), empty when unknown (a UUID entry without NVML)
     * @param uuid {@code GPU-...} or {@code MIG-...}, empty when unknown (sysfs without NVML)
     */
    public record Device(int ordinal, String busId, String uuid) {
        public Device {
            busId = busId == null || busId.isBlank() ? "" : Topology.normaliseBusId(busId);
            uuid = uuid == null ? "" : uuid.trim();
        }

        /** "CUDA device 1 (0000:14:00.0, GPU-5e0f...)". */
        public String describe() {
            return "CUDA device " + ordinal + " (" + identity() + ")";
        }

        /** "0000:14:00.0, GPU-5e0f..." with what is known. */
        public String identity() {
            String id = busId.isEmpty() ? "" : busId;
            if (!uuid.isEmpty()) {
                id = id.isEmpty() ? uuid : id + ", " + uuid;
            }
            return id.isEmpty() ? "bus id and UUID unknown" : id;
        }
    }

    /** Why a process drives the GPU it drives. */
    public enum Reason {
        /** The program passed the device. */
        ARGUMENT,
        /** {@code JCCL_CUDA_DEVICE}. */
        SETTING,
        /** It is the only GPU the process sees. */
        ONLY_VISIBLE,
        /** GPU number local rank of those the process sees. */
        LOCAL_RANK
    }

    /**
     * The GPU chosen and why.
     *
     * @param device the GPU
     * @param reason which rule chose it
     * @param why the rule in words, e.g. "by local rank 2 of 4" or "JCCL_CUDA_DEVICE=GPU-5e0f"
     */
    public record Choice(Device device, Reason reason, String why) {
    }

    /**
     * A choice or the reason there is none.
     *
     * @param choice the GPU, null on error
     * @param error what is wrong and how to fix it, null when there is a choice
     */
    public record Result(Choice choice, String error) {
        public boolean ok() {
            return choice != null;
        }

        /** The choice, or an {@link InvalidUsageException} with the error. */
        public Choice orThrow() {
            if (choice == null) {
                throw new InvalidUsageException(error);
            }
            return choice;
        }
    }

    /**
     * The devices a process with {@code CUDA_VISIBLE_DEVICES} (as {@code cvd} read it) sees, for the
     * doctor and the launcher: resolved entries carry bus id and (with NVML) UUID; a UUID entry
     * that sysfs cannot place carries its text as UUID; a MIG instance its name.
     */
    public static List<Device> devices(CudaVisibleDevices cvd) {
        List<Device> out = new ArrayList<>();
        List<CudaVisibleDevices.Entry> entries = cvd.entries();
        for (int i = 0; i < entries.size(); i++) {
            CudaVisibleDevices.Entry e = entries.get(i);
            String bus = e.gpu() == null ? "" : e.gpu().pci().address();
            String uuid;
            if (e.mig()) {
                uuid = e.text();
            } else if (e.gpu() != null) {
                uuid = e.gpu().uuid();
            } else {
                uuid = e.text().startsWith("GPU-") ? e.text() : "";
            }
            out.add(new Device(i, bus, uuid));
        }
        return out;
    }

    /**
     * The GPU of a process.
     *
     * @param visible the GPUs it sees, CUDA device 0 first
     * @param cudaDevice {@code JCCL_CUDA_DEVICE}, null or blank when unset
     * @param localRank its rank among the job's processes on its host, -1 when unknown
     * @param localSize the number of those processes, -1 when unknown
     * @param cvd its {@code CUDA_VISIBLE_DEVICES}, null when unset (for messages)
     */
    public static Result choose(List<Device> visible, String cudaDevice, int localRank, int localSize, String cvd) {
        String who = who(localRank, localSize);
        int n = visible.size();
        String seen = n + " GPU" + (n == 1 ? "" : "s") + (n == 0 ? "" : " (" + listing(visible) + ")") + " with " + cvdText(cvd);
        if (cudaDevice != null && !cudaDevice.isBlank()) {
            String v = cudaDevice.trim();
            String setting = SETTING + "=" + v;
            if (v.matches("\\d+")) {
                long idx = Long.parseLong(v.length() > 9 ? v.substring(0, 9) : v);
                if (idx < n) {
                    return ok(visible.get((int) idx), Reason.SETTING, setting);
                }
                return error(setting + " names CUDA device " + v + ", but " + who + " sees " + seen + ": the index counts the GPUs"
                        + " that CUDA_VISIBLE_DEVICES leaves visible, from 0. Fix: give an index below " + n + ", name the GPU by its"
                        + " UUID (nvidia-smi -L), or unset " + SETTING);
            }
            String p = v.toLowerCase(Locale.ROOT);
            List<Device> m = visible.stream().filter(d -> !d.uuid().isEmpty() && d.uuid().toLowerCase(Locale.ROOT).startsWith(p)).toList();
            if (m.size() == 1) {
                return ok(m.getFirst(), Reason.SETTING, setting);
            }
            if (m.size() > 1) {
                return error(setting + " matches " + m.size() + " of the GPUs " + who + " sees (" + listing(m) + "). Fix: give more of"
                        + " the UUID, so that it names one GPU (nvidia-smi -L)");
            }
            boolean unknown = visible.stream().anyMatch(d -> d.uuid().isEmpty());
            return error(setting + " matches no GPU that " + who + " sees: " + seen + (unknown ? " (UUIDs not known here)" : "")
                    + ". Fix: name a GPU this process sees (nvidia-smi -L lists the UUIDs), give its index among them, or unset "
                    + SETTING + " (a UUID that CUDA_VISIBLE_DEVICES hides cannot be used)");
        }
        if (n == 0) {
            return error(who + " sees no GPU (" + cvdText(cvd) + "). Fix: unset CUDA_VISIBLE_DEVICES or list this rank's GPU in it;"
                    + " nvidia-smi shows the GPUs of the host");
        }
        if (n == 1) {
            return ok(visible.getFirst(), Reason.ONLY_VISIBLE, "the only GPU this process sees");
        }
        String fixes = "give each rank its own GPU (CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK in the rank's environment, srun"
                + " --gpus-per-task=1, one GPU per Kubernetes pod), make as many GPUs as there are ranks on the host visible to every"
                + " rank, or name the GPU per rank with " + SETTING;
        if (localRank < 0) {
            return error("the local rank of this process is unknown and it sees " + seen + ", so the GPU to drive cannot be"
                    + " chosen. Fix: start it with a launcher that sets the local rank (jccl run and torchrun do; mpirun and srun"
                    + " too, or set JCCL_LOCAL_RANK), or " + fixes);
        }
        if (localSize > 0 && n < localSize) {
            return error(who + " has no GPU of its own: it sees " + seen + " for " + localSize + " ranks on this host; a process must"
                    + " see exactly one GPU, or at least as many GPUs as there are ranks on its host (local rank r then takes CUDA"
                    + " device r). Fix: " + fixes + ", or start at most " + n + " ranks per host");
        }
        if (localRank >= n) {
            return error(who + " has no GPU of its own: it sees " + seen + ", and local rank r takes CUDA device r. Fix: " + fixes);
        }
        return ok(visible.get(localRank), Reason.LOCAL_RANK, "by local rank " + localRank + (localSize > 0 ? " of " + localSize : ""));
    }

    private static Result ok(Device d, Reason r, String why) {
        return new Result(new Choice(d, r, why), null);
    }

    private static Result error(String message) {
        return new Result(null, message);
    }

    static String who(int localRank, int localSize) {
        if (localRank < 0) {
            return "this process";
        }
        return "local rank " + localRank + (localSize > 0 ? " of " + localSize : "");
    }

    /** "CUDA_VISIBLE_DEVICES=3,2" or "CUDA_VISIBLE_DEVICES unset". */
    public static String cvdText(String cvd) {
        return cvd == null ? "CUDA_VISIBLE_DEVICES unset" : "CUDA_VISIBLE_DEVICES=" + cvd;
    }

    /** "0: 0000:13:00.0 GPU-..., 1: ..." (at most 8). */
    static String listing(List<Device> devices) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < devices.size() && i < 8; i++) {
            Device d = devices.get(i);
            sb.append(i == 0 ? "" : "; ").append(d.ordinal()).append(": ").append(d.identity());
        }
        if (devices.size() > 8) {
            sb.append("; ... ").append(devices.size() - 8).append(" more");
        }
        return sb.toString();
    }

    // ------------------------------------------------------------------ the gathered table

    /**
     * What one rank publishes at the creation of a GPU communicator, before any memory is exchanged.
     *
     * @param rank its rank in the communicator
     * @param hostKey its host identity: a digest of the host communicator's host hash (which honours JCCL_HOSTID)
     * @param host its host name (for messages)
     * @param pid its process id
     * @param localRank its local rank, -1 when unknown
     * @param device its GPU
     * @param cvd its CUDA_VISIBLE_DEVICES, null when unset
     * @param why why it drives that GPU ({@link Choice#why()}, or "given by the program")
     */
    public record Claim(int rank, String hostKey, String host, long pid, int localRank, Device device, String cvd, String why) {

        /** Bytes of one encoded claim (fixed, for an all-gather). */
        public static final int BYTES = 1024;
        private static final int VERSION = 1;

        /** A claim whose host key is derived from {@code hostHash}. */
        public static Claim of(int rank, String hostHash, String host, long pid, int localRank, Device device, String cvd, String why) {
            return new Claim(rank, GpuMapping.hostKey(hostHash), host, pid, localRank, device, cvd, why);
        }

        /** The fixed-size record ({@value #BYTES} bytes, little-endian; strings are cut to fit). */
        public byte[] encode() {
            byte[] out = new byte[BYTES];
            ByteBuffer b = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(VERSION);
            b.putLong(pid);
            b.putInt(device.ordinal());
            b.putInt(localRank);
            b.put(HexFormat.of().parseHex(hostKey));
            b.put((byte) (cvd == null ? 0 : 1));
            put(b, host, 128);
            put(b, device.busId(), 32);
            put(b, device.uuid(), 96);
            put(b, cvd == null ? "" : cvd, 480);
            put(b, why, 220);
            return out;
        }

        /** The claim of rank {@code rank} at {@code offset} of a gathered table. */
        public static Claim decode(byte[] table, int offset, int rank) {
            ByteBuffer b = ByteBuffer.wrap(table, offset, BYTES).order(ByteOrder.LITTLE_ENDIAN);
            int version = b.getInt();
            if (version != VERSION) {
                throw new IllegalStateException("rank " + rank + " published a GPU claim of version " + version + ", this rank reads"
                        + " version " + VERSION + ": every rank must run the same jccl");
            }
            long pid = b.getLong();
            int ordinal = b.getInt();
            int localRank = b.getInt();
            byte[] key = new byte[16];
            b.get(key);
            boolean hasCvd = b.get() != 0;
            String host = get(b);
            String bus = get(b);
            String uuid = get(b);
            String cvd = get(b);
            String why = get(b);
            return new Claim(rank, HexFormat.of().formatHex(key), host, pid, localRank, new Device(ordinal, bus, uuid),
                    hasCvd ? cvd : null, why);
        }

        /** The claims of a gathered table of {@code n} ranks. */
        public static List<Claim> decodeAll(byte[] table, int n) {
            List<Claim> out = new ArrayList<>(n);
            for (int q = 0; q < n; q++) {
                out.add(decode(table, q * BYTES, q));
            }
            return out;
        }

        /** "rank 1 (host a, pid 77, local rank 1) as CUDA device 0 (CUDA_VISIBLE_DEVICES=2; the only GPU this process sees)". */
        String describe() {
            return "rank " + rank + " (host " + host + (pid > 0 ? ", pid " + pid : "") + (localRank >= 0 ? ", local rank " + localRank : "")
                    + ") as CUDA"
                    + " device " + device.ordinal() + " (" + cvdText(cvd) + "; " + why + ")";
        }

        private static void put(ByteBuffer b, String s, int max) {
            byte[] u = (s == null ? "" : s).getBytes(StandardCharsets.UTF_8);
            int len = Math.min(u.length, max);
            b.putShort((short) len);
            b.put(u, 0, len);
        }

        private static String get(ByteBuffer b) {
            int len = b.getShort() & 0xffff;
            byte[] u = new byte[len];
            b.get(u);
            return new String(u, StandardCharsets.UTF_8);
        }
    }

    /** 16 bytes of SHA-256 of a host hash, hex: equal hosts, equal keys. */
    public static String hostKey(String hostHash) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(hostHash.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(d, 0, 16);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 unavailable", e);
        }
    }

    /**
     * Ranks of one host that claim one GPU (same UUID, or the same bus id where a UUID is unknown),
     * as the message every rank raises, or null when every rank of a host has a GPU of its own.
     * A pure function of the table, so all ranks reach the same verdict.
     */
    public static String conflicts(List<Claim> table) {
        Map<String, List<Claim>> byGpu = new LinkedHashMap<>();
        for (Claim c : table) {
            String id = !c.device().uuid().isEmpty() ? c.device().uuid().toLowerCase(Locale.ROOT) : c.device().busId();
            if (id.isEmpty()) {
                continue;
            }
            byGpu.computeIfAbsent(c.hostKey() + "/" + id, k -> new ArrayList<>()).add(c);
        }
        List<String> shared = new ArrayList<>();
        for (List<Claim> group : byGpu.values()) {
            if (group.size() < 2) {
                continue;
            }
            Claim first = group.getFirst();
            StringBuilder sb = new StringBuilder();
            List<String> ranks = group.stream().map(c -> Integer.toString(c.rank())).toList();
            sb.append(ranks.size() == 2 ? "ranks " + ranks.get(0) + " and " + ranks.get(1)
                    : "ranks " + String.join(", ", ranks.subList(0, ranks.size() - 1)) + " and " + ranks.getLast());
            sb.append(" are on one GPU of host ").append(first.host()).append(", ").append(first.device().identity()).append(": ");
            for (int i = 0; i < group.size(); i++) {
                sb.append(i == 0 ? "" : ", ").append(group.get(i).describe());
            }
            shared.add(sb.toString());
        }
        if (shared.isEmpty()) {
            return null;
        }
        return "two ranks on one GPU: " + String.join("; ", shared) + ". Every rank needs a GPU of its own (NCCL fails or hangs"
                + " here). Fix: give each rank its own GPU (CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK or $LOCAL_RANK in the rank's"
                + " environment, srun --gpus-per-task=1), or leave CUDA_VISIBLE_DEVICES the same for every rank of a host so that"
                + " local rank r takes GPU r; `jccl doctor --cuda-visible-devices-per-rank` checks a layout before the job";
    }
}
