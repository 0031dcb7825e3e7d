package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.internal.launch.SlurmStep;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Slurm step over two and three "hosts" (network namespaces joined by a bridge, {@link
 * NetNamespaces}), with the variables srun gives each task set by hand and no PMIx: every rank finds
 * rank 0 at the first node of {@code SLURM_STEP_NODELIST} (a host list of the namespaces' addresses,
 * {@code 10.213.0.[1-3]}) on the port derived from {@code SLURM_JOB_ID} and {@code SLURM_STEP_ID},
 * and reads the job secret from the per-user file of a home directory the hosts share (made by
 * whichever rank comes first). Ranks of one host talk through shared memory, of different hosts
 * over TCP between the namespaces' addresses; every collective is checked. Needs root (skips
 * otherwise).
 */
class SlurmHostsProcessesTest {

    @TempDir
    Path home;

    /**
     * Starts {@code tasksPerNode[i]} ranks in host {@code i}, numbered in Slurm's block order, and
     * checks the run; returns the processes' output.
     */
    private String runStep(int[] tasksPerNode, String job, String step) throws Exception {
        int hosts = tasksPerNode.length;
        int n = 0;
        for (int t : tasksPerNode) {
            n += t;
        }
        String nodelist = "10.213.0.[1-" + hosts + "]";
        List<String> counts = new ArrayList<>();
        for (int t : tasksPerNode) {
            counts.add(Integer.toString(t));
        }
        try (NetNamespaces net = NetNamespaces.create(hosts); Processes procs = new Processes()) {
            int rank = 0;
            List<Integer> hostOf = new ArrayList<>();
            for (int h = 0; h < hosts; h++) {
                for (int l = 0; l < tasksPerNode[h]; l++) {
                    Map<String, String> e = new HashMap<>();
                    e.put("SLURM_JOB_ID", job);
                    e.put("SLURM_STEP_ID", step);
                    e.put("SLURM_PROCID", Integer.toString(rank));
                    e.put("SLURM_NTASKS", Integer.toString(n));
                    e.put("SLURM_LOCALID", Integer.toString(l));
                    e.put("SLURM_NODEID", Integer.toString(h));
                    e.put("SLURMD_NODENAME", NetNamespaces.address(h));
                    e.put("SLURM_STEP_NODELIST", nodelist);
                    e.put("SLURM_JOB_NODELIST", nodelist);
                    e.put("SLURM_STEP_TASKS_PER_NODE", String.join(",", counts));
                    // Test scaffolding only: one host identity per namespace (they share the machine's boot id and name).
                    e.put("JCCL_HOSTID", "host" + h);
                    e.put("JCCL_DEBUG", "INFO");
                    e.put("JCCL_DEBUG_SUBSYS", "INIT,NET");
                    List<String> cmd = new ArrayList<>(Processes.collectiveCheck("--counts", "0,7,1000,70000", "--types",
                            "float32,int64,bfloat16", "--reduce-ops", "sum,min", "--verbose"));
                    cmd.add(1, "-Duser.home=" + home);
                    procs.start("rank" + rank, net.inHost(h, cmd), e);
                    hostOf.add(h);
                    rank++;
                }
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(200));
            String all = procs.outputs();
            assertEquals(Collections.nCopies(n, 0), codes, all);
            Processes.checkOk(all);
            int port = SlurmStep.port(job, step);
            for (int r = 0; r < n; r++) {
                String out = procs.get(r).output();
                assertTrue(out.contains("rank " + r + " of " + n + ": joined through the Slurm launcher convention"), out);
                assertTrue(out.contains("rank " + r + ": rank 0's address through Slurm step " + job + "." + step + ": first node 10.213.0.1 of"
                        + " SLURM_STEP_NODELIST=" + nodelist + ", port " + port), out);
                // The world communicator's transports (its id is the first one the rank logs; split and dup follow): SHM
                // within a host, TCP across hosts.
                Matcher first = Pattern.compile("comm (\\S+) rank " + r + " -> rank ").matcher(out);
                assertTrue(first.find(), "no connection logged:\n" + out);
                Matcher via = Pattern.compile("comm " + Pattern.quote(first.group(1)) + " rank " + r + " -> rank (\\d+) via (\\S+)\n")
                        .matcher(out);
                int seen = 0;
                while (via.find()) {
                    int p = Integer.parseInt(via.group(1));
                    assertEquals(hostOf.get(p).equals(hostOf.get(r)) ? "SHM" : "TCP", via.group(2), via.group() + "\n" + out);
                    seen++;
                }
                // Every TCP connection (of any communicator) runs between the namespaces' addresses.
                Matcher tcp = Pattern.compile(" -> rank \\d+ via TCP /?([0-9.]+):\\d+ ").matcher(out);
                while (tcp.find()) {
                    assertTrue(tcp.group(1).startsWith("10.213.0."), tcp.group() + "\n" + out);
                }
                assertTrue(seen > 0, "no connection of the world communicator logged:\n" + out);
            }
            assertTrue(Files.exists(home.resolve(".jccl/secret")), "the shared per-user secret file was not made");
            return all;
        }
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void twoHostsTwoTasksEach() throws Exception {
        runStep(new int[] {2, 2}, "31337", "0");
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void threeHostsOfTwoOneOneTasks() throws Exception {
        runStep(new int[] {2, 1, 1}, "31338", "2");
    }
}
