package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.internal.topo.FixtureFiles;
import org.jccl.spi.PeerInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a transport learns about its rank's place on the host through TransportContext: local rank
 * and size, its GPU and its NICs (what the UCX transport will set UCX_NET_DEVICES from), on the 8-GPU,
 * 8-HCA fixture host.
 */
class TransportContextTest {

    @TempDir
    Path dir;

    private static PeerInfo[] peers(String... hosts) {
        PeerInfo[] p = new PeerInfo[hosts.length];
        for (int r = 0; r < hosts.length; r++) {
            p[r] = new PeerInfo(r, hosts[r], 10 + r, "hash-" + hosts[r], "jvm-" + r, Map.of());
        }
        return p;
    }

    @Test
    void localRankAndSizeComeFromThePeerTableOnceBootstrapCompleted() {
        TransportContextImpl ctx = new TransportContextImpl(new byte[16], 5, 6, new byte[16], Config.defaults());
        assertEquals(-1, ctx.localRank(), "no launcher, no peer table yet");
        assertEquals(-1, ctx.localSize());
        ctx.setPeers(peers("a", "b", "a", "b", "a", "a"));
        assertEquals(3, ctx.localRank());
        assertEquals(4, ctx.localSize());
    }

    @Test
    void theLaunchersLocalRankIsKnownBeforeBootstrap() {
        Config c = Config.fromEnvironment(Map.of("RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "3", "MASTER_ADDR", "127.0.0.1",
                "MASTER_PORT", "29500", "JCCL_AUTH_TOKEN", "0123456789abcdef0123456789abcdef"));
        assertTrue(c.launch().isPresent(), "torchrun's variables make a launch");
        TransportContextImpl ctx = new TransportContextImpl(new byte[16], 3, 8, new byte[16], c);
        assertEquals(3, ctx.localRank());
        // a communicator split from the job's is not the launcher's: its local rank waits for the peer table
        TransportContextImpl split = new TransportContextImpl(new byte[16], 1, 2, new byte[16], c);
        assertEquals(-1, split.localRank());
    }

    @Test
    void everyRankOfAnEightGpuHostGetsItsOwnGpuAndItsNearestHca() {
        Path topo = FixtureFiles.topologyFile("dgx8", dir);
        Config c = Config.defaults().with("JCCL_TOPO_FILE", topo.toString());
        PeerInfo[] host = peers("n", "n", "n", "n", "n", "n", "n", "n");
        java.util.Set<String> nics = new java.util.HashSet<>();
        java.util.Set<String> gpus = new java.util.HashSet<>();
        for (int r = 0; r < 8; r++) {
            TransportContextImpl ctx = new TransportContextImpl(new byte[16], r, 8, new byte[16], c);
            ctx.setPeers(host);
            List<String> mine = ctx.nics();
            assertTrue(!mine.isEmpty(), "rank " + r + " has no NIC");
            nics.add(mine.getFirst());
            String gpu = ctx.gpu();
            assertNotNull(gpu, "rank " + r + " has no GPU");
            gpus.add(gpu);
        }
        assertEquals(8, gpus.size(), "8 ranks drive 8 different GPUs: " + gpus);
        assertEquals(8, nics.size(), "8 ranks use all 8 HCAs as their primary: " + nics);
    }

    @Test
    void noLocalRankNoGpuNoNics() {
        TransportContextImpl ctx = new TransportContextImpl(new byte[16], 0, 2, new byte[16], Config.defaults());
        assertNull(ctx.gpu());
        assertEquals(List.of(), ctx.nics());
    }
}
