package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code mpirun -H host1:2,host2:2} over two "hosts": network namespaces joined by a bridge
 * ({@link NetNamespaces}), each with its own host name (a UTS namespace) that both resolve
 * ({@link NetNamespaces#hosts}), mpirun started in the first
 * and its daemon in the second through an rsh agent that enters that host's namespaces instead of
 * ssh. No {@code -x} and no variable that forms the job: rank 0's address and the secret go through
 * Open MPI's PMIx servers (one per host, joined by the fence), the ranks tell hosts apart by their
 * host names, talk through shared memory within a host and over TCP between the namespaces'
 * addresses, and every collective is checked. Needs root, iproute2, unshare (util-linux) and
 * Open MPI; skips naming what is missing.
 */
class MpirunHostsProcessesTest {

    @TempDir
    Path dir;

    private static String tool(String name) {
        for (String d : (System.getenv().getOrDefault("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin").split(":")) {
            if (!d.isEmpty() && Files.isExecutable(Path.of(d, name))) {
                return Path.of(d, name).toString();
            }
        }
        return null;
    }

    @Test
    @Timeout(value = 200, unit = TimeUnit.SECONDS)
    void mpirunAcrossTwoHostsWithNothingExtra() throws Exception {
        String mpirun = tool("mpirun");
        String unshare = tool("unshare");
        assumeTrue(mpirun != null, "mpirun not found: apt-get install openmpi-bin");
        assumeTrue(unshare != null, "unshare not found (Debian package util-linux)");
        try (NetNamespaces net = NetNamespaces.create(2); Processes procs = new Processes()) {
            // Each host resolves the host names, as on a cluster.
            for (int i = 0; i < 2; i++) {
                net.hosts(i, NetNamespaces.address(0) + " node0\n" + NetNamespaces.address(1) + " node1");
            }
            // The rsh agent mpirun calls as `agent <host> <command>`: host 10.213.0.<i+1> is namespace i, named node<i>.
            StringBuilder agent = new StringBuilder("#!/bin/sh\nhost=\"$1\"; shift\ncase \"$host\" in\n");
            for (int i = 0; i < 2; i++) {
                agent.append("  ").append(NetNamespaces.address(i)).append(") ns=").append(net.host(i)).append("; name=node").append(i)
                        .append(" ;;\n");
            }
            agent.append("  *) echo \"unknown host $host\" >&2; exit 1 ;;\nesac\n")
                    .append("exec ").append(tool("ip")).append(" netns exec \"$ns\" ").append(unshare)
                    .append(" --uts /bin/sh -c \"hostname $name; $*\"\n");
            Path agentFile = dir.resolve("netns-agent.sh");
            Files.writeString(agentFile, agent.toString());
            Files.setPosixFilePermissions(agentFile, PosixFilePermissions.fromString("rwxr-xr-x"));
            Path home = Files.createDirectories(dir.resolve("home"));

            List<String> program = new ArrayList<>(Processes.collectiveCheck("--counts", "0,7,1000,70000", "--types",
                    "float32,int32,bfloat16", "--reduce-ops", "sum,max", "--verbose"));
            program.add(1, "-Duser.home=" + home);
            List<String> cmd = new ArrayList<>(List.of(unshare, "--uts", "/bin/sh", "-c", "hostname node0 && exec \"$0\" \"$@\"",
                    mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "plm_rsh_agent", agentFile.toString(),
                    "--mca", "btl", "self,tcp", "-H", NetNamespaces.address(0) + ":2," + NetNamespaces.address(1) + ":2", "-np", "4"));
            cmd.addAll(program);
            // Observability only (logged connections); nothing that forms the job.
            procs.start("mpirun", net.inHost(0, cmd), Map.of("JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "INIT,NET"));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(180));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), "mpirun exited " + codes.getFirst() + "\n" + out);
            Processes.checkOk(out);
            for (int r = 0; r < 4; r++) {
                assertTrue(out.contains("rank " + r + " of 4: joined through the Open MPI launcher convention"), out);
                assertTrue(out.contains("rank " + r + ": rank 0's address through the PMIx server of Open MPI (namespace "), out);
            }
            // Ranks 0,1 on node0 and 2,3 on node1 (mpirun's by-slot mapping): the world communicator (the first each rank
            // logs) uses SHM within a node and TCP across, and TCP runs between the namespaces' addresses.
            for (int r = 0; r < 4; r++) {
                Matcher first = Pattern.compile("\\[" + r + "] JCCL INFO comm (\\S+) rank " + r + " -> rank ").matcher(out);
                assertTrue(first.find(), "rank " + r + " logged no connection:\n" + out);
                Matcher via = Pattern.compile("comm " + Pattern.quote(first.group(1)) + " rank " + r + " -> rank (\\d+) via (\\S+)\n")
                        .matcher(out);
                int seen = 0;
                while (via.find()) {
                    int p = Integer.parseInt(via.group(1));
                    assertEquals(p / 2 == r / 2 ? "SHM" : "TCP", via.group(2), via.group());
                    seen++;
                }
                assertEquals(3, seen, "rank " + r + "'s transports to its 3 peers:\n" + out);
            }
            Matcher tcp = Pattern.compile(" -> rank \\d+ via TCP /?([0-9.]+):\\d+ ").matcher(out);
            int connections = 0;
            while (tcp.find()) {
                assertTrue(tcp.group(1).startsWith("10.213.0."), tcp.group());
                connections++;
            }
            assertTrue(connections > 0, "no TCP connection between the hosts:\n" + out);
            assertTrue(!Files.exists(home.resolve(".jccl")), "a secret file was made: the secret did not come through PMIx");
        }
    }
}
