package org.jccl.cli.status;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import org.jccl.Config;
import org.jccl.internal.control.ControlPlane;
import org.jccl.internal.util.Json;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code jccl status [--dir DIR] [--json]}: finds the status files that every rank of every live
 * communicator writes ({@code jccl-status-<comm>-r<rank>-<pid>} in {@code JCCL_DUMP_DIR}, default
 * {@code /tmp/jccl-<user>}), asks one rank per communicator (the lowest that answers) for the
 * report the ranks build over their control channel, and prints it. Exit code 0 when nothing is
 * stalled, 1 when an operation has waited {@code JCCL_STALL_WARN} or a rank did not answer or the
 * communicator failed, 2 when no job was found or none answered.
 */
@Command(name = "status", mixinStandardHelpOptions = true, sortOptions = false,
        header = "Ask the running jccl jobs of this host for their hang report.",
        description = {
            "Every rank of a running communicator writes a status file (port and token of a loopback endpoint) into"
                    + " JCCL_DUMP_DIR (default /tmp/jccl-<user>, readable by this user only). jccl status asks one rank per"
                    + " communicator; that rank collects every rank's sequence numbers over the communicator's control channel"
                    + " and answers with one summary line (the stall line, naming the ranks that are behind or called another"
                    + " collective), each rank's current operation and the answering rank's byte counters.",
            ""},
        footer = {"", "Exit status: 0 nothing stalled; 1 something is stalled, failed or did not answer; 2 no job found."})
public final class StatusCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--dir", description = "directory of the status files (default: JCCL_DUMP_DIR, else /tmp/jccl-<user>)")
    Path dir;

    @Option(names = "--json", description = "print each communicator's report as JSON")
    boolean json;

    @Option(names = "--timeout", description = "seconds to wait for one rank's answer (default ${DEFAULT-VALUE})", defaultValue = "6")
    int timeoutSeconds;

    /** One status file. */
    record Endpoint(Path file, String comm, int rank, int size, long pid, String host, int port, String token) {
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        Path d = dir != null ? dir : ControlPlane.dumpDir(Config.fromEnvironment());
        Map<String, List<Endpoint>> byComm = new TreeMap<>();
        for (Endpoint e : endpoints(d)) {
            byComm.computeIfAbsent(e.comm(), k -> new ArrayList<>()).add(e);
        }
        if (byComm.isEmpty()) {
            out.println("jccl status: no running jccl communicator found in " + d + " (ranks write their status files there;"
                    + " pass --dir or set JCCL_DUMP_DIR as the job did)");
            out.flush();
            return 2;
        }
        int code = 0;
        int answered = 0;
        for (Map.Entry<String, List<Endpoint>> c : byComm.entrySet()) {
            List<Endpoint> eps = c.getValue();
            eps.sort((a, b) -> Integer.compare(a.rank(), b.rank()));
            Map<?, ?> report = null;
            Endpoint asked = null;
            List<String> failures = new ArrayList<>();
            for (Endpoint e : eps) {
                try {
                    report = ask(e);
                    asked = e;
                    break;
                } catch (IOException | RuntimeException ex) {
                    failures.add("rank " + e.rank() + " (pid " + e.pid() + "): " + ex.getMessage());
                }
            }
            if (report == null) {
                out.println("communicator " + c.getKey() + ": no rank answered: " + String.join("; ", failures));
                code = Math.max(code, 1);
                continue;
            }
            answered++;
            if (Boolean.TRUE.equals(report.get("stalled"))) {
                code = Math.max(code, 1);
            }
            if (json) {
                out.println(Json.write(report));
            } else {
                print(out, c.getKey(), asked, report);
            }
        }
        out.flush();
        return answered == 0 ? 2 : code;
    }

    private static void print(PrintWriter out, String comm, Endpoint asked, Map<?, ?> r) {
        out.println("communicator " + comm + ": " + r.get("size") + " ranks (asked rank " + asked.rank() + ", pid " + asked.pid() + ")");
        out.println((Boolean.TRUE.equals(r.get("stalled")) ? "STALLED: " : "OK: ") + r.get("summary"));
        if (r.get("last_stall_line") != null) {
            out.println("last stall line logged by rank " + asked.rank() + ": " + r.get("last_stall_line"));
        }
        for (Object o : (List<?>) r.get("ranks")) {
            Map<?, ?> m = (Map<?, ?>) o;
            StringBuilder sb = new StringBuilder("  rank ").append(m.get("rank")).append(" (host ").append(m.get("host")).append(", pid ")
                    .append(m.get("pid")).append("): ");
            if (!"answered".equals(m.get("answer"))) {
                sb.append(m.get("answer"));
            } else if (m.get("current") != null) {
                sb.append("in #").append(m.get("current_seq")).append(' ').append(m.get("current")).append(", ")
                        .append(m.get("current_state")).append(' ').append(num(m.get("current_wait_ms")) / 1000.0).append(" s");
            } else {
                sb.append("idle");
            }
            if ("answered".equals(m.get("answer"))) {
                sb.append("; last issued #").append(m.get("last_issued")).append(' ').append(m.get("last_issued_op")).append(", ")
                        .append(m.get("ops")).append(" ops, ").append(m.get("errors")).append(" errors, ").append(m.get("bytes_sent"))
                        .append(" B sent, ").append(m.get("bytes_received")).append(" B received");
            }
            out.println(sb);
        }
        Object counters = r.get("counters");
        if (counters instanceof Map<?, ?> cm && cm.get("transports") instanceof Map<?, ?> tm && !tm.isEmpty()) {
            out.println("  rank " + asked.rank() + " by transport: " + tm);
        }
    }

    private static long num(Object o) {
        return o instanceof Number n ? n.longValue() : 0;
    }

    /** The status files of live processes in {@code d}. */
    static List<Endpoint> endpoints(Path d) {
        List<Endpoint> list = new ArrayList<>();
        if (!Files.isDirectory(d)) {
            return list;
        }
        try (Stream<Path> s = Files.list(d)) {
            for (Path f : s.filter(p -> p.getFileName().toString().startsWith("jccl-status-")
                    && !p.getFileName().toString().endsWith(".tmp")).toList()) {
                Endpoint e = parse(f);
                if (e != null && ProcessHandle.of(e.pid()).map(ProcessHandle::isAlive).orElse(false)) {
                    list.add(e);
                }
            }
        } catch (IOException e) {
            return list;
        }
        return list;
    }

    private static Endpoint parse(Path f) {
        try {
            Map<String, String> kv = new HashMap<>();
            List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
            if (lines.isEmpty() || !lines.get(0).equals("jccl-status 1")) {
                return null;
            }
            for (String l : lines.subList(1, lines.size())) {
                int eq = l.indexOf('=');
                if (eq > 0) {
                    kv.put(l.substring(0, eq), l.substring(eq + 1));
                }
            }
            return new Endpoint(f, kv.get("comm"), Integer.parseInt(kv.get("rank")), Integer.parseInt(kv.get("size")),
                    Long.parseLong(kv.get("pid")), kv.get("host"), Integer.parseInt(kv.get("port")), kv.get("token"));
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    private Map<?, ?> ask(Endpoint e) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), e.port()), timeoutSeconds * 1000);
            s.setSoTimeout(timeoutSeconds * 1000);
            OutputStream o = s.getOutputStream();
            o.write(("STATUS " + e.token() + "\n").getBytes(StandardCharsets.US_ASCII));
            o.flush();
            InputStream in = s.getInputStream();
            byte[] all = in.readNBytes(4 << 20);
            if (all.length == 0) {
                throw new IOException("closed the connection without an answer");
            }
            return (Map<?, ?>) Json.parse(new String(all, StandardCharsets.UTF_8));
        }
    }
}
