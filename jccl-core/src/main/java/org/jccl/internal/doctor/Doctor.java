package org.jccl.internal.doctor;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.topo.CudaVisibleDevices;
import org.jccl.internal.topo.GpuProbe;
import org.jccl.internal.topo.Topology;

/**
 * {@code jccl doctor}: preflight checks of a host for a job of N local ranks, each PASS, WARN or
 * FAIL (or SKIP, with the reason) with the fix in one sentence. Every check is a pure function of
 * a {@link Topology}, the environment, N and the interface list, so each is tested on a synthetic
 * host (docs/DOCTOR.md maps the field reports to the checks).
 *
 * <p>Exit code: 0 when nothing warns or fails, 1 with warnings, 2 with a failure.
 *
 * <p>This class holds the input, the findings and their rendering, and runs the checks in order;
 * the checks themselves are in {@link HostChecks} (container, shared memory, limits, interfaces,
 * variables), {@link RdmaChecks} and {@link GpuChecks}, over what {@link Checks} shares.
 */
public final class Doctor {

    /** Outcome of one check, mildest first. */
    public enum Status { PASS, SKIP, WARN, FAIL }

    /**
     * One check's outcome.
     *
     * @param id short stable name ({@code shm}, {@code gpudirect}, ...)
     * @param status PASS, SKIP, WARN or FAIL
     * @param message what was found, with the numbers
     * @param fix one sentence saying what to do (empty for PASS and SKIP)
     */
    public record Finding(String id, Status status, String message, String fix) {
        public Finding {
            Objects.requireNonNull(id, "id");
            Objects.requireNonNull(status, "status");
            fix = fix == null ? "" : fix;
        }
    }

    /**
     * All findings of one run.
     *
     * @param host the host's name
     * @param localRanks the N checked for
     * @param findings in check order
     */
    public record Report(String host, int localRanks, List<Finding> findings) {
        public Report {
            findings = List.copyOf(findings);
        }

        /** 0 pass, 1 warnings, 2 failures. */
        public int exitCode() {
            Status worst = findings.stream().map(Finding::status).max(Enum::compareTo).orElse(Status.PASS);
            return worst == Status.FAIL ? 2 : worst == Status.WARN ? 1 : 0;
        }

        /** The finding called {@code id}. */
        public Finding get(String id) {
            return findings.stream().filter(f -> f.id().equals(id)).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("no check " + id));
        }

        /** The report as the terminal shows it. */
        public String text() {
            StringBuilder sb = new StringBuilder();
            sb.append("jccl doctor: ").append(localRanks).append(" local rank(s) on ").append(host.isEmpty() ? "this host" : host)
                    .append('\n');
            for (Finding f : findings) {
                sb.append(String.format("%-5s %-20s %s%n", f.status(), f.id(), f.message()));
                if (!f.fix().isEmpty()) {
                    sb.append(String.format("%-26s fix: %s%n", "", f.fix()));
                }
            }
            Map<Status, Integer> n = counts();
            sb.append(String.format("%d pass, %d warn, %d fail, %d skipped (exit code %d)%n", n.get(Status.PASS), n.get(Status.WARN),
                    n.get(Status.FAIL), n.get(Status.SKIP), exitCode()));
            return sb.toString();
        }

        private Map<Status, Integer> counts() {
            Map<Status, Integer> n = new LinkedHashMap<>();
            for (Status s : Status.values()) {
                n.put(s, 0);
            }
            findings.forEach(f -> n.merge(f.status(), 1, Integer::sum));
            return n;
        }

        /** The report as {@code jccl doctor --json} prints it. */
        public Map<String, Object> toJson() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("host", host);
            m.put("local_ranks", localRanks);
            m.put("exit_code", exitCode());
            List<Object> l = new ArrayList<>();
            for (Finding f : findings) {
                Map<String, Object> o = new LinkedHashMap<>();
                o.put("id", f.id());
                o.put("status", f.status().name());
                o.put("message", f.message());
                o.put("fix", f.fix());
                l.add(o);
            }
            m.put("checks", l);
            return m;
        }
    }

    /**
     * What the checks look at.
     *
     * @param topo the host
     * @param env the environment of the job (the settings and CUDA_VISIBLE_DEVICES are read from it)
     * @param localRanks N, the ranks the job will start on this host (at least 1)
     * @param interfaces the interfaces with their addresses (for JCCL_SOCKET_IFNAME), e.g. {@link Interfaces#systemInterfaces()}
     * @param gpuProbe NVML for the P2P check, or {@link GpuProbe#absent}
     * @param perRankCvd each local rank's CUDA_VISIBLE_DEVICES (null entry: unset) when the launcher gives each its own, N
     *        entries; null when every rank has {@code env}'s
     * @param localRank the one local rank this doctor runs as (it was started inside a rank, whose environment says which),
     *        or -1 to check every local rank
     */
    public record Input(Topology topo, Map<String, String> env, int localRanks, List<Interfaces.Nic> interfaces, GpuProbe gpuProbe,
                        List<String> perRankCvd, int localRank) {
        public Input {
            env = Map.copyOf(env);
            interfaces = List.copyOf(interfaces);
            if (localRanks < 1) {
                throw new IllegalArgumentException("local ranks must be at least 1, not " + localRanks);
            }
            if (perRankCvd != null) {
                if (perRankCvd.size() != localRanks) {
                    throw new IllegalArgumentException(perRankCvd.size() + " per-rank CUDA_VISIBLE_DEVICES values for " + localRanks
                            + " local ranks: give one per rank");
                }
                perRankCvd = java.util.Collections.unmodifiableList(new ArrayList<>(perRankCvd));
            }
            if (localRank >= localRanks) {
                throw new IllegalArgumentException("local rank " + localRank + " is not below the " + localRanks + " local ranks");
            }
        }

        /** Every rank with {@code env}'s CUDA_VISIBLE_DEVICES, every rank checked. */
        public Input(Topology topo, Map<String, String> env, int localRanks, List<Interfaces.Nic> interfaces, GpuProbe gpuProbe) {
            this(topo, env, localRanks, interfaces, gpuProbe, null, -1);
        }
    }

    /** Launchers' local-rank variables, innermost convention first (as LaunchEnvironment orders them). */
    static final List<String> LOCAL_RANK_VARIABLES = List.of("JCCL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID");

    /**
     * The local rank the environment gives this process (a doctor started inside a rank), with the
     * variable that said so, or null when none does.
     */
    public static Map.Entry<String, Integer> localRankFromEnv(Map<String, String> env) {
        for (String k : LOCAL_RANK_VARIABLES) {
            String v = env.get(k);
            if (v != null && v.trim().matches("\\d{1,6}")) {
                return Map.entry(k, Integer.parseInt(v.trim()));
            }
        }
        return null;
    }

    /**
     * N when the user gives none: the launcher's local size if the environment has one, else the
     * visible GPUs, else the CPUs.
     */
    public static int defaultLocalRanks(Topology topo, Map<String, String> env) {
        for (String k : List.of("JCCL_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")) {
            String v = env.get(k);
            if (v != null && v.trim().matches("\\d+") && Integer.parseInt(v.trim()) > 0) {
                return Integer.parseInt(v.trim());
            }
        }
        int gpus = CudaVisibleDevices.resolve(topo, env.get("CUDA_VISIBLE_DEVICES")).visible().size();
        return gpus > 0 ? gpus : Math.max(1, topo.cpus());
    }

    /** Runs every check. */
    public static Report run(Input in) {
        Config config = Config.fromEnvironment(in.env());
        HostChecks host = new HostChecks(in, config);
        RdmaChecks rdma = new RdmaChecks(in, config);
        GpuChecks gpu = new GpuChecks(in, config);
        List<Finding> out = new ArrayList<>();
        guard(out, "container", host::container);
        guard(out, "shm", host::shm);
        guard(out, "memlock", host::memlock);
        guard(out, "open-files", host::openFiles);
        guard(out, "threads", host::threads);
        guard(out, "listen-backlog", host::listenBacklog);
        guard(out, "gpudirect-rdma", rdma::gpuDirect);
        guard(out, "rdma-ports", rdma::rdmaPorts);
        guard(out, "rdma-link-layer", rdma::linkLayer);
        guard(out, "roce-gid", rdma::roceGid);
        guard(out, "ib-hca", rdma::ibHca);
        guard(out, "nic-assignment", rdma::nicAssignment);
        guard(out, "socket-ifname", host::socketIfname);
        guard(out, "cuda-visible-devices", gpu::cudaVisibleDevices);
        guard(out, "gpu-p2p", gpu::p2p);
        guard(out, "env", host::env);
        return new Report(in.topo().hostname(), in.localRanks(), out);
    }

    /** A check that throws (a bad setting it needed) is a FAIL naming the error, never a crash of the doctor. */
    private static void guard(List<Finding> out, String id, Supplier<Finding> check) {
        try {
            out.add(check.get());
        } catch (ConfigException e) {
            out.add(new Finding(id, Status.FAIL, "cannot check: " + e.getMessage(), "correct the setting named above"));
        } catch (RuntimeException e) {
            out.add(new Finding(id, Status.SKIP, "could not be checked: " + e, ""));
        }
    }

    /** A size to suggest: twice the need, rounded up to a power of two, at least 1g. */
    public static String suggestSize(long need) {
        long want = Math.max(1L << 30, Long.highestOneBit(Math.max(1, 2 * need - 1)) << 1);
        return want % (1L << 30) == 0 ? (want >> 30) + "g" : (want >> 20) + "m";
    }
}
