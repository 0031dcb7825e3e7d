package org.jccl.internal.bootstrap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclTimeoutException;
import org.jccl.ReduceOp;
import org.jccl.internal.launch.LaunchEnvironment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Rank 0's root address through a real torch TCPStore, as torchrun's agent serves it
 * ({@code TORCHELASTIC_USE_AGENT_STORE=True}): the ranks (threads here, each with its own
 * torchrun-like environment) form a job without binding the store's port, without JCCL_AUTH_TOKEN.
 */
@Timeout(120)
class TorchStoreExchangeTest {

    @TempDir
    Path dir;

    private Map<String, String> torchrunEnv(int rank, int size, int storePort, String runId) {
        Map<String, String> e = new HashMap<>();
        e.put("MASTER_ADDR", "127.0.0.1");
        e.put("MASTER_PORT", Integer.toString(storePort));
        e.put("RANK", Integer.toString(rank));
        e.put("WORLD_SIZE", Integer.toString(size));
        e.put("LOCAL_RANK", Integer.toString(rank));
        e.put("GROUP_RANK", "0");
        e.put("TORCHELASTIC_USE_AGENT_STORE", "True");
        e.put("TORCHELASTIC_RUN_ID", runId);
        e.put("TORCHELASTIC_RESTART_COUNT", "0");
        e.put("JCCL_SECRET_FILE", dir.resolve("secret").toString());
        e.put("JCCL_SOCKET_IFNAME", "lo");
        e.put("JCCL_INIT_TIMEOUT", "20");
        return e;
    }

    @Test
    void theAgentStoreSelectsTheTorchExchangeAndJcclCommIdStillWins() {
        Map<String, String> e = torchrunEnv(1, 2, 29511, "r1");
        Config.Launch l = LaunchEnvironment.detect(e).orElseThrow();
        TorchStoreExchange x = assertInstanceOf(TorchStoreExchange.class, l.exchange());
        assertEquals(29511, x.store().getPort());
        assertTrue(l.rootDescription().startsWith("torchrun's TCPStore at MASTER_ADDR:MASTER_PORT=127.0.0.1:29511"), l.rootDescription());
        e.put("TORCHELASTIC_USE_AGENT_STORE", "False");
        assertInstanceOf(FixedAddressExchange.class, LaunchEnvironment.detect(e).orElseThrow().exchange());
        e.put("TORCHELASTIC_USE_AGENT_STORE", "True");
        e.put("JCCL_COMM_ID", "127.0.0.1:4000");
        assertInstanceOf(FixedAddressExchange.class, LaunchEnvironment.detect(e).orElseThrow().exchange());
    }

    @Test
    void aJobFormsThroughARealTorchStoreTwiceInARow() throws Exception {
        String python = TorchPython.find();
        assumeTrue(python != null, TorchPython.MISSING);
        int n = 3;
        ExecutorService pool = Executors.newCachedThreadPool();
        try (TorchPython.Peer torch = new TorchPython.Peer(python)) {
            // Two jobs in a row in the same processes: the second initialisation uses the next key.
            for (int round = 0; round < 2; round++) {
                List<Future<Float>> fs = new ArrayList<>();
                for (int r = 0; r < n; r++) {
                    Config cfg = Config.fromEnvironment(torchrunEnv(r, n, torch.port, "job-" + ProcessHandle.current().pid()));
                    int rank = r;
                    fs.add(pool.submit(() -> {
                        try (Communicator c = Jccl.init(cfg)) {
                            float[] x = {rank + 1};
                            c.allReduce(x, ReduceOp.SUM);
                            return x[0];
                        }
                    }));
                }
                for (Future<Float> f : fs) {
                    try {
                        assertEquals(6.0f, f.get(60, TimeUnit.SECONDS));
                    } catch (ExecutionException e) {
                        throw new AssertionError("round " + round + ": " + e.getCause(), e.getCause());
                    }
                }
            }
            assertEquals("OK", torch.command("set still-serving yes"), "the store is unharmed");
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aRankWhoseRankZeroNeverPublishesTimesOutNamingTheStoreAndKey() throws Exception {
        String python = TorchPython.find();
        assumeTrue(python != null, TorchPython.MISSING);
        try (TorchPython.Peer torch = new TorchPython.Peer(python)) {
            Map<String, String> e = torchrunEnv(1, 2, torch.port, "lonely");
            e.put("JCCL_INIT_TIMEOUT", "2");
            Config cfg = Config.fromEnvironment(e);
            JcclTimeoutException x = assertThrows(JcclTimeoutException.class, () -> Jccl.init(cfg));
            assertTrue(x.getMessage().contains("for rank 0 to publish its bootstrap address in torchrun's TCPStore at"
                    + " MASTER_ADDR:MASTER_PORT=127.0.0.1:" + torch.port + " (key jccl/lonely/0/") && x.getMessage().contains("is rank 0 running"),
                    x.getMessage());
        }
    }
}
