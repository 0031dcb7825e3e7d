package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jccl.examples.CollectiveCheck;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Ranks started by the test itself, each with nothing but environment variables, as an external
 * launcher (torchrun, a Kubernetes indexed job, a shell script) would start them: no jccl launcher
 * stops a rank here, so whatever ends a failed job is jccl's own doing.
 */
class SelfLaunchedProcessesTest {

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void torchrunStyleEnvironmentFormsTheJob() {
        String port = Integer.toString(Processes.freePort());
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 3; r++) {
                procs.start("rank" + r, Processes.collectiveCheck("--counts", "0,7,1000", "--types", "float32,int8",
                        "--reduce-ops", "sum,avg", "--collectives", "allreduce,broadcast,allgather,reducescatter,sendrecv,split",
                        "--verbose"),
                        Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", port, "RANK", Integer.toString(r), "WORLD_SIZE", "3",
                                "LOCAL_RANK", Integer.toString(r), "JCCL_AUTH_TOKEN", token));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(80));
            assertEquals(List.of(0, 0, 0), codes, procs.outputs());
            Processes.checkOk(procs.outputs());
            for (int r = 0; r < 3; r++) {
                String out = procs.get(r).output();
                assertTrue(out.contains("rank " + r + " of 3: joined through the torchrun launcher convention"), out);
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void ranksWithDifferentTokensBothFailNamingTheToken() {
        String commId = "127.0.0.1:" + Processes.freePort();
        try (Processes procs = new Processes()) {
            long t0 = System.nanoTime();
            for (int r = 0; r < 2; r++) {
                // A fresh token per rank: the job's secret does not match.
                procs.start("rank" + r, Processes.collectiveCheck("--collectives", "barrier"),
                        Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(r), "JCCL_WORLD_SIZE", "2",
                                "JCCL_AUTH_TOKEN", Processes.newToken(), "JCCL_INIT_TIMEOUT", "5"));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(45));
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
            String all = procs.outputs();
            assertEquals(List.of(CollectiveCheck.EXIT_ERROR, CollectiveCheck.EXIT_ERROR), codes, all);
            // JVM start plus the 5 s init deadline, with room for a loaded 2-core machine; no hang.
            assertTrue(seconds < 30, "took " + seconds + " s\n" + all);
            // Rank 1 is refused by the root with a reason; rank 0 (which runs the root) times out and says why rank 1 is missing.
            String joiner = procs.get(1).output();
            assertTrue(joiner.contains("CHECK ERROR rank 1: org.jccl.JcclException [AUTHENTICATION]"), joiner);
            assertTrue(joiner.contains("different JCCL_AUTH_TOKEN values"), joiner);
            String root = procs.get(0).output();
            assertTrue(root.contains("CHECK ERROR rank 0: org.jccl.JcclTimeoutException"), root);
            assertTrue(root.contains("failed authentication"), root);
            assertTrue(root.contains("dropped before registering (wrong JCCL_AUTH_TOKEN"), root);
        }
    }

    /**
     * The survivors' connect deadline. A survivor that waits for the dead rank to connect to it (the
     * lower rank of a pair connects) learns of the death only from this deadline (30 s by default),
     * so the test shortens it.
     */
    private static final int CONNECT_TIMEOUT_S = 5;

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void survivorsOfADeadRankFailWithAJcclErrorOnTheirOwn() {
        String commId = "127.0.0.1:" + Processes.freePort();
        String token = Processes.newToken();
        try (Processes procs = new Processes()) {
            long t0 = System.nanoTime();
            for (int r = 0; r < 3; r++) {
                procs.start("rank" + r, Processes.javaMain(DyingRank.class.getName(), "1", "3"),
                        Map.of("JCCL_COMM_ID", commId, "JCCL_RANK", Integer.toString(r), "JCCL_WORLD_SIZE", "3",
                                "JCCL_AUTH_TOKEN", token, "JCCL_CONNECT_TIMEOUT", Integer.toString(CONNECT_TIMEOUT_S)));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(60));
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
            String all = procs.outputs();
            assertEquals(List.of(DyingRank.SURVIVOR_EXIT, 3, DyingRank.SURVIVOR_EXIT), codes, all);
            assertFalse(all.contains("BARRIER COMPLETED"), all);
            // JVM starts, init, and at most one connect deadline: a survivor waiting for rank 1 to connect gives up then.
            assertTrue(seconds < 15 + 2 * CONNECT_TIMEOUT_S, "took " + seconds + " s\n" + all);
            for (int r : new int[] {0, 2}) {
                String out = procs.get(r).output();
                assertTrue(out.contains("SURVIVOR FAILED org.jccl."), out);
            }
            // Rank 0's barrier sends to rank 1. If rank 1 is already gone, rank 0's error names it. But rank 1's
            // acceptor may still complete the handshake before its process exits; rank 0's send then lands in
            // the socket buffer, and an idle connection's close is only seen at its next send or receive. Rank 0
            // then learns of the failure through rank 2, which aborts after its own wait for rank 1 and closes
            // its sockets at once; that error must then say so (a cascade, not a silent hang). Telling every
            // survivor the root cause needs failure propagation on a side channel (the faults issue).
            String first = procs.get(0).output();
            assertTrue(first.contains("rank 1 ")
                    || (first.contains("rank 2 ") && first.contains("closed its communicator after an error of its own")),
                    "rank 0's error must name the dead rank, or the survivor that failed because of it:\n" + first);
        }
    }
}
