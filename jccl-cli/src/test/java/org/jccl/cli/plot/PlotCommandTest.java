package org.jccl.cli.plot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.awt.Color;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;
import javax.xml.parsers.DocumentBuilderFactory;
import org.jccl.cli.JcclCli;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;
import picocli.CommandLine;

/**
 * {@code jccl plot} and {@code jccl perf --plot} on fixture files (see the fixtures' README): the
 * pictures are parsed back (the SVG as XML, the PNG as pixels) and must hold one line per run with a
 * dot per measured size, the legend texts, the axis titles and the size ticks; bad input fails with
 * a message naming the file and the cause.
 */
class PlotCommandTest {

    private static final String JCCL = "jccl-allreduce-np2.json";
    private static final String ALLGATHER = "jccl-allgather-np2.json";
    private static final String MPI = "mpi-allreduce-np2.txt";
    private static final String NCCL_BACKEND = "jccl-backend-nccl-4xH200.json";
    private static final String NCCL_TESTS = "nccl-tests-4xH200.json";

    @TempDir
    Path dir;

    /** Drawing needs AWT and at least one font; a machine without fonts skips the drawing tests, naming the packages. */
    private static void assumeFonts() {
        String fonts;
        try {
            fonts = String.join(",", java.awt.GraphicsEnvironment.getLocalGraphicsEnvironment().getAvailableFontFamilyNames());
        } catch (RuntimeException | Error e) {
            fonts = "";
        }
        assumeTrue(!fonts.isEmpty(), "no font for AWT on this machine: install fontconfig and fonts-dejavu-core"
                + " (Debian; .ci/run does) to run the plot tests");
    }

    @BeforeEach
    void fixtures() throws IOException {
        for (String f : List.of(JCCL, ALLGATHER, MPI, NCCL_BACKEND, NCCL_TESTS)) {
            try (InputStream in = PlotCommandTest.class.getResourceAsStream(f)) {
                Files.copy(in, dir.resolve(f));
            }
        }
    }

    private record Result(int code, String out, String err) {
    }

    private static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new JcclCli());
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute(args);
        return new Result(code, out.toString(), err.toString());
    }

    private String f(String name) {
        return dir.resolve(name).toString();
    }

    /** What an SVG shows: its texts, and per colour the lines (2 px strokes) and dots (fills) drawn in it. */
    private record Svg(List<String> texts, Map<String, Integer> lines, Map<String, Integer> dots) {
        static Svg read(Path file) throws Exception {
            DocumentBuilderFactory dbf = DocumentBuilderFactory.newInstance();
            dbf.setNamespaceAware(true);
            dbf.setFeature("http://apache.org/xml/features/nonvalidating/load-external-dtd", false);
            Document doc = dbf.newDocumentBuilder().parse(file.toFile());
            List<String> texts = new ArrayList<>();
            NodeList t = doc.getElementsByTagNameNS("*", "text");
            for (int i = 0; i < t.getLength(); i++) {
                texts.add(t.item(i).getTextContent());
            }
            Map<String, Integer> lines = new HashMap<>();
            Map<String, Integer> dots = new HashMap<>();
            NodeList paths = doc.getElementsByTagNameNS("*", "path");
            for (int i = 0; i < paths.getLength(); i++) {
                Map<String, String> st = style((Element) paths.item(i));
                if (!"none".equals(st.get("stroke")) && "none".equals(st.get("fill")) && "2".equals(st.get("stroke-width"))) {
                    lines.merge(st.get("stroke"), 1, Integer::sum);
                } else if ("none".equals(st.get("stroke")) && st.get("fill") != null && st.get("fill").startsWith("rgb(")) {
                    dots.merge(st.get("fill"), 1, Integer::sum);
                }
            }
            return new Svg(texts, lines, dots);
        }

        /** The element's style with its ancestors' (Batik puts shared style on enclosing groups). */
        private static Map<String, String> style(Element e) {
            List<Element> chain = new ArrayList<>();
            for (Node n = e; n instanceof Element el; n = n.getParentNode()) {
                chain.addFirst(el);
            }
            Map<String, String> st = new HashMap<>();
            for (Element el : chain) {
                for (String kv : el.getAttribute("style").split(";")) {
                    int c = kv.indexOf(':');
                    if (c > 0) {
                        st.put(kv.substring(0, c).strip(), kv.substring(c + 1).strip());
                    }
                }
            }
            return st;
        }
    }

    private static String rgb(Color c) {
        return "rgb(" + c.getRed() + "," + c.getGreen() + "," + c.getBlue() + ")";
    }

    @Test
    void jcclBesideAnAnchorAndNcclTestsOneLinePerRunWithItsDotsAndLabels() throws Exception {
        assumeFonts();
        Path svg = dir.resolve("busbw.svg");
        Result r = run("plot", f(JCCL), f(MPI), "-o", svg.toString());
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("wrote " + svg + " (2 runs)"), r.out());
        Svg s = Svg.read(svg);

        assertTrue(s.texts().contains("all_reduce: bus bandwidth (out-of-place, float sum)"), s.texts().toString());
        assertTrue(s.texts().contains("jccl 0.2.0, 2 ranks on CPU, vm, 2026-11-27 09:16"), s.texts().toString());
        assertTrue(s.texts().contains("Open MPI, 2 ranks (anchor)"), s.texts().toString());
        assertTrue(s.texts().contains("message size (K, M, G = 2^10, 2^20, 2^30 bytes)"), s.texts().toString());
        // Values from 0.0001 to 9 GB/s: a logarithmic axis, one label per decade.
        assertTrue(s.texts().contains("busbw (GB/s), log scale"), s.texts().toString());
        assertTrue(s.texts().containsAll(List.of("0.0001", "0.001", "0.01", "0.1", "1", "10")), s.texts().toString());
        // 8 B ... 32 MB (22 powers of two), a label every second one: on the measured sizes, both ends included.
        assertTrue(s.texts().containsAll(List.of("8 B", "32 B", "128 B", "512 B", "2 KB", "8 KB", "32 KB", "128 KB", "512 KB",
                "2 MB", "8 MB", "32 MB")), s.texts().toString());

        // Each run: its line and the legend's sample (2 px strokes), a dot per size plus the legend's.
        String blue = rgb(BusBwChart.COLORS[0]);
        String orange = rgb(BusBwChart.COLORS[1]);
        assertEquals(Map.of(blue, 2, orange, 2), s.lines());
        assertEquals(Map.of(blue, 12 + 1, orange, 12 + 1), s.dots());
    }

    @Test
    void labelsReplaceTheMadeUpOnesAndTheInPlaceColumnsCanBeDrawn() throws Exception {
        assumeFonts();
        Path svg = dir.resolve("labels.svg");
        Result r = run("plot", f(NCCL_BACKEND), f(NCCL_TESTS), "-o", svg.toString(), "--label", "NCCL via jccl perf",
                "--in-place", "--title", "4x H200");
        assertEquals(0, r.code(), r.err());
        Svg s = Svg.read(svg);
        assertTrue(s.texts().contains("4x H200"), s.texts().toString());
        assertTrue(s.texts().contains("NCCL via jccl perf"), s.texts().toString());
        // The second file keeps the label made from nccl-tests' own report.
        assertTrue(s.texts().contains("NCCL 2.28.9 (nccl-tests), 4x NVIDIA H200, h200node, 2026-11-21 13:40, NCCL_NVLS_ENABLE=0"),
                s.texts().toString());
        // The reports' 0.00 GB/s rows (8 and 32 B) cannot be drawn on the logarithmic axis: 16 sizes, 14 above 0,
        // from 128 B to 8 GB, labelled every second power of two, both ends included.
        assertTrue(s.texts().containsAll(List.of("128 B", "512 B", "2 KB", "8 KB", "32 KB", "128 KB", "512 KB", "2 MB", "8 MB",
                "32 MB", "128 MB", "512 MB", "2 GB", "8 GB")), s.texts().toString());
        assertFalse(s.texts().contains("8 B"), s.texts().toString());
        assertEquals(2, s.lines().size());
        assertTrue(s.dots().values().stream().allMatch(n -> n == 14 + 1), s.dots().toString());
    }

    @Test
    void aLinearAxisStartsAtZeroAndThePngShowsEveryLine() throws Exception {
        assumeFonts();
        Path png = dir.resolve("busbw.png");
        Result r = run("plot", f(NCCL_BACKEND), f(JCCL), "-o", png.toString(), "--y", "linear");
        assertEquals(0, r.code(), r.err());
        BufferedImage img = ImageIO.read(png.toFile());
        assertEquals(BusBwChart.WIDTH, img.getWidth());
        assertEquals(BusBwChart.HEIGHT, img.getHeight());
        Map<Integer, Integer> pixels = new HashMap<>();
        for (int y = 0; y < img.getHeight(); y++) {
            for (int x = 0; x < img.getWidth(); x++) {
                pixels.merge(img.getRGB(x, y) & 0xffffff, 1, Integer::sum);
            }
        }
        for (int i = 0; i < 2; i++) {
            int rgb = BusBwChart.COLORS[i].getRGB() & 0xffffff;
            assertTrue(pixels.getOrDefault(rgb, 0) > 100, "line " + i + " has only " + pixels.getOrDefault(rgb, 0) + " pixels");
        }
        assertEquals(0, pixels.getOrDefault(BusBwChart.COLORS[2].getRGB() & 0xffffff, 0), "a third line appeared");

        Path svg = dir.resolve("linear.svg");
        assertEquals(0, run("plot", f(NCCL_BACKEND), "-o", svg.toString(), "--y", "linear").code());
        List<String> texts = Svg.read(svg).texts();
        assertTrue(texts.contains("busbw (GB/s)"), texts.toString());
        assertTrue(texts.containsAll(List.of("0", "50", "100", "350")), texts.toString());
        // Written like any file the user makes (group and others may read it under the usual umask 022), not with a
        // temporary file's 0600, and no temporary file is left beside it.
        java.util.Set<java.nio.file.attribute.PosixFilePermission> mode = Files.getPosixFilePermissions(svg);
        assertTrue(mode.contains(java.nio.file.attribute.PosixFilePermission.OTHERS_READ), "mode " + mode);
        try (var left = Files.list(dir)) {
            assertEquals(List.of(), left.filter(p -> p.getFileName().toString().endsWith(".tmp")).toList());
        }
    }

    @Test
    void perfPlotDrawsItsOwnRun() throws Exception {
        assumeFonts();
        Path svg = dir.resolve("perf.svg");
        Path json = dir.resolve("perf.json");
        int code = JcclCli.execute("perf", "all_reduce", "-np", "2", "-b", "1K", "-e", "4K", "-f", "2", "-n", "2", "-w", "1",
                "--jit-warmup", "0", "-J", json.toString(), "--plot", svg.toString());
        assertEquals(0, code);
        Svg s = Svg.read(svg);
        assertTrue(s.texts().containsAll(List.of("1 KB", "2 KB", "4 KB")), s.texts().toString());
        assertTrue(s.texts().stream().anyMatch(t -> t.startsWith("jccl 0.2.0, 2 ranks on CPU, ")), s.texts().toString());
        assertEquals(1, s.lines().size());
        assertEquals(3 + 1, s.dots().values().iterator().next());
        // The same picture as jccl plot draws from the -J file.
        Path again = dir.resolve("again.svg");
        assertEquals(0, run("plot", json.toString(), "-o", again.toString()).code());
        assertEquals(s.texts(), Svg.read(again).texts());
    }

    @Test
    @Timeout(60)
    void perfChecksThePlotFileBeforeMeasuring() {
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new JcclCli());
        cl.setErr(new PrintWriter(err, true));
        assertEquals(2, cl.execute("perf", "all_reduce", "-np", "2", "--plot", f("busbw.pdf")));
        assertTrue(err.toString().contains("name it .svg or .png"), err.toString());
        err.getBuffer().setLength(0);
        assertEquals(2, cl.execute("perf", "all_reduce", "-np", "2", "--plot", f("no/such/dir/busbw.svg")));
        assertTrue(err.toString().contains("does not exist"), err.toString());
    }

    @Test
    void aMissingFileIsNamed() {
        Result r = run("plot", f(JCCL), f("missing.json"), "-o", f("x.svg"));
        assertEquals(1, r.code());
        assertTrue(r.err().contains("jccl plot: " + f("missing.json") + ": no such file"), r.err());
        assertFalse(Files.exists(dir.resolve("x.svg")));
    }

    @Test
    void filesThatAreNotReportsAreRefusedWithWhatToGive() throws IOException {
        Files.writeString(dir.resolve("other.json"), "{\"name\": \"not a report\", \"results\": []}");
        Result r = run("plot", f("other.json"), "-o", f("x.svg"));
        assertEquals(1, r.code());
        assertTrue(r.err().contains(f("other.json") + " is not a jccl perf -J report: it has neither \"jccl_version\" nor"
                + " \"nccl_version\""), r.err());
        assertTrue(r.err().contains("jccl perf ... -J FILE"), r.err());

        // The table jccl perf prints (what people paste) is not a report.
        Files.writeString(dir.resolve("table.txt"), "#       size         count      type   redop    root     time\n"
                + "        1024           256     float     sum      -1    10.00\n");
        r = run("plot", f("table.txt"), "-o", f("x.svg"));
        assertEquals(1, r.code());
        assertTrue(r.err().contains("is not a jccl perf -J report (it is not JSON, nor the output of an anchor program)"), r.err());
        assertTrue(r.err().contains("add -J FILE"), r.err());

        // A report cut short by a run that died.
        String cut = Files.readString(dir.resolve(JCCL));
        Files.writeString(dir.resolve("cut.json"), cut.substring(0, cut.length() / 2));
        r = run("plot", f("cut.json"), "-o", f("x.svg"));
        assertEquals(1, r.code());
        assertTrue(r.err().contains(f("cut.json") + " is not a jccl perf -J report: invalid JSON at offset"), r.err());

        Files.write(dir.resolve("binary.json"), new byte[] {(byte) 0xff, (byte) 0xfe, 0, 1});
        r = run("plot", f("binary.json"), "-o", f("x.svg"));
        assertEquals(1, r.code());
        assertTrue(r.err().contains(f("binary.json") + " is not a jccl perf -J report (not UTF-8 text)"), r.err());
        assertFalse(Files.exists(dir.resolve("x.svg")));
    }

    @Test
    void differentCollectivesAreNotMixed() {
        Result r = run("plot", f(JCCL), f(ALLGATHER), "-o", f("x.svg"));
        assertEquals(1, r.code());
        assertTrue(r.err().contains("cannot draw different collectives in one plot (" + f(JCCL) + " is all_reduce, "
                + f(ALLGATHER) + " is all_gather)"), r.err());
        assertFalse(Files.exists(dir.resolve("x.svg")));
    }

    @Test
    void usageErrorsExitTwo() {
        Result r = run("plot", f(JCCL), "-o", f("x.jpg"));
        assertEquals(2, r.code());
        assertTrue(r.err().contains("name it .svg or .png"), r.err());
        r = run("plot", f(JCCL), "-o", f("x.svg"), "--label", "a", "--label", "b");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("2 --label for 1 FILE(s)"), r.err());
        r = run("plot", f(JCCL), "-o", f("x.svg"), "--y", "cubic");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("--y 'cubic' is not auto, log or linear"), r.err());
        r = run("plot", "-o", f("x.svg"));
        assertEquals(2, r.code());
    }

    @Test
    void labelsSayWhatRan() {
        PerfRun nccl = PerfRunReader.read(dir.resolve(NCCL_BACKEND));
        assertEquals("NCCL 2.28.9, 4x NVIDIA H200, h200node, 2026-11-21 14:02, NCCL_NVLS_ENABLE=0", nccl.label());
        assertEquals("all_reduce", nccl.collective());
        PerfRun tests = PerfRunReader.read(dir.resolve(NCCL_TESTS));
        assertEquals("all_reduce", tests.collective()); // from ./build/all_reduce_perf
        assertEquals(16, tests.curves().getFirst().points().size());
        String gloo = "# gloo torch 1.13.0 np 3\n#       bytes      time_us  algbw_GBs busbw_GBs\n"
                + "           8        105.0     0.000     0.000\n        8192        226.0     0.036     0.048\n";
        PerfRun g = PerfRunReader.parse(gloo, "gloo.txt");
        assertEquals("Gloo (torch 1.13.0), 3 ranks (anchor)", g.label());
        assertEquals(2, g.curves().getFirst().points().size());
    }

    @Test
    void sizesAndBandwidthsAreWrittenAsPeopleReadThem() {
        assertEquals("8 B", BusBwChart.sizeLabel(8));
        assertEquals("1 KB", BusBwChart.sizeLabel(1024));
        assertEquals("512 KB", BusBwChart.sizeLabel(512 * 1024));
        assertEquals("8 GB", BusBwChart.sizeLabel(8L << 30));
        assertEquals("1536 B", BusBwChart.sizeLabel(1536));
        assertEquals("0.0001", BusBwChart.bandwidthTick(1e-4));
        assertEquals("2.5", BusBwChart.bandwidthTick(2.5));
        assertEquals("350", BusBwChart.bandwidthTick(350));
        assertEquals(50, BusBwChart.niceStep(364, 8));
        assertEquals(0.5, BusBwChart.niceStep(4.4, 10));
        assertEquals(3, BusBwChart.tickStep(30)); // 8 B .. 8 GB: 11 labels
        assertEquals(2, BusBwChart.tickStep(22));
        assertEquals(1, BusBwChart.tickStep(6));
        assertEquals(5, BusBwChart.tickStep(55));
    }
}
