package org.jccl.cli.perf;

import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jccl.Jccl;

/**
 * The {@code -J} report, in the shape of nccl-tests' JSON output (file version 3), so scripts
 * written for nccl-tests read jccl's too:
 * <pre>
 * {"version":3, "start_time":..., "args":[...], "env":[...], "jccl_version":...,
 *  "config":{"nthreads":1, ..., "devices":[{"rank":0, "pid":..., "hostname":...}, ...]},
 *  "results":[{"size":..., "count":..., "type":..., "redop":..., "root":"    -1",
 *              "out_of_place":{"time":..., "alg_bw":..., "bus_bw":..., "nwrong":...},
 *              "in_place":{...}, "actual_iterations":..., "experiment_name":""}, ...],
 *  "out_of_bounds":{"count":0, "okay":"true"},
 *  "average_bus_bandwidth":{"bandwidth":..., "okay":"unchecked"},
 *  "errors":[], "end_time":...}
 * </pre>
 * Kept from nccl-tests on purpose: numbers printed with six decimals, booleans as the strings
 * "true"/"false", the root as its padded column text. Differences: "jccl_version" replaces
 * "nccl_version"; "env" lists only JCCL_* and NCCL_* variables, with JCCL_AUTH_TOKEN masked
 * (nccl-tests copies the whole environment, secrets included); non-finite numbers are quoted
 * ("nan", "inf") so the file always parses.
 *
 * <p>Written by hand (no JSON library in jccl-cli). Like nccl-tests, an existing file is never
 * overwritten: the report goes to {@code file.0}, {@code file.1}, ... instead.
 */
final class JsonReport {
    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss");

    private final StringBuilder results = new StringBuilder();
    private int resultCount;
    private final String startTime;

    JsonReport() {
        this.startTime = now();
    }

    /**
     * Creates the output file, or the first free {@code path.N}, so that a failure shows before
     * the benchmark runs rather than after.
     *
     * @return the path actually created
     */
    static Path create(Path path) throws IOException {
        Path p = path;
        for (int i = 0; ; i++) {
            try {
                Files.newByteChannel(p, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE).close();
                return p;
            } catch (FileAlreadyExistsException e) {
                if (i == 10_000) {
                    throw e;
                }
                p = path.resolveSibling(path.getFileName() + "." + i);
            }
        }
    }

    /** Adds one results line. */
    void add(ResultRow r, int iters) {
        StringBuilder b = results;
        if (resultCount++ > 0) {
            b.append(',');
        }
        b.append("{\"size\":").append(r.sizeBytes())
                .append(",\"count\":").append(r.count())
                .append(",\"type\":").append(str(r.type()))
                .append(",\"redop\":").append(str(r.redop()))
                .append(",\"root\":").append(str(CFormat.right(Integer.toString(r.root()), 6)))
                .append(",\"out_of_place\":");
        measurement(b, r.outOfPlace());
        b.append(",\"in_place\":");
        measurement(b, r.inPlace());
        b.append(",\"actual_iterations\":").append(iters)
                .append(",\"experiment_name\":\"\"}");
    }

    /**
     * The whole document.
     *
     * @param o the run's settings
     * @param ranks every rank's device line
     * @param env the environment (only JCCL_* and NCCL_* entries are kept)
     * @param errors footer's out-of-bounds count
     * @param avgBusBw footer's average bus bandwidth
     * @param minBusBw NCCL_TESTS_MIN_BW, negative when unset
     * @param errorMessages failures to report, usually none
     */
    String document(PerfOptions o, List<RankInfo> ranks, Map<String, String> env, long errors, double avgBusBw,
            double minBusBw, List<String> errorMessages) {
        return document(o, ranks, env, errors, avgBusBw, minBusBw, errorMessages, 1, null);
    }

    /**
     * {@link #document(PerfOptions, List, Map, long, double, double, List)} for a run that drives
     * {@code ngpus} GPUs per process; {@code backend} (the "# Backend:" text, or null for host
     * memory) is added as "backend".
     */
    String document(PerfOptions o, List<RankInfo> ranks, Map<String, String> env, long errors, double avgBusBw,
            double minBusBw, List<String> errorMessages, int ngpus, String backend) {
        StringBuilder b = new StringBuilder(results.length() + 2048);
        b.append("{\"version\":3");
        b.append(",\"start_time\":").append(str(startTime));
        List<String> args = new ArrayList<>();
        args.add("jccl");
        args.add("perf");
        args.addAll(o.args());
        b.append(",\"args\":");
        list(b, args);
        List<String> envList = new ArrayList<>();
        for (Map.Entry<String, String> e : new TreeMap<>(env).entrySet()) {
            if (e.getKey().startsWith("JCCL_") || e.getKey().startsWith("NCCL_")) {
                String v = e.getKey().equals("JCCL_AUTH_TOKEN") ? "****" : e.getValue();
                envList.add(e.getKey() + "=" + v);
            }
        }
        b.append(",\"env\":");
        list(b, envList);
        b.append(",\"jccl_version\":").append(str(Jccl.version()));
        if (backend != null) {
            b.append(",\"backend\":").append(str(backend));
        }
        b.append(",\"config\":{\"nthreads\":1,\"ngpus\":").append(ngpus)
                .append(",\"minimum_bytes\":").append(o.minBytes())
                .append(",\"maximum_bytes\":").append(o.maxBytes());
        if (o.stepFactor() > 1) {
            b.append(",\"step_factor\":").append(o.stepFactor());
        } else {
            b.append(",\"step_bytes\":").append(o.stepBytes());
        }
        b.append(",\"warmup_iters\":").append(o.warmupIters())
                .append(",\"iterations\":").append(o.iters())
                .append(",\"aggregated_iterations\":1")
                .append(",\"validation\":").append(o.check())
                .append(",\"graph\":0")
                .append(",\"blocking_collectives\":").append(bool(o.blocking() != 0))
                .append(",\"per_iter_timing\":").append(bool(false))
                .append(",\"per_iter_skip\":0")
                .append(",\"parallel_init\":").append(bool(false))
                .append(",\"devices\":[");
        for (int i = 0; i < ranks.size(); i++) {
            RankInfo r = ranks.get(i);
            b.append(i > 0 ? "," : "")
                    .append("{\"rank\":").append(r.rank())
                    .append(",\"group\":0")
                    .append(",\"pid\":").append(r.pid())
                    .append(",\"hostname\":").append(str(r.host()))
                    .append(",\"device\":").append(r.device())
                    .append(",\"device_hex\":").append(str(r.busId()))
                    .append(",\"device_info\":").append(str(r.description()))
                    .append('}');
        }
        b.append("]}");
        b.append(",\"results\":[").append(results).append(']');
        b.append(",\"out_of_bounds\":{\"count\":").append(errors).append(",\"okay\":").append(bool(errors == 0)).append('}');
        b.append(",\"average_bus_bandwidth\":{\"bandwidth\":").append(num(avgBusBw)).append(",\"okay\":")
                .append(minBusBw < 0 ? str("unchecked") : bool(avgBusBw >= minBusBw * 0.9)).append('}');
        b.append(",\"errors\":");
        list(b, errorMessages);
        b.append(",\"end_time\":").append(str(now()));
        b.append("}\n");
        return b.toString();
    }

    /** Writes {@link #document} to {@code path} (made by {@link #create}). */
    static void write(Path path, String document) throws IOException {
        try (Writer w = Files.newBufferedWriter(path, StandardCharsets.UTF_8, StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE)) {
            w.write(document);
        }
    }

    private static void measurement(StringBuilder b, ResultRow.Measurement m) {
        b.append("{\"time\":").append(num(m.timeUs()))
                .append(",\"alg_bw\":").append(num(m.algBw()))
                .append(",\"bus_bw\":").append(num(m.busBw()))
                .append(",\"nwrong\":").append(m.checked() ? num(m.wrong()) : "null")
                .append('}');
    }

    private static void list(StringBuilder b, List<String> items) {
        b.append('[');
        for (int i = 0; i < items.size(); i++) {
            b.append(i > 0 ? "," : "").append(str(items.get(i)));
        }
        b.append(']');
    }

    /** nccl-tests' jsonDouble: "%lf", with non-finite values quoted to stay valid JSON. */
    static String num(double v) {
        return Double.isFinite(v) ? CFormat.fixed(v, 6) : str(CFormat.fixed(v, 6));
    }

    /** nccl-tests writes booleans as strings. */
    private static String bool(boolean v) {
        return v ? "\"true\"" : "\"false\"";
    }

    /** A JSON string literal; escapes everything JSON requires, and '/' as nccl-tests does. */
    static String str(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '/' -> b.append("\\/");
                case '\n' -> b.append("\\n");
                case '\t' -> b.append("\\t");
                case '\r' -> b.append("\\r");
                case '\b' -> b.append("\\b");
                case '\f' -> b.append("\\f");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private static String now() {
        return LocalDateTime.now().format(TIME);
    }
}
