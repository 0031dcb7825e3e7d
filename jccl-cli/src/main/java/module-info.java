/**
 * The {@code jccl} command line: {@code run} (the local launcher), {@code perf} (nccl-tests'
 * flags and columns), {@code plot}, {@code env}, {@code topo}, {@code doctor} and {@code status}.
 * An application module: it exports nothing.
 */
module org.jccl.cli {
    requires org.jccl.core;
    requires org.jccl.cuda;
    // `jccl doctor` and `jccl topo` report UCX (found or not, version, transports); ranks find the transport through
    // ServiceLoader.
    requires org.jccl.ucx;
    requires info.picocli;
    // `jccl plot` draws with JFreeChart and writes SVG through Batik (both use AWT's geometry). Optional,
    // as in the pom: on the module path add them with --add-modules org.jfree.jfreechart,
    // org.apache.xmlgraphics.batik.svggen; without them the plot commands say what is missing.
    requires static org.jfree.jfreechart;
    requires static org.apache.xmlgraphics.batik.svggen;
    requires java.desktop;
    // `jccl perf` waits for the JIT compiler to go quiet before it measures (CompilationMXBean).
    requires java.management;

    // picocli fills the commands' option fields by reflection.
    opens org.jccl.cli to info.picocli;
    opens org.jccl.cli.env to info.picocli;
    opens org.jccl.cli.perf to info.picocli;
    opens org.jccl.cli.plot to info.picocli;
    opens org.jccl.cli.run to info.picocli;
    opens org.jccl.cli.status to info.picocli;
    opens org.jccl.cli.topo to info.picocli;
}
