package org.jccl.cli.perf;

import static org.jccl.cli.CliRun.jccl;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.cli.CliRun.Result;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link P2pProbe} under {@code jccl run -np 2} (two JVMs over jccl's transports): each shape prints one line on
 * rank 0 with its figures, and a job of another size is refused by name.
 */
class P2pProbeTest {

    private static double positive(Matcher m, int group) {
        double v = Double.parseDouble(m.group(group));
        assertTrue(v > 0, m.group() + ": group " + group + " is not positive");
        return v;
    }

    /** Runs {@code shape} of {@code size} 300 times; its rank-0 line must match {@code line} with two positive figures. */
    private static Result p50Line(String shape, String size, String line) {
        Result r = jccl("run", "-np", "2", P2pProbe.class.getName(), shape, size, "300");
        assertEquals(0, r.code(), r.err());
        Matcher m = Pattern.compile(line).matcher(r.out());
        assertTrue(m.find(), r.out());
        positive(m, 1);
        positive(m, 2);
        return r;
    }

    @Test
    @Timeout(120)
    void everyShapePrintsItsFiguresOnRankZero() {
        Result lat = p50Line("lat", "8", "\\[0\\] lat 8 B: iterations 300, p50 ([0-9.]+) us, avg ([0-9.]+) us");
        assertTrue(!lat.out().contains("[1] lat"), "only rank 0 prints: " + lat.out());

        Result bw = jccl("run", "-np", "2", P2pProbe.class.getName(), "bw", "64K", "200", "8");
        assertEquals(0, bw.code(), bw.err());
        Matcher b = Pattern.compile("\\[0\\] bw 65536 B: iterations 200, window 8, ([0-9.]+) us per message, ([0-9.]+) MB/s").matcher(bw.out());
        assertTrue(b.find(), bw.out());
        double us = positive(b, 1);
        double mbs = positive(b, 2);
        // the two figures are one measurement: MiB/s = 64 KiB / time per message
        assertEquals(65536 / (us * 1e-6) / (1 << 20), mbs, mbs * 0.01, bw.out());

        p50Line("xchg", "1K", "\\[0\\] xchg 1024 B: iterations 300, p50 ([0-9.]+) us, avg ([0-9.]+) us");
    }

    @Test
    @Timeout(60)
    void aJobOfThreeRanksIsRefusedByName() {
        Result r = jccl("run", "-np", "3", P2pProbe.class.getName(), "lat", "8", "10");
        assertTrue(r.code() != 0, r.out());
        assertTrue((r.out() + r.err()).contains("P2pProbe needs exactly 2 ranks, this job has 3"), r.out() + r.err());
    }
}
