package org.jccl.internal.launch;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ResourceException;
import org.jccl.internal.bootstrap.RootExchange;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Interfaces;

/**
 * Rank 0's bootstrap root found from the Slurm step itself ({@link SlurmStep}), for plain {@code srun}
 * (no PMIx): every rank takes the first node of the step's node list and the port derived from the
 * job and step ids; rank 0 binds that port there, nothing is published. The secret comes from
 * {@code JCCL_AUTH_TOKEN} or the per-user secret file (a node list is no trusted channel).
 *
 * <p>Rank 0 binds the port on the address its node's name resolves to on its own host and on the
 * interface jccl selects ({@code JCCL_SOCKET_IFNAME} rules), so the other nodes reach it even when
 * the node maps its own name to a loopback address. Checked before anything waits: rank 0 must run
 * on the first node ({@link SlurmStep#rankZeroProblem}); the name must resolve; a rank on another
 * node must not resolve it to a loopback address; the port must be free on rank 0's node (else an
 * error naming {@code JCCL_COMM_ID}, the fix for a port another program holds).
 */
public final class SlurmNodelistExchange implements RootExchange {

    private final SlurmStep step;
    private final int rank;

    public SlurmNodelistExchange(SlurmStep step, int rank) {
        this.step = step;
        this.rank = rank;
    }

    /** The step this exchange reads. */
    public SlurmStep step() {
        return step;
    }

    @Override
    public String describe() {
        return step.describe();
    }

    private InetSocketAddress root() {
        String host = step.rootHost();
        try {
            return new InetSocketAddress(InetAddress.getByName(host), step.port());
        } catch (UnknownHostException e) {
            throw new ConfigException("rank 0's node " + host + " (first node of " + step.nodelistVar() + "=" + step.nodelist()
                    + ") does not resolve on this host (" + Log.host() + "): " + e.getMessage() + "; make the node names resolve"
                    + " (DNS or /etc/hosts), or start the job with srun --mpi=pmix, or set JCCL_COMM_ID=<rank 0's address>:<port>", e);
        }
    }

    @Override
    public List<InetSocketAddress> bindAddresses(Config config) {
        String problem = step.rankZeroProblem();
        if (problem != null) {
            throw new ConfigException(problem);
        }
        InetSocketAddress root = root();
        checkPortFree(root);
        List<InetSocketAddress> out = new ArrayList<>(List.of(root));
        InetAddress selected = Interfaces.selectAddress(config);
        if (!selected.equals(root.getAddress())) {
            out.add(new InetSocketAddress(selected, root.getPort()));
        }
        return out;
    }

    /**
     * Fails, naming the fixes, when another program holds the derived port on rank 0's node (an
     * address that is not this host's is left to the bootstrap root's own error).
     */
    private void checkPortFree(InetSocketAddress root) {
        if (!isLocal(root.getAddress())) {
            return;
        }
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(true); // as the root binds: a previous step's connections in TIME_WAIT do not count
            s.bind(root, 1);
        } catch (IOException e) {
            throw new ResourceException("rank 0 cannot listen on port " + root.getPort() + " of " + step.rootHost() + " (" + e.getMessage()
                    + "): jccl derives that port from SLURM_JOB_ID=" + step.jobId() + " and SLURM_STEP_ID=" + step.stepId() + " (range "
                    + SlurmStep.PORT_BASE + "-" + SlurmStep.PORT_LAST + ") and another program or job holds it; set"
                    + " JCCL_COMM_ID=" + step.rootHost() + ":<a free port> for every rank (srun --export=ALL,JCCL_COMM_ID=...), or start"
                    + " the job with srun --mpi=pmix (rank 0 then takes any free port and publishes it)", e);
        }
    }

    private static boolean isLocal(InetAddress a) {
        try {
            return a.isAnyLocalAddress() || java.net.NetworkInterface.getByInetAddress(a) != null;
        } catch (IOException e) {
            return false;
        }
    }

    @Override
    public Published publish(List<InetSocketAddress> listening, byte[] secret, String hostId, Config config, long deadlineNanos) {
        return new Published(List.of(root()), null, null, jobKey());
    }

    /**
     * @throws ConfigException when the first node's name resolves to a loopback address on a rank that
     *         runs on another node (SLURM_NODEID is not 0): it could never reach rank 0
     */
    @Override
    public Published lookup(Config config, long deadlineNanos) {
        InetSocketAddress root = root();
        if (root.getAddress().isLoopbackAddress() && step.nodeId() > 0) {
            String where = "rank " + rank + " runs on node " + step.nodeId() + " of " + step.nodelistVar() + "=" + step.nodelist();
            String fixes = "start the job with srun --mpi=pmix, or set JCCL_COMM_ID=<rank 0's address>:<port>";
            if (root.getAddress().getHostAddress().equals(step.rootHost())) {
                throw new ConfigException(where + ", which names " + step.rootHost() + ", a loopback address, as rank 0's node: no other"
                        + " node can reach it; " + fixes);
            }
            throw new ConfigException(where + " but rank 0's node " + step.rootHost() + " resolves to " + root.getAddress().getHostAddress()
                    + " here (" + Log.host() + "), a loopback address: this host's name resolution maps '" + step.rootHost() + "' to"
                    + " itself (see `getent hosts " + step.rootHost() + "`); fix it, or " + fixes);
        }
        return new Published(List.of(root), null, null, jobKey());
    }

    private String jobKey() {
        return "slurm:" + step.jobId() + "." + step.stepId();
    }

    @Override
    public String toString() {
        return "SlurmNodelistExchange[" + describe() + "]";
    }
}
