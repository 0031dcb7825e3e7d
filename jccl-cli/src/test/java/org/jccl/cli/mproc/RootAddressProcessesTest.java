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
 * Rank 0's listening addresses across two "hosts" (network namespaces joined by a switch, each with
 * its own /etc/hosts): where rank 0's host maps its own name to 127.0.1.1 (Debian's default) the
 * job still forms, because rank 0 listens on the interface jccl selects as well as on what
 * MASTER_ADDR resolves to; where the other host also resolves the name to a loopback address it
 * fails at once, naming the name resolution. No JCCL_AUTH_TOKEN: both hosts read one secret file
 * (a shared home). Skipped without root or iproute2 ({@link NetNamespaces}).
 */
class RootAddressProcessesTest {

    private static final String MASTER = "jcclmaster";

    @TempDir
    Path dir;

    private Map<String, String> env(int rank, int port) {
        Map<String, String> e = new HashMap<>();
        e.put("MASTER_ADDR", MASTER);
        e.put("MASTER_PORT", Integer.toString(port));
        e.put("RANK", Integer.toString(rank));
        e.put("WORLD_SIZE", "2");
        e.put("LOCAL_RANK", "0");
        e.put("GROUP_RANK", Integer.toString(rank));
        e.put("JCCL_SECRET_FILE", dir.resolve("home/.jccl/secret").toString());
        e.put("JCCL_SOCKET_IFNAME", NetNamespaces.IFNAME);
        e.put("JCCL_HOSTID", "host" + rank);
        e.put("JCCL_DEBUG", "INFO");
        e.put("JCCL_DEBUG_SUBSYS", "BOOTSTRAP");
        return e;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void rankZerosHostMapsItsNameToLoopbackAndTheJobStillForms() throws Exception {
        try (NetNamespaces net = NetNamespaces.create(2); Processes procs = new Processes()) {
            net.hosts(0, "127.0.1.1 " + MASTER);
            net.hosts(1, NetNamespaces.address(0) + " " + MASTER);
            int port = 29_000 + (int) (ProcessHandle.current().pid() % 1000);
            for (int r = 0; r < 2; r++) {
                procs.start("rank" + r, net.inHost(r, Processes.collectiveCheck("--counts", "0,7,1000", "--types", "float32,int64",
                        "--reduce-ops", "sum,max", "--verbose")), env(r, port));
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
    void aLoopbackMasterAddrOnAnotherHostFailsAtOnceNamingNameResolution() throws Exception {
        try (NetNamespaces net = NetNamespaces.create(2); Processes procs = new Processes()) {
            net.hosts(0, "127.0.1.1 " + MASTER);
            net.hosts(1, "127.0.1.1 " + MASTER);
            int port = 29_000 + (int) (ProcessHandle.current().pid() % 1000) + 1;
            for (int r = 0; r < 2; r++) {
                Map<String, String> e = env(r, port);
                e.put("JCCL_INIT_TIMEOUT", "5");
                procs.start("rank" + r, net.inHost(r, Processes.collectiveCheck("--collectives", "barrier")), e);
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            String joiner = procs.get(1).output();
            assertEquals(List.of(CollectiveCheck.EXIT_ERROR, CollectiveCheck.EXIT_ERROR), codes, procs.outputs());
            assertTrue(joiner.contains("MASTER_ADDR:MASTER_PORT=" + MASTER + ":" + port + " resolves to 127.0.1.1 on this host")
                    && joiner.contains("rank 0 runs on another host (this is torchrun node GROUP_RANK=1; rank 0 runs on node 0)")
                    && joiner.contains("getent hosts " + MASTER), joiner);
        }
    }
}
