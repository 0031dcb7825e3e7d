package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class PerfFormatTest {

    @Test
    void fixedRoundsTheExactBinaryValueLikeGlibc() {
        assertEquals("0.12", CFormat.fixed(0.125, 2), "tie on an exact binary value: half-even, as glibc");
        assertEquals("0.38", CFormat.fixed(0.375, 2));
        assertEquals("2.67", CFormat.fixed(2.675, 2), "2.675 is 2.67499999... in binary");
        assertEquals("1.01", CFormat.fixed(1.005000000001, 2));
        assertEquals("18.21", CFormat.fixed(18.21, 2));
        assertEquals("0.000000", CFormat.fixed(0, 6));
        assertEquals("-0.00", CFormat.fixed(-0.001, 2), "C keeps the sign of a negative rounded to zero");
        assertEquals("35354", CFormat.fixed(35354.3, 0));
        assertEquals("nan", CFormat.fixed(Double.NaN, 2));
        assertEquals("inf", CFormat.fixed(Double.POSITIVE_INFINITY, 2));
    }

    @Test
    void exponentForm() {
        assertEquals("1.2e+07", CFormat.exp(12345678, 1));
        assertEquals("1e+07", CFormat.exp(12345678, 0));
        assertEquals("1.0e+01", CFormat.exp(9.96, 1), "rounding up to 10 renormalises");
        assertEquals("5.0e-05", CFormat.exp(0.00005, 1));
        assertEquals("0.0e+00", CFormat.exp(0, 1));
        assertEquals("1.0e+100", CFormat.exp(1e100, 1));
    }

    @Test
    void generalFormLikePrintfG() {
        assertEquals("0", CFormat.g(0));
        assertEquals("7", CFormat.g(7));
        assertEquals("123456", CFormat.g(123456));
        assertEquals("1.23457e+06", CFormat.g(1234567));
        assertEquals("1e+06", CFormat.g(1000000));
        assertEquals("1.5", CFormat.g(1.5));
        assertEquals("0.0001", CFormat.g(0.0001));
        assertEquals("1e-05", CFormat.g(0.00001));
        assertEquals("3.33333", CFormat.g(10.0 / 3));
        assertEquals("12.3457", CFormat.g(12.345678));
        assertEquals("100000", CFormat.g(99999.96));
        assertEquals("99999.9", CFormat.g(99999.95), "99999.95 is 99999.9499... in binary");
        assertEquals("1e+06", CFormat.g(999999.5));
        assertEquals("288.533", CFormat.g(288.5326));
    }

    @Test
    void fitSqueezesIntoTheColumnLikeGetFloatStr() {
        assertEquals("  18.21", CFormat.fit(18.21, 7));
        assertEquals("8945.05", CFormat.fit(8945.05, 7));
        assertEquals("35354.3", CFormat.fit(35354.3, 7), "the anchor table's 8 GB time");
        assertEquals("1234567", CFormat.fit(1234567.4, 7));
        assertEquals("1.2e+07", CFormat.fit(12345678, 7));
        assertEquals("  0.00", CFormat.fit(0.001, 6));
        assertEquals("364.45", CFormat.fit(364.45, 6));
        assertEquals("1234.6", CFormat.fit(1234.56, 6));
        assertEquals("123457", CFormat.fit(123456.7, 6));
        assertEquals(" 1e+06", CFormat.fit(1234567, 6));
    }

    /** nccl-tests' row, built with its own format strings from util.cu (the string/int parts, which C and Java print alike). */
    private static String ncclRow(long size, long count, String type, String redop, int root, String[] oop, String[] ip) {
        String rootName = String.format("%6d", root);
        String pre = String.format("%12d  %12d  %8s  %6s  %6s", size, count, type, redop, rootName);
        return pre + body(oop) + body(ip);
    }

    /** "  %7s  %6s  %6s  %6g", or with "    N/A" in place of the last field when unchecked. */
    private static String body(String[] v) {
        return v[3].equals("N/A") ? String.format("  %7s  %6s  %6s    N/A", v[0], v[1], v[2])
                : String.format("  %7s  %6s  %6s  %6s", (Object[]) v);
    }

    @Test
    void rowMatchesNcclTestsLayout() {
        ResultRow r = new ResultRow(33554432, 8388608, "float", "sum", -1,
                new ResultRow.Measurement(174.44, 192.36, 288.53, 0),
                new ResultRow.Measurement(175.12, 191.61, 287.41, 0));
        String expected = ncclRow(33554432, 8388608, "float", "sum", -1,
                new String[] {"174.44", "192.36", "288.53", "0"}, new String[] {"175.12", "191.61", "287.41", "0"});
        assertEquals(expected, Table.row(r));
        assertEquals("    33554432       8388608     float     sum      -1   174.44  192.36  288.53       0   175.12  191.61  287.41       0",
                Table.row(r));
    }

    @Test
    void rowWithPlaceholdersLargeNumbersAndNotApplicable() {
        ResultRow r = new ResultRow(8589934592L, 536870912, "float", ResultRow.NO_OP, -1,
                new ResultRow.Measurement(18210.8, 471.70, 353.77, 12),
                new ResultRow.Measurement(123456789.0, 0.004, 0.003, ResultRow.Measurement.NOT_CHECKED));
        String expected = ncclRow(8589934592L, 536870912, "float", "none", -1,
                new String[] {"18210.8", "471.70", "353.77", "12"}, new String[] {"1.2e+08", "0.00", "0.00", "N/A"});
        // nccl-tests prints a fixed "    N/A", one column narrower than "  %6g"
        assertEquals(expected, Table.row(r));
        assertTrue(Table.row(r).endsWith("   0.00    0.00    N/A"), Table.row(r));
    }

    @Test
    void rowWithRoot() {
        ResultRow r = new ResultRow(1024, 256, "bfloat16", "max", 3,
                new ResultRow.Measurement(5.5, 0.19, 0.19, 0), new ResultRow.Measurement(5.25, 0.2, 0.2, 1234567));
        assertEquals(ncclRow(1024, 256, "bfloat16", "max", 3, new String[] {"5.50", "0.19", "0.19", "0"},
                new String[] {"5.25", "0.20", "0.20", "1.23457e+06"}), Table.row(r));
    }

    /**
     * Lines printed by a C program (glibc printf) that applies nccl-tests 2.19.6's format strings
     * (writeBenchmarkLinePreamble, getFloatStr, writeBenchmarkLineBody, writeResultFooter) to the
     * values below: rounding ties, column overflow into fewer decimals and the exponent form,
     * %g of large #wrong counts, N/A.
     */
    private static final String[] GOLDEN_ROWS = {
        "           8             2     float     sum      -1     0.50    0.00    0.00       0     0.12   16.00   24.00  999999",
        "          64            16  bfloat16    none       0    18.20    0.12    0.38       1  35354.3  242.97  364.45       7",
        "         512           128     float     sum       1   100000  1234.6  100.00  1.23457e+06  8945.05  240.08  360.11       0",
        "        4096          1024  bfloat16    none      -1  1234568  123457   1e+06    N/A  1.2e+07    0.00    0.01      42",
        "       32768          8192     float     sum       0  1.2e+07    0.00    0.01      42  1234568  123457   1e+06    N/A",
        "      262144         65536  bfloat16    none       1  8945.05  240.08  360.11       0   100000  1234.6  100.00  1.23457e+06",
        "     2097152        524288     float     sum      -1  35354.3  242.97  364.45       7    18.20    0.12    0.38       1",
        "    16777216       4194304  bfloat16    none       0     0.12   16.00   24.00  999999     0.50    0.00    0.00       0",
    };

    @Test
    void rowsMatchLinesPrintedByCWithNcclTestsFormats() {
        double[][] v = {{0.5, 0.0, 0.0}, {18.205, 0.125, 0.375}, {99999.995, 1234.565, 99.995}, {1234567.8, 123456.7, 999999.5},
            {12345678, 0.004, 0.005}, {8945.05, 240.08, 360.11}, {35354.34, 242.97, 364.45}, {0.125, 16.0, 24.0}};
        long[] w = {0, 1, 1234567, -1, 42, 0, 7, 999999};
        for (int i = 0; i < 8; i++) {
            ResultRow.Measurement a = new ResultRow.Measurement(v[i][0], v[i][1], v[i][2], w[i]);
            ResultRow.Measurement b = new ResultRow.Measurement(v[7 - i][0], v[7 - i][1], v[7 - i][2], w[7 - i]);
            ResultRow r = new ResultRow(8L << (3 * i), 2L << (3 * i), i % 2 == 1 ? "bfloat16" : "float",
                    i % 2 == 1 ? "none" : "sum", i % 3 - 1, a, b);
            assertEquals(GOLDEN_ROWS[i], Table.row(r), "row " + i);
        }
        String[] bw = {"288.533", "0.000123456", "1.23457e+06", "0", "15.5"};
        double[] values = {288.532612, 0.000123456, 1234567.0, 0.0, 15.5};
        for (int i = 0; i < bw.length; i++) {
            assertEquals("# Avg bus bandwidth    : " + bw[i] + " ", Table.footer(0, values[i], -1, Collective.ALL_REDUCE).get(1));
        }
    }

    @Test
    void headerMatchesNcclTests() {
        List<String> h = Table.resultHeader();
        assertEquals("#", h.get(0));
        assertEquals(String.format("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          ",
                "", "", "", "", ""), h.get(1));
        assertEquals(String.format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s",
                "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", ""),
                h.get(2));
        assertEquals(String.format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s",
                "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ""), h.get(3));
        // the column titles sit right above the values
        String row = Table.row(new ResultRow(8, 2, "float", "sum", -1, new ResultRow.Measurement(18.21, 0, 0, 0),
                new ResultRow.Measurement(18.15, 0, 0, 0)));
        assertEquals(h.get(2).indexOf("#wrong") + 6, row.indexOf(" 0 ") + 2);
        assertEquals(h.get(2).length() - 1, row.length(), "rows end under the last title; the header keeps a trailing blank");
    }

    @Test
    void footerMatchesNcclTests() {
        List<String> f = Table.footer(0, 288.532612, -1, Collective.ALL_REDUCE);
        assertEquals(List.of("# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 288.533 ", "#",
                "# Collective test concluded: all_reduce_perf", "#", ""), f);
        List<String> bad = Table.footer(3, 1.5, 10, Collective.SENDRECV);
        assertEquals("# Out of bounds values : 3 FAILED", bad.get(0));
        assertEquals("# Avg bus bandwidth    : 1.5 FAILED", bad.get(1));
        assertEquals("# Avg bus bandwidth    : 9.5 OK", Table.footer(0, 9.5, 10, Collective.SENDRECV).get(1));
    }

    @Test
    void deviceReport() {
        PerfOptions o = new PerfTesting.Opts().build();
        List<RankInfo> ranks = List.of(new RankInfo(0, 4242, "node1", -1, "cpu", "host memory"),
                new RankInfo(1, 4243, "node1", -1, "cpu", "host memory"));
        List<String> l = Table.deviceReport(o, ranks);
        assertTrue(l.get(0).startsWith("# jccl perf version "), l.get(0));
        assertEquals("# Collective test starting: all_reduce_perf", l.get(1));
        assertEquals("# nThread 1 nGpus 1 minBytes 8 maxBytes 4096 step: 4(factor) warmup iters: 1 iters: 3 agg iters: 1"
                + " validation: 1 graph: 0 unalign: 0", l.get(2));
        assertEquals("#", l.get(3));
        assertEquals("# Using devices", l.get(4));
        assertEquals(String.format("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s", 0, 0, 4242, "node1", -1, "cpu",
                "host memory"), l.get(5));
        assertEquals("#  Rank  1 Group  0 Pid   4243 on      node1 device -1 [cpu] host memory", l.get(6));

        PerfTesting.Opts bytes = new PerfTesting.Opts();
        bytes.factor = 1;
        bytes.step = 1024;
        bytes.blocking = 3;
        List<String> l2 = Table.deviceReport(bytes.build(), ranks);
        assertTrue(l2.get(2).contains(" step: 1024(bytes) "), l2.get(2));
        assertEquals("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier ", l2.get(3));
    }

    @Test
    void rankRecordsRoundTrip() {
        RankInfo r = new RankInfo(7, 123456, "host-a", -1, "cpu", "host memory, 2 CPUs, Java 25");
        byte[] all = new byte[RankInfo.RECORD_BYTES * 2];
        System.arraycopy(r.encode(), 0, all, RankInfo.RECORD_BYTES, RankInfo.RECORD_BYTES);
        assertEquals(r, RankInfo.decode(all, RankInfo.RECORD_BYTES));
        RankInfo longDesc = new RankInfo(0, 1, "h", -1, "cpu", "x".repeat(2000));
        RankInfo back = RankInfo.decode(longDesc.encode(), 0);
        assertEquals("h", back.host());
        assertTrue(back.description().length() < RankInfo.RECORD_BYTES);
        assertTrue(!RankInfo.hostName().contains("."));
    }
}
