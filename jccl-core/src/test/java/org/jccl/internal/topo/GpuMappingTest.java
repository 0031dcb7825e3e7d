package org.jccl.internal.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.InvalidUsageException;
import org.jccl.internal.topo.GpuMapping.Claim;
import org.jccl.internal.topo.GpuMapping.Device;
import org.jccl.internal.topo.GpuMapping.Reason;
import org.jccl.internal.topo.GpuMapping.Result;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The GPU-per-process rule ({@link GpuMapping}) on the dgx8 fixture (8 GPUs at 0000:13, 14, 33, 34,
 * 93, 94, b3, b4), every rule and every error, and the duplicate check on a gathered table.
 */
@Timeout(30)
class GpuMappingTest {

    @TempDir
    Path dir;

    /** NVML stand-in: GPU at bus 0000:XY:00.0 has UUID GPU-XYa1b2c3-1111-2222-3333-4444555566XY. */
    static GpuProbe uuids() {
        return new GpuProbe() {
            @Override
            public boolean available() {
                return true;
            }

            @Override
            public String status() {
                return "ok";
            }

            @Override
            public String uuid(String busId) {
                String xy = busId.substring(5, 7);
                return "GPU-" + xy + "a1b2c3-1111-2222-3333-4444555566" + xy;
            }

            @Override
            public List<String> nvlinkPeers(String busId) {
                return List.of();
            }

            @Override
            public String p2pRead(String busA, String busB) {
                return "OK";
            }
        };
    }

    private Topology dgx() {
        return Fixtures.discover("dgx8", dir.resolve("plain"));
    }

    private Topology dgxWithUuids() {
        Path root = FixtureTree.expand("dgx8", dir.resolve("nvml"));
        return new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), uuids(), "/dev/shm").discover();
    }

    private static Result choose(Topology t, String cvd, String cudaDevice, int localRank, int localSize) {
        return GpuMapping.choose(GpuMapping.devices(CudaVisibleDevices.resolve(t, cvd)), cudaDevice, localRank, localSize, cvd);
    }

    private static void assertHas(String text, String... parts) {
        assertTrue(text != null, "no message");
        for (String p : parts) {
            assertTrue(text.contains(p), "missing '" + p + "' in: " + text);
        }
    }

    @Test
    void everyRankSeesEveryGpuAndTakesItsLocalRank() {
        Topology t = dgx();
        for (int r = 0; r < 8; r++) {
            Result res = choose(t, null, null, r, 8);
            assertTrue(res.ok(), res.error());
            assertEquals(r, res.choice().device().ordinal());
            assertEquals(t.gpus().get(r).pci().address(), res.choice().device().busId());
            assertEquals(Reason.LOCAL_RANK, res.choice().reason());
            assertHas(res.choice().why(), "by local rank " + r + " of 8");
        }
        // Four ranks on an eight-GPU host: GPUs 4-7 idle, which is allowed.
        assertEquals("0000:34:00.0", choose(t, null, null, 3, 4).choice().device().busId());
    }

    @Test
    void aProcessThatSeesOneGpuUsesItWhateverItsLocalRank() {
        Topology t = dgx();
        for (int r = 0; r < 8; r++) {
            // CUDA_VISIBLE_DEVICES=$LOCAL_RANK: rank r sees GPU r only, as CUDA device 0.
            Result res = choose(t, Integer.toString(r), null, r, 8);
            assertTrue(res.ok(), res.error());
            assertEquals(0, res.choice().device().ordinal());
            assertEquals(t.gpus().get(r).pci().address(), res.choice().device().busId());
            assertEquals(Reason.ONLY_VISIBLE, res.choice().reason());
        }
        // Even with no local rank at all (a launcher that sets none).
        assertEquals(Reason.ONLY_VISIBLE, choose(t, "6", null, -1, -1).choice().reason());
    }

    @Test
    void aReorderedListIsFollowedInItsOrder() {
        Topology t = dgx();
        String[] expect = {"0000:34:00.0", "0000:33:00.0", "0000:14:00.0", "0000:13:00.0"};
        for (int r = 0; r < 4; r++) {
            Result res = choose(t, "3,2,1,0", null, r, 4);
            assertEquals(expect[r], res.choice().device().busId(), "local rank " + r);
            assertEquals(r, res.choice().device().ordinal());
        }
    }

    @Test
    void uuidsAndUniquePrefixesSelectGpus() {
        Topology t = dgxWithUuids();
        Result one = choose(t, "GPU-b4", null, 5, 8);
        assertEquals("0000:b4:00.0", one.choice().device().busId());
        assertEquals("GPU-b4a1b2c3-1111-2222-3333-4444555566b4", one.choice().device().uuid());
        assertEquals(Reason.ONLY_VISIBLE, one.choice().reason());
        assertEquals("0000:14:00.0", choose(t, "GPU-13a1,GPU-14a1", null, 1, 2).choice().device().busId());
        // Without NVML a UUID entry is still one visible device: its bus id is unknown, its UUID the entry.
        Result blind = choose(dgx(), "GPU-b4a1", null, 0, 4);
        assertTrue(blind.ok(), blind.error());
        assertEquals("", blind.choice().device().busId());
        assertEquals("GPU-b4a1", blind.choice().device().uuid());
    }

    @Test
    void migInstancesAreDevicesOfTheirOwn() {
        Topology t = dgxWithUuids();
        // The older form names its GPU: sysfs places it; its identity is the MIG name.
        String old = "MIG-GPU-93a1b2c3-1111-2222-3333-444455556693/1/0";
        Result res = choose(t, old, null, 2, 4);
        assertEquals(Reason.ONLY_VISIBLE, res.choice().reason());
        assertEquals("0000:93:00.0", res.choice().device().busId());
        assertEquals(old, res.choice().device().uuid());
        CudaVisibleDevices cvd = CudaVisibleDevices.resolve(t, old);
        assertTrue(cvd.entries().getFirst().mig());
        assertEquals(List.of(old), cvd.unresolved());
        // The current form cannot be placed without NVML's MIG queries, but is still the process's one device.
        Result mig = choose(t, "MIG-8f1e9b7a-0c1d-5e2f-a3b4-c5d6e7f80912", null, 0, 2);
        assertEquals("MIG-8f1e9b7a-0c1d-5e2f-a3b4-c5d6e7f80912", mig.choice().device().uuid());
        assertEquals("", mig.choice().device().busId());
        // Two MIG instances: local rank r takes instance r.
        Result second = choose(t, "MIG-aaaa1111,MIG-bbbb2222", null, 1, 2);
        assertEquals("MIG-bbbb2222", second.choice().device().uuid());
        assertEquals(1, second.choice().device().ordinal());
    }

    @Test
    void jcclCudaDeviceWinsByIndexOrUuid() {
        Topology t = dgxWithUuids();
        Result idx = choose(t, "4,5,6,7", "2", 0, 4);
        assertEquals("0000:b3:00.0", idx.choice().device().busId(), "index 2 of the visible 4,5,6,7 is GPU 6");
        assertEquals(Reason.SETTING, idx.choice().reason());
        assertEquals("JCCL_CUDA_DEVICE=2", idx.choice().why());
        Result uuid = choose(t, null, "gpu-94A1", 0, 8);
        assertEquals("0000:94:00.0", uuid.choice().device().busId(), "a prefix, in any case");
        Result beatsOnly = choose(t, "3", "0", 5, 8);
        assertEquals(Reason.SETTING, beatsOnly.choice().reason());

        assertHas(choose(t, "4,5,6,7", "4", 1, 4).error(), "JCCL_CUDA_DEVICE=4 names CUDA device 4, but local rank 1 of 4 sees 4 GPUs",
                "0: 0000:93:00.0, GPU-93a1b2c3", "CUDA_VISIBLE_DEVICES=4,5,6,7", "index below 4", "by its UUID (nvidia-smi -L)");
        assertHas(choose(t, null, "GPU-1", 0, 8).error(), "JCCL_CUDA_DEVICE=GPU-1 matches 2 of the GPUs", "0000:13:00.0",
                "0000:14:00.0", "give more of the UUID");
        assertHas(choose(t, "0,1", "GPU-b4", 0, 2).error(), "JCCL_CUDA_DEVICE=GPU-b4 matches no GPU that local rank 0 of 2 sees",
                "CUDA_VISIBLE_DEVICES=0,1", "a UUID that CUDA_VISIBLE_DEVICES hides cannot be used");
        assertHas(choose(dgx(), null, "GPU-b4", 0, 8).error(), "(UUIDs not known here)");
    }

    @Test
    void everyOtherLayoutIsAnErrorThatNamesRankSizeGpusAndFixes() {
        Topology t = dgx();
        String tooFew = choose(t, "0,1", null, 1, 4).error();
        assertHas(tooFew, "local rank 1 of 4 has no GPU of its own", "sees 2 GPUs (0: 0000:13:00.0; 1: 0000:14:00.0)",
                "CUDA_VISIBLE_DEVICES=0,1", "for 4 ranks on this host", "exactly one GPU, or at least as many GPUs",
                "CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK", "srun --gpus-per-task=1", "JCCL_CUDA_DEVICE", "at most 2 ranks per host");
        // The same verdict for rank 0, which could have had a GPU: every rank of the layout fails alike.
        assertFalse(choose(t, "0,1", null, 0, 4).ok());
        assertHas(choose(t, "", null, 0, 2).error(), "local rank 0 of 2 sees no GPU (CUDA_VISIBLE_DEVICES=)", "unset CUDA_VISIBLE_DEVICES");
        assertHas(choose(t, null, null, -1, -1).error(), "the local rank of this process is unknown", "sees 8 GPUs",
                "CUDA_VISIBLE_DEVICES unset", "JCCL_LOCAL_RANK");
        assertHas(choose(t, "0,1,2", null, 5, -1).error(), "local rank 5 has no GPU of its own", "sees 3 GPUs");
        InvalidUsageException e = assertThrows(InvalidUsageException.class, () -> choose(t, "0,1", null, 1, 4).orThrow());
        assertEquals(tooFew, e.getMessage());
    }

    @Test
    void theSettingsGrammarIsCheckedAtValidation() {
        for (String ok : List.of("0", "7", "GPU-5e0f", "gpu-5E0F-1234", "MIG-8f1e9b7a-0c1d", " 3 ")) {
            Config.defaults().with("JCCL_CUDA_DEVICE", ok).validate();
        }
        for (String bad : List.of("-1", "cuda:0", "GPU-", "0,1", "GPU-xyz", "1.5")) {
            ConfigException e = assertThrows(ConfigException.class, () -> Config.defaults().with("JCCL_CUDA_DEVICE", bad).validate(), bad);
            assertHas(e.getMessage(), "JCCL_CUDA_DEVICE='" + bad + "' is not allowed", "a GPU index", "UUID");
        }
        assertHas(assertThrows(ConfigException.class, () -> Config.defaults().with("JCCL_CUDA_DEVICE", "0,1").validate()).getMessage(),
                "it names one GPU, unlike CUDA_VISIBLE_DEVICES");
    }

    // ------------------------------------------------------------------ the gathered table

    private static Claim claim(int rank, String hostHash, String host, String bus, String uuid, String cvd, String why) {
        return Claim.of(rank, hostHash, host, 1000 + rank, rank, new Device(0, bus, uuid), cvd, why);
    }

    private static byte[] gather(List<Claim> claims) {
        byte[] table = new byte[claims.size() * Claim.BYTES];
        for (int i = 0; i < claims.size(); i++) {
            System.arraycopy(claims.get(i).encode(), 0, table, i * Claim.BYTES, Claim.BYTES);
        }
        return table;
    }

    @Test
    void claimsSurviveTheWire() {
        Claim a = Claim.of(3, "id:a", "dgx01", 4242, 1, new Device(2, "0000:1B:00.0", "GPU-5e0f"), "3,2,1,0", "by local rank 1 of 4");
        Claim b = Claim.of(4, "id:b", "dgx02", 7, -1, new Device(0, "", ""), null, "the only GPU this process sees");
        List<Claim> back = Claim.decodeAll(gather(List.of(a, b)), 2);
        assertEquals(new Claim(0, a.hostKey(), "dgx01", 4242, 1, new Device(2, "0000:1b:00.0", "GPU-5e0f"), "3,2,1,0",
                "by local rank 1 of 4"), back.get(0), "the rank is the slot's, the bus id lower case");
        assertEquals(new Claim(1, b.hostKey(), "dgx02", 7, -1, new Device(0, "", ""), null, "the only GPU this process sees"), back.get(1),
                "an unset CUDA_VISIBLE_DEVICES stays unset, not empty");
        // A long CUDA_VISIBLE_DEVICES (sixteen UUIDs) is cut to fit, never overflows the record.
        String many = String.join(",", java.util.Collections.nCopies(16, "GPU-5e0f1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b"));
        Claim c = Claim.of(0, "h", "x".repeat(300), 1, 0, new Device(0, "0000:13:00.0", "GPU-1"), many, "w".repeat(500));
        Claim d = Claim.decode(c.encode(), 0, 0);
        assertTrue(many.startsWith(d.cvd()) && d.cvd().length() == 480, d.cvd());
        assertEquals(128, d.host().length());
        assertNotEqualsKey(Claim.of(0, "id:a", "h", 1, 0, new Device(0, "", ""), null, ""), Claim.of(0, "id:b", "h", 1, 0,
                new Device(0, "", ""), null, ""));
    }

    private static void assertNotEqualsKey(Claim a, Claim b) {
        assertFalse(a.hostKey().equals(b.hostKey()), "host keys of different hosts differ");
    }

    @Test
    void twoRanksOfOneHostOnOneGpuFailWithBothNamed() {
        List<Claim> table = List.of(
                claim(0, "hostA", "dgx01", "0000:13:00.0", "GPU-13a1", "2", "the only GPU this process sees"),
                claim(1, "hostA", "dgx01", "0000:14:00.0", "GPU-14a1", "1", "the only GPU this process sees"),
                claim(2, "hostA", "dgx01", "0000:13:00.0", "GPU-13a1", "2", "the only GPU this process sees"));
        String m = GpuMapping.conflicts(Claim.decodeAll(gather(table), 3));
        assertHas(m, "two ranks on one GPU: ranks 0 and 2 are on one GPU of host dgx01, 0000:13:00.0, GPU-13a1",
                "rank 0 (host dgx01, pid 1000, local rank 0) as CUDA device 0 (CUDA_VISIBLE_DEVICES=2; the only GPU this process sees)",
                "rank 2 (host dgx01, pid 1002, local rank 2) as CUDA device 0 (CUDA_VISIBLE_DEVICES=2;",
                "Every rank needs a GPU of its own", "CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK", "jccl doctor --cuda-visible-devices-per-rank");
        assertFalse(m.contains("rank 1 "), m);
        // Three on one GPU, and a second shared GPU: all named.
        List<Claim> worse = new ArrayList<>(table);
        worse.add(claim(3, "hostA", "dgx01", "0000:13:00.0", "GPU-13a1", null, "by local rank 0 of 4"));
        worse.add(claim(4, "hostA", "dgx01", "0000:14:00.0", "GPU-14a1", null, "JCCL_CUDA_DEVICE=1"));
        assertHas(GpuMapping.conflicts(worse), "ranks 0, 2 and 3 are on one GPU", "ranks 1 and 4 are on one GPU",
                "rank 3 (host dgx01, pid 1003, local rank 3) as CUDA device 0 (CUDA_VISIBLE_DEVICES unset; by local rank 0 of 4)",
                "JCCL_CUDA_DEVICE=1");
    }

    @Test
    void distinctGpusOtherHostsAndMigSlicesAreNoConflict() {
        assertNull(GpuMapping.conflicts(List.of(
                claim(0, "hostA", "n1", "0000:13:00.0", "GPU-13a1", "0", "x"),
                claim(1, "hostA", "n1", "0000:14:00.0", "GPU-14a1", "1", "x"),
                // The same UUID on another host identity (JCCL_HOSTID makes one machine several): not this check's business.
                claim(2, "hostB", "n1", "0000:13:00.0", "GPU-13a1", "0", "x"),
                // Two MIG instances of one GPU: one bus id, two devices.
                claim(3, "hostA", "n1", "0000:93:00.0", "MIG-aaaa", "MIG-aaaa", "x"),
                claim(4, "hostA", "n1", "0000:93:00.0", "MIG-bbbb", "MIG-bbbb", "x"))));
        // UUIDs unknown: the bus id decides.
        assertHas(GpuMapping.conflicts(List.of(claim(0, "h", "n", "0000:13:00.0", "", "0", "x"), claim(1, "h", "n", "0000:13:00.0", "", "0",
                "x"))), "ranks 0 and 1 are on one GPU of host n, 0000:13:00.0:");
        // UUIDs compare without regard to case.
        assertHas(GpuMapping.conflicts(List.of(claim(0, "h", "n", "", "GPU-ABC", "0", "x"), claim(1, "h", "n", "", "gpu-abc", "0", "x"))),
                "ranks 0 and 1");
    }

    /**
     * The exchange as GPU creation runs it, over a real host communicator (ranks as threads, no GPU):
     * each rank encodes its claim, one all-gather, each decodes and judges the same table, so every
     * rank raises the same message; the host identity and local place come from the peer table.
     */
    @Test
    void everyRankJudgesTheSameGatheredTable() throws Exception {
        List<org.jccl.Communicator> comms = org.jccl.Jccl.initLocal(3);
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(3);
        try {
            List<java.util.concurrent.Future<String>> verdicts = new ArrayList<>();
            for (org.jccl.Communicator c : comms) {
                verdicts.add(pool.submit(() -> {
                    org.jccl.internal.runtime.HostPeers.Layout l = org.jccl.internal.runtime.HostPeers.of(c);
                    assertEquals(c.rank(), l.localRank());
                    assertEquals(3, l.localSize());
                    // Ranks 0 and 2 on the GPU at 0000:13:00.0, rank 1 on 0000:14:00.0.
                    String bus = c.rank() == 1 ? "0000:14:00.0" : "0000:13:00.0";
                    Claim mine = Claim.of(c.rank(), l.hostHash(), l.host(), ProcessHandle.current().pid(), l.localRank(),
                            new Device(0, bus, "GPU-" + bus.substring(5, 7)), "2", "the only GPU this process sees");
                    byte[] all = new byte[3 * Claim.BYTES];
                    c.allGather(org.jccl.Buffer.of(mine.encode()), org.jccl.Buffer.of(all));
                    return GpuMapping.conflicts(Claim.decodeAll(all, 3));
                }));
            }
            String first = verdicts.get(0).get(60, java.util.concurrent.TimeUnit.SECONDS);
            assertHas(first, "ranks 0 and 2 are on one GPU of host", "0000:13:00.0, GPU-13", "rank 0 (host", "rank 2 (host",
                    "as CUDA device 0 (CUDA_VISIBLE_DEVICES=2; the only GPU this process sees)");
            for (java.util.concurrent.Future<String> f : verdicts) {
                assertEquals(first, f.get(60, java.util.concurrent.TimeUnit.SECONDS), "every rank raises the same message");
            }
        } finally {
            pool.shutdownNow();
            comms.forEach(org.jccl.Communicator::close);
        }
    }
}
