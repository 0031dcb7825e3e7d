package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.cli.JcclCli;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link P2pProbe} under {@code jccl run -np 2} (two JVMs over jccl's transports): each shape prints one line on
 * rank 0 with its figures, and a job of another size is refused by name.
 */
class P2pProbeTest {

    private record Result(int code, String out, String err) {
    }

    /** {@code jccl args...} in this JVM, output captured (the ranks are processes; their lines come prefixed "[r] "). */
    private static Result jccl(String... args) {
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            int code = JcclCli.execute(args);
            return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
    }

    private static double positive(Matcher m, int group) {
        double v = Double.parseDouble(m.group(group));
        assertTrue(v > 0, m.group() + ": group " + group + " is not positive");
        return v;
    }

    @Test
    @Timeout(120)
    void everyShapePrintsItsFiguresOnRankZero() {
        Result lat = jccl("run", "-np", "2", P2pProbe.class.getName(), "lat", "8", "300");
        assertEquals(0, lat.code(), lat.err());
        Matcher l = Pattern.compile("\\[0\\] lat 8 B: iterations 300, p50 ([0-9.]+) us, avg ([0-9.]+) us").matcher(lat.out());
        assertTrue(l.find(), lat.out());
        positive(l, 1);
        positive(l, 2);
        assertTrue(!lat.out().contains("[1] lat"), "only rank 0 prints: " + lat.out());

        Result bw = jccl("run", "-np", "2", P2pProbe.class.getName(), "bw", "64K", "200", "8");
        assertEquals(0, bw.code(), bw.err());
        Matcher b = Pattern.compile("\\[0\\] bw 65536 B: iterations 200, window 8, ([0-9.]+) us per message, ([0-9.]+) MB/s").matcher(bw.out());
        assertTrue(b.find(), bw.out());
        double us = positive(b, 1);
        double mbs = positive(b, 2);
        // the two figures are one measurement: MiB/s = 64 KiB / time per message
        assertEquals(65536 / (us * 1e-6) / (1 << 20), mbs, mbs * 0.01, bw.out());

        Result x = jccl("run", "-np", "2", P2pProbe.class.getName(), "xchg", "1K", "300");
        assertEquals(0, x.code(), x.err());
        Matcher e = Pattern.compile("\\[0\\] xchg 1024 B: iterations 300, p50 ([0-9.]+) us, avg ([0-9.]+) us").matcher(x.out());
        assertTrue(e.find(), x.out());
        positive(e, 1);
        positive(e, 2);
    }

    @Test
    @Timeout(60)
    void aJobOfThreeRanksIsRefusedByName() {
        Result r = jccl("run", "-np", "3", P2pProbe.class.getName(), "lat", "8", "10");
        assertTrue(r.code() != 0, r.out());
        assertTrue((r.out() + r.err()).contains("P2pProbe needs exactly 2 ranks, this job has 3"), r.out() + r.err());
    }
}
