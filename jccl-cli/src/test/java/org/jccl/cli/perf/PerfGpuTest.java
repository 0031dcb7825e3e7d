package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.cli.JcclCli;
import org.jccl.cuda.Cuda;
import org.jccl.cuda.DeviceCommunicator;
import org.jccl.cuda.NcclCommunicator;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code jccl perf} on GPUs. Skipped where there is no GPU (CI). Two kinds of test: the real
 * backends (jccl's kernels, and NCCL where libnccl.so.2 loads) through the command line, and the
 * benchmark's harness (buffers, streams, threads, checks, report) on real GPU memory with {@link
 * StagedDeviceCluster}, a host-staged stand-in communicator that is right by construction, so a
 * harness bug cannot hide behind a backend bug or the reverse.
 */
@Timeout(300)
class PerfGpuTest {

    @BeforeEach
    void needsGpu() {
        assumeTrue(Cuda.isAvailable(), "skipped: no GPU here: " + Cuda.unavailableReason());
        assumeTrue(Config.fromEnvironment().launch().isEmpty(), "skipped: this test JVM runs inside a launcher's job");
    }

    private record Exec(int code, String out, String err) {
        List<String> rows() {
            return out.lines().filter(l -> !l.startsWith("#") && !l.isBlank()).toList();
        }
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

    /** The #wrong columns of every row (out of place, in place), N/A left out. */
    private static List<String> wrongColumns(List<String> rows) {
        List<String> w = new ArrayList<>();
        for (String row : rows) {
            String[] f = PerfTesting.fields(row);
            assertEquals(13, f.length, row);
            w.add(f[8]);
            w.add(f[12]);
        }
        w.removeIf("N/A"::equals);
        return w;
    }

    /**
     * Exit code 0, the device block (nGpus per process, one line per rank with its GPU), every row
     * of 8 B to 1 MiB by 4 checked and right, the footer, no stack trace.
     */
    private static void assertCleanRun(Exec e, int gpusPerProcess, int ranks, String backendPrefix) {
        String all = e.out() + "\n--- stderr ---\n" + e.err();
        assertEquals(0, e.code(), all);
        List<String> lines = e.out().lines().toList();
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("# nThread 1 nGpus " + gpusPerProcess + " minBytes 8 maxBytes 1048576 ")), all);
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("# Backend: " + backendPrefix)), all);
        for (int r = 0; r < ranks; r++) {
            String prefix = "#  Rank " + String.format("%2d", r) + " Group  0 Pid ";
            String device = " device " + String.format("%2d", r) + " [";
            assertTrue(lines.stream().anyMatch(l -> l.startsWith(prefix) && l.contains(device)),
                    "device line of rank " + r + "\n" + all);
        }
        List<String> rows = e.rows();
        assertEquals(SizeSweep.sizes(8, 1 << 20, 1 << 20, 4).size(), rows.size(), "8 B to 1 MiB by 4\n" + all);
        for (String w : wrongColumns(rows)) {
            assertEquals("0", w, all);
        }
        assertTrue(e.out().contains("# Out of bounds values : 0 OK"), all);
        assertTrue(e.out().contains("# Avg bus bandwidth    : "), all);
        assertFalse(e.err().contains("\tat "), "no stack trace\n" + all);
    }

    @Test
    void jcclBackendOnEveryGpu() {
        int n = Cuda.deviceCount();
        Exec e = exec("perf", "all_reduce", "-g", Integer.toString(n), "-b", "8", "-e", "1M", "-f", "4", "-c", "1");
        assertCleanRun(e, n, n, "jccl");
    }

    @Test
    void ncclBackendOnEveryGpu() {
        assumeTrue(NcclCommunicator.isAvailable(), "skipped: no NCCL here: " + NcclCommunicator.unavailableReason());
        int n = Cuda.deviceCount();
        Exec e = exec("perf", "all_reduce", "-g", Integer.toString(n), "--backend", "nccl", "-b", "8", "-e", "1M", "-f", "4",
                "-c", "1");
        assertCleanRun(e, n, n, "nccl");
    }

    /** -np P --device cuda: P rank processes, GPU = local rank, the host communicator around them. */
    @Test
    void oneGpuPerProcess() {
        int n = Cuda.deviceCount();
        assumeTrue(n >= 2, "skipped: needs 2 GPUs, " + n + " visible");
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream saved = System.out;
        Exec e;
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            e = exec("perf", "-np", "2", "all_reduce", "--device", "cuda", "-b", "8", "-e", "1M", "-f", "4", "-c", "1");
        } finally {
            System.setOut(saved);
        }
        Exec withOut = new Exec(e.code(), captured.toString(StandardCharsets.UTF_8), e.err());
        assertCleanRun(withOut, 1, 2, "jccl");
        assertTrue(e.err().contains("(local rank 1) on GPU 1 ["), "the mapping is logged\n" + e.err());
    }

    // ------------------------------------------------------------------ the harness, with a stand-in communicator

    private static PerfTesting.Run runStaged(StagedDeviceCluster cluster, PerfOptions o) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        List<DeviceCommunicator> comms = cluster.comms();
        int code = GpuPerfRunner.runLocal(null, comms, o, new PrintWriter(out, true), new PrintWriter(err, true),
                Map.of("NCCL_DEBUG", "WARN"));
        return new PerfTesting.Run(out.toString(), err.toString(), new int[] {code});
    }

    private static PerfTesting.Opts small(Collective c) {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(c);
        o.min = 8;
        o.max = 256 << 10;
        o.factor = 8;
        o.iters = 3;
        o.root = PerfOptions.ALL_ROOTS;
        return o;
    }

    @Test
    void harnessChecksEveryCollectiveOnGpuMemory() {
        int n = Cuda.deviceCount();
        for (Collective c : Collective.values()) {
            PerfTesting.Run r = runStaged(new StagedDeviceCluster(Cuda.devicesList()), small(c).build());
            String all = c + "\n" + r.out() + "\n--- stderr ---\n" + r.err();
            assertEquals(0, r.code(), all);
            int roots = c.hasRoot() ? n : 1;
            assertEquals(6 * roots, r.rows().size(), all);
            for (String w : wrongColumns(r.rows())) {
                assertEquals("0", w, all);
            }
            assertTrue(r.out().contains("# Backend: staged"), all);
            assertTrue(r.out().contains("# Out of bounds values : 0 OK"), all);
        }
    }

    @Test
    void harnessNoticesWrongResults() {
        StagedDeviceCluster cluster = new StagedDeviceCluster(Cuda.devicesList());
        cluster.host.corruptRank = Cuda.deviceCount() - 1;
        PerfTesting.Opts o = small(Collective.ALL_REDUCE);
        PerfTesting.Run r = runStaged(cluster, o.build());
        String all = r.out() + "\n--- stderr ---\n" + r.err();
        assertEquals(1, r.code(), all);
        assertTrue(wrongColumns(r.rows()).stream().noneMatch("0"::equals), all);
        assertTrue(r.out().contains("# Out of bounds values : 12 FAILED"), all);
    }

    @Test
    void harnessBlockingMedianTypesAndJson(@TempDir Path dir) throws Exception {
        PerfTesting.Opts o = small(Collective.REDUCE_SCATTER);
        o.types = List.of(org.jccl.DataType.BFLOAT16, org.jccl.DataType.INT8);
        o.ops = List.of(org.jccl.ReduceOp.MAX, org.jccl.ReduceOp.AVG);
        o.blocking = 1;
        o.json = dir.resolve("r.json");
        PerfTesting.Run r = runStaged(new StagedDeviceCluster(Cuda.devicesList()), o.build());
        assertEquals(0, r.code(), r.out() + r.err());
        assertEquals(4 * 6, r.rows().size(), r.out());
        String doc = Files.readString(o.json);
        assertTrue(doc.contains("\"backend\":\"staged\""), doc);
        assertTrue(doc.contains("\"ngpus\":" + Cuda.deviceCount()), doc);
        MiniJson.parse(doc);

        PerfTesting.Opts m = small(Collective.ALL_GATHER);
        PerfOptions median = new PerfOptions(m.collective, m.min, m.max, m.step, m.factor, m.iters, m.warmup, m.check, m.ops,
                m.types, m.root, 2, 0, null, -1, List.of("all_gather"), 200, true);
        PerfTesting.Run rm = runStaged(new StagedDeviceCluster(Cuda.devicesList()), median);
        assertEquals(0, rm.code(), rm.out() + rm.err());
        for (String w : wrongColumns(rm.rows())) {
            assertEquals("0", w, rm.out());
        }
    }
}
