package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jccl.ucx.Ucx;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Four JVMs as two "hosts" ({@code JCCL_HOSTID=a,a,b,b}) with {@code JCCL_NET=UCX} over UCX's tcp: pairs of one host
 * id take SHM, pairs across take UCX (found by ServiceLoader from the jccl-ucx jar on the class path), each rank logs
 * its UCX line (NICs, UCX transports, GPUDirect RDMA and why), and CollectiveCheck's results are right throughout.
 * Skips, naming what is missing, without UCX.
 */
class UcxProcessesTest {
    private Path dir;

    @BeforeEach
    void makeDir() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-mproc-ucx-");
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
    void fourProcessesAsTwoHostsUseShmInsideAndUcxAcross() {
        Ucx.Status s = Ucx.status();
        Assumptions.assumeTrue(s.available(), () -> "UCX is not usable here (" + s.reason() + "); apt-get install libucx0 to run this test");
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 4; r++) {
                procs.start("rank" + r, Processes.collectiveCheck("--counts", "0,7,1000,300001", "--types", "float32,int32,bf16",
                        "--reduce-ops", "sum,max,avg"),
                        Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(r), "JCCL_WORLD_SIZE", "4", "JCCL_AUTH_TOKEN", token,
                                "JCCL_SHM_DIR", dir.toString(), "JCCL_HOSTID", "a,a,b,b", "JCCL_NET", "UCX", "JCCL_UCX_TLS", "tcp",
                                "JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "INIT"));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(160));
            String all = procs.outputs();
            assertEquals(List.of(0, 0, 0, 0), codes, all);
            Processes.checkOk(all);
            for (int r = 0; r < 4; r++) {
                String out = procs.get(r).output();
                for (int p = 0; p < 4; p++) {
                    if (p != r) {
                        String line = "rank " + r + " -> rank " + p + " via " + (r / 2 == p / 2 ? "SHM" : "UCX");
                        assertTrue(out.contains(line), line + " missing in\n" + out);
                    }
                }
                assertTrue(out.contains("UCX " + s.version() + ": ") && out.contains("UCX transports tcp/") && out.contains("GPUDirect RDMA"),
                        "no UCX line in\n" + out);
            }
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aKilledRankFailsTheSurvivorsOverUcxNamingItWithinThePeerTimeout() throws Exception {
        Ucx.Status s = Ucx.status();
        Assumptions.assumeTrue(s.available(), () -> "UCX is not usable here (" + s.reason() + "); apt-get install libucx0 to run this test");
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        int timeout = 10;
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 3; r++) {
                procs.start("rank" + r, Processes.javaMain(LoopRank.class.getName(), "65536", dir.resolve("stop").toString()),
                        Map.ofEntries(Map.entry("JCCL_COMM_ID", commId), Map.entry("JCCL_RANK", Integer.toString(r)),
                                Map.entry("JCCL_WORLD_SIZE", "3"), Map.entry("JCCL_AUTH_TOKEN", token), Map.entry("JCCL_SHM_DIR", dir.toString()),
                                Map.entry("JCCL_HOSTID", "a,b,c"), Map.entry("JCCL_NET", "UCX"), Map.entry("JCCL_UCX_TLS", "tcp"),
                                Map.entry("JCCL_PEER_TIMEOUT", Integer.toString(timeout)), Map.entry("JCCL_DEBUG", "INFO"),
                                Map.entry("JCCL_DEBUG_SUBSYS", "INIT")));
            }
            long deadline = System.nanoTime() + 90_000_000_000L;
            while (!(procs.get(0).output().contains("\nOK ") && procs.get(1).output().contains("\nOK ")
                    && procs.get(2).output().contains("\nOK "))) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("the ranks did not loop within 90 s\n" + procs.outputs());
                }
                Thread.sleep(100);
            }
            Matcher v = Pattern.compile("READY rank 2 pid (\\d+)").matcher(procs.get(2).output());
            assertTrue(v.find(), procs.get(2).output());
            long victimPid = Long.parseLong(v.group(1));
            long killedAt = System.currentTimeMillis();
            procs.get(2).process().destroyForcibly(); // SIGKILL, in the middle of an all-reduce over UCX
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            assertEquals(List.of(LoopRank.FAILED_EXIT, LoopRank.FAILED_EXIT, 137), codes, procs.outputs());
            String host = org.jccl.internal.log.Log.host();
            for (int r = 0; r < 2; r++) {
                String out = procs.get(r).output();
                assertTrue(out.contains("rank " + r + " -> rank 2 via UCX"), out);
                Matcher m = Pattern.compile("FAILED_AT_MS=(\\d+) org\\.jccl\\.PeerFailedException \\[PEER_FAILED]: (.*)").matcher(out);
                assertTrue(m.find(), out);
                long ms = Long.parseLong(m.group(1)) - killedAt;
                assertTrue(ms < timeout * 1000L, "failed " + ms + " ms after the kill\n" + out);
                String msg = m.group(2);
                assertTrue(msg.contains("rank 2 (host " + host + ", pid " + victimPid + ")") || msg.contains("rank 2 (" + host + " pid " + victimPid + ")"),
                        msg);
                assertTrue(out.contains("LATER org.jccl.PeerFailedException"), out);
            }
        }
    }
}
