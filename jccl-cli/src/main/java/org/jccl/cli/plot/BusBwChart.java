package org.jccl.cli.plot;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Dimension;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.Shape;
import java.awt.geom.Ellipse2D;
import java.awt.geom.Rectangle2D;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.text.FieldPosition;
import java.text.NumberFormat;
import java.text.ParsePosition;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import javax.xml.parsers.DocumentBuilderFactory;
import javax.xml.parsers.ParserConfigurationException;
import org.apache.batik.svggen.SVGGraphics2D;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberTick;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.axis.NumberTickUnit;
import org.jfree.chart.axis.TickType;
import org.jfree.chart.axis.ValueAxis;
import org.jfree.chart.block.BlockBorder;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.chart.text.TextUtils;
import org.jfree.chart.ui.RectangleEdge;
import org.jfree.chart.ui.RectangleInsets;
import org.jfree.chart.ui.TextAnchor;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;
import org.w3c.dom.Document;

/**
 * Bus bandwidth against message size, one line per run (per curve), as nccl-tests users plot it:
 * the x axis is logarithmic in powers of two with size labels (8 B, 1 KB, ... 8 GB; K, M, G are
 * powers of 1024 as in jccl perf's -b/-e), the y axis is GB/s, logarithmic when the values span
 * more than two decades (small messages run at a tiny fraction of large ones), else linear from 0.
 *
 * <p>Drawn with JFreeChart (LGPL-2.1); PNG through its encoder, SVG through Apache Batik's
 * {@code SVGGraphics2D} (Apache-2.0), which writes text as {@code <text>} (searchable, and what the
 * tests read) and each line as one path. Both need AWT's fonts (headless is fine); a runtime without
 * fonts gets a message naming the packages. XChart (Apache-2.0) was tried first: it draws every
 * letter as a filled outline, so its SVG had no text at all (250 KB for one chart).
 */
public final class BusBwChart {

    /** The y axis. */
    public enum YScale {
        /** Logarithmic when the plotted values span more than two decades, else linear. */
        AUTO,
        LOG,
        LINEAR
    }

    /**
     * What to draw.
     *
     * @param inPlace the in-place columns instead of the out-of-place ones
     * @param y the y axis
     * @param title the chart's title, or null for one made from the runs
     */
    public record Options(boolean inPlace, YScale y, String title) {
        public Options {
            Objects.requireNonNull(y, "y");
        }

        /** Out of place, automatic y axis, made-up title. */
        public static Options defaults() {
            return new Options(false, YScale.AUTO, null);
        }
    }

    static final int WIDTH = 960;
    static final int HEIGHT = 600;

    private static final String[] UNITS = {"B", "KB", "MB", "GB", "TB", "PB"};

    /** Lines in an order that stays readable in print: blue, orange, green, red, purple, brown, pink, grey. */
    static final Color[] COLORS = {new Color(0x1f77b4), new Color(0xff7f0e), new Color(0x2ca02c),
        new Color(0xd62728), new Color(0x9467bd), new Color(0x8c564b), new Color(0xe377c2), new Color(0x7f7f7f)};

    private static final Color GRID = new Color(0xdddddd);

    private BusBwChart() {
    }

    /**
     * Draws {@code runs} into {@code out} (.svg or .png; replaced if it exists).
     *
     * @throws PlotInputException when the runs cannot share one plot (different collectives) or have nothing to draw
     * @throws IllegalArgumentException for an output name that is not .svg or .png
     * @throws IOException when the file cannot be written
     */
    public static void write(List<PerfRun> runs, Options options, Path out) throws IOException {
        PlotOutput.Format format = PlotOutput.formatOf(out);
        JFreeChart chart = build(runs, options);
        Path dir = out.toAbsolutePath().getParent();
        // A temporary name beside the target, created like any file the user makes (the umask's mode: a picture is
        // for sharing), not createTempFile's 0600; CREATE_NEW, so a name that exists is never written through.
        Path tmp = dir.resolve("." + out.getFileName() + "." + ProcessHandle.current().pid() + "." + System.nanoTime() + ".tmp");
        try {
            try (OutputStream os = Files.newOutputStream(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                render(chart, format, os);
            }
            Files.move(tmp, out, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /** Writes {@code chart} as {@code format}. */
    static void render(JFreeChart chart, PlotOutput.Format format, OutputStream os) throws IOException {
        try {
            if (format == PlotOutput.Format.PNG) {
                ChartUtils.writeChartAsPNG(os, chart, WIDTH, HEIGHT);
                return;
            }
            Document doc = DocumentBuilderFactory.newInstance().newDocumentBuilder().getDOMImplementation()
                    .createDocument("http://www.w3.org/2000/svg", "svg", null);
            // Rotated labels (the y axis title) as text rotated by a transform, not as glyph outlines. A
            // JFreeChart-wide setting; jccl draws nothing else with it.
            TextUtils.setUseDrawRotatedStringWorkaround(false);
            SVGGraphics2D g = new SVGGraphics2D(doc);
            g.setSVGCanvasSize(new Dimension(WIDTH, HEIGHT));
            chart.draw(g, new Rectangle2D.Double(0, 0, WIDTH, HEIGHT));
            Writer w = new OutputStreamWriter(os, StandardCharsets.UTF_8);
            g.stream(w, true);
            w.flush();
        } catch (ParserConfigurationException e) {
            throw new IOException("no XML DOM in this JDK to build the SVG: " + e.getMessage(), e);
        } catch (InternalError | UnsatisfiedLinkError | NoClassDefFoundError e) {
            // A JDK without fonts or without java.desktop (a jlinked runtime).
            throw new IOException("cannot draw: this Java runtime has no usable fonts or AWT (" + e + "). Install fontconfig"
                    + " and a font (Debian: apt-get install -y fontconfig fonts-dejavu-core) or use a full JDK.", e);
        }
    }

    /**
     * The chart of {@code runs}.
     *
     * @throws PlotInputException when the runs cannot share one plot or have nothing to draw
     */
    public static JFreeChart build(List<PerfRun> runs, Options options) {
        if (runs.isEmpty()) {
            throw new PlotInputException("nothing to draw: no run given");
        }
        Set<String> collectives = new LinkedHashSet<>();
        runs.forEach(r -> collectives.add(r.collective()));
        if (collectives.size() > 1) {
            StringBuilder which = new StringBuilder();
            for (PerfRun r : runs) {
                which.append(which.isEmpty() ? "" : ", ").append(r.source()).append(" is ").append(r.collective());
            }
            throw new PlotInputException("cannot draw different collectives in one plot (" + which + "): their bus"
                    + " bandwidths are not the same quantity. Plot each collective on its own.");
        }
        String collective = collectives.iterator().next();

        // One series per curve: the run's label, plus the curve's type/op/root when the curves differ in them.
        Set<String> kinds = new HashSet<>();
        runs.forEach(r -> r.curves().forEach(c -> kinds.add(c.describe())));
        boolean sameKind = kinds.size() == 1;
        Map<String, List<double[]>> series = new LinkedHashMap<>();
        List<Double> values = new ArrayList<>();
        for (PerfRun r : runs) {
            for (PerfRun.Curve c : r.curves()) {
                List<double[]> pts = new ArrayList<>();
                for (PerfRun.Point p : c.points()) {
                    double bw = options.inPlace() ? p.inPlace() : p.outOfPlace();
                    if (p.bytes() > 0 && Double.isFinite(bw)) {
                        pts.add(new double[] {p.bytes(), bw});
                        values.add(bw);
                    }
                }
                if (pts.isEmpty()) {
                    continue;
                }
                String name = r.label() + (sameKind || c.describe().isEmpty() ? "" : " [" + c.describe() + "]");
                String unique = name;
                for (int n = 2; series.containsKey(unique); n++) {
                    unique = name + " (" + n + ")";
                }
                series.put(unique, pts);
            }
        }
        if (series.isEmpty()) {
            throw new PlotInputException("nothing to draw: no run has " + (options.inPlace() ? "an in-place" : "an out-of-place")
                    + " bus bandwidth for a size above 0 bytes" + (options.inPlace() ? " (try without --in-place)" : ""));
        }
        boolean logY = switch (options.y()) {
            case LOG -> true;
            case LINEAR -> false;
            case AUTO -> spansDecades(values, 2);
        };

        XYSeriesCollection data = new XYSeriesCollection();
        double minBytes = Double.MAX_VALUE;
        double maxBytes = 0;
        for (Map.Entry<String, List<double[]>> e : series.entrySet()) {
            XYSeries s = new XYSeries(e.getKey(), false, true);
            for (double[] p : e.getValue()) {
                // A logarithmic axis cannot show 0 GB/s (sizes too small to register in the report's 6 decimals).
                if (!logY || p[1] > 0) {
                    s.add(p[0], p[1]);
                    minBytes = Math.min(minBytes, p[0]);
                    maxBytes = Math.max(maxBytes, p[0]);
                }
            }
            if (s.getItemCount() > 0) {
                data.addSeries(s);
            }
        }
        if (data.getSeriesCount() == 0) {
            throw new PlotInputException("nothing to draw on a logarithmic axis: every bus bandwidth is 0; use --y linear");
        }

        String what = options.inPlace() ? "in-place" : "out-of-place";
        String title = options.title() != null ? options.title()
                : collective + ": bus bandwidth (" + what + (sameKind && !kinds.iterator().next().isEmpty()
                        ? ", " + kinds.iterator().next() : "") + ")";
        XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, true);
        renderer.setDrawSeriesLineAsPath(true);
        renderer.setDrawOutlines(false);
        Shape dot = new Ellipse2D.Double(-3.5, -3.5, 7, 7);
        for (int i = 0; i < data.getSeriesCount(); i++) {
            renderer.setSeriesPaint(i, COLORS[i % COLORS.length]);
            renderer.setSeriesStroke(i, new BasicStroke(2f, BasicStroke.CAP_ROUND, BasicStroke.JOIN_ROUND));
            renderer.setSeriesShape(i, dot);
        }
        double maxY = values.stream().mapToDouble(Double::doubleValue).max().orElse(1);
        XYPlot plot = new XYPlot(data, sizeAxis(minBytes, maxBytes), logY ? bandwidthLogAxis() : bandwidthLinearAxis(maxY),
                renderer);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(GRID);
        plot.setRangeGridlinePaint(GRID);
        plot.setDomainGridlineStroke(new BasicStroke(1f));
        plot.setRangeGridlineStroke(new BasicStroke(1f));
        plot.setOutlinePaint(new Color(0x999999));
        JFreeChart chart = new JFreeChart(title, new Font(Font.SANS_SERIF, Font.BOLD, 16), plot, true);
        chart.setBackgroundPaint(Color.WHITE);
        chart.setPadding(new RectangleInsets(8, 8, 8, 16));
        chart.getLegend().setItemFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
        chart.getLegend().setFrame(BlockBorder.NONE);
        chart.getLegend().setPosition(RectangleEdge.BOTTOM);
        return chart;
    }

    /**
     * The size axis: base 2, from the whole power of two at or below the smallest size to the one at or
     * above the largest, with a labelled tick every {@link #tickStep} powers of two counted from the
     * smallest size, so that ticks fall on measured sizes (8 B, 32 B, ... for -b 8 -f 4).
     */
    static LogAxis sizeAxis(double minBytes, double maxBytes) {
        double lo = Math.floor(log2(minBytes));
        double hi = Math.ceil(log2(maxBytes));
        if (hi - lo < 2) {
            lo -= 1;
            hi += 1;
        }
        double step = tickStep(hi - lo);
        SizeAxis x = new SizeAxis(lo, step);
        // A little room beyond the outer points, so that they are not drawn on the plot's border.
        x.setRange(Math.pow(2, lo - 0.5), Math.pow(2, hi + 0.5));
        fonts(x);
        return x;
    }

    /**
     * Powers of two between size ticks over a span of {@code span} powers: the smallest step that
     * divides the span into at most 14 labels (so that both ends are labelled), else the smallest
     * that gives at most 11.
     */
    static double tickStep(double span) {
        int[] steps = {1, 2, 3, 4, 5, 6, 8, 10};
        for (int s : steps) {
            if (span % s == 0 && span / s <= 13) {
                return s;
            }
        }
        for (int s : steps) {
            if (span / s <= 11) {
                return s;
            }
        }
        return Math.ceil(span / 11);
    }

    /** A base-2 axis whose ticks are 2^(first + k * step), labelled by {@link #sizeLabel}. */
    static final class SizeAxis extends LogAxis {
        private static final long serialVersionUID = 1L;
        private final double first;
        private final double step;

        SizeAxis(double first, double step) {
            super("message size (K, M, G = 2^10, 2^20, 2^30 bytes)");
            this.first = first;
            this.step = step;
            setBase(2);
            setAutoTickUnitSelection(false);
            setTickUnit(new NumberTickUnit(step));
            setMinorTickCount(1);
            setMinorTickMarksVisible(false);
        }

        @Override
        @SuppressWarnings({"rawtypes", "unchecked"}) // JFreeChart's signature
        protected List refreshTicksHorizontal(Graphics2D g2, Rectangle2D dataArea, RectangleEdge edge) {
            List ticks = new ArrayList();
            TextAnchor anchor = edge == RectangleEdge.TOP ? TextAnchor.BOTTOM_CENTER : TextAnchor.TOP_CENTER;
            for (double e = first; e <= 62; e += step) {
                double v = Math.pow(2, e);
                if (v > getUpperBound()) {
                    break;
                }
                if (v >= getLowerBound()) {
                    // A NumberTick (plain text) rather than LogAxis's LogTick (attributed text, which the SVG
                    // generator writes as outlines): the labels stay text in the SVG.
                    ticks.add(new NumberTick(TickType.MAJOR, v, sizeLabel((long) v), anchor, TextAnchor.CENTER, 0.0));
                }
            }
            return ticks;
        }
    }

    private static LogAxis bandwidthLogAxis() {
        BandwidthLogAxis y = new BandwidthLogAxis();
        fonts(y);
        return y;
    }

    /** A base-10 axis with a tick at each power of ten, labelled 0.001, 0.1, 1, 100 (plain text ticks, as above). */
    static final class BandwidthLogAxis extends LogAxis {
        private static final long serialVersionUID = 1L;

        BandwidthLogAxis() {
            super("busbw (GB/s), log scale");
            setBase(10);
            setSmallestValue(1e-9);
            setAutoTickUnitSelection(false);
            setTickUnit(new NumberTickUnit(1));
            setMinorTickCount(1);
            setMinorTickMarksVisible(false);
        }

        @Override
        @SuppressWarnings({"rawtypes", "unchecked"}) // JFreeChart's signature
        protected List refreshTicksVertical(Graphics2D g2, Rectangle2D dataArea, RectangleEdge edge) {
            List ticks = new ArrayList();
            TextAnchor anchor = edge == RectangleEdge.RIGHT ? TextAnchor.CENTER_LEFT : TextAnchor.CENTER_RIGHT;
            for (int e = (int) Math.floor(Math.log10(getLowerBound())); e <= (int) Math.ceil(Math.log10(getUpperBound())); e++) {
                double v = Math.pow(10, e);
                if (v >= getLowerBound() && v <= getUpperBound()) {
                    ticks.add(new NumberTick(TickType.MAJOR, v, bandwidthTick(v), anchor, TextAnchor.CENTER, 0.0));
                }
            }
            return ticks;
        }
    }

    /** From 0, with a tick every 1, 2, 2.5 or 5 times a power of ten: 5 to 10 labels up to {@code max}. */
    private static NumberAxis bandwidthLinearAxis(double max) {
        NumberAxis y = new NumberAxis("busbw (GB/s)");
        y.setAutoRangeIncludesZero(true);
        y.setAutoTickUnitSelection(false);
        y.setTickUnit(new NumberTickUnit(niceStep(max, 8)));
        y.setNumberFormatOverride(new BandwidthFormat());
        fonts(y);
        return y;
    }

    /** The smallest of 1, 2, 2.5, 5 x 10^n that cuts [0, max] into at most {@code parts} steps. */
    static double niceStep(double max, int parts) {
        if (!(max > 0)) {
            return 1;
        }
        double raw = max / parts;
        double decade = Math.pow(10, Math.floor(Math.log10(raw)));
        for (double m : new double[] {1, 2, 2.5, 5, 10}) {
            if (m * decade >= raw) {
                return m * decade;
            }
        }
        return 10 * decade;
    }

    private static void fonts(ValueAxis a) {
        a.setLabelFont(new Font(Font.SANS_SERIF, Font.PLAIN, 13));
        a.setTickLabelFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
    }

    /** Whether the positive values span more than {@code decades} powers of ten. */
    static boolean spansDecades(List<Double> values, int decades) {
        double min = Double.MAX_VALUE;
        double max = 0;
        for (double v : values) {
            if (v > 0) {
                min = Math.min(min, v);
                max = Math.max(max, v);
            }
        }
        return max > 0 && max / min > Math.pow(10, decades);
    }

    static double log2(double bytes) {
        return Math.log(bytes) / Math.log(2);
    }

    /** "8 B", "1 KB", "512 KB", "8 GB": the size in the largest unit that keeps it whole. */
    static String sizeLabel(long bytes) {
        int u = 0;
        long v = bytes;
        while (v >= 1024 && v % 1024 == 0 && u < UNITS.length - 1) {
            v /= 1024;
            u++;
        }
        return v + " " + UNITS[u];
    }

    /** A y tick: GB/s with as many decimals as the value needs (0.001, 0.5, 12, 350). */
    static String bandwidthTick(double v) {
        if (v == 0) {
            return "0";
        }
        if (v >= 100) {
            return String.format(Locale.ROOT, "%.0f", v);
        }
        String s = String.format(Locale.ROOT, "%.6f", v);
        s = s.replaceAll("0+$", "");
        return s.endsWith(".") ? s.substring(0, s.length() - 1) : s;
    }

    /** Formats GB/s with as many decimals as the value needs: 0.001, 0.5, 12, 350. */
    private static final class BandwidthFormat extends NumberFormat {
        private static final long serialVersionUID = 1L;

        @Override
        public StringBuffer format(double number, StringBuffer to, FieldPosition pos) {
            return to.append(bandwidthTick(number));
        }

        @Override
        public StringBuffer format(long number, StringBuffer to, FieldPosition pos) {
            return to.append(number);
        }

        @Override
        public Number parse(String source, ParsePosition pos) {
            throw new UnsupportedOperationException("display only");
        }
    }
}
