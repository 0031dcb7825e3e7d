package org.jccl.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.InvalidUsageException;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.CudaDriver;
import org.jccl.internal.topo.GpuMapping;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The GPU-per-process rule against what CUDA enumerates, and the creation-time check that refuses two
 * ranks on one GPU, on the GPU machine (skipped without a GPU). Ranks are threads of this JVM with
 * in-JVM host communicators; the multi-process layouts (one visible GPU per process by index and by
 * UUID, a reordered list, two processes on one GPU) are scripts/gpu-launch-check.sh's.
 */
@Timeout(120)
class GpuPerProcessTest {

    private static void requireGpus(int n) {
        Assumptions.assumeTrue(Cuda.isAvailable(), () -> "skipped: no GPU here: " + Cuda.unavailableReason());
        Assumptions.assumeTrue(Cuda.deviceCount() >= n, () -> "skipped: needs " + n + " GPUs, " + Cuda.deviceCount() + " visible");
    }

    @Test
    void uuidsAreFormattedLikeNvidiaSmi() {
        byte[] b = new byte[16];
        for (int i = 0; i < 16; i++) {
            b[i] = (byte) (0xf0 + i);
        }
        assertEquals("GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff", CudaDriver.formatUuid("GPU-", b));
        assertEquals("MIG-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff", CudaDriver.formatUuid("MIG-", b));
    }

    @Test
    void theRuleAgreesWithWhatCudaEnumerates() {
        requireGpus(1);
        int n = Cuda.deviceCount();
        Config none = Config.defaults();
        Set<String> uuids = new HashSet<>();
        for (int r = 0; r < n; r++) {
            CudaDevice d = Cuda.device(r);
            assertTrue(d.uuid().matches("(GPU|MIG)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), d.uuid());
            assertTrue(uuids.add(d.uuid()), "UUIDs are distinct: " + d.uuid());
            GpuMapping.Result res = Cuda.select(r, n, none);
            assertTrue(res.ok(), res.error());
            assertEquals(r, res.choice().device().ordinal());
            // CUDA's bus id, in sysfs's form (lower case, 4-digit domain), the form doctor and launcher compare.
            String bus = res.choice().device().busId();
            assertTrue(bus.matches("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]") && d.pciBusId().toLowerCase(Locale.ROOT).endsWith(bus
                    .substring(5)), d.pciBusId() + " -> " + bus);
            assertEquals(d.uuid(), res.choice().device().uuid());
            assertEquals(n == 1 ? GpuMapping.Reason.ONLY_VISIBLE : GpuMapping.Reason.LOCAL_RANK, res.choice().reason());
        }
        if (n >= 2) {
            GpuMapping.Result tooMany = Cuda.select(0, n + 1, none);
            assertFalse(tooMany.ok());
            assertTrue(tooMany.error().contains("local rank 0 of " + (n + 1) + " has no GPU of its own: it sees " + n + " GPUs"), tooMany.error());
            assertTrue(tooMany.error().contains(Cuda.device(1).mappingDevice().busId()), tooMany.error());
        }
        // JCCL_CUDA_DEVICE by a prefix of the last GPU's UUID wins over the local rank.
        CudaDevice last = Cuda.device(n - 1);
        CudaDevice chosen = Cuda.deviceFor(0, n, none.with("JCCL_CUDA_DEVICE", last.uuid().substring(0, 13)));
        assertEquals(last, chosen);
        assertEquals("JCCL_CUDA_DEVICE=" + last.uuid().substring(0, 13), chosen.chosenBecause(0));
        assertEquals("given by the program", chosen.chosenBecause(1), "a reason recorded for local rank 0 is not another rank's");
        InvalidUsageException e = org.junit.jupiter.api.Assertions.assertThrows(InvalidUsageException.class,
                () -> Cuda.deviceFor(0, n, none.with("JCCL_CUDA_DEVICE", Integer.toString(n))));
        assertTrue(e.getMessage().contains("JCCL_CUDA_DEVICE=" + n + " names CUDA device " + n), e.getMessage());
    }

    /** Runs {@code create} on each rank's thread over in-JVM host communicators; returns each rank's result or exception. */
    private static List<Object> onRanks(int n, BiFunction<Communicator, Integer, Object> create) throws Exception {
        List<Communicator> hosts = Jccl.initLocal(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Future<Object>> fs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                fs.add(pool.submit(() -> {
                    try {
                        return create.apply(hosts.get(rank), rank);
                    } catch (RuntimeException ex) {
                        return ex;
                    }
                }));
            }
            List<Object> out = new ArrayList<>();
            for (Future<Object> f : fs) {
                out.add(f.get(60, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            pool.shutdownNow();
            hosts.forEach(Communicator::close);
        }
    }

    @Test
    void twoRanksOnOneGpuFailOnEveryRankNamingBoth() throws Exception {
        requireGpus(1);
        CudaDevice gpu = Cuda.device(0);
        List<Object> jccl = onRanks(2, (host, r) -> CudaCommunicator.create(host, gpu, Config.defaults()));
        List<Object> results = new ArrayList<>(jccl);
        if (NcclCommunicator.isAvailable()) {
            results.addAll(onRanks(2, (host, r) -> NcclCommunicator.create(host, gpu)));
        }
        for (int i = 0; i < results.size(); i++) {
            Object o = results.get(i);
            if (o instanceof DeviceCommunicator c) {
                c.close();
            }
            assertTrue(o instanceof InvalidUsageException, "every rank must fail, rank " + (i % 2) + " got " + o);
            String m = ((InvalidUsageException) o).getMessage();
            assertTrue(m.startsWith("rank " + (i % 2) + ": " + (i < 2 ? "CudaCommunicator" : "NcclCommunicator") + ".create: two ranks on"
                    + " one GPU: ranks 0 and 1 are on one GPU of host "), m);
            assertTrue(m.contains(gpu.mappingDevice().identity()), m);
            // Each rank's CUDA_VISIBLE_DEVICES as the mapping prints it ("=..." or "unset"), and the program's choice, not a
            // reason left on the shared device object by an earlier rule call of this JVM.
            String cvd = GpuMapping.cvdText(System.getenv("CUDA_VISIBLE_DEVICES"));
            assertTrue(m.contains("rank 0 (host ") && m.contains("rank 1 (host ") && m.contains("as CUDA device 0 (" + cvd + "; given by the program)"), m);
        }
    }

    @Test
    void ranksOnTheirOwnGpusPassTheCheckAndReduce() throws Exception {
        requireGpus(2);
        List<Object> results = onRanks(2, (host, r) -> {
            CudaDevice d = Cuda.deviceFor(r, 2, Config.defaults());
            assertEquals(r, d.ordinal());
            CudaCommunicator c = CudaCommunicator.create(host, d, Config.defaults());
            try (Arena a = Arena.ofConfined(); DeviceBuffer buf = d.allocate(256, DataType.FLOAT32); CudaStream s = d.createStream()) {
                MemorySegment h = a.allocate(256 * 4L);
                for (int i = 0; i < 256; i++) {
                    h.setAtIndex(ValueLayout.JAVA_FLOAT, i, r + 1);
                }
                buf.copyFrom(h);
                c.allReduce(buf, buf, ReduceOp.SUM, s);
                s.synchronize();
                buf.copyTo(h);
                return h.getAtIndex(ValueLayout.JAVA_FLOAT, 255);
            } finally {
                c.close();
            }
        });
        assertEquals(List.of(3.0f, 3.0f), results, "1 + 2 on both ranks");
    }
}
