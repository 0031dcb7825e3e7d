package org.jccl.internal.launch;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A Slurm job step as its tasks see it: the step's nodes ({@code SLURM_STEP_NODELIST}, else
 * {@code SLURM_JOB_NODELIST}), the tasks on each ({@code SLURM_STEP_TASKS_PER_NODE}, else
 * {@code SLURM_TASKS_PER_NODE}, e.g. {@code 2(x3),1}), the job and step ids, and this task's node
 * ({@code SLURM_NODEID}, {@code SLURMD_NODENAME}). From it, without any launcher service, every
 * task finds rank 0's bootstrap root: the first node of the step, at a port derived from the job
 * and step ids ({@link #port()}).
 *
 * <p><b>Where task 0 runs.</b> Slurm's block, cyclic and plane distributions (the default is block)
 * place task 0 on the first node of the step's list (src/common/slurm_step_layout.c: each fills
 * node 0 first). {@code --distribution=arbitrary} (a host file) and a topology ordering of nodes
 * need not: with {@code SLURM_DISTRIBUTION=arbitrary} no address is derived (the error says to use
 * {@code srun --mpi=pmix} or {@code JCCL_COMM_ID}), and in every case rank 0 checks that it runs on
 * node 0 of the list ({@link #rankZeroProblem}) and fails at once, naming both nodes, when it does
 * not, instead of leaving the others to wait for it.
 *
 * <p><b>The port</b> is {@value #PORT_BASE} + h(job id, step id) mod {@value #PORT_SPAN}, i.e. in
 * [{@value #PORT_BASE}, {@value #PORT_LAST}], below Linux's ephemeral range (32768-60999), so
 * outgoing connections do not take it; two steps running at once on one node (two jobs, or
 * {@code srun &} twice in one job) get different ports unless they collide by chance (about 1 in
 * 12,000 per pair), which is an "address in use" error naming {@code JCCL_COMM_ID} as the fix.
 */
public record SlurmStep(String jobId, String stepId, String nodelistVar, String nodelist, List<String> nodes, List<Integer> tasksPerNode,
        int nodeId, String nodeName, String distribution) {

    public static final int PORT_BASE = 20000;
    public static final int PORT_SPAN = 12000;
    public static final int PORT_LAST = PORT_BASE + PORT_SPAN - 1;

    public SlurmStep {
        nodes = List.copyOf(nodes);
        tasksPerNode = List.copyOf(tasksPerNode);
    }

    /**
     * The step this process belongs to, read from {@code env}.
     *
     * @param ntasks the job's size as the launcher convention read it ({@code SLURM_NTASKS}), checked
     *        against the task layout
     * @throws IllegalArgumentException naming every missing or inconsistent variable and the fix
     */
    public static SlurmStep from(Map<String, String> env, int ntasks) {
        String job = first(env, "SLURM_JOB_ID", "SLURM_JOBID");
        String step = first(env, "SLURM_STEP_ID", "SLURM_STEPID");
        if (job == null) {
            throw new IllegalArgumentException("SLURM_JOB_ID is not set: this process was not started by srun");
        }
        if (step == null) {
            throw new IllegalArgumentException("SLURM_STEP_ID is not set: this process runs in job " + job + "'s batch script, not"
                    + " in a job step; start the ranks with srun (e.g. srun --mpi=pmix java ... or srun java ...)");
        }
        String nodelistVar = env.containsKey("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST"
                : env.containsKey("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : null;
        if (nodelistVar == null) {
            throw new IllegalArgumentException("neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set: srun sets them;"
                    + " without them rank 0's node is unknown");
        }
        String nodelist = env.get(nodelistVar);
        List<String> nodes;
        try {
            nodes = Hostlist.expand(nodelist);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(nodelistVar + ": " + e.getMessage(), e);
        }
        if (nodes.isEmpty()) {
            throw new IllegalArgumentException(nodelistVar + " is empty: it must name the step's nodes");
        }
        String tasksVar = env.containsKey("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE"
                : env.containsKey("SLURM_TASKS_PER_NODE") ? "SLURM_TASKS_PER_NODE" : null;
        List<Integer> tasks = new ArrayList<>();
        if (tasksVar != null) {
            tasks = tasksPerNode(env.get(tasksVar), tasksVar);
            if (tasks.size() != nodes.size()) {
                throw new IllegalArgumentException(tasksVar + "=" + env.get(tasksVar) + " describes " + tasks.size() + " nodes but "
                        + nodelistVar + "=" + nodelist + " names " + nodes.size() + "; the two must come from the same step");
            }
            int sum = tasks.stream().mapToInt(Integer::intValue).sum();
            if (ntasks > 0 && sum != ntasks) {
                throw new IllegalArgumentException(tasksVar + "=" + env.get(tasksVar) + " places " + sum + " tasks but the job has "
                        + ntasks + " (SLURM_NTASKS); were the variables set by hand?");
            }
        }
        int nodeId = -1;
        String nid = env.get("SLURM_NODEID");
        if (nid != null) {
            try {
                nodeId = Integer.parseInt(nid.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("SLURM_NODEID='" + nid + "' is not a number");
            }
            if (nodeId < 0 || nodeId >= nodes.size()) {
                throw new IllegalArgumentException("SLURM_NODEID=" + nodeId + " is not an index of the " + nodes.size() + " nodes of "
                        + nodelistVar + "=" + nodelist);
            }
        }
        String dist = env.getOrDefault("SLURM_DISTRIBUTION", "");
        return new SlurmStep(job.trim(), step.trim(), nodelistVar, nodelist, nodes, tasks, nodeId, env.get("SLURMD_NODENAME"), dist.trim());
    }

    private static String first(Map<String, String> env, String name, String alias) {
        String v = env.get(name);
        if (v == null || v.isBlank()) {
            v = env.get(alias);
        }
        return v == null || v.isBlank() ? null : v;
    }

    /**
     * Slurm's compressed task counts: a comma list of {@code n} or {@code n(xk)} (n tasks on each of
     * k nodes), e.g. {@code 2(x3),1} = 2, 2, 2, 1.
     */
    public static List<Integer> tasksPerNode(String text, String var) {
        List<Integer> out = new ArrayList<>();
        for (String item : text.trim().split(",", -1)) {
            String t = item.trim();
            int count;
            int repeat = 1;
            try {
                int paren = t.indexOf('(');
                if (paren >= 0) {
                    if (!t.startsWith("(x", paren) || !t.endsWith(")")) {
                        throw new NumberFormatException();
                    }
                    count = Integer.parseInt(t.substring(0, paren));
                    repeat = Integer.parseInt(t.substring(paren + 2, t.length() - 1));
                } else {
                    count = Integer.parseInt(t);
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(var + "='" + text + "': '" + t + "' is not a task count n or n(xk) (e.g. 2(x3),1)");
            }
            if (count < 0 || repeat < 1 || repeat > Hostlist.MAX_HOSTS) {
                throw new IllegalArgumentException(var + "='" + text + "': '" + t + "' is out of range");
            }
            for (int i = 0; i < repeat; i++) {
                out.add(count);
            }
        }
        return out;
    }

    /** The node task 0 runs on under block, cyclic and plane distributions: the first of the step's list. */
    public String rootHost() {
        return nodes.getFirst();
    }

    /** The port rank 0's root binds: {@value #PORT_BASE} + h(job id, step id) mod {@value #PORT_SPAN}. */
    public int port() {
        return port(jobId, stepId);
    }

    /** The derived port of job {@code job}, step {@code step} (ids as Slurm prints them). */
    public static int port(String job, String step) {
        long x = 0x9E3779B97F4A7C15L;
        for (char c : (job + "." + step).toCharArray()) {
            x = mix(x ^ c);
        }
        return PORT_BASE + (int) Long.remainderUnsigned(x, PORT_SPAN);
    }

    /** splitmix64's finaliser: every input bit moves every output bit. */
    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /**
     * Why the first node of the list cannot be taken for task 0's node in this step, or null: with
     * {@code --distribution=arbitrary} Slurm places tasks in the host file's order, not the list's.
     */
    public String distributionProblem() {
        String nodeLevel = distribution.toLowerCase(Locale.ROOT).split("[:,]", 2)[0];
        if (nodeLevel.equals("arbitrary")) {
            return "SLURM_DISTRIBUTION=" + distribution + ": with an arbitrary distribution task 0 need not run on the first node of "
                    + nodelistVar + ", so jccl cannot derive rank 0's address from it; start the job with srun --mpi=pmix (rank 0"
                    + " publishes its address through PMIx) or set JCCL_COMM_ID=<task 0's host>:<port> for every rank";
        }
        return null;
    }

    /**
     * On rank 0: why it is not on the node the other ranks will connect to ({@code SLURM_NODEID}
     * not 0, or {@code SLURMD_NODENAME} not the list's first node), or null when it is (or the
     * variables are absent).
     */
    public String rankZeroProblem() {
        boolean wrongIndex = nodeId > 0;
        boolean wrongName = nodeName != null && !nodeName.isBlank() && !nodeName.equals(rootHost());
        if (!wrongIndex && !wrongName) {
            return null;
        }
        String here = nodeName != null && !nodeName.isBlank() ? nodeName : nodeId >= 0 ? nodes.get(nodeId) : "another node";
        return "rank 0 runs on " + here + (nodeId >= 0 ? " (SLURM_NODEID=" + nodeId + ")" : "") + ", not on " + rootHost()
                + ", the first node of " + nodelistVar + "=" + nodelist + ", where the other ranks look for it"
                + (distribution.isEmpty() ? "" : " (SLURM_DISTRIBUTION=" + distribution + ")")
                + "; start the job with srun --mpi=pmix (rank 0 publishes its address through PMIx), or use a block or cyclic"
                + " distribution, or set JCCL_COMM_ID=<rank 0's host>:<port> for every rank";
    }

    /** How the address was derived, for messages: "first node vm of SLURM_STEP_NODELIST=vm, port 23456 from SLURM_JOB_ID=5, SLURM_STEP_ID=0". */
    public String describe() {
        return "Slurm step " + jobId + "." + stepId + ": first node " + rootHost() + " of " + nodelistVar + "=" + nodelist + ", port "
                + port() + " derived from SLURM_JOB_ID=" + jobId + " and SLURM_STEP_ID=" + stepId;
    }
}
