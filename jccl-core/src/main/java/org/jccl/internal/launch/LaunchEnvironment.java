package org.jccl.internal.launch;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.JcclId;
import org.jccl.internal.bootstrap.FixedAddressExchange;
import org.jccl.internal.bootstrap.RootExchange;
import org.jccl.internal.bootstrap.TorchStoreExchange;
import org.jccl.internal.config.JobSecret;
import org.jccl.internal.config.UserSecret;

/**
 * Reads the job identity (rank, world size, local rank, bootstrap root, secret) from the variables
 * that launchers already set, so a program started by {@code jccl run}, torchrun, mpirun or srun
 * needs no jccl-specific arguments. Conventions are tried in this order, and the first whose rank or
 * size variable is present is used:
 * <ol>
 *   <li><b>JCCL</b>: {@code JCCL_COMM_ID} (host:port; {@code NCCL_COMM_ID} is accepted too),
 *       {@code JCCL_RANK}, {@code JCCL_WORLD_SIZE}, optional {@code JCCL_LOCAL_RANK};</li>
 *   <li><b>torchrun</b>: {@code RANK}, {@code WORLD_SIZE}, optional {@code LOCAL_RANK}; root
 *       {@code MASTER_ADDR}:{@code MASTER_PORT} (or {@code JCCL_COMM_ID}, which wins when set, e.g.
 *       because torchrun's own store already holds {@code MASTER_PORT});</li>
 *   <li><b>Open MPI</b>: {@code OMPI_COMM_WORLD_RANK}, {@code OMPI_COMM_WORLD_SIZE}, optional
 *       {@code OMPI_COMM_WORLD_LOCAL_RANK};</li>
 *   <li><b>MVAPICH</b>: {@code MV2_COMM_WORLD_RANK}, {@code MV2_COMM_WORLD_SIZE}, optional
 *       {@code MV2_COMM_WORLD_LOCAL_RANK};</li>
 *   <li><b>PMI</b> (MPICH's and Intel MPI's Hydra {@code mpiexec}, {@code srun --mpi=pmi2}, Cray PALS):
 *       {@code PMI_RANK}, {@code PMI_SIZE}, optional {@code MPI_LOCALRANKID} (Hydra) else
 *       {@code PMI_LOCAL_RANK} (PALS);</li>
 *   <li><b>Slurm</b>: {@code SLURM_PROCID}, {@code SLURM_NTASKS} (else {@code SLURM_NPROCS}),
 *       optional {@code SLURM_LOCALID};</li>
 *   <li><b>PMIx</b> (a PMIx launcher that sets none of the above, e.g. PRRTE's {@code prterun}):
 *       {@code PMIX_RANK}; size and local rank from the PMIx server ({@code PMIX_JOB_SIZE},
 *       {@code PMIX_LOCAL_RANK}).</li>
 * </ol>
 * MPI launchers and Slurm set no rendezvous address. Unless {@code JCCL_COMM_ID} or
 * {@code MASTER_ADDR} is set (then that fixed address, {@code MASTER_PORT} defaulting to
 * {@value #DEFAULT_PORT}), rank 0's address comes from the launcher ({@link LauncherChannels}):
 * through its PMIx server (mpirun, {@code srun --mpi=pmix}), else from the Slurm step's node list and
 * a port derived from the job and step ids (plain {@code srun}); without either, the error names
 * what to set and why neither channel applied.
 * The secret is {@code JCCL_AUTH_TOKEN} when set, else the per-user secret file ({@link UserSecret},
 * {@code ~/.jccl/secret} or {@code JCCL_SECRET_FILE}); a launcher's own variables are never taken
 * for a secret (anyone who can list processes on the node sees them), and a job must not be
 * joinable by guessing a port. How rank 0's root address reaches the other ranks is the launch's
 * {@link RootExchange}.
 *
 * <p>The order matters where launchers nest: mpirun inside a Slurm allocation leaves the
 * allocation's {@code SLURM_*} variables in place, and torchrun under srun sets its own {@code RANK};
 * the innermost launcher's convention comes first.
 *
 * <p>A convention that is present but incomplete or invalid is an error that names every missing or
 * wrong variable and how to fix it, rather than a silent fallback to the next convention (which
 * would form a different job than the user asked for). Stateless.
 */
public final class LaunchEnvironment {

    /** The root port for Open MPI and Slurm when only {@code MASTER_ADDR} is set (torch.distributed's usual port). */
    public static final int DEFAULT_PORT = 29500;

    private static final String AUTH_TOKEN = "JCCL_AUTH_TOKEN";
    private static final String COMM_ID = "JCCL_COMM_ID";
    private static final String NCCL_COMM_ID = "NCCL_COMM_ID";
    /** Set by torchrun's agent: "True" when the agent serves a TCPStore at MASTER_ADDR:MASTER_PORT for the workers. */
    static final String AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE";

    /** How one launcher names rank, size and local rank, and how to pass a variable through it. */
    private enum Convention {
        JCCL("JCCL", "JCCL_RANK", "JCCL_WORLD_SIZE", null, "JCCL_LOCAL_RANK",
                " (`jccl run` sets it by itself; otherwise export the same value to every rank)"),
        TORCHRUN("torchrun", "RANK", "WORLD_SIZE", null, "LOCAL_RANK",
                " (export it before starting torchrun, which passes its environment on to every rank)"),
        OPEN_MPI("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", null, "OMPI_COMM_WORLD_LOCAL_RANK",
                " (mpirun -x JCCL_AUTH_TOKEN, srun --export=ALL,JCCL_AUTH_TOKEN=...)"),
        MVAPICH("MVAPICH", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", null, "MV2_COMM_WORLD_LOCAL_RANK",
                " (mpirun_rsh ... JCCL_AUTH_TOKEN=..., mpiexec -genv JCCL_AUTH_TOKEN ...)"),
        PMI("PMI", "PMI_RANK", "PMI_SIZE", null, "MPI_LOCALRANKID",
                " (mpiexec -genv JCCL_AUTH_TOKEN ..., srun --export=ALL,JCCL_AUTH_TOKEN=...)"),
        SLURM("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID",
                " (mpirun -x JCCL_AUTH_TOKEN, srun --export=ALL,JCCL_AUTH_TOKEN=...)"),
        /** Size and local rank come from the PMIx server, not from variables. */
        PMIX("PMIx", "PMIX_RANK", null, null, null, " (export it before starting the launcher)");

        final String label;
        final String rankVar;
        final String sizeVar;
        final String sizeFallbackVar;
        final String localVar;
        final String exportHint;

        Convention(String label, String rankVar, String sizeVar, String sizeFallbackVar, String localVar, String exportHint) {
            this.label = label;
            this.rankVar = rankVar;
            this.sizeVar = sizeVar;
            this.sizeFallbackVar = sizeFallbackVar;
            this.localVar = localVar;
            this.exportHint = exportHint;
        }

        boolean present(Map<String, String> env) {
            return env.containsKey(rankVar) || (sizeVar != null && env.containsKey(sizeVar))
                    || (sizeFallbackVar != null && env.containsKey(sizeFallbackVar));
        }

        /** The local-rank variable set in {@code env} (PMI: Hydra's MPI_LOCALRANKID, else Cray PALS' PMI_LOCAL_RANK), or null. */
        String localVarIn(Map<String, String> env) {
            if (localVar != null && env.containsKey(localVar)) {
                return localVar;
            }
            return this == PMI && env.containsKey("PMI_LOCAL_RANK") ? "PMI_LOCAL_RANK" : null;
        }

        String marker(Map<String, String> env) {
            if (env.containsKey(rankVar)) {
                return rankVar;
            }
            return env.containsKey(sizeVar) ? sizeVar : sizeFallbackVar;
        }
    }

    private LaunchEnvironment() {
    }

    /**
     * The job identity of the first launcher convention present in {@code env}, or empty when none is.
     *
     * @throws ConfigException when that convention is incomplete or has invalid values; the message
     *         names every variable involved and the fix
     */
    public static Optional<Config.Launch> detect(Map<String, String> env) {
        return detect(env, System.getProperty("user.home"));
    }

    /**
     * {@link #detect(Map)} with {@code userHome} as the home directory of the per-user secret file
     * ({@code <userHome>/.jccl/secret} unless {@code JCCL_SECRET_FILE} is set).
     */
    public static Optional<Config.Launch> detect(Map<String, String> env, String userHome) {
        Convention[] all = Convention.values();
        for (int i = 0; i < all.length; i++) {
            if (all[i].present(env)) {
                return Optional.of(read(all[i], env, userHome, later(all, i, env)));
            }
        }
        return Optional.empty();
    }

    /** The first later convention that is also present, for the hint "or unset X to use Y". */
    private static Convention later(Convention[] all, int i, Map<String, String> env) {
        for (int j = i + 1; j < all.length; j++) {
            if (env.containsKey(all[j].rankVar)) {
                return all[j];
            }
        }
        return null;
    }

    private static Config.Launch read(Convention c, Map<String, String> env, String userHome, Convention shadowed) {
        List<String> problems = new ArrayList<>();
        if (c == Convention.PMIX) {
            return readPmix(env, userHome, shadowed);
        }
        Integer size = number(env, c.sizeVar, c.sizeFallbackVar, "the number of ranks in the job", 1, problems);
        Integer rank = number(env, c.rankVar, null, "this process's rank, an integer from 0 to " + (size != null ? Integer.toString(size - 1) : c.sizeVar + "-1"), 0, problems);
        String localVar = c.localVarIn(env);
        Integer local = localVar != null ? number(env, localVar, null, "this process's rank among the ranks on its host",
                0, problems) : Integer.valueOf(-1);
        if (rank != null && size != null && rank >= size) {
            problems.add(c.rankVar + "=" + rank + " is not below " + sizeName(c, env) + "=" + size + ": ranks run from 0 to " + (size - 1)
                    + "; check the launcher's rank assignment");
        }
        if (local != null && size != null && local >= size) {
            problems.add(localVar + "=" + local + " is not below " + sizeName(c, env) + "=" + size + ": a local rank cannot exceed the"
                    + " number of ranks");
        }
        RootExchange exchange = exchange(c, env, rank == null ? 0 : rank, problems);
        JobSecret secret = secret(c, env, userHome, problems);
        if (!problems.isEmpty()) {
            String hint = shadowed == null ? "" : "; if the " + shadowed.label + " variables (" + shadowed.rankVar + " is set) describe"
                    + " the job you meant, unset " + c.marker(env) + " so they are used";
            throw new ConfigException(String.join("; ", problems) + " (launcher convention " + c.label + ", detected from "
                    + c.marker(env) + hint + ")");
        }
        return new Config.Launch(c.label, rank, size, local, exchange, secret);
    }

    /**
     * How rank 0's root address reaches the others. {@code JCCL_COMM_ID} (or {@code NCCL_COMM_ID})
     * always wins: a fixed address. Under torchrun with {@code TORCHELASTIC_USE_AGENT_STORE=True} the
     * agent's TCPStore at {@code MASTER_ADDR}:{@code MASTER_PORT} carries rank 0's address (that port
     * is the agent's); otherwise a fixed address ({@code MASTER_ADDR}:{@code MASTER_PORT}: under
     * torchrun without the agent store nobody holds it, as torch's own rank 0 would bind it), where
     * rank 0 also listens on the interface jccl selects.
     */
    private static RootExchange exchange(Convention c, Map<String, String> env, int rank, List<String> problems) {
        String commIdVar = env.containsKey(COMM_ID) ? COMM_ID : env.containsKey(NCCL_COMM_ID) ? NCCL_COMM_ID : null;
        String whyNoChannel = "";
        if (commIdVar == null && c != Convention.JCCL && c != Convention.TORCHRUN && !env.containsKey("MASTER_ADDR")) {
            LauncherChannels.Choice channel = LauncherChannels.find(c.label, env, rank, size(c, env));
            if (channel.exchange() != null) {
                return channel.exchange();
            }
            whyNoChannel = channel.whyNot();
        }
        int before = problems.size();
        InetSocketAddress root = root(c, env, problems);
        if (root == null) {
            if (!whyNoChannel.isEmpty() && problems.size() > before) {
                problems.set(problems.size() - 1, problems.getLast() + " (" + whyNoChannel + ")");
            }
            return null;
        }
        if (commIdVar == null && c == Convention.TORCHRUN && "True".equals(env.get(AGENT_STORE))) {
            // torchrun's agent serves a TCPStore at MASTER_ADDR:MASTER_PORT: never bind that port, publish through the store.
            return new TorchStoreExchange(root, env.get("MASTER_ADDR").trim() + ":" + masterPort(env), env.get("TORCHELASTIC_RUN_ID"),
                    env.get("TORCHELASTIC_RESTART_COUNT"), rank);
        }
        String given = commIdVar != null ? commIdVar + "=" + env.get(commIdVar).trim()
                : "MASTER_ADDR:MASTER_PORT=" + env.get("MASTER_ADDR").trim() + ":" + masterPort(env);
        String hostText = commIdVar != null ? hostOf(env.get(commIdVar)) : env.get("MASTER_ADDR").trim();
        return new FixedAddressExchange(root, given, true, hostText);
    }

    /** "node0" of "node0:29500", "fe80::1" of "[fe80::1]:29500". */
    private static String hostOf(String hostPort) {
        String t = hostPort.trim();
        if (t.startsWith("[")) {
            int close = t.indexOf(']');
            return close > 0 ? t.substring(1, close) : t;
        }
        int colon = t.lastIndexOf(':');
        return colon > 0 ? t.substring(0, colon) : t;
    }

    private static String masterPort(Map<String, String> env) {
        String port = env.get("MASTER_PORT");
        return port == null || port.isBlank() ? Integer.toString(DEFAULT_PORT) : port.trim();
    }

    /** The convention's size variable as a number, or -1 (already reported by {@link #number} when wrong). */
    private static int size(Convention c, Map<String, String> env) {
        String v = env.get(sizeName(c, env));
        try {
            return v == null ? -1 : Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /**
     * The PMIx convention: {@code PMIX_RANK} and a PMIx server, but none of the launchers' own
     * variables; the size and local rank are asked of the server ({@code PMIx_Init} is safe: the
     * environment names the server). The root address comes through PMIx as well, unless
     * {@code JCCL_COMM_ID} is set.
     */
    private static Config.Launch readPmix(Map<String, String> env, String userHome, Convention shadowed) {
        List<String> problems = new ArrayList<>();
        Integer rank = number(env, "PMIX_RANK", null, "this process's rank in its PMIx namespace", 0, problems);
        int size = -1;
        int local = -1;
        String unusable = Pmix.unavailable(env).orElse(null);
        if (unusable != null) {
            problems.add("PMIX_RANK is set but the job's size can only come from the PMIx server, and " + unusable + "; set JCCL_RANK,"
                    + " JCCL_WORLD_SIZE and JCCL_COMM_ID instead");
        } else if (rank != null) {
            try {
                Pmix p = Pmix.client(env);
                java.time.Duration t = java.time.Duration.ofSeconds(30);
                size = (int) p.getNumber(-1, Pmix.KEY_JOB_SIZE, t).orElse(-1);
                local = (int) p.getNumber(p.rank(), Pmix.KEY_LOCAL_RANK, t).orElse(-1);
                if (size < 1) {
                    problems.add("the PMIx server of namespace " + p.namespace() + " does not tell the job size (pmix.job.size)");
                } else if (rank >= size) {
                    problems.add("PMIX_RANK=" + rank + " is not below the job size " + size + " the PMIx server reports");
                }
            } catch (PmixException e) {
                problems.add("PMIX_RANK is set but the PMIx server cannot be asked for the job size: " + e.getMessage());
            }
        }
        RootExchange exchange = problems.isEmpty() ? exchange(Convention.PMIX, env, rank, size, problems) : null;
        JobSecret secret = secret(Convention.PMIX, env, userHome, problems);
        if (!problems.isEmpty()) {
            String hint = shadowed == null ? "" : "; if the " + shadowed.label + " variables (" + shadowed.rankVar + " is set) describe"
                    + " the job you meant, unset PMIX_RANK so they are used";
            throw new ConfigException(String.join("; ", problems) + " (launcher convention PMIx, detected from PMIX_RANK" + hint + ")");
        }
        return new Config.Launch(Convention.PMIX.label, rank, size, local, exchange, secret);
    }

    /** PMIx convention: JCCL_COMM_ID when set, else the PMIx channel (the only one it has). */
    private static RootExchange exchange(Convention c, Map<String, String> env, int rank, int size, List<String> problems) {
        String commIdVar = env.containsKey(COMM_ID) ? COMM_ID : env.containsKey(NCCL_COMM_ID) ? NCCL_COMM_ID : null;
        if (commIdVar != null) {
            InetSocketAddress root = hostPort(env.get(commIdVar), commIdVar, problems);
            return root == null ? null : new FixedAddressExchange(root, commIdVar + "=" + env.get(commIdVar).trim(), true);
        }
        LauncherChannels.Choice channel = LauncherChannels.find(c.label, env, rank, size);
        if (channel.exchange() == null) {
            problems.add("PMIx does not say where rank 0 is: " + channel.whyNot() + "; set JCCL_COMM_ID=<rank 0's host>:<port>");
        }
        return channel.exchange();
    }

    private static String sizeName(Convention c, Map<String, String> env) {
        return env.containsKey(c.sizeVar) || c.sizeFallbackVar == null ? c.sizeVar : c.sizeFallbackVar;
    }

    /** Parses an integer variable (or its fallback name) >= min; records a problem and returns null when missing or invalid. */
    private static Integer number(Map<String, String> env, String name, String fallback, String meaning, int min, List<String> problems) {
        String var = name;
        String v = env.get(name);
        if (v == null && fallback != null) {
            var = fallback;
            v = env.get(fallback);
        }
        if (v == null) {
            problems.add(name + " is not set: it must be " + meaning);
            return null;
        }
        String t = v.trim();
        if (t.isEmpty()) {
            problems.add(var + " is set but empty: it must be " + meaning);
            return null;
        }
        int x;
        try {
            x = Integer.parseInt(t);
        } catch (NumberFormatException e) {
            problems.add(var + "='" + v + "' is not a number: it must be " + meaning);
            return null;
        }
        if (x < min) {
            problems.add(var + "=" + x + " is not allowed: it must be " + meaning + (min > 0 ? " (at least " + min + ")" : " (not negative)"));
            return null;
        }
        return x;
    }

    private static InetSocketAddress root(Convention c, Map<String, String> env, List<String> problems) {
        String commIdVar = env.containsKey(COMM_ID) ? COMM_ID : env.containsKey(NCCL_COMM_ID) ? NCCL_COMM_ID : null;
        if (commIdVar != null) {
            return hostPort(env.get(commIdVar), commIdVar, problems);
        }
        if (c == Convention.JCCL) {
            problems.add(COMM_ID + " is not set: it must be host:port of the bootstrap root, which rank 0 starts (e.g. "
                    + COMM_ID + "=node0:" + DEFAULT_PORT + "), the same on every rank");
            return null;
        }
        String addr = env.get("MASTER_ADDR");
        String port = env.get("MASTER_PORT");
        if (addr == null || addr.isBlank()) {
            if (c == Convention.TORCHRUN) {
                problems.add("MASTER_ADDR is " + (addr == null ? "not set" : "empty") + ": torchrun sets it to rank 0's host; outside"
                        + " torchrun set MASTER_ADDR=<rank 0's host> and MASTER_PORT, or " + COMM_ID + "=<rank 0's host>:<port>");
            } else {
                problems.add(c.label + " does not say where rank 0 is: set " + COMM_ID + "=<rank 0's host>:<port> or MASTER_ADDR"
                        + " (with MASTER_PORT, default " + DEFAULT_PORT + ") and export it to every rank"
                        + (c == Convention.OPEN_MPI ? " (mpirun -x " + COMM_ID + ")" : " (srun --export=ALL," + COMM_ID + "=...)"));
            }
            return null;
        }
        if (port == null || port.isBlank()) {
            if (c == Convention.TORCHRUN) {
                problems.add("MASTER_PORT is " + (port == null ? "not set" : "empty") + ": torchrun sets it; outside torchrun set it to"
                        + " a free port on rank 0's host (e.g. MASTER_PORT=" + DEFAULT_PORT + ")");
                return null;
            }
            port = Integer.toString(DEFAULT_PORT);
        }
        String host = addr.trim();
        if (host.indexOf(':') >= 0 && !host.startsWith("[")) {
            host = "[" + host + "]";
        }
        return hostPort(host + ":" + port.trim(), "MASTER_ADDR:MASTER_PORT", problems);
    }

    private static InetSocketAddress hostPort(String text, String var, List<String> problems) {
        if (text.indexOf('/') >= 0) {
            // JcclId.encode() output pasted here would carry the secret; never echo it.
            problems.add(var + " contains a '/': it takes host:port only; put the secret into " + AUTH_TOKEN + " instead");
            return null;
        }
        try {
            return parseHostPort(text, var);
        } catch (ConfigException e) {
            problems.add(e.getMessage() + "; it must be host:port of rank 0's host, the same on every rank");
            return null;
        }
    }

    /**
     * {@code host:port} or {@code [v6]:port}, resolved when the name resolves now, else left
     * unresolved: the exchange resolves it again until the init deadline (a Kubernetes pod's name
     * exists in DNS only once the pod runs, and rank 0's pod may start after this one).
     */
    private static InetSocketAddress parseHostPort(String text, String what) {
        try {
            return JcclId.parseHostPort(text, what);
        } catch (ConfigException e) {
            if (!(e.getCause() instanceof java.net.UnknownHostException)) {
                throw e;
            }
            String host = hostOf(text);
            String t = text.trim();
            return InetSocketAddress.createUnresolved(host, Integer.parseInt(t.substring(t.lastIndexOf(':') + 1)));
        }
    }

    /**
     * The job secret: {@code JCCL_AUTH_TOKEN} when set (it wins over everything), else the per-user
     * secret file ({@code JCCL_SECRET_FILE}, else {@code ~/.jccl/secret}), read or made only when the
     * job is initialised. A launcher channel that carries a secret (PMIx) comes between the two;
     * the root exchange says whether it does.
     */
    private static JobSecret secret(Convention c, Map<String, String> env, String userHome, List<String> problems) {
        String token = env.get(AUTH_TOKEN);
        if (token == null) {
            try {
                return JobSecret.file(UserSecret.location(env, userHome));
            } catch (ConfigException e) {
                problems.add(e.getMessage());
                return null;
            }
        }
        if (token.isBlank()) {
            problems.add(AUTH_TOKEN + " is set but empty: every rank needs the same 32-hex-digit secret; make one with"
                    + " `openssl rand -hex 16` and export it to all ranks" + c.exportHint + ", or unset it to use the per-user"
                    + " secret file ~/.jccl/secret");
            return null;
        }
        try {
            return JobSecret.explicit(JcclId.parseSecret(token, AUTH_TOKEN), AUTH_TOKEN);
        } catch (ConfigException e) {
            problems.add(e.getMessage() + " and give every rank the same value");
            return null;
        }
    }
}
