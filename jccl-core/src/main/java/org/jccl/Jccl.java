package org.jccl;

import java.util.List;
import java.util.Objects;
import org.jccl.internal.log.Log;
import org.jccl.internal.runtime.CommunicatorFactory;

/**
 * Entry point: creates communicators.
 *
 * <pre>{@code
 * // every rank, with the launcher's environment (jccl run, torchrun, mpirun, srun):
 * try (Communicator comm = Jccl.init(Config.fromEnvironment())) {
 *     comm.allReduce(gradients, ReduceOp.SUM);
 * }
 * }</pre>
 */
public final class Jccl {
    private Jccl() {
    }

    /** jccl's version. */
    public static String version() {
        String v = Jccl.class.getPackage().getImplementationVersion();
        return v != null ? v : "0.2.0";
    }

    /**
     * Joins the job named by {@code id} as {@code rank} of {@code size}; blocks until every rank has
     * joined or {@code JCCL_INIT_TIMEOUT} expires (then the error lists the ranks that never arrived).
     *
     * @throws IllegalArgumentException for a rank outside [0, size) or size &lt; 1
     * @throws JcclException when the job cannot be formed (timeout, wrong secret, duplicate rank, size mismatch)
     */
    public static Communicator init(JcclId id, int rank, int size, Config config) {
        Objects.requireNonNull(id, "id");
        Objects.requireNonNull(config, "config");
        checkRank(rank, size);
        prepare(config, rank);
        return CommunicatorFactory.init(id, rank, size, config, false);
    }

    /** {@link #init(JcclId, int, int, Config)} with the settings of the environment. */
    public static Communicator init(JcclId id, int rank, int size) {
        return init(id, rank, size, Config.fromEnvironment());
    }

    /**
     * Joins the job described by the launcher's environment (see {@link Config#fromEnvironment()}):
     * {@code JCCL_COMM_ID}/{@code JCCL_RANK}/{@code JCCL_WORLD_SIZE}/{@code JCCL_AUTH_TOKEN}, torchrun's
     * {@code MASTER_ADDR}/{@code MASTER_PORT}/{@code RANK}/{@code WORLD_SIZE}, Open MPI's
     * {@code OMPI_COMM_WORLD_*} or Slurm's {@code SLURM_*}. Rank 0 starts the bootstrap root and makes
     * its address known through the launcher's channel (a fixed address, torchrun's store, ...); the
     * job secret is {@code JCCL_AUTH_TOKEN}, else one the launcher hands out, else the per-user secret
     * file ({@code ~/.jccl/secret}, made on first use; see docs/DEPLOY.md, "Secrets and trust").
     *
     * @throws ConfigException when no launcher convention is present, naming what is missing
     */
    public static Communicator init(Config config) {
        Objects.requireNonNull(config, "config");
        Config.Launch launch = config.launch().orElseThrow(() -> new ConfigException(
                "no job identity in the environment: set JCCL_COMM_ID=host:port, JCCL_RANK, JCCL_WORLD_SIZE and"
                        + " JCCL_AUTH_TOKEN (or start the program with `jccl run -np N`, torchrun, mpirun or srun)"));
        checkRank(launch.rank(), launch.size());
        prepare(config, launch.rank());
        return CommunicatorFactory.init(launch, config);
    }

    /**
     * Creates {@code n} ranks as threads of this JVM: returns one communicator per rank, index =
     * rank. Each must be driven by its own thread (a blocking collective waits for the others).
     * The ranks talk through the in-JVM transport unless {@code JCCL_LOCAL_DISABLE=1}, in which
     * case they use TCP over loopback.
     */
    public static List<Communicator> initLocal(int n, Config config) {
        if (n < 1) {
            throw new IllegalArgumentException("n must be >= 1, got " + n);
        }
        prepare(Objects.requireNonNull(config, "config"), 0);
        return CommunicatorFactory.initLocal(n, config);
    }

    /** {@link #initLocal(int, Config)} with the settings of the environment. */
    public static List<Communicator> initLocal(int n) {
        return initLocal(n, Config.fromEnvironment());
    }

    /** Every bad setting is reported before anything starts, naming where it was set; then the version line (JCCL_DEBUG set). */
    private static void prepare(Config config, int rank) {
        config.validate();
        Log.version(rank, "jccl " + version() + " (Java " + Runtime.version() + ")");
    }

    private static void checkRank(int rank, int size) {
        if (size < 1) {
            throw new IllegalArgumentException("size must be >= 1, got " + size);
        }
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " is outside [0, " + size + ")");
        }
    }
}
