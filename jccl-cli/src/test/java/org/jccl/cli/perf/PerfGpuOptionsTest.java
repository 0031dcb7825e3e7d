package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.cli.JcclCli;
import org.jccl.cuda.Cuda;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;

/** The GPU flags of {@code jccl perf} (-g, --device, --backend) and the parts of GPU mode that need no GPU. */
@Timeout(30)
class PerfGpuOptionsTest {

    private record Exec(int code, String out, String err) {
    }

    private static Exec exec(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new JcclCli());
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute(args);
        return new Exec(code, out.toString(), err.toString());
    }

    private static PerfCommand parse(String... args) {
        PerfCommand cmd = new PerfCommand();
        new CommandLine(cmd).parseArgs(args);
        return cmd;
    }

    @Test
    void defaultIsHostMemory() {
        assertEquals(DeviceOptions.CPU, parse("all_reduce").deviceOptions());
        assertEquals(DeviceOptions.CPU, parse("all_reduce", "--device", "cpu").deviceOptions());
        assertEquals(DeviceOptions.CPU, parse("all_reduce", "--backend", "jccl").deviceOptions());
        assertFalse(DeviceOptions.CPU.gpu());
    }

    @Test
    void gpuFlags() {
        DeviceOptions g = parse("all_reduce", "-g", "4").deviceOptions();
        assertEquals(new DeviceOptions(true, 4, DeviceOptions.Backend.JCCL), g, "-g implies --device cuda");
        assertEquals(4, g.gpusPerProcess());
        DeviceOptions cuda = parse("all_reduce", "--device", "CUDA").deviceOptions();
        assertEquals(new DeviceOptions(true, 0, DeviceOptions.Backend.JCCL), cuda);
        assertEquals(1, cuda.gpusPerProcess(), "--device cuda alone: one GPU per process");
        assertEquals(new DeviceOptions(true, 2, DeviceOptions.Backend.NCCL),
                parse("all_reduce", "--ngpus", "2", "--backend", "nccl", "--device", "cuda").deviceOptions());
        assertEquals(new DeviceOptions(true, 0, DeviceOptions.Backend.NCCL), parse("all_reduce", "--backend", "NCCL").deviceOptions(),
                "NCCL only runs on GPUs");
        assertEquals(new DeviceOptions(true, 8, DeviceOptions.Backend.JCCL), parse("all_reduce", "-g8").deviceOptions());
    }

    @Test
    void gpuFlagsReachTheRanksOfNp() {
        PerfCommand c = parse("-np", "2", "all_reduce", "-g", "1", "--backend", "nccl", "--device", "cuda", "-b", "8");
        assertEquals(List.of("all_reduce", "--ngpus", "1", "--backend", "nccl", "--device", "cuda", "--minbytes", "8"),
                PerfCommand.rankArgs(c.spec.commandLine().getParseResult()));
    }

    @Test
    void badGpuFlagsAreUsageErrors() {
        Object[][] cases = {
            {new String[] {"perf", "all_reduce", "--device", "gpu"}, "--device 'gpu' is not cpu or cuda"},
            {new String[] {"perf", "all_reduce", "--backend", "mpi"}, "--backend 'mpi' is not jccl or nccl"},
            {new String[] {"perf", "all_reduce", "-g", "0"}, "-g/--ngpus must be at least 1, got 0"},
            {new String[] {"perf", "all_reduce", "-g", "two"}, "two"},
            {new String[] {"perf", "all_reduce", "-g", "2", "--device", "cpu"}, "cannot be combined with --device cpu"},
            {new String[] {"perf", "all_reduce", "--backend", "nccl", "--device", "cpu"}, "--backend nccl runs on GPUs"},
            {new String[] {"perf", "all_reduce", "-np", "2", "-g", "2"}, "-np 2 with -g/--ngpus 2 is not supported yet"},
        };
        for (Object[] c : cases) {
            String[] args = (String[]) c[0];
            Exec e = exec(args);
            assertEquals(2, e.code(), String.join(" ", args) + "\n" + e.err());
            assertTrue(e.err().contains((String) c[1]), String.join(" ", args) + " -> " + e.err());
            assertFalse(e.err().contains("\tat "), "no stack trace: " + e.err());
        }
    }

    /** On a machine without CUDA (CI) every way into GPU mode ends with one line naming the reason, exit code 1. */
    @Test
    void withoutAGpuOneClearLine() {
        assumeFalse(Cuda.isAvailable(), "this machine has a GPU");
        assumeTrue(Config.fromEnvironment().launch().isEmpty(), "this test JVM runs inside a launcher's job");
        String reason = Cuda.unavailableReason();
        assertNotNull(reason);
        Object[][] cases = {
            {new String[] {"perf", "all_reduce", "--device", "cuda", "-b", "8", "-e", "1K"}, "--device cuda needs a GPU: "},
            {new String[] {"perf", "all_reduce", "-g", "2", "-b", "8", "-e", "1K"}, "-g/--ngpus 2 needs a GPU: "},
            {new String[] {"perf", "all_reduce", "--backend", "nccl"}, "--backend nccl needs a GPU: "},
            {new String[] {"perf", "-np", "2", "sendrecv", "--device", "cuda"}, "--device cuda needs a GPU: "},
        };
        for (Object[] c : cases) {
            String[] args = (String[]) c[0];
            Exec e = exec(args);
            String expected = "jccl perf: " + c[1] + reason;
            assertEquals(1, e.code(), String.join(" ", args) + "\n" + e.err());
            assertEquals(List.of(expected), e.err().lines().toList(), String.join(" ", args));
            assertEquals("", e.out());
        }
    }

    @Test
    void help() {
        Exec e = exec("perf", "--help");
        assertEquals(0, e.code());
        for (String flag : new String[] {"-g, --ngpus=N", "--device=cpu|cuda", "--backend=jccl|nccl"}) {
            assertTrue(e.out().contains(flag), flag + " in\n" + e.out());
        }
    }

    @Test
    void deviceBlockOfAGpuRun() {
        PerfOptions o = new PerfTesting.Opts().build();
        List<RankInfo> ranks = List.of(new RankInfo(0, 1234, "gpu-node", 0, "0000:18:00.0", "NVIDIA H200"),
                new RankInfo(1, 1234, "gpu-node", 1, "0000:2A:00.0", "NVIDIA H200"));
        List<String> l = Table.deviceReport(o, ranks, 2, "nccl 2.28.9 (/usr/lib/libnccl.so.2)");
        assertEquals("# nThread 1 nGpus 2 minBytes 8 maxBytes 4096 step: 4(factor) warmup iters: 1 iters: 3 agg iters: 1"
                + " validation: 1 graph: 0 unalign: 0", l.get(2));
        assertEquals("# Backend: nccl 2.28.9 (/usr/lib/libnccl.so.2)", l.get(3));
        assertEquals("#", l.get(4));
        assertEquals("# Using devices", l.get(5));
        assertEquals("#  Rank  0 Group  0 Pid   1234 on   gpu-node device  0 [0000:18:00.0] NVIDIA H200", l.get(6));
        assertEquals("#  Rank  1 Group  0 Pid   1234 on   gpu-node device  1 [0000:2A:00.0] NVIDIA H200", l.get(7));
        assertEquals(Table.deviceReport(o, List.of()), Table.deviceReport(o, List.of(), 1, null), "CPU mode unchanged");
    }

    @Test
    void jsonOfAGpuRun() {
        PerfOptions o = new PerfTesting.Opts().build();
        String doc = new JsonReport().document(o, List.of(new RankInfo(0, 1, "h", 3, "0000:18:00.0", "NVIDIA H200")), Map.of(),
                0, 1.0, -1, List.of(), 2, "jccl");
        @SuppressWarnings("unchecked")
        Map<String, Object> root = (Map<String, Object>) MiniJson.parse(doc);
        assertEquals("jccl", root.get("backend"));
        @SuppressWarnings("unchecked")
        Map<String, Object> config = (Map<String, Object>) root.get("config");
        assertEquals(2.0, config.get("ngpus"));
        String cpu = new JsonReport().document(o, List.of(), Map.of(), 0, 1.0, -1, List.of());
        assertFalse(cpu.contains("\"backend\""), cpu);
        assertTrue(cpu.contains("\"ngpus\":1,"), cpu);
    }

    @Test
    void ncclVersionText() {
        assertEquals("2.28.9", GpuPerfRunner.ncclVersionString(22809));
        assertEquals("2.18.10", GpuPerfRunner.ncclVersionString(21810));
        assertEquals("2.8.4", GpuPerfRunner.ncclVersionString(2804));
    }

    @Test
    void loadedLibraryComesFromTheProcessMaps() {
        assumeTrue(java.nio.file.Files.isReadable(java.nio.file.Path.of("/proc/self/maps")), "no /proc here");
        String java = GpuPerfRunner.loadedLibrary("libjava");
        assertNotNull(java);
        assertTrue(java.startsWith("/") && java.endsWith("libjava.so"), java);
        assertNull(GpuPerfRunner.loadedLibrary("libsurely-not-loaded-xyz"));
    }

    // ------------------------------------------------------------------ RankSync: threads, and processes over a host communicator

    /** Runs body(process, local) on processes x locals threads, each process with its own RankSync over a FakeCluster host. */
    private static List<Object> onThreads(int processes, int locals, boolean withHost, RankBody body) throws Exception {
        List<Communicator> hosts = withHost ? new FakeCluster(processes).comms() : null;
        List<RankSync> syncs = new ArrayList<>();
        for (int p = 0; p < processes; p++) {
            syncs.add(new RankSync(locals, hosts == null ? null : hosts.get(p), processes * locals, p == 0 ? 0 : -1));
        }
        ExecutorService pool = Executors.newFixedThreadPool(processes * locals);
        try {
            List<Future<Object>> fs = new ArrayList<>();
            for (int p = 0; p < processes; p++) {
                for (int l = 0; l < locals; l++) {
                    int pp = p;
                    int ll = l;
                    fs.add(pool.submit(() -> body.run(syncs.get(pp), pp * locals + ll, ll)));
                }
            }
            List<Object> results = new ArrayList<>();
            for (Future<Object> f : fs) {
                results.add(f.get(20, TimeUnit.SECONDS));
            }
            return results;
        } finally {
            pool.shutdownNow();
        }
    }

    private interface RankBody {
        Object run(RankSync sync, int rank, int local) throws Exception;
    }

    @Test
    void rankSyncCombinesEveryRankOfTheJob() throws Exception {
        for (int[] shape : new int[][] {{1, 4}, {2, 2}, {3, 1}, {1, 1}}) {
            int processes = shape[0];
            int locals = shape[1];
            int n = processes * locals;
            List<Object> res = onThreads(processes, locals, processes > 1, (sync, rank, local) -> {
                double v = 10 + rank; // rank 0: 10, rank n-1: 9 + n
                sync.barrier(local);
                return List.of(sync.reduce(local, v, RankSync.Reduction.RANK0), sync.reduce(local, v, RankSync.Reduction.MEAN),
                        sync.reduce(local, v, RankSync.Reduction.MIN), sync.reduce(local, v, RankSync.Reduction.MAX),
                        sync.reduce(local, (long) rank, RankSync.Reduction.SUM), sync.reduce(local, 7L * (rank == 0 ? 1 : 0),
                                RankSync.Reduction.RANK0), sync.reduce(local, (long) rank, RankSync.Reduction.MAX));
            });
            double mean = 10 + (n - 1) / 2.0;
            List<Object> expected = List.of(10.0, mean, 10.0, 9.0 + n, (long) n * (n - 1) / 2, 7L, (long) n - 1);
            for (Object r : res) {
                assertEquals(expected, r, processes + " x " + locals);
            }
        }
    }

    @Test
    void averageFlagPicksTheReduction() {
        assertEquals(RankSync.Reduction.RANK0, RankSync.forAverage(0));
        assertEquals(RankSync.Reduction.MEAN, RankSync.forAverage(1));
        assertEquals(RankSync.Reduction.MIN, RankSync.forAverage(2));
        assertEquals(RankSync.Reduction.MAX, RankSync.forAverage(3));
    }

    @Test
    void aFailedRankReleasesTheOthers() throws Exception {
        RankSync sync = new RankSync(3, null, 3, 0);
        CyclicBarrier started = new CyclicBarrier(3);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            List<Future<?>> waiting = new ArrayList<>();
            for (int l = 1; l <= 2; l++) {
                int local = l;
                waiting.add(pool.submit(() -> {
                    started.await();
                    return sync.reduce(local, 1.0, RankSync.Reduction.SUM);
                }));
            }
            started.await();
            Thread.sleep(100);
            sync.fail();
            for (Future<?> f : waiting) {
                java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                        () -> f.get(10, TimeUnit.SECONDS));
                assertTrue(e.getCause() instanceof RankSync.Aborted, e.toString());
            }
            assertThrows(RankSync.Aborted.class, () -> sync.barrier(0), "a rank arriving after the failure stops at once");
        } finally {
            pool.shutdownNow();
        }
    }
}
