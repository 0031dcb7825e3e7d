package org.jccl.cli.run;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The output of one local job's ranks: one thread per rank's stdout and stderr copies each whole
 * line to ours with a {@code "[rank] "} prefix, so lines of different ranks never mix, and drops
 * the JVM's boot-time incubator warning of a rank jccl composed; the launcher's own messages are
 * written the same way.
 */
final class RankOutput {

    /**
     * What a JVM prints to stderr while it boots with the Vector API module, before any of its code
     * runs. The ranks of a command jccl composed ({@link JavaCommand#javaCommand(String)}, a {@code .jar} TARGET) do not
     * show it: jccl added the module, not the user (see {@link JavaCommand#isJcclJavaCommand}).
     */
    static final String INCUBATOR_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector";

    /** A rank's output line longer than this is passed on in pieces, so a rank cannot exhaust our heap. */
    private static final int MAX_LINE = 64 * 1024;

    private final List<Thread> pumps = new ArrayList<>();
    /** Whether each rank's stderr loses its JVM's boot-time incubator warning (a command jccl composed). */
    private final boolean dropIncubatorWarning;

    RankOutput(boolean dropIncubatorWarning) {
        this.dropIncubatorWarning = dropIncubatorWarning;
    }

    /** Writes {@code line} plus a newline to {@code to} as one unit, so lines of different ranks never mix. */
    static void writeLine(PrintStream to, byte[] prefix, byte[] buf, int off, int len) {
        synchronized (to) {
            to.write(prefix, 0, prefix.length);
            to.write(buf, off, len);
            to.write('\n');
            to.flush();
        }
    }

    static void message(PrintStream to, String text) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        writeLine(to, new byte[0], b, 0, b.length);
    }

    /** Copies one output stream of rank {@code rank} to {@code to}, line by line, prefixed. */
    void relay(int rank, InputStream in, PrintStream to, String which) {
        byte[] prefix = ("[" + rank + "] ").getBytes(StandardCharsets.UTF_8);
        byte[] incubatorWarning = INCUBATOR_WARNING.getBytes(StandardCharsets.US_ASCII);
        boolean dropWarning = dropIncubatorWarning && which.equals("err");
        Thread t = Thread.ofPlatform().daemon().name("jccl-run-rank" + rank + "-" + which).start(() -> {
            // Bytes, not chars: a rank's output is passed on exactly as written, whatever its encoding.
            byte[] line = new byte[1024];
            int len = 0;
            byte[] buf = new byte[8192];
            // The JVM prints the warning once, at boot: only its first occurrence is dropped.
            boolean dropNext = dropWarning;
            try (in) {
                int n;
                while ((n = in.read(buf)) > 0) {
                    for (int i = 0; i < n; i++) {
                        byte b = buf[i];
                        if (b == '\n') {
                            if (dropNext && Arrays.equals(line, 0, len, incubatorWarning, 0, incubatorWarning.length)) {
                                dropNext = false;
                            } else {
                                writeLine(to, prefix, line, 0, len);
                            }
                            len = 0;
                            continue;
                        }
                        if (len == line.length) {
                            if (len >= MAX_LINE) {
                                writeLine(to, prefix, line, 0, len);
                                len = 0;
                            } else {
                                line = Arrays.copyOf(line, Math.min(MAX_LINE, len * 2));
                            }
                        }
                        line[len++] = b;
                    }
                }
            } catch (IOException e) {
                // The stream closes under us when the process is killed: the rest of the output is gone.
            }
            if (len > 0) {
                writeLine(to, prefix, line, 0, len);
            }
        });
        pumps.add(t);
    }

    /**
     * Waits briefly for the output threads, so every line a rank wrote is printed before our summary.
     * Bounded: a grandchild that outlived its rank may hold the pipe open indefinitely.
     */
    void drain() {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        for (Thread t : pumps) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return;
            }
            try {
                t.join(Duration.ofNanos(left));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
