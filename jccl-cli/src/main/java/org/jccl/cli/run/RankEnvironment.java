package org.jccl.cli.run;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The job identity each rank of a local job gets: a communicator address on a free loopback port,
 * a fresh secret, and the JCCL_* variables of its rank, with the variables of other launchers
 * removed so that a rank started inside such a job cannot mistake that job's identity for its own.
 */
final class RankEnvironment {

    /**
     * Variables of other launcher conventions. jccl reads them when the JCCL_* ones are absent, so an
     * inherited set (jccl run started inside an mpirun or Slurm job) would describe the wrong job.
     */
    static final Set<String> CONFLICTING = Set.of(
            "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
            "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "NCCL_COMM_ID");

    /** Prefixes of conflicting variables (all of Open MPI's per-rank identity). */
    static final List<String> CONFLICTING_PREFIXES = List.of("OMPI_COMM_WORLD_");

    private static final SecureRandom RANDOM = new SecureRandom();

    private RankEnvironment() {
    }

    /** A fresh job secret: 16 random bytes as 32 lower-case hex digits. */
    static String newToken() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    /**
     * A loopback port that was free a moment ago, for rank 0's bootstrap root. Another process could take
     * it before rank 0 binds it; rank 0 then fails with "address in use" and the job stops (fail fast).
     */
    static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot find a free TCP port on 127.0.0.1 for the bootstrap root: " + e.getMessage()
                    + "; check that the loopback interface is up", e);
        }
    }

    /** Applies the job identity of {@code rank} to {@code env} (a copy of the parent's environment). */
    static void apply(Map<String, String> env, String commId, String token, int rank, int np,
            Map<String, String> extraEnv) {
        env.keySet().removeIf(k -> CONFLICTING.contains(k) || CONFLICTING_PREFIXES.stream().anyMatch(k::startsWith));
        env.put("JCCL_COMM_ID", commId);
        env.put("JCCL_RANK", Integer.toString(rank));
        env.put("JCCL_WORLD_SIZE", Integer.toString(np));
        env.put("JCCL_LOCAL_RANK", Integer.toString(rank));
        env.put("JCCL_LOCAL_SIZE", Integer.toString(np));
        env.put("JCCL_AUTH_TOKEN", token);
        for (Map.Entry<String, String> e : extraEnv.entrySet()) {
            if (e.getValue() == null) {
                env.remove(e.getKey());
            } else {
                env.put(e.getKey(), e.getValue());
            }
        }
    }
}
