package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.jccl.cli.plot.PerfRun;
import org.jccl.cli.plot.PerfRunReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The plot reads what {@link JsonReport} writes: GPU documents (the ones GpuPerfRunner writes, with a
 * backend and the GPUs' names) and CPU ones, and {@link PerfPlot} draws them or says why not.
 */
class PerfPlotTest {

    private static String gpuReport(String backend) {
        PerfOptions o = new PerfTesting.Opts().build();
        JsonReport r = new JsonReport();
        long size = 8;
        for (int i = 0; i < 6; i++, size *= 4) {
            ResultRow.Measurement m = new ResultRow.Measurement(20, size / 20e3, 1.5 * size / 20e3, 0);
            r.add(new ResultRow(size, size / 4, "float", "sum", -1, m, m), 3);
        }
        List<RankInfo> gpus = List.of(new RankInfo(0, 7, "gpu-node", 0, "0000:18:00.0", "NVIDIA H200"),
                new RankInfo(1, 7, "gpu-node", 1, "0000:2A:00.0", "NVIDIA H200"));
        return r.document(o, gpus, Map.of("JCCL_AUTH_TOKEN", "secret", "JCCL_RANK", "0", "NCCL_NVLS_ENABLE", "0"), 0, 1.0, -1,
                List.of(), 2, backend);
    }

    @Test
    void gpuReportsAreLabelledByBackendGpusHostAndSettings() {
        PerfRun jccl = PerfRunReader.parse(gpuReport("jccl"), "jccl.json");
        assertTrue(jccl.label().matches("jccl \\S+, 2x NVIDIA H200, gpu-node, \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d, NCCL_NVLS_ENABLE=0"),
                jccl.label());
        assertEquals(6, jccl.curves().getFirst().points().size());
        PerfRun nccl = PerfRunReader.parse(gpuReport("nccl 2.28.9 (/usr/lib/x86_64-linux-gnu/libnccl.so.2)"), "nccl.json");
        assertTrue(nccl.label().startsWith("NCCL 2.28.9, 2x NVIDIA H200, gpu-node, "), nccl.label());
        assertFalse(nccl.label().contains("secret") || nccl.label().contains("JCCL_RANK"), nccl.label());
    }

    @Test
    void perfPlotDrawsAReportOrSaysWhy(@TempDir Path dir) throws Exception {
        StringWriter err = new StringWriter();
        // Nothing to draw: every row of this report is 0 bytes.
        JsonReport empty = new JsonReport();
        ResultRow.Measurement m = new ResultRow.Measurement(1, 0, 0, 0);
        empty.add(new ResultRow(0, 0, "float", "sum", -1, m, m), 3);
        String doc = empty.document(new PerfTesting.Opts().build(), List.of(), Map.of(), 0, 0, -1, List.of());
        assertFalse(PerfPlot.draw(doc, dir.resolve("empty.svg"), new PrintWriter(err, true)));
        assertTrue(err.toString().contains("jccl perf: could not draw the plot to " + dir.resolve("empty.svg")
                + ": nothing to draw"), err.toString());
        assertTrue(err.toString().contains("add -J FILE"), err.toString());
        assertFalse(Files.exists(dir.resolve("empty.svg")));

        String fonts;
        try {
            fonts = String.join(",", java.awt.GraphicsEnvironment.getLocalGraphicsEnvironment().getAvailableFontFamilyNames());
        } catch (RuntimeException | Error e) {
            fonts = "";
        }
        assumeTrue(!fonts.isEmpty(), "no font for AWT: install fontconfig and fonts-dejavu-core to draw");
        Path png = dir.resolve("gpu.png");
        assertTrue(PerfPlot.draw(gpuReport("jccl"), png, new PrintWriter(new StringWriter(), true)));
        assertTrue(Files.size(png) > 1000);
    }
}
