package org.jccl.conformance;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.internal.transport.local.LocalTransport;
import org.jccl.internal.transport.shm.ShmTransport;
import org.jccl.internal.transport.tcp.TcpTransport;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.Transport;

/**
 * A rank as a process: a JVM that runs {@link OneSidedScenarios} on command, so that the one-sided
 * suite runs between real processes (separate address spaces, separate mappings) as it does between
 * threads. The parent ({@link Pool}) starts a few of these once per test class and drives them over
 * stdin/stdout, one line per step; protocol lines on stdout start with {@code @@}, anything else is log.
 *
 * <pre>
 *   parent                                            child
 *   RUN transport scenario rank size comm secret settings  -> (opens its endpoint)
 *                                                      <-  @@ ADDR pid addressHex
 *   PEER rank pid hostId addressHex   (one per rank)  ->   (connects, runs the scenario, closes)
 *                                                      <-  @@ DONE | @@ FAIL base64(stack trace)
 *   KEY LOCAL                                          ->  @@ KEY hex  (a LOCAL key made in this JVM)
 *   FULL bytes dir                                     ->  @@ THREW class base64(message) | @@ ALLOCATED; then @@ LEFT n
 *   (end of input)                                     ->  exits
 * </pre>
 */
public final class SpiRankServer {
    private SpiRankServer() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.split(" ");
            switch (w[0]) {
                case "RUN" -> run(w, in, out);
                case "KEY" -> out.println("@@ KEY " + localKey());
                case "FULL" -> full(Long.parseLong(w[1]), w[2], out);
                default -> out.println("@@ FAIL " + encode("unknown command: " + line));
            }
        }
    }

    static Transport transport(String name) {
        return switch (name) {
            case "LOCAL" -> new LocalTransport();
            case "SHM" -> new ShmTransport();
            case "TCP" -> new TcpTransport();
            default -> throw new IllegalArgumentException("no transport " + name);
        };
    }

    private static void run(String[] w, BufferedReader in, PrintStream out) throws IOException {
        Transport t = transport(w[1]);
        OneSidedScenarios.Body body = OneSidedScenarios.BY_NAME.get(w[2]);
        int rank = Integer.parseInt(w[3]);
        int size = Integer.parseInt(w[4]);
        Map<String, String> settings = new LinkedHashMap<>();
        for (int i = 7; i < w.length; i++) {
            String[] kv = w[i].split("=", 2);
            settings.put(kv[0], kv[1]);
        }
        SpiRig rig;
        try {
            rig = SpiRig.open(t, HexFormat.of().parseHex(w[5]), HexFormat.of().parseHex(w[6]), rank, size, OneSidedConformance.config(settings));
        } catch (Throwable e) {
            out.println("@@ FAIL " + encode(stack(e)));
            return;
        }
        out.println("@@ ADDR " + ProcessHandle.current().pid() + " " + HexFormat.of().formatHex(rig.endpoint().address()));
        try {
            PeerInfo[] peers = new PeerInfo[size];
            for (int i = 0; i < size; i++) {
                String[] p = in.readLine().split(" ");
                int r = Integer.parseInt(p[1]);
                peers[r] = new PeerInfo(r, "testhost", Long.parseLong(p[2]), p[3], "jvm-" + p[2], Map.of(t.name(), HexFormat.of().parseHex(p[4])));
            }
            rig.setPeers(peers);
            rig.connectAll();
            body.run(rig);
            rig.close();
            out.println("@@ DONE");
        } catch (Throwable e) {
            rig.close();
            out.println("@@ FAIL " + encode(stack(e)));
        }
    }

    /** A key of a LOCAL region registered in this JVM (then deregistered: the JVM id is what makes it foreign). */
    private static String localKey() throws IOException {
        SpiRig rig = SpiRig.open(new LocalTransport(), OneSidedConformance.random16(), OneSidedConformance.random16(), 0, 1, Config.defaults());
        try {
            rig.setPeers(new PeerInfo[] {rig.info(new LocalTransport(), "other-host", ProcessHandle.current().pid(), "other-jvm")});
            RegisteredRegion r = rig.endpoint().allocate(64);
            return HexFormat.of().formatHex(r.packedKey());
        } finally {
            rig.close();
        }
    }

    /** Allocates an SHM region of {@code bytes} in {@code dir} (a small tmpfs): prints what was thrown and the files left. */
    private static void full(long bytes, String dir, PrintStream out) throws IOException {
        Map<String, String> settings = Map.of("JCCL_SHM_DIR", dir);
        SpiRig rig = SpiRig.open(new ShmTransport(), OneSidedConformance.random16(), OneSidedConformance.random16(), 0, 1,
                OneSidedConformance.config(settings));
        try {
            rig.setPeers(new PeerInfo[] {rig.info(new ShmTransport(), "host", ProcessHandle.current().pid(), "jvm")});
            rig.endpoint().allocate(bytes);
            out.println("@@ ALLOCATED");
        } catch (Throwable e) {
            out.println("@@ THREW " + e.getClass().getName() + " " + encode(String.valueOf(e.getMessage())));
        } finally {
            rig.close();
        }
        try (var s = Files.list(Path.of(dir))) {
            out.println("@@ LEFT " + s.filter(p -> p.getFileName().toString().startsWith("jccl-shm-")).count());
        }
    }

    static String encode(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }

    static String decode(String s) {
        return new String(Base64.getDecoder().decode(s), StandardCharsets.UTF_8);
    }

    private static String stack(Throwable e) {
        StringWriter sw = new StringWriter();
        e.printStackTrace(new PrintWriter(sw));
        return sw.toString();
    }

    /** The parent's side: rank processes started once, driven line by line, stopped at close. */
    static final class Pool implements AutoCloseable {
        private final List<Process> procs = new ArrayList<>();
        private final List<BlockingQueue<String>> lines = new ArrayList<>();
        private final List<StringBuilder> logs = new ArrayList<>();

        /** {@code n} rank servers as plain JVMs. */
        static Pool start(int n) throws IOException {
            return start(n, List.of());
        }

        /** {@code n} rank servers, each started as {@code prefix} followed by the java command (e.g. unshare ... exec). */
        static Pool start(int n, List<String> prefix) throws IOException {
            Pool p = new Pool();
            try {
                for (int i = 0; i < n; i++) {
                    List<String> cmd = new ArrayList<>(prefix);
                    cmd.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                            "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
                            SpiRankServer.class.getName()));
                    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
                    pb.environment().put("JCCL_DEBUG", "WARN");
                    Process proc = pb.start();
                    BlockingQueue<String> q = new LinkedBlockingQueue<>();
                    StringBuilder log = new StringBuilder();
                    Thread.ofPlatform().daemon().name("rank-server-" + i + "-out").start(() -> {
                        try (BufferedReader r = proc.inputReader(StandardCharsets.UTF_8)) {
                            String l;
                            while ((l = r.readLine()) != null) {
                                if (l.startsWith("@@ ")) {
                                    q.add(l.substring(3));
                                } else {
                                    synchronized (log) {
                                        log.append(l).append('\n');
                                    }
                                }
                            }
                        } catch (IOException ignored) {
                            // the process ended
                        }
                        q.add("EOF");
                    });
                    p.procs.add(proc);
                    p.lines.add(q);
                    p.logs.add(log);
                }
            } catch (IOException | RuntimeException e) {
                p.close();
                throw e;
            }
            return p;
        }

        void send(int i, String line) throws IOException {
            OutputStream o = procs.get(i).getOutputStream();
            o.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            o.flush();
        }

        /** The next protocol line of server {@code i}, within the scenario deadline. */
        String next(int i) throws InterruptedException {
            String l = lines.get(i).poll(SpiRig.DEADLINE_MILLIS + 30_000, TimeUnit.MILLISECONDS);
            if (l == null || l.equals("EOF")) {
                String log;
                synchronized (logs.get(i)) {
                    log = logs.get(i).toString();
                }
                throw new AssertionError("rank server " + i + (l == null ? " said nothing in time" : " exited") + "; its output:\n" + log);
            }
            return l;
        }

        /** Runs {@code scenario} on servers 0..n-1 as ranks of one communicator; throws every rank's failure. */
        void run(String transport, String scenario, int n, Map<String, String> settings) throws Exception {
            String comm = HexFormat.of().formatHex(OneSidedConformance.random16());
            String secret = HexFormat.of().formatHex(OneSidedConformance.random16());
            StringBuilder cfg = new StringBuilder();
            settings.forEach((k, v) -> cfg.append(' ').append(k).append('=').append(v));
            for (int r = 0; r < n; r++) {
                send(r, "RUN " + transport + " " + scenario + " " + r + " " + n + " " + comm + " " + secret + cfg);
            }
            String[] peers = new String[n];
            List<String> failures = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                String l = next(r);
                if (l.startsWith("FAIL ")) {
                    failures.add("rank " + r + " could not open its endpoint: " + decode(l.substring(5)));
                } else {
                    String[] a = l.split(" "); // ADDR pid hex
                    peers[r] = "PEER " + r + " " + a[1] + " one-host " + a[2];
                }
            }
            if (!failures.isEmpty()) {
                throw new AssertionError(String.join("\n", failures));
            }
            for (int r = 0; r < n; r++) {
                for (String p : peers) {
                    send(r, p);
                }
            }
            for (int r = 0; r < n; r++) {
                String l = next(r);
                if (l.startsWith("FAIL ")) {
                    failures.add("rank " + r + " (process " + procs.get(r).pid() + "): " + decode(l.substring(5)));
                } else if (!l.equals("DONE")) {
                    failures.add("rank " + r + ": unexpected " + l);
                }
            }
            if (!failures.isEmpty()) {
                throw new AssertionError(scenario + " failed on " + failures.size() + " rank process(es):\n" + String.join("\n", failures));
            }
        }

        /** A LOCAL key made by server {@code i}. */
        String localKey(int i) throws Exception {
            send(i, "KEY LOCAL");
            String l = next(i);
            if (!l.startsWith("KEY ")) {
                throw new AssertionError("rank server " + i + ": " + l);
            }
            return l.substring(4);
        }

        /** Everything server {@code i} printed outside the protocol so far. */
        String log(int i) {
            synchronized (logs.get(i)) {
                return logs.get(i).toString();
            }
        }

        /** Ends the servers (end of input), forcibly after 10 s. */
        @Override
        public void close() {
            for (Process p : procs) {
                try {
                    p.getOutputStream().close();
                } catch (IOException ignored) {
                    // already gone
                }
            }
            for (Process p : procs) {
                try {
                    if (!p.waitFor(10, TimeUnit.SECONDS)) {
                        p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                    }
                } catch (InterruptedException e) {
                    p.destroyForcibly();
                    Thread.currentThread().interrupt();
                }
            }
        }
    }
}
