package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Four real JVMs as two "hosts" ({@code JCCL_HOSTID=a,a,b,b}, the same environment in every
 * process, each taking its rank's entry): ranks of one host id pick SHM, ranks of different ids
 * TCP, the tuner picks the hierarchical all-reduce and reduce-scatter by itself for large messages (logged under
 * TUNING), and CollectiveCheck's results are right throughout.
 */
class HierProcessesTest {
    private Path dir;

    @BeforeEach
    void makeDir() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-mproc-hier-");
    }

    @AfterEach
    void removeDir() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.toList()) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(dir);
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void fourProcessesAsTwoHostsUseShmInsideTcpAcrossAndHierarchicalCollectives() {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 4; r++) {
                procs.start("rank" + r, Processes.collectiveCheck("--counts", "0,7,1000,300001", "--types", "float32,int32,bf16",
                        "--reduce-ops", "sum,max,avg", "--collectives", "allreduce,broadcast,reduce,allgather,reducescatter"),
                        Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(r), "JCCL_WORLD_SIZE", "4", "JCCL_AUTH_TOKEN", token,
                                "JCCL_SHM_DIR", dir.toString(), "JCCL_HOSTID", "a,a,b,b", "JCCL_DEBUG", "INFO",
                                "JCCL_DEBUG_SUBSYS", "INIT,TUNING"));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(160));
            String all = procs.outputs();
            assertEquals(List.of(0, 0, 0, 0), codes, all);
            Processes.checkOk(all);
            List<String> want = new ArrayList<>();
            for (int r = 0; r < 4; r++) {
                String out = procs.get(r).output();
                for (int p = 0; p < 4; p++) {
                    if (p != r) {
                        String line = "rank " + r + " -> rank " + p + " via " + (r / 2 == p / 2 ? "SHM" : "TCP");
                        assertTrue(out.contains(line), line + " missing in\n" + out);
                    }
                }
            }
            String r0 = procs.get(0).output();
            assertTrue(r0.contains("hierarchical collectives over 2 hosts: 0, 1 | 2, 3"), r0);
            assertTrue(r0.contains("all_reduce 1200004 B 4 ranks via same-host + cross-host stages: hier (model"), r0);
            assertTrue(r0.contains("B 2 ranks via TCP, cross-host stage: "), r0);
            // reduce-scatter of 300001 float32 per rank: 4 x 1200004 B of input
            assertTrue(r0.contains("reduce_scatter 4800016 B 4 ranks via same-host + cross-host stages: hier (model"), r0);
        }
    }
}
