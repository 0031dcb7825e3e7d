package org.jccl.cli.plot;

import java.io.IOException;
import java.nio.charset.MalformedInputException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.internal.util.Json;

/**
 * Reads a {@link PerfRun} from what a benchmark wrote:
 * <ul>
 *   <li>the {@code -J} JSON report of {@code jccl perf} (CPU or GPU, {@code --backend jccl} or
 *       {@code nccl}): nccl-tests' layout (version 3) with {@code "jccl_version"};</li>
 *   <li>the {@code -J} JSON report of nccl-tests itself (the same layout with {@code "nccl_version"});</li>
 *   <li>the output of the CPU anchor programs of {@code scripts/cpu-anchors.sh} (Open MPI's
 *       {@code mpi_allreduce}, Gloo's {@code gloo_allreduce.py}): a {@code # mpi np N} or
 *       {@code # gloo torch V np N} line, a column header with {@code busbw_GBs}, then rows of bytes,
 *       time, algbw and busbw. Both are all-reduce programs.</li>
 * </ul>
 * Anything else is refused with a message that names the file, what is wrong and what to give instead.
 */
public final class PerfRunReader {

    /** What a file must be, for the messages. */
    static final String EXPECTED = "a JSON report written by `jccl perf ... -J FILE` (or nccl-tests' -J), or the output of an"
            + " anchor program of scripts/cpu-anchors.sh";

    /** Job identity and secrets: every run has them, they say nothing about what was measured. */
    private static final Set<String> IDENTITY = Set.of("JCCL_COMM_ID", "JCCL_RANK", "JCCL_WORLD_SIZE", "JCCL_LOCAL_RANK",
            "JCCL_LOCAL_SIZE", "JCCL_AUTH_TOKEN", "NCCL_COMM_ID");

    /** The collectives nccl-tests and jccl perf name, without separators, to their nccl-tests names. */
    private static final Map<String, String> COLLECTIVES = collectives();

    private static final Pattern MPI_HEADER = Pattern.compile("#\\s*mpi\\s+np\\s+(\\d+)\\s*");
    private static final Pattern GLOO_HEADER = Pattern.compile("#\\s*gloo\\s+torch\\s+(\\S+)\\s+np\\s+(\\d+)\\s*");
    private static final Pattern NUMBER = Pattern.compile("[-+]?(\\d+\\.?\\d*|\\.\\d+)([eE][-+]?\\d+)?");

    private PerfRunReader() {
    }

    private static Map<String, String> collectives() {
        Map<String, String> m = new LinkedHashMap<>();
        for (String n : List.of("all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter", "alltoall", "sendrecv",
                "gather", "scatter", "hypercube")) {
            m.put(n.replace("_", ""), n);
        }
        return m;
    }

    /**
     * Reads {@code file}.
     *
     * @throws PlotInputException when it is missing, unreadable or not one of the accepted formats
     */
    public static PerfRun read(Path file) {
        String text;
        try {
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (NoSuchFileException e) {
            throw new PlotInputException(file + ": no such file. Give " + EXPECTED + ".");
        } catch (AccessDeniedException e) {
            throw new PlotInputException(file + ": permission denied; make it readable (chmod +r) or copy it.");
        } catch (MalformedInputException e) {
            throw new PlotInputException(file + " is not a jccl perf -J report (not UTF-8 text). Give " + EXPECTED + ".");
        } catch (IOException e) {
            throw new PlotInputException(file + ": cannot read it (" + e.getMessage() + ").");
        }
        return parse(text, file.toString());
    }

    /** Reads the text of a report or anchor output; {@code source} names it in messages. */
    public static PerfRun parse(String text, String source) {
        String t = text.strip();
        if (t.isEmpty()) {
            throw new PlotInputException(source + " is empty. Give " + EXPECTED + ".");
        }
        if (t.startsWith("{")) {
            return fromReport(t, source);
        }
        if (t.startsWith("#")) {
            PerfRun anchor = fromAnchor(t, source);
            if (anchor != null) {
                return anchor;
            }
        }
        throw new PlotInputException(source + " is not a jccl perf -J report (it is not JSON, nor the output of an anchor"
                + " program). Give " + EXPECTED + "; the table jccl perf prints is not enough, add -J FILE to write one.");
    }

    /** A JSON report of jccl perf or nccl-tests. */
    static PerfRun fromReport(String json, String source) {
        Object parsed;
        try {
            parsed = Json.parse(json);
        } catch (IllegalArgumentException e) {
            throw new PlotInputException(source + " is not a jccl perf -J report: " + e.getMessage()
                    + " (a report cut short by a run that did not finish is not valid JSON either).");
        }
        if (!(parsed instanceof Map<?, ?> root)) {
            throw notAReport(source, "its JSON is not an object");
        }
        Object jcclVersion = root.get("jccl_version");
        Object ncclVersion = root.get("nccl_version");
        if (jcclVersion == null && ncclVersion == null) {
            throw notAReport(source, "it has neither \"jccl_version\" nor \"nccl_version\"");
        }
        if (!(root.get("results") instanceof List<?> results)) {
            throw notAReport(source, "it has no \"results\" list");
        }
        List<String> args = strings(root.get("args"));
        String collective = collective(args);
        if (collective == null) {
            throw notAReport(source, "its \"args\" " + args + " do not name a collective (all_reduce, all_gather, ...)");
        }
        Map<String, List<PerfRun.Point>> groups = new LinkedHashMap<>();
        Map<String, String[]> keys = new LinkedHashMap<>();
        int index = 0;
        for (Object o : results) {
            if (!(o instanceof Map<?, ?> row)) {
                throw notAReport(source, "result " + index + " is not an object");
            }
            long size = longValue(row.get("size"), source, "result " + index + " \"size\"");
            String type = text(row.get("type"));
            String redop = text(row.get("redop"));
            String rootColumn = text(row.get("root"));
            String key = type + "\u0000" + redop + "\u0000" + rootColumn;
            keys.putIfAbsent(key, new String[] {type, redop, rootColumn});
            groups.computeIfAbsent(key, k -> new ArrayList<>())
                    .add(new PerfRun.Point(size, busBw(row.get("out_of_place")), busBw(row.get("in_place"))));
            index++;
        }
        if (groups.isEmpty()) {
            throw new PlotInputException(source + " has no results: the run wrote no rows (it failed before the first"
                    + " size, or -b was above -e). Run it again and give its -J file.");
        }
        List<PerfRun.Curve> curves = new ArrayList<>();
        for (Map.Entry<String, List<PerfRun.Point>> e : groups.entrySet()) {
            String[] k = keys.get(e.getKey());
            curves.add(new PerfRun.Curve(k[0], k[1], k[2], e.getValue()));
        }
        return new PerfRun(source, collective, reportLabel(root, jcclVersion, ncclVersion), curves);
    }

    private static PlotInputException notAReport(String source, String why) {
        return new PlotInputException(source + " is not a jccl perf -J report: " + why + ". Give " + EXPECTED + ".");
    }

    /**
     * The legend text of a report: implementation and version, ranks and device, host, start time,
     * and the JCCL_ and NCCL_ settings of the run other than the job identity (they change what was
     * measured: JCCL_SHM_DISABLE=1 is a TCP run).
     */
    static String reportLabel(Map<?, ?> root, Object jcclVersion, Object ncclVersion) {
        List<String> parts = new ArrayList<>();
        String backend = text(root.get("backend"));
        if (jcclVersion == null) {
            parts.add("NCCL " + text(ncclVersion) + " (nccl-tests)");
        } else if (!backend.isEmpty() && !backend.equalsIgnoreCase("jccl")) {
            // "nccl 2.28.9 (/usr/lib/x86_64-linux-gnu/libnccl.so.2)": the library's path is noise here.
            int paren = backend.indexOf(" (");
            String b = paren > 0 ? backend.substring(0, paren) : backend;
            parts.add(b.startsWith("nccl") ? "NCCL" + b.substring(4) : b);
        } else {
            parts.add("jccl " + text(jcclVersion));
        }
        List<Map<?, ?>> devices = new ArrayList<>();
        if (root.get("config") instanceof Map<?, ?> config && config.get("devices") instanceof List<?> list) {
            for (Object d : list) {
                if (d instanceof Map<?, ?> m) {
                    devices.add(m);
                }
            }
        }
        if (!devices.isEmpty()) {
            Map<?, ?> first = devices.getFirst();
            boolean cpu = text(first.get("device_hex")).equals("cpu") || text(first.get("device")).equals("-1");
            if (cpu) {
                parts.add(devices.size() + (devices.size() == 1 ? " rank" : " ranks") + " on CPU");
            } else {
                String name = text(first.get("device_info"));
                parts.add(devices.size() + "x " + (name.isEmpty() ? "GPU" : name));
            }
            Set<String> hosts = new LinkedHashSet<>();
            devices.forEach(d -> hosts.add(text(d.get("hostname"))));
            hosts.remove("");
            if (hosts.size() == 1) {
                parts.add(hosts.iterator().next());
            } else if (hosts.size() > 1) {
                parts.add(hosts.size() + " hosts");
            }
        }
        String start = text(root.get("start_time"));
        if (start.length() >= 16) {
            parts.add(start.substring(0, 16)); // "2026-11-27 09:03", no seconds
        } else if (!start.isEmpty()) {
            parts.add(start);
        }
        for (String e : strings(root.get("env"))) {
            int eq = e.indexOf('=');
            String name = eq > 0 ? e.substring(0, eq) : e;
            if (!IDENTITY.contains(name) && (name.startsWith("JCCL_") || name.startsWith("NCCL_"))) {
                parts.add(e);
            }
        }
        return String.join(", ", parts);
    }

    /** The collective named by the report's "args": jccl's third argument, nccl-tests' binary name. */
    static String collective(List<String> args) {
        for (String a : args) {
            String base = a.substring(a.lastIndexOf('/') + 1).toLowerCase(Locale.ROOT);
            if (base.endsWith("_perf")) {
                base = base.substring(0, base.length() - "_perf".length());
            }
            String c = COLLECTIVES.get(base.replace("_", "").replace("-", ""));
            if (c != null) {
                return c;
            }
        }
        return null;
    }

    /** An anchor program's output, or null when {@code text} does not start like one. */
    static PerfRun fromAnchor(String text, String source) {
        List<String> lines = text.lines().map(String::strip).filter(l -> !l.isEmpty()).toList();
        String first = lines.getFirst();
        Matcher mpi = MPI_HEADER.matcher(first);
        Matcher gloo = GLOO_HEADER.matcher(first);
        String label;
        if (mpi.matches()) {
            label = "Open MPI, " + mpi.group(1) + " ranks (anchor)";
        } else if (gloo.matches()) {
            label = "Gloo (torch " + gloo.group(1) + "), " + gloo.group(2) + " ranks (anchor)";
        } else {
            return null;
        }
        if (lines.size() < 2 || !lines.get(1).startsWith("#") || !lines.get(1).contains("busbw_GBs")) {
            return null;
        }
        List<PerfRun.Point> points = new ArrayList<>();
        for (int i = 2; i < lines.size(); i++) {
            String l = lines.get(i);
            if (l.startsWith("#")) {
                continue;
            }
            String[] f = l.split("\\s+");
            if (f.length != 4 || !NUMBER.matcher(f[0]).matches() || !NUMBER.matcher(f[3]).matches()) {
                throw new PlotInputException(source + " line " + (i + 1) + " is not a row of bytes, time_us, algbw_GBs,"
                        + " busbw_GBs: '" + l + "'. Give the anchor program's output unchanged.");
            }
            points.add(new PerfRun.Point((long) Double.parseDouble(f[0]), Double.parseDouble(f[3]), Double.NaN));
        }
        if (points.isEmpty()) {
            throw new PlotInputException(source + " has no rows: the anchor program printed its header only.");
        }
        return new PerfRun(source, "all_reduce", label, List.of(new PerfRun.Curve("float", "sum", "", points)));
    }

    private static double busBw(Object measurement) {
        if (measurement instanceof Map<?, ?> m && m.get("bus_bw") instanceof Number n) {
            return n.doubleValue();
        }
        return Double.NaN; // absent, null, or a non-finite number written as text ("nan", "inf")
    }

    private static long longValue(Object v, String source, String what) {
        if (v instanceof Number n) {
            return n.longValue();
        }
        throw notAReport(source, what + " is not a number");
    }

    private static String text(Object v) {
        return v == null ? "" : v.toString().strip();
    }

    private static List<String> strings(Object v) {
        List<String> out = new ArrayList<>();
        if (v instanceof List<?> l) {
            for (Object o : l) {
                if (o != null) {
                    out.add(o.toString());
                }
            }
        }
        return out;
    }
}
