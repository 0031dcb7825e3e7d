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
                Map<String, String> env = rankEnv(commId, token, r, transport);
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

    /**
     * A program that ends right after a mismatched rooted call (each rank broadcasts as the root: each only
     * sends): over TCP its call returns with its own, right, data and close() finds the mismatch in the ring
     * confirmation and throws it; over SHM the confirmation is awaited and the call itself throws. Neither
     * JVM exits 0.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"SHM", "TCP"})
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void rootsThatReturnFailInCloseNamingBothCalls(String transport) {
        roots(transport, false);
    }

    /**
     * The same program without close(): main returns with the communicator open. The JVM's exit settles the
     * held ring confirmations, finds the mismatch and exits with status 1, naming both calls on stderr.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"SHM", "TCP"})
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void rootsThatReturnAndNeverCloseExitWithStatus1(String transport) {
        roots(transport, true);
    }

    /** The environment of rank {@code r} of 2 on one host; TCP: shared memory off. */
    private static Map<String, String> rankEnv(String commId, String token, int r, String transport) {
        Map<String, String> env = new HashMap<>(Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(r),
                "JCCL_WORLD_SIZE", "2", "JCCL_LOCAL_RANK", Integer.toString(r), "JCCL_AUTH_TOKEN", token,
                "JCCL_SOCKET_IFNAME", "lo"));
        if (transport.equals("TCP")) {
            env.put("JCCL_SHM_DISABLE", "1");
        }
        return env;
    }

    private void roots(String transport, boolean noClose) {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            long t0 = System.nanoTime();
            for (int r = 0; r < 2; r++) {
                Map<String, String> env = rankEnv(commId, token, r, transport);
                List<String> cmd = new java.util.ArrayList<>(Processes.javaMain(MismatchRootsRank.class.getName()));
                if (noClose) {
                    cmd.add("noclose");
                }
                procs.start("rank" + r, cmd, env);
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(90));
            double seconds = (System.nanoTime() - t0) / 1e9;
            for (int r = 0; r < 2; r++) {
                String out = procs.get(r).output();
                float own = r + 1;
                if (transport.equals("SHM")) {
                    // In memory the ring confirmation is awaited at the end of the call: the calls fail themselves.
                    assertNotEquals(0, codes.get(r), "rank " + r + " exited 0:\n" + procs.outputs());
                    assertTrue(!out.contains("RETURNED") && out.contains("InvalidUsageException") && out.contains("[MISMATCH]")
                            && out.contains("broadcast #0"), "rank " + r + "'s call did not fail itself:\n" + out);
                } else {
                    assertTrue(out.contains("RETURNED " + r + " " + own + " " + own), "rank " + r + "'s call did not return its own data:\n" + out);
                }
                if (transport.equals("SHM")) {
                    assertTrue(out.contains("mismatched collective calls"), "rank " + r + ":\n" + out);
                } else if (noClose) {
                    assertEquals(1, codes.get(r), "rank " + r + " exit status:\n" + procs.outputs());
                    assertTrue(out.contains("jccl: exiting with status 1: ") && out.contains("mismatched collective calls"),
                            "rank " + r + " does not report the mismatch at exit:\n" + out);
                } else {
                    assertNotEquals(0, codes.get(r), "rank " + r + " exited 0:\n" + procs.outputs());
                    assertTrue(out.contains("InvalidUsageException") && out.contains("[MISMATCH]") && out.contains("mismatched collective calls")
                            && out.contains("close()"), "rank " + r + " does not report the mismatch from close():\n" + out);
                }
                assertTrue(out.contains("broadcast (1000 x float root 0)") && out.contains("broadcast (1000 x float root 1)"),
                        "rank " + r + " does not name both calls:\n" + out);
            }
            assertTrue(seconds < 60, "the ranks took " + seconds + " s to fail\n" + procs.outputs());
        }
    }
}
