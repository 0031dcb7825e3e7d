package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.cli.JcclCli;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;

@Timeout(20)
class PerfCommandTest {

    private static PerfCommand parse(String... args) {
        PerfCommand cmd = new PerfCommand();
        new CommandLine(cmd).parseArgs(args);
        return cmd;
    }

    private static PerfOptions options(String... args) {
        return parse(args).options(Map.of());
    }

    /** Runs {@code jccl <args>} and returns the exit code and what it printed. */
    private record Exec(int code, String out, String err) {
    }

    private static Exec exec(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new JcclCli());
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute(args);
        return new Exec(code, out.toString(), err.toString());
    }

    @Test
    void defaultsAreNcclTests() {
        PerfOptions o = options("all_reduce");
        assertEquals(Collective.ALL_REDUCE, o.collective());
        assertEquals(32L << 20, o.minBytes());
        assertEquals(32L << 20, o.maxBytes());
        assertEquals(1L << 20, o.stepBytes());
        assertEquals(1, o.stepFactor());
        assertEquals(20, o.iters());
        assertEquals(1, o.warmupIters(), "nccl-tests 2.19 warms up once per size (it used to be 5)");
        assertEquals(1, o.check());
        assertEquals(List.of(ReduceOp.SUM), o.ops());
        assertEquals(List.of(DataType.FLOAT32), o.types());
        assertEquals(0, o.root());
        assertEquals(1, o.average());
        assertEquals(0, o.blocking());
        assertNull(o.jsonFile());
        assertEquals(-1, o.minBusBw());
        assertEquals(List.of(32L << 20), o.sizes());
        assertEquals(List.of("all_reduce"), o.args());
    }

    @Test
    void shortFlags() {
        PerfOptions o = options("reduce_perf", "-b", "8", "-e", "128M", "-f", "2", "-n", "5", "-w", "3", "-c", "0", "-o", "max",
                "-d", "half", "-r", "2", "-a", "3", "-z", "1", "-J", "out.json");
        assertEquals(Collective.REDUCE, o.collective());
        assertEquals(8, o.minBytes());
        assertEquals(128L << 20, o.maxBytes());
        assertEquals(2, o.stepFactor());
        assertEquals(5, o.iters());
        assertEquals(3, o.warmupIters());
        assertEquals(0, o.check());
        assertEquals(List.of(ReduceOp.MAX), o.ops());
        assertEquals(List.of(DataType.FLOAT16), o.types());
        assertEquals(2, o.root());
        assertEquals(3, o.average());
        assertEquals(1, o.blocking());
        assertEquals(Path.of("out.json"), o.jsonFile());
        assertEquals(25, o.sizes().size());
    }

    @Test
    void longFlagsAllAndAttachedValues() {
        PerfOptions o = options("broadcast", "--minbytes", "1K", "--maxbytes=4K", "--stepbytes", "1K", "--iters", "7",
                "--warmup_iters", "0", "--check", "2", "--op", "all", "--datatype", "all", "--root", "all", "--average", "2",
                "--blocking", "3", "--output_file", "x.json");
        assertEquals(List.of(1024L, 2048L, 3072L, 4096L), o.sizes());
        assertEquals(PerfOptions.ALL_OPS, o.ops());
        assertEquals(PerfOptions.ALL_TYPES, o.types());
        assertEquals(PerfOptions.ALL_ROOTS, o.root());
        assertEquals(Path.of("x.json"), options("sendrecv", "--json", "x.json").jsonFile());
        assertEquals(PerfOptions.ALL_ROOTS, options("reduce", "-r", "-1").root(), "nccl-tests spells 'all roots' -1");
        PerfOptions attached = options("all_gather", "-b8", "-e64M", "-f4", "-dbfloat16");
        assertEquals(8, attached.minBytes());
        assertEquals(64L << 20, attached.maxBytes());
        assertEquals(List.of(DataType.BFLOAT16), attached.types());
        assertEquals(12, attached.sizes().size());
    }

    @Test
    void minimumBandwidthComesFromTheEnvironment() {
        assertEquals(123.5, parse("all_reduce").options(Map.of("NCCL_TESTS_MIN_BW", "123.5")).minBusBw());
        PerfCommand bad = parse("all_reduce");
        CommandLine.ParameterException e = assertThrows(CommandLine.ParameterException.class,
                () -> bad.options(Map.of("NCCL_TESTS_MIN_BW", "fast")));
        assertTrue(e.getMessage().contains("NCCL_TESTS_MIN_BW"), e.getMessage());
    }

    @Test
    void npIsNotPassedToTheRanks() {
        PerfCommand c = parse("-np", "4", "all_reduce", "-n", "5", "-b", "8", "--op", "max", "-J", "r.json");
        assertEquals(4, c.np);
        List<String> args = PerfCommand.rankArgs(c.spec.commandLine().getParseResult());
        assertEquals(List.of("all_reduce", "--iters", "5", "--minbytes", "8", "--op", "max", "--output_file", "r.json"), args);
        assertEquals(5, c.options(Map.of()).iters(), "-n and -np are different options");
        PerfCommand d = parse("sendrecv", "-np", "2");
        assertEquals(2, d.np);
        assertEquals(List.of("sendrecv"), PerfCommand.rankArgs(d.spec.commandLine().getParseResult()));
    }

    @Test
    void badFlagsAreUsageErrorsWithClearMessages() {
        Object[][] cases = {
            {new String[] {"perf", "allreduc"}, "unknown collective 'allreduc'"},
            {new String[] {"perf", "all_reduce", "-b", "32X"}, "invalid size '32X' for -b/--minbytes"},
            {new String[] {"perf", "all_reduce", "-b", "64", "-e", "8"}, "64 > 8"},
            {new String[] {"perf", "all_reduce", "-o", "mulsum"}, "mulsum"},
            {new String[] {"perf", "all_reduce", "-o", "xor"}, "unknown reduce op 'xor'"},
            {new String[] {"perf", "all_reduce", "-d", "fp8"}, "unknown data type 'fp8'"},
            {new String[] {"perf", "all_reduce", "-a", "4"}, "-a/--average"},
            {new String[] {"perf", "all_reduce", "-n", "0"}, "-n/--iters"},
            {new String[] {"perf", "all_reduce", "-z", "7"}, "-z/--blocking"},
            {new String[] {"perf", "all_reduce", "-r", "first"}, "-r/--root"},
            {new String[] {"perf", "all_reduce", "-b", "0", "-e", "8", "-f", "2"}, "never grows"},
            {new String[] {"perf", "all_reduce", "-f", "-2"}, "-f/--stepfactor"},
            {new String[] {"perf", "all_reduce", "-n", "lots"}, "lots"},
            {new String[] {"perf", "all_reduce", "-t", "2"}, "Unknown option"},
            {new String[] {"perf"}, "COLLECTIVE"},
            {new String[] {"perf", "all_reduce", "-np", "0"}, "-np must be at least 1"},
        };
        for (Object[] c : cases) {
            String[] args = (String[]) c[0];
            Exec e = exec(args);
            assertEquals(2, e.code(), String.join(" ", args) + "\n" + e.err());
            assertTrue(e.err().contains((String) c[1]), String.join(" ", args) + " -> " + e.err());
        }
    }

    @Test
    void withoutAJobEnvironmentItPointsToNp() {
        assumeTrue(Config.fromEnvironment().launch().isEmpty(), "this test JVM runs inside a launcher's job");
        Exec e = exec("perf", "all_reduce", "-b", "8");
        assertEquals(2, e.code(), e.err());
        assertTrue(e.err().contains("jccl perf -np N all_reduce --minbytes 8"), e.err());
    }

    /** -np starts real rank processes through the local launcher; rank 0's report arrives without the launcher's prefix. */
    @Test
    @Timeout(120)
    void npStartsRankProcesses() throws Exception {
        java.io.ByteArrayOutputStream captured = new java.io.ByteArrayOutputStream();
        java.io.PrintStream saved = System.out;
        int code;
        System.setOut(new java.io.PrintStream(captured, true, java.nio.charset.StandardCharsets.UTF_8));
        try {
            code = exec("perf", "-np", "2", "sendrecv", "-b", "1K", "-e", "4K", "-f", "4", "-n", "3").code();
        } finally {
            System.setOut(saved);
        }
        String out = captured.toString(java.nio.charset.StandardCharsets.UTF_8);
        assertEquals(0, code, out);
        List<String> lines = out.lines().toList();
        assertEquals("# Collective test starting: sendrecv_perf", lines.get(1), out);
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("#  Rank  1 Group  0 Pid ")), out);
        List<String> rows = lines.stream().filter(l -> !l.startsWith("#") && !l.isBlank()).toList();
        assertEquals(2, rows.size(), out);
        assertTrue(rows.getFirst().startsWith("        1024           256     float     sum      -1 "), rows.getFirst());
        assertTrue(out.contains("# Out of bounds values : 0 OK"), out);
    }

    @Test
    void help() {
        Exec e = exec("perf", "--help");
        assertEquals(0, e.code());
        for (String flag : new String[] {"--minbytes", "--maxbytes", "--stepbytes", "--stepfactor", "--iters", "--warmup_iters",
            "--check", "--op", "--datatype", "--root", "--average", "--blocking", "--output_file", "-np"}) {
            assertTrue(e.out().contains(flag), flag + " in\n" + e.out());
        }
    }
}
