package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(10)
class PerfJsonTest {

    @SuppressWarnings("unchecked")
    private static Map<String, Object> obj(Object o) {
        return (Map<String, Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object o) {
        return (List<Object>) o;
    }

    @Test
    void documentIsWellFormedAndShapedLikeNcclTests() {
        JsonReport r = new JsonReport();
        r.add(new ResultRow(1024, 256, "float", "sum", -1, new ResultRow.Measurement(12.5, 0.08192, 0.12288, 0),
                new ResultRow.Measurement(13.25, 0.077, 0.116, 0)), 20);
        r.add(new ResultRow(0, 0, "float", "none", -1, new ResultRow.Measurement(0.5, 0, 0, 0),
                new ResultRow.Measurement(Double.NaN, Double.POSITIVE_INFINITY, 0, ResultRow.Measurement.NOT_CHECKED)), 20);
        PerfOptions o = new PerfOptions(Collective.ALL_REDUCE, 8, 4096, 1 << 20, 4, 20, 1, 1, List.of(org.jccl.ReduceOp.SUM),
                List.of(org.jccl.DataType.FLOAT32), 0, 1, 0, null, -1,
                List.of("all_reduce", "--minbytes", "8", "--op", "a\"quoted\\value/\n\t\u0001"), 0, false);
        String doc = r.document(o, List.of(new RankInfo(0, 99, "node\"1", -1, "cpu", "host memory")),
                Map.of("JCCL_AUTH_TOKEN", "s3cret", "NCCL_SOCKET_IFNAME", "eth0", "PATH", "/bin"), 0, 1.25, -1, List.of());
        assertFalse(doc.contains("s3cret"), "the auth token never reaches the file");
        Map<String, Object> root = obj(MiniJson.parse(doc));
        assertEquals(3.0, root.get("version"));
        assertEquals(List.of("jccl", "perf", "all_reduce", "--minbytes", "8", "--op", "a\"quoted\\value/\n\t\u0001"), root.get("args"));
        assertEquals(List.of("JCCL_AUTH_TOKEN=****", "NCCL_SOCKET_IFNAME=eth0"), root.get("env"));
        assertTrue(((String) root.get("start_time")).matches("\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d"));
        Map<String, Object> config = obj(root.get("config"));
        assertEquals(8.0, config.get("minimum_bytes"));
        assertEquals(4096.0, config.get("maximum_bytes"));
        assertEquals(4.0, config.get("step_factor"));
        assertFalse(config.containsKey("step_bytes"));
        assertEquals(20.0, config.get("iterations"));
        assertEquals("false", config.get("blocking_collectives"), "nccl-tests writes booleans as strings");
        Map<String, Object> dev = obj(list(config.get("devices")).get(0));
        assertEquals("node\"1", dev.get("hostname"));
        assertEquals(99.0, dev.get("pid"));

        List<Object> results = list(root.get("results"));
        assertEquals(2, results.size());
        Map<String, Object> first = obj(results.get(0));
        assertEquals(List.of("size", "count", "type", "redop", "root", "out_of_place", "in_place", "actual_iterations",
                "experiment_name"), List.copyOf(first.keySet()));
        assertEquals(1024.0, first.get("size"));
        assertEquals("    -1", first.get("root"), "the padded column text, as nccl-tests");
        Map<String, Object> oop = obj(first.get("out_of_place"));
        assertEquals(12.5, oop.get("time"));
        assertEquals(0.08192, oop.get("alg_bw"));
        assertEquals(0.0, oop.get("nwrong"));
        assertTrue(doc.contains("\"time\":12.500000"), "six decimals like %lf");
        Map<String, Object> ip2 = obj(obj(results.get(1)).get("in_place"));
        assertEquals("nan", ip2.get("time"));
        assertEquals("inf", ip2.get("alg_bw"));
        assertNull(ip2.get("nwrong"), "unchecked is null");
        assertTrue(ip2.containsKey("nwrong"));

        assertEquals(Map.of("count", 0.0, "okay", "true"), root.get("out_of_bounds"));
        assertEquals(Map.of("bandwidth", 1.25, "okay", "unchecked"), root.get("average_bus_bandwidth"));
        assertEquals(List.of(), root.get("errors"));
        assertTrue(root.containsKey("end_time"));
    }

    @Test
    void failedRunAndStepBytes() {
        PerfTesting.Opts opts = new PerfTesting.Opts();
        opts.factor = 1;
        opts.step = 512;
        String doc = new JsonReport().document(opts.build(), List.of(), Map.of(), 2, 3.0, 10, List.of("rank 1 failed"));
        Map<String, Object> root = obj(MiniJson.parse(doc));
        assertEquals(512.0, obj(root.get("config")).get("step_bytes"));
        assertEquals(Map.of("count", 2.0, "okay", "false"), root.get("out_of_bounds"));
        assertEquals(Map.of("bandwidth", 3.0, "okay", "false"), root.get("average_bus_bandwidth"));
        assertEquals(List.of("rank 1 failed"), root.get("errors"));
        assertEquals(List.of(), root.get("results"));
    }

    @Test
    void neverOverwritesAnExistingFile(@TempDir Path dir) throws Exception {
        Path p = dir.resolve("out.json");
        assertEquals(p, JsonReport.create(p));
        assertEquals(dir.resolve("out.json.0"), JsonReport.create(p));
        assertEquals(dir.resolve("out.json.1"), JsonReport.create(p));
        JsonReport.write(p, "{}\n");
        assertEquals("{}\n", Files.readString(p));
    }

    @Test
    void stringEscapes() {
        assertEquals("\"a\\/b\\\"c\\\\d\\n\\t\\u0007\"", JsonReport.str("a/b\"c\\d\n\t\u0007"));
        assertEquals("1.500000", JsonReport.num(1.5));
        assertEquals("\"nan\"", JsonReport.num(Double.NaN));
    }
}
