package org.jccl.internal.launch;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jccl.internal.bootstrap.RootExchange;

/**
 * For MPI launchers and srun, which set no rendezvous address: the channel through which rank 0's
 * address reaches the other ranks, chosen from what the launcher set up, in this order:
 * <ol>
 *   <li><b>PMIx</b> ({@link PmixExchange}): a PMIx server named in the environment (mpirun, {@code srun
 *       --mpi=pmix}), {@code PMIX_RANK} equal to the launcher's rank (else the PMIx variables are an
 *       outer job's), and a usable {@code libpmix.so.2};</li>
 *   <li><b>Slurm node list</b> ({@link SlurmNodelistExchange}): a Slurm job step whose
 *       {@code SLURM_PROCID} and {@code SLURM_NTASKS} are the launcher's rank and size (so the step is
 *       this job, not e.g. the step of mpirun's daemons inside an allocation), with a distribution
 *       that puts task 0 on the first node.</li>
 * </ol>
 * Every rank of a job sees the same variables and so picks the same channel. When neither applies,
 * {@link Choice#whyNot()} says why each was not used, for the error that asks for {@code JCCL_COMM_ID}.
 * Nothing here connects to anything or calls {@code PMIx_Init}.
 */
public final class LauncherChannels {

    private LauncherChannels() {
    }

    /**
     * The chosen channel, or none with the reasons.
     *
     * @param exchange the channel, or null
     * @param whyNot why no channel was usable (empty when one was, or when the environment shows none at all)
     */
    public record Choice(RootExchange exchange, String whyNot) {
        public Choice {
            Objects.requireNonNull(whyNot, "whyNot");
        }
    }

    /**
     * @param convention the launcher convention that gave rank and size ("Open MPI", "Slurm", ...)
     * @param size the job's size, or -1 when unknown
     */
    public static Choice find(String convention, Map<String, String> env, int rank, int size) {
        List<String> why = new ArrayList<>();
        if (env.containsKey("PMIX_RANK") || env.containsKey("PMIX_NAMESPACE")) {
            String pr = env.getOrDefault("PMIX_RANK", "").trim();
            if (pr.isEmpty()) {
                why.add("PMIx not used: PMIX_NAMESPACE is set but PMIX_RANK is not (an incomplete or inherited PMIx environment)");
            } else if (!pr.equals(Integer.toString(rank))) {
                why.add("PMIx not used: PMIX_RANK=" + pr + " is not this process's rank " + rank + " (the PMIx variables belong to"
                        + " another launcher's job)");
            } else {
                String unusable = Pmix.unavailable(env).orElse(null);
                if (unusable == null) {
                    return new Choice(new PmixExchange(env, convention, rank, size), "");
                }
                why.add("PMIx not used: " + unusable);
            }
        }
        if (env.containsKey("SLURM_JOB_ID") || env.containsKey("SLURM_JOBID")) {
            String procId = env.getOrDefault("SLURM_PROCID", "").trim();
            String ntasks = env.getOrDefault("SLURM_NTASKS", env.getOrDefault("SLURM_NPROCS", "")).trim();
            if (!procId.equals(Integer.toString(rank)) || (size >= 0 && !ntasks.equals(Integer.toString(size)))) {
                why.add("the Slurm node list not used: SLURM_PROCID=" + procId + " and SLURM_NTASKS=" + ntasks + " are not this"
                        + " process's rank " + rank + " and size " + size + " (the Slurm variables belong to another layer, e.g."
                        + " the step of mpirun's daemons)");
            } else {
                try {
                    SlurmStep step = SlurmStep.from(env, size);
                    String dist = step.distributionProblem();
                    if (dist == null) {
                        return new Choice(new SlurmNodelistExchange(step, rank), "");
                    }
                    why.add(dist);
                } catch (IllegalArgumentException e) {
                    why.add("the Slurm node list not used: " + e.getMessage());
                }
            }
        }
        return new Choice(null, String.join("; ", why));
    }
}
