package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The mismatch guard between real JVMs, with default settings (JCCL_CHECK unset): two processes
 * all-reduce 200,000 and 300,000 floats (issue 18: without the guard rank 1's tail came back
 * unreduced or 0.0 and both exited 0). Both must exit non-zero within seconds, each printing a
 * MISMATCH that names both calls, over shared memory (the shared collective segment) and over TCP.
 */
class MismatchProcessesTest {

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"SHM", "TCP"})
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void twoProcessesWithDifferentCountsBothFailNamingBothCalls(String transport) {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            long t0 = System.nanoTime();
            for (int r = 0; r < 2; r++) {
                Map<String, String> env = new HashMap<>(Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(r),
                        "JCCL_WORLD_SIZE", "2", "JCCL_LOCAL_RANK", Integer.toString(r), "JCCL_AUTH_TOKEN", token,
                        "JCCL_SOCKET_IFNAME", "lo"));
                if (transport.equals("TCP")) {
                    env.put("JCCL_SHM_DISABLE", "1");
                }
                procs.start("rank" + r, Processes.javaMain(MismatchRank.class.getName(), "200000", "300000"), env);
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(90));
            double seconds = (System.nanoTime() - t0) / 1e9;
            for (int r = 0; r < 2; r++) {
                String out = procs.get(r).output();
                assertNotEquals(0, codes.get(r), "rank " + r + " exited 0:\n" + procs.outputs());
                assertTrue(!out.contains("SUM "), "rank " + r + " returned a result:\n" + out);
                assertTrue(out.contains("InvalidUsageException") && out.contains("[MISMATCH]") && out.contains("mismatched collective calls"),
                        "rank " + r + " does not report the mismatch:\n" + out);
                assertTrue(out.contains("allReduce (200000 x float sum)") && out.contains("allReduce (300000 x float sum)"),
                        "rank " + r + " does not name both calls:\n" + out);
            }
            // JVM start, bootstrap and the failure: seconds, never the 90 s deadline.
            assertTrue(seconds < 60, "the ranks took " + seconds + " s to fail\n" + procs.outputs());
            assertEquals(2, codes.size());
        }
    }
}
