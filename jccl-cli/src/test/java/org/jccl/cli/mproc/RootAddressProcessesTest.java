package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jccl.examples.CollectiveCheck;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Rank 0's listening addresses across two hosts (network namespaces joined by a switch, each with
 * its own host name and /etc/hosts), MASTER_ADDR naming rank 0's host, as a launcher sets it. Where
 * rank 0's host maps its own name to 127.0.1.1 (Debian's default) the job forms, because rank 0
 * listens on the interface jccl selects as well as on what MASTER_ADDR resolves to. Where the other
 * host also maps that name to 127.0.1.1 (an /etc/hosts copied from rank 0's host) its rank fails
 * at once naming the name resolution, and rank 0's timeout says which address the others must
 * reach. No JCCL_AUTH_TOKEN: both hosts read one secret file (a shared home). Skipped without root
 * or iproute2 ({@link NetNamespaces}).
 */
class RootAddressProcessesTest {

    @TempDir
    Path dir;

    private Map<String, String> env(int rank, int port) {
        Map<String, String> e = new HashMap<>();
        e.put("MASTER_ADDR", "jnode0");
        e.put("MASTER_PORT", Integer.toString(port));
        e.put("RANK", Integer.toString(rank));
        e.put("WORLD_SIZE", "2");
        e.put("LOCAL_RANK", "0");
        e.put("JCCL_SECRET_FILE", dir.resolve("home/.jccl/secret").toString());
        e.put("JCCL_DEBUG", "INFO");
        e.put("JCCL_DEBUG_SUBSYS", "BOOTSTRAP");
        return e;
    }

    private static String hosts(String self, int selfIndex, String other, int otherIndex) {
        return "127.0.1.1 " + self + "\n" + NetNamespaces.address(otherIndex) + " " + other;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void rankZerosHostMapsItsNameToLoopbackAndTheJobStillForms() throws Exception {
        try (NetNamespaces net = NetNamespaces.create(2); Processes procs = new Processes()) {
            net.hosts(0, hosts("jnode0", 0, "jnode1", 1));
            net.hosts(1, hosts("jnode1", 1, "jnode0", 0));
            int port = 29_000 + (int) (ProcessHandle.current().pid() % 1000);
            for (int r = 0; r < 2; r++) {
                procs.start("rank" + r, net.inHost(r, "jnode" + r, Processes.collectiveCheck("--counts", "0,7,1000", "--types",
                        "float32,int64", "--reduce-ops", "sum,max", "--verbose")), env(r, port));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            String out = procs.outputs();
            assertEquals(List.of(0, 0), codes, out);
            Processes.checkOk(out);
            String root = procs.get(0).output();
            assertTrue(root.contains("bootstrap root listening on 127.0.1.1:" + port + " and " + NetNamespaces.address(0) + ":" + port),
                    root);
            assertTrue(procs.get(1).output().contains("(root " + NetNamespaces.address(0) + ":" + port + ")"), procs.get(1).output());
            assertTrue(root.contains("job secret from the secret file " + dir.resolve("home/.jccl/secret")), root);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void anotherHostResolvingRankZerosNameToLoopbackFailsAtOnceNamingNameResolution() throws Exception {
        try (NetNamespaces net = NetNamespaces.create(2); Processes procs = new Processes()) {
            // Host 1 got host 0's /etc/hosts: it maps jnode0 to 127.0.1.1 too.
            net.hosts(0, hosts("jnode0", 0, "jnode1", 1));
            net.hosts(1, hosts("jnode0", 0, "jnode1", 1));
            int port = 29_000 + (int) (ProcessHandle.current().pid() % 1000) + 1;
            long t0 = System.nanoTime();
            for (int r = 0; r < 2; r++) {
                Map<String, String> e = env(r, port);
                e.put("JCCL_INIT_TIMEOUT", "5");
                procs.start("rank" + r, net.inHost(r, "jnode" + r, Processes.collectiveCheck("--collectives", "barrier")), e);
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            String joiner = procs.get(1).output();
            String root = procs.get(0).output();
            assertEquals(List.of(CollectiveCheck.EXIT_ERROR, CollectiveCheck.EXIT_ERROR), codes, procs.outputs());
            assertTrue(joiner.contains("CHECK ERROR rank 1: org.jccl.ConfigException [CONFIG]: MASTER_ADDR:MASTER_PORT=jnode0:" + port
                    + ": this host (jnode1) resolves 'jnode0', the name of another host, to 127.0.1.1, a loopback address")
                    && joiner.contains("getent hosts jnode0"), joiner);
            assertTrue(root.contains("127.0.1.1:" + port + " is a loopback address (what JCCL_COMM_ID / MASTER_ADDR resolves to on this"
                    + " host), which ranks on other hosts cannot reach; they must reach " + NetNamespaces.address(0) + ":" + port), root);
            assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0) < 45, "no hang beyond the init deadline");
        }
    }
}
