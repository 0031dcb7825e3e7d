package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The benchmark's logic (layouts, in-place slots, roots, checks, combining, output) over {@link
 * FakeCluster}, an in-memory stand-in for the runtime.
 */
@Timeout(60)
class PerfBenchmarkTest {

    private static PerfTesting.Run run(int n, PerfOptions o) throws Exception {
        return PerfTesting.runRanks(new FakeCluster(n).comms(), o);
    }

    private static void assertClean(PerfTesting.Run r, Collective c) {
        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("# Out of bounds values : 0 OK"), r.out());
        for (String row : r.rows()) {
            String[] f = PerfTesting.fields(row);
            assertEquals(13, f.length, row);
            assertEquals("0", f[8], "out-of-place #wrong: " + row);
            assertEquals(c.inPlaceUnchecked() ? "N/A" : "0", f[12], "in-place #wrong: " + row);
            assertTrue(Double.parseDouble(f[5]) > 0, "time: " + row);
        }
    }

    @ParameterizedTest
    @EnumSource(Collective.class)
    void everyCollectiveChecksCleanOnOneThreeAndFourRanks(Collective c) throws Exception {
        for (int n : new int[] {1, 3, 4}) {
            PerfTesting.Run r = run(n, new PerfTesting.Opts().coll(c).build());
            assertClean(r, c);
            // -b 8 -e 4096 -f 4: 8 32 128 512 2048
            assertEquals(5, r.rows().size(), r.out());
            for (String row : r.rows()) {
                String[] f = PerfTesting.fields(row);
                assertEquals("float", f[2]);
                assertEquals(c.hasOp() ? "sum" : "none", f[3], row);
                assertEquals(c.hasRoot() ? "0" : "-1", f[4], row);
            }
        }
    }

    @Test
    void sizeAndCountColumnsFollowNcclTests() throws Exception {
        PerfTesting.Run r = run(4, new PerfTesting.Opts().coll(Collective.ALL_GATHER).build());
        List<String> sizes = new ArrayList<>();
        List<String> counts = new ArrayList<>();
        for (String row : r.rows()) {
            sizes.add(PerfTesting.fields(row)[0]);
            counts.add(PerfTesting.fields(row)[1]);
        }
        assertEquals(List.of("0", "0", "128", "512", "2048"), sizes, "the anchor's all_gather: 8 and 32 bytes round to 0 on 4 ranks");
        assertEquals(List.of("0", "0", "8", "32", "128"), counts);
        assertClean(r, Collective.ALL_GATHER);
    }

    @ParameterizedTest
    @EnumSource(value = Collective.class, names = {"ALL_REDUCE", "REDUCE", "REDUCE_SCATTER"})
    void everyTypeAndOp(Collective c) throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(c);
        o.min = 256;
        o.max = 1024;
        o.types = PerfOptions.ALL_TYPES;
        o.ops = PerfOptions.ALL_OPS;
        PerfTesting.Run r = run(3, o.build());
        assertClean(r, c);
        assertEquals(10 * 5 * 2, r.rows().size());
        String first = r.rows().getFirst();
        assertEquals("int8", PerfTesting.fields(first)[2]);
        assertEquals("sum", PerfTesting.fields(first)[3]);
        // nccl-tests' order: types outer, ops inner (sum prod max min avg)
        assertEquals("prod", PerfTesting.fields(r.rows().get(2))[3]);
        assertEquals("max", PerfTesting.fields(r.rows().get(4))[3]);
        assertEquals("bfloat16", PerfTesting.fields(r.rows().getLast())[2]);
        assertEquals("avg", PerfTesting.fields(r.rows().getLast())[3]);
    }

    @ParameterizedTest
    @EnumSource(value = Collective.class, names = {"ALL_GATHER", "ALLTOALL", "SENDRECV", "BROADCAST"})
    void everyTypeForCopies(Collective c) throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(c);
        o.min = 100;
        o.max = 1000;
        o.factor = 10;
        o.types = PerfOptions.ALL_TYPES;
        PerfTesting.Run r = run(3, o.build());
        assertClean(r, c);
        assertEquals(10 * 2, r.rows().size());
    }

    @ParameterizedTest
    @EnumSource(value = Collective.class, names = {"BROADCAST", "REDUCE"})
    void everyRootInTurn(Collective c) throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(c);
        o.root = PerfOptions.ALL_ROOTS;
        o.min = 64;
        o.max = 64;
        PerfTesting.Run r = run(3, o.build());
        assertClean(r, c);
        List<String> roots = r.rows().stream().map(row -> PerfTesting.fields(row)[4]).toList();
        assertEquals(List.of("0", "1", "2"), roots);

        o.root = 2;
        r = run(3, o.build());
        assertClean(r, c);
        assertEquals("2", PerfTesting.fields(r.rows().getFirst())[4]);
    }

    @Test
    void pairedTimingNotesBothMethodsAfterEveryRowAndKeepsTheTable() throws Exception {
        PerfTesting.Opts m = new PerfTesting.Opts();
        PerfOptions o = new PerfOptions(m.collective, m.min, m.max, m.step, m.factor, m.iters, m.warmup, m.check, m.ops, m.types,
                m.root, m.average, m.blocking, null, -1, List.of("all_reduce"), 0, false, null, 3);
        PerfTesting.Run r = run(3, o);
        assertClean(r, Collective.ALL_REDUCE);
        assertEquals(5, r.rows().size(), r.out());
        List<String> lines = r.out().lines().toList();
        int rows = 0;
        for (int i = 0; i < lines.size(); i++) {
            if (!r.rows().contains(lines.get(i))) {
                continue;
            }
            rows++;
            String size = PerfTesting.fields(lines.get(i))[0];
            // The row, then one '#paired' line per variant: size, variant, both times, the median ratio and the 3 pairs'.
            for (int v = 0; v < 2; v++) {
                String[] f = PerfTesting.fields(lines.get(i + 1 + v));
                assertEquals(List.of("#paired", size, v == 0 ? "out" : "in", "mean_us"), List.of(f[0], f[1], f[2], f[3]), lines.get(i + 1 + v));
                assertEquals(List.of("median_us", "ratio", "pairs"), List.of(f[5], f[7], f[9]), lines.get(i + 1 + v));
                assertEquals(13, f.length, lines.get(i + 1 + v));
                double mean = Double.parseDouble(f[4]);
                double median = Double.parseDouble(f[6]);
                assertTrue(mean > 0 && median > 0, lines.get(i + 1 + v));
                double[] pairs = {Double.parseDouble(f[10]), Double.parseDouble(f[11]), Double.parseDouble(f[12])};
                java.util.Arrays.sort(pairs);
                assertEquals(pairs[1], Double.parseDouble(f[8]), 0.0011, "the ratio is the median of the pairs': " + lines.get(i + 1 + v));
            }
            // The table's time is the mean method's (median of its three runs, as the note says).
            assertEquals(Double.parseDouble(PerfTesting.fields(lines.get(i))[5]), Double.parseDouble(PerfTesting.fields(lines.get(i + 1))[4]),
                    0.006, lines.get(i) + " / " + lines.get(i + 1));
        }
        assertEquals(5, rows);
    }

    @Test
    void pairedTimingAndMedianAreExclusive() {
        PerfTesting.Opts m = new PerfTesting.Opts();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new PerfOptions(m.collective, m.min, m.max,
                m.step, m.factor, m.iters, m.warmup, m.check, m.ops, m.types, m.root, m.average, m.blocking, null, -1, List.of(), 0, true,
                null, 3));
        assertTrue(e.getMessage().contains("--timing paired"), e.getMessage());
    }

    @Test
    void sendrecvLoopsOverOpsLikeNcclTests() throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(Collective.SENDRECV);
        o.ops = PerfOptions.ALL_OPS;
        o.min = 64;
        o.max = 64;
        PerfTesting.Run r = run(2, o.build());
        assertClean(r, Collective.SENDRECV);
        assertEquals(List.of("sum", "prod", "max", "min", "avg"), r.rows().stream().map(row -> PerfTesting.fields(row)[3]).toList());
    }

    @Test
    void wrongResultsAreCountedAndFail() throws Exception {
        FakeCluster cluster = new FakeCluster(3);
        cluster.corruptRank = 1;
        PerfTesting.Run r = PerfTesting.runRanks(cluster.comms(), new PerfTesting.Opts().build());
        assertEquals(1, r.code());
        for (String row : r.rows()) {
            String[] f = PerfTesting.fields(row);
            if (!f[0].equals("0")) {
                assertEquals("1", f[8], row);
                assertEquals("1", f[12], row);
            }
        }
        // nccl-tests counts checks that failed on some rank: one rank, 5 sizes, 2 variants
        assertTrue(r.out().contains("# Out of bounds values : 10 FAILED"), r.out());
    }

    @Test
    void inPlaceOnlyCorruptionIsReportedInTheInPlaceColumn() throws Exception {
        FakeCluster cluster = new FakeCluster(4);
        cluster.corruptRank = 3;
        cluster.corruptInPlaceOnly = true;
        PerfTesting.Opts o = new PerfTesting.Opts().coll(Collective.ALL_GATHER);
        o.min = 1024;
        o.max = 1024;
        PerfTesting.Run r = PerfTesting.runRanks(cluster.comms(), o.build());
        assertEquals(1, r.code());
        String[] f = PerfTesting.fields(r.rows().getFirst());
        assertEquals("0", f[8]);
        assertEquals("1", f[12]);
        assertTrue(r.out().contains("# Out of bounds values : 1 FAILED"), r.out());
    }

    @Test
    void checkOffPrintsNotApplicable() throws Exception {
        FakeCluster cluster = new FakeCluster(2);
        cluster.corruptRank = 0;
        PerfTesting.Opts o = new PerfTesting.Opts();
        o.check = 0;
        PerfTesting.Run r = PerfTesting.runRanks(cluster.comms(), o.build());
        assertEquals(0, r.code(), "nothing checked, nothing failed");
        for (String row : r.rows()) {
            assertTrue(row.endsWith("N/A"), row);
            assertEquals("N/A", PerfTesting.fields(row)[8]);
        }
        assertTrue(r.out().contains("validation: 0 "), r.out());
    }

    @Test
    void blockingModesAndAverages() throws Exception {
        for (int z = 0; z <= 3; z++) {
            for (int a = 0; a <= 3; a++) {
                PerfTesting.Opts o = new PerfTesting.Opts();
                o.blocking = z;
                o.average = a;
                o.min = 1024;
                o.max = 1024;
                PerfTesting.Run r = run(2, o.build());
                assertClean(r, Collective.ALL_REDUCE);
                assertEquals(1, r.rows().size());
            }
        }
    }

    @Test
    void busBandwidthIsAlgBandwidthTimesTheFactor() throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts();
        o.min = 1 << 20;
        o.max = 1 << 20;
        PerfTesting.Run r = run(4, o.build());
        String[] f = PerfTesting.fields(r.rows().getFirst());
        double time = Double.parseDouble(f[5]);
        double alg = Double.parseDouble(f[6]);
        double bus = Double.parseDouble(f[7]);
        assertEquals((1 << 20) / 1e9 / (time * 1e-6), alg, alg * 0.01 + 0.01);
        assertEquals(alg * 1.5, bus, bus * 0.01 + 0.01);
        // footer: the mean of the printed busbw values (out of place and in place)
        double mean = (bus + Double.parseDouble(f[11])) / 2;
        String avgLine = r.out().lines().filter(l -> l.startsWith("# Avg bus bandwidth")).findFirst().orElseThrow();
        assertEquals(mean, Double.parseDouble(avgLine.substring(avgLine.indexOf(':') + 1).trim()), mean * 0.01 + 0.01);
    }

    @Test
    void reportLayout() throws Exception {
        PerfTesting.Run r = run(3, new PerfTesting.Opts().build());
        List<String> lines = r.out().lines().toList();
        assertTrue(lines.get(0).startsWith("# jccl perf version"), lines.get(0));
        assertEquals("# Collective test starting: all_reduce_perf", lines.get(1));
        assertTrue(lines.get(2).startsWith("# nThread 1 nGpus 1 minBytes 8 maxBytes 4096 step: 4(factor) warmup iters: 1 iters: 3"));
        assertEquals("#", lines.get(3));
        assertEquals("# Using devices", lines.get(4));
        for (int k = 0; k < 3; k++) {
            assertTrue(lines.get(5 + k).startsWith("#  Rank  " + k + " Group  0 Pid "), lines.get(5 + k));
        }
        assertEquals(Table.resultHeader(), lines.subList(8, 12));
        assertEquals(Table.row(new ResultRow(8, 2, "float", "sum", -1, new ResultRow.Measurement(0, 0, 0, 0),
                new ResultRow.Measurement(0, 0, 0, 0))).substring(0, 50), lines.get(12).substring(0, 50));
        assertEquals("# Collective test concluded: all_reduce_perf", lines.get(lines.size() - 3));
        assertEquals("#", lines.get(lines.size() - 2));
        assertEquals("", lines.getLast());
        assertTrue(r.out().endsWith("#\n\n"), "ends with '#' and an empty line, as nccl-tests");
    }

    @Test
    void jsonReportFromARun(@TempDir Path dir) throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(Collective.REDUCE_SCATTER);
        o.json = dir.resolve("rs.json");
        PerfTesting.Run r = run(3, o.build());
        assertClean(r, Collective.REDUCE_SCATTER);
        assertEquals("# Writing JSON output to " + o.json, r.out().lines().findFirst().orElseThrow());
        Object doc = MiniJson.parse(Files.readString(o.json));
        @SuppressWarnings("unchecked")
        Map<String, Object> root = (Map<String, Object>) doc;
        assertEquals(5, ((List<?>) root.get("results")).size());
        assertEquals(3, ((List<?>) ((Map<?, ?>) root.get("config")).get("devices")).size());
        assertEquals(List.of("JCCL_AUTH_TOKEN=****", "JCCL_DEBUG=WARN"), root.get("env"));
    }

    @Test
    void unwritableJsonStopsEveryRankBeforeTheRun(@TempDir Path dir) throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts();
        o.json = dir.resolve("no/such/dir/out.json");
        PerfTesting.Run r = run(3, o.build());
        assertEquals(PerfRunner.USAGE, r.code());
        assertTrue(r.err().contains("cannot write the JSON report"), r.err());
        assertEquals("", r.out());
    }

    @Test
    void rootOutsideTheJobIsAUsageError() throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts().coll(Collective.BROADCAST);
        o.root = 3;
        PerfTesting.Run r = run(3, o.build());
        assertEquals(PerfRunner.USAGE, r.code());
        assertTrue(r.err().contains("-r/--root 3 is not a rank of this 3-rank job"), r.err());
        // a root for a collective without one is ignored, as nccl-tests does
        PerfTesting.Run ok = run(3, o.coll(Collective.ALL_REDUCE).build());
        assertClean(ok, Collective.ALL_REDUCE);
    }

    @Test
    void buffersTooLargeStopEveryRank() throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts();
        o.max = 1L << 60;
        PerfTesting.Run r = run(2, o.build());
        assertEquals(PerfRunner.FAILED, r.code());
        assertTrue(r.err().contains("cannot allocate 2 x 1152921504606846976 bytes"), r.err());
        assertTrue(r.err().contains("lower -e"), r.err());
    }

    @Test
    void minimumBusBandwidth() throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts();
        o.minBw = 1e9;
        PerfTesting.Run r = run(2, o.build());
        assertEquals(1, r.code());
        assertTrue(r.out().lines().anyMatch(l -> l.startsWith("# Avg bus bandwidth    : ") && l.endsWith(" FAILED")), r.out());
        o.minBw = 0;
        assertEquals(0, run(2, o.build()).code());
    }

    @Test
    void singleElementTypesAndOddSizes() throws Exception {
        PerfTesting.Opts o = new PerfTesting.Opts();
        o.types = List.of(DataType.FLOAT64);
        o.ops = List.of(ReduceOp.MIN);
        o.min = 13;
        o.max = 100;
        o.factor = 1;
        o.step = 29;
        PerfTesting.Run r = run(3, o.build());
        assertClean(r, Collective.ALL_REDUCE);
        assertEquals(List.of("8", "40", "64", "96"), r.rows().stream().map(row -> PerfTesting.fields(row)[0]).toList(),
                "13, 42, 71, 100 bytes rounded down to whole doubles");
    }
}
