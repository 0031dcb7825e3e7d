package org.jccl.cli.plot;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The plot's output file and the libraries that draw it, checked before anything is measured or
 * read. Kept apart from {@link BusBwChart} on purpose: this class references no JFreeChart or Batik
 * type, so it loads (and says what is missing) where those optional libraries are absent, which
 * loading BusBwChart itself could not.
 */
public final class PlotOutput {

    private PlotOutput() {
    }

    /** The output file's format, from its extension. */
    public enum Format { SVG, PNG }

    /**
     * The format {@code out} asks for by its extension.
     *
     * @throws IllegalArgumentException for any other extension
     */
    public static Format formatOf(Path out) {
        String name = out.getFileName() == null ? "" : out.getFileName().toString().toLowerCase(Locale.ROOT);
        if (name.endsWith(".svg")) {
            return Format.SVG;
        }
        if (name.endsWith(".png")) {
            return Format.PNG;
        }
        throw new IllegalArgumentException("cannot tell the picture's format from '" + out + "': name it .svg or .png");
    }

    /**
     * Checks, before anything is measured or read, that {@code out} can be written: its extension, its
     * folder, and that the drawing libraries are on the classpath.
     *
     * @throws IllegalArgumentException naming what is wrong
     */
    public static void checkWritable(Path out) {
        formatOf(out);
        Path dir = out.toAbsolutePath().getParent();
        if (dir == null || !Files.isDirectory(dir)) {
            throw new IllegalArgumentException("cannot write the plot to " + out + ": folder " + dir + " does not exist");
        }
        if (!Files.isWritable(dir)) {
            throw new IllegalArgumentException("cannot write the plot to " + out + ": folder " + dir + " is not writable");
        }
        String missing = missingLibraries();
        if (missing != null) {
            throw new IllegalArgumentException(missing);
        }
    }

    /**
     * Null when AWT, JFreeChart and Batik's SVG generator can be loaded, else what to add: the two
     * libraries are optional dependencies of jccl-cli (bin/jccl has them; a project that depends on
     * jccl-cli does not inherit them).
     */
    static String missingLibraries() {
        if (ModuleLayer.boot().findModule("java.desktop").isEmpty()) {
            return "plots need the java.desktop module (AWT), which this Java runtime (" + System.getProperty("java.home")
                    + ") lacks, as a jlinked runtime may: use a full JDK, or keep the numbers with -J FILE and draw them"
                    + " with jccl plot on a machine that has one";
        }
        List<String> missing = new ArrayList<>();
        ClassLoader loader = PlotOutput.class.getClassLoader();
        for (String[] c : new String[][] {{"org.jfree.chart.JFreeChart", "org.jfree:jfreechart"},
            {"org.apache.batik.svggen.SVGGraphics2D", "org.apache.xmlgraphics:batik-svggen"}}) {
            try {
                Class.forName(c[0], false, loader);
            } catch (ClassNotFoundException | LinkageError e) {
                missing.add(c[1]);
            }
        }
        if (missing.isEmpty()) {
            return null;
        }
        if (PlotOutput.class.getModule().isNamed()) {
            // On the module path the optional modules are resolved only when asked for (requires static).
            return "plots need " + String.join(" and ", missing) + " (optional dependencies of org.jccl:jccl-cli): put them on"
                    + " the module path and add --add-modules org.jfree.jfreechart,org.apache.xmlgraphics.batik.svggen";
        }
        return "plots need " + String.join(" and ", missing) + " on the classpath (optional"
                + " dependencies of org.jccl:jccl-cli; bin/jccl has them): add them to your build";
    }
}
