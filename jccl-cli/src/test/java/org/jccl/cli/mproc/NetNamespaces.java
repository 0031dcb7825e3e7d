package org.jccl.cli.mproc;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;

/**
 * A switch and {@code n} hosts made of Linux network namespaces: namespace {@code <tag>-sw} holds
 * a bridge {@code br0}; namespace {@code <tag>-r<i>} holds interface {@link #IFNAME} with address
 * {@code 10.213.0.<i+1>/24}, one end of a veth pair whose other end, {@code p<i>}, is a port of the
 * bridge. Taking a port down cuts that host off without either side seeing an error (a switch
 * port failing); {@code tc netem} on a host's interface delays what it sends; {@code tc tbf} on both
 * ends of a host's veth pair ({@link #shape}) makes everything it sends and receives wait in a
 * rate-limited kernel queue.
 *
 * <p>Needs root (CAP_NET_ADMIN) and iproute2; {@link #create} skips the calling test with the
 * reason when the machine lacks either, or the kernel lacks network namespaces, veth or bridges.
 * {@link #close()} deletes every namespace it created, which also deletes the interfaces.
 */
final class NetNamespaces implements AutoCloseable {
    /** The name of every host's interface, for {@code JCCL_SOCKET_IFNAME}. */
    static final String IFNAME = "jccl0";

    private static final AtomicInteger COUNTER = new AtomicInteger();

    private final String tag;
    private final int hosts;
    private final List<String> created = new ArrayList<>();
    private final List<Path> etcDirs = new ArrayList<>();

    private NetNamespaces(String tag, int hosts) {
        this.tag = tag;
        this.hosts = hosts;
    }

    /**
     * Builds the switch and {@code hosts} hosts, or skips the calling test (a JUnit assumption)
     * with the reason when this machine cannot.
     */
    static NetNamespaces create(int hosts) throws IOException, InterruptedException {
        Assumptions.assumeTrue(System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux"),
                "network namespaces are Linux only; this is " + System.getProperty("os.name"));
        String ip = tool("ip");
        Assumptions.assumeTrue(ip != null, "the ip command (Debian package iproute2) is not installed: apt-get install iproute2");
        Result id = exec(List.of("id", "-u"));
        Assumptions.assumeTrue(id.code == 0 && id.out.strip().equals("0"),
                "creating network namespaces needs root (CAP_NET_ADMIN); this test runs as uid " + id.out.strip());
        NetNamespaces n = new NetNamespaces("jccl" + ProcessHandle.current().pid() + "x" + COUNTER.incrementAndGet(), hosts);
        boolean ok = false;
        try {
            n.build();
            ok = true;
        } finally {
            if (!ok) {
                n.close();
            }
        }
        return n;
    }

    private void build() throws IOException, InterruptedException {
        String sw = switchNs();
        facility(List.of("netns", "add", sw), "cannot create a network namespace");
        created.add(sw);
        facility(List.of("-n", sw, "link", "add", "br0", "type", "bridge"), "the kernel has no bridge devices");
        ip("-n", sw, "link", "set", "br0", "up");
        for (int i = 0; i < hosts; i++) {
            String ns = host(i);
            ip("netns", "add", ns);
            created.add(ns);
            ip("-n", ns, "link", "set", "lo", "up");
            facility(List.of("-n", sw, "link", "add", "p" + i, "type", "veth", "peer", "name", IFNAME, "netns", ns),
                    "the kernel has no veth devices");
            ip("-n", sw, "link", "set", "p" + i, "master", "br0");
            ip("-n", sw, "link", "set", "p" + i, "up");
            ip("-n", ns, "addr", "add", address(i) + "/24", "dev", IFNAME);
            ip("-n", ns, "link", "set", IFNAME, "up");
        }
    }

    /** The namespace of host {@code i}. */
    String host(int i) {
        return tag + "-r" + i;
    }

    private String switchNs() {
        return tag + "-sw";
    }

    /** The address of host {@code i}. */
    static String address(int i) {
        return "10.213.0." + (i + 1);
    }

    /** {@code command} run inside host {@code i}'s namespace. */
    List<String> inHost(int i, List<String> command) {
        List<String> c = new ArrayList<>(List.of(tool("ip"), "netns", "exec", host(i)));
        c.addAll(command);
        return c;
    }

    /**
     * Gives host {@code i} its own {@code /etc/hosts} with {@code lines}: {@code ip netns exec} mounts
     * {@code /etc/netns/<namespace>/hosts} over {@code /etc/hosts} for what it runs, so each host
     * resolves names its own way (e.g. its own name to 127.0.1.1, as Debian installs it). Removed by
     * {@link #close()}.
     */
    void hosts(int i, String lines) throws IOException {
        Path dir = Path.of("/etc/netns", host(i));
        Files.createDirectories(dir);
        etcDirs.add(dir);
        Files.writeString(dir.resolve("hosts"), "127.0.0.1 localhost\n" + lines + "\n");
    }

    /**
     * {@code command} run inside host {@code i}'s namespace under its own host name {@code hostname}
     * (a UTS namespace: {@code unshare --uts}), as a separate machine would be named.
     */
    List<String> inHost(int i, String hostname, List<String> command) {
        List<String> c = new ArrayList<>(List.of("unshare", "--uts", "sh", "-c", "hostname " + hostname + " && exec \"$@\"", "sh"));
        c.addAll(command);
        return inHost(i, c);
    }

    /** Takes host {@code i}'s switch port down: nothing it sends arrives, nothing reaches it, no error anywhere. */
    void cut(int i) throws IOException, InterruptedException {
        ip("-n", switchNs(), "link", "set", "p" + i, "down");
    }

    /**
     * Adds {@code tc netem delay <ms>ms} to everything host {@code i} sends, or skips the calling
     * test when the kernel has no netem queueing discipline (module sch_netem).
     */
    void delay(int i, int ms) throws IOException, InterruptedException {
        String tc = tool("tc");
        Assumptions.assumeTrue(tc != null, "the tc command (Debian package iproute2) is not installed: apt-get install iproute2");
        Result r = exec(inHost(i, List.of(tc, "qdisc", "add", "dev", IFNAME, "root", "netem", "delay", ms + "ms")));
        Assumptions.assumeTrue(r.code == 0, "tc netem is not available: kernel " + System.getProperty("os.version") + " lacks the"
                + " sch_netem queueing discipline (Debian kernels ship it as a module: `modprobe sch_netem` as root on the host, which"
                + " .ci/run does; a container cannot load it); tc said: " + r.out.strip());
    }

    /**
     * Skips the calling test when {@code tc netem} cannot be used here (no tc, or a kernel without
     * the sch_netem queueing discipline): tries a zero delay on host 0 and removes it.
     */
    void assumeNetem() throws IOException, InterruptedException {
        delay(0, 0);
        Result r = exec(inHost(0, List.of(tool("tc"), "qdisc", "del", "dev", IFNAME, "root")));
        if (r.code != 0) {
            throw new IOException("cannot remove the netem probe from " + host(0) + ": " + r.out.strip());
        }
    }

    /**
     * Puts a token bucket ({@code tc qdisc add ... root tbf rate <bitsPerSecond>bit burst <burst>
     * latency <latencyMs>ms}) on both ends of host {@code i}'s veth pair: its interface (what it
     * sends) and its switch port (what it receives). Packets beyond the burst wait in the kernel's
     * queue until the rate lets them out, so a backlog of {@code b} bytes delays the packet behind
     * it by {@code b / rate}, whichever connection it belongs to; tbf holds at most
     * {@code latency} worth of bytes and drops beyond that, so a run without drops
     * ({@link #tbfStats}) had no packet wait longer than {@code latency} (each packet crosses one
     * of the two queues). tbf (CONFIG_NET_SCH_TBF) is often built in where sch_netem is not, as in
     * the development VM's kernel; skips the calling test when the kernel lacks it.
     */
    void shape(int i, long bitsPerSecond, int burstBytes, int latencyMs) throws IOException, InterruptedException {
        String tc = tool("tc");
        Assumptions.assumeTrue(tc != null, "the tc command (Debian package iproute2) is not installed: apt-get install iproute2");
        List<String> tbf = List.of("root", "tbf", "rate", bitsPerSecond + "bit", "burst", Integer.toString(burstBytes), "latency",
                latencyMs + "ms");
        List<String> mine = new ArrayList<>(List.of(tc, "qdisc", "add", "dev", IFNAME));
        mine.addAll(tbf);
        Result r = exec(inHost(i, mine));
        Assumptions.assumeTrue(r.code == 0, "tc tbf is not available: kernel " + System.getProperty("os.version") + " lacks the"
                + " sch_tbf queueing discipline (CONFIG_NET_SCH_TBF); tc said: " + r.out.strip());
        List<String> port = new ArrayList<>(List.of(tool("ip"), "netns", "exec", switchNs(), tc, "qdisc", "add", "dev", "p" + i));
        port.addAll(tbf);
        r = exec(port);
        if (r.code != 0) {
            throw new IOException(String.join(" ", port) + " failed (exit " + r.code + "): " + r.out.strip());
        }
    }

    /** Counters of one tbf queue: what {@code tc -s qdisc show} reports, parsed. */
    record TbfStats(String where, long sentBytes, long sentPackets, long dropped, long overlimits, String raw) {
    }

    private static final Pattern TC_STATS = Pattern.compile(
            "qdisc tbf .*?Sent (\\d+) bytes (\\d+) pkt \\(dropped (\\d+), overlimits (\\d+)", Pattern.DOTALL);

    /** The counters of the tbf queues {@link #shape} put on host {@code i}'s interface and on its switch port, in that order. */
    List<TbfStats> tbfStats(int i) throws IOException, InterruptedException {
        List<TbfStats> out = new ArrayList<>();
        for (String[] at : List.of(new String[] {host(i), IFNAME}, new String[] {switchNs(), "p" + i})) {
            Result r = exec(List.of(tool("ip"), "netns", "exec", at[0], tool("tc"), "-s", "qdisc", "show", "dev", at[1]));
            Matcher m = TC_STATS.matcher(r.out);
            if (r.code != 0 || !m.find()) {
                throw new IOException("no tbf counters for " + at[1] + " in " + at[0] + ": " + r.out.strip());
            }
            out.add(new TbfStats(at[0] + "/" + at[1], Long.parseLong(m.group(1)), Long.parseLong(m.group(2)),
                    Long.parseLong(m.group(3)), Long.parseLong(m.group(4)), r.out.strip()));
        }
        return out;
    }

    /** One established TCP connection as {@code ss -tin} shows it: its ends and the kernel's smoothed RTT estimate. */
    record TcpConn(String local, int localPort, String peer, int peerPort, double rttMs, double rttVarMs, String raw) {
    }

    private static final Pattern SS_ENDS = Pattern.compile("(?m)^\\S+\\s+\\S+\\s+\\[?(?:::ffff:)?([0-9.]+)]?:(\\d+)\\s+\\[?(?:::ffff:)?([0-9.]+)]?:(\\d+)");
    private static final Pattern SS_RTT = Pattern.compile("\\brtt:([0-9.]+)/([0-9.]+)");

    /**
     * Host {@code i}'s established TCP connections with the RTT the kernel measured on each
     * ({@code ss -tin}: {@code rtt:<srtt>/<rttvar>} in ms, from the acknowledgements of what
     * that end sent). Fails when the ss command (iproute2) is missing.
     */
    List<TcpConn> tcp(int i) throws IOException, InterruptedException {
        String ss = tool("ss");
        if (ss == null) {
            throw new IOException("the ss command (Debian package iproute2) is not installed: apt-get install iproute2");
        }
        Result r = exec(inHost(i, List.of(ss, "-tin", "state", "established")));
        if (r.code != 0) {
            throw new IOException("ss -tin in " + host(i) + " failed (exit " + r.code + "): " + r.out.strip());
        }
        List<TcpConn> out = new ArrayList<>();
        Matcher ends = SS_ENDS.matcher(r.out);
        List<int[]> at = new ArrayList<>();
        List<String[]> hosts = new ArrayList<>();
        while (ends.find()) {
            at.add(new int[] {ends.start(), ends.end(), Integer.parseInt(ends.group(2)), Integer.parseInt(ends.group(4))});
            hosts.add(new String[] {ends.group(1), ends.group(3)});
        }
        for (int k = 0; k < at.size(); k++) {
            String block = r.out.substring(at.get(k)[0], k + 1 < at.size() ? at.get(k + 1)[0] : r.out.length());
            Matcher rtt = SS_RTT.matcher(block);
            if (!rtt.find()) {
                continue; // no RTT sample yet (nothing sent on it)
            }
            out.add(new TcpConn(hosts.get(k)[0], at.get(k)[2], hosts.get(k)[1], at.get(k)[3], Double.parseDouble(rtt.group(1)),
                    Double.parseDouble(rtt.group(2)), block.strip()));
        }
        return out;
    }

    /**
     * Makes every host's new TCP sockets use congestion control {@code name}
     * ({@code net.ipv4.tcp_congestion_control} is per network namespace since Linux 4.15); call
     * before the ranks start. Skips the calling test, with the kernel's answer, when it cannot.
     */
    void congestionControl(String name) throws IOException, InterruptedException {
        for (int i = 0; i < hosts; i++) {
            Result r = exec(inHost(i, List.of("sh", "-c", "echo " + name + " > /proc/sys/net/ipv4/tcp_congestion_control")));
            Assumptions.assumeTrue(r.code == 0, "cannot choose TCP congestion control " + name + " in a network namespace (kernel "
                    + System.getProperty("os.version") + "; per-namespace since Linux 4.15): " + r.out.strip());
        }
    }

    /**
     * Skips the calling test when {@code tc tbf} cannot be used here (no tc, or a kernel without
     * the sch_tbf queueing discipline): puts one on host 0's interface and removes it.
     */
    void assumeTbf() throws IOException, InterruptedException {
        String tc = tool("tc");
        Assumptions.assumeTrue(tc != null, "the tc command (Debian package iproute2) is not installed: apt-get install iproute2");
        Result r = exec(inHost(0, List.of(tc, "qdisc", "add", "dev", IFNAME, "root", "tbf", "rate", "1mbit", "burst", "3000",
                "latency", "1s")));
        Assumptions.assumeTrue(r.code == 0, "tc tbf is not available: kernel " + System.getProperty("os.version") + " lacks the"
                + " sch_tbf queueing discipline (CONFIG_NET_SCH_TBF); tc said: " + r.out.strip());
        r = exec(inHost(0, List.of(tc, "qdisc", "del", "dev", IFNAME, "root")));
        if (r.code != 0) {
            throw new IOException("cannot remove the tbf probe from " + host(0) + ": " + r.out.strip());
        }
    }

    /** What {@code tc qdisc show} says about host {@code i}'s interface. */
    String qdisc(int i) throws IOException, InterruptedException {
        return exec(inHost(i, List.of(tool("tc"), "qdisc", "show", "dev", IFNAME))).out;
    }

    @Override
    public void close() {
        for (int k = created.size() - 1; k >= 0; k--) {
            try {
                exec(List.of(tool("ip"), "netns", "del", created.get(k)));
            } catch (IOException | InterruptedException e) {
                // Best effort: a namespace left behind holds no process (the ranks are killed first).
            }
        }
        created.clear();
        for (Path d : etcDirs) {
            try {
                Files.deleteIfExists(d.resolve("hosts"));
                Files.deleteIfExists(d);
            } catch (IOException e) {
                // Best effort: an /etc/netns directory of a deleted namespace is never used again.
            }
        }
        etcDirs.clear();
    }

    // ------------------------------------------------------------------------------------------ helpers

    private record Result(int code, String out) {
    }

    /** {@code ip args}, failing the test with ip's message when it fails. */
    private static void ip(String... args) throws IOException, InterruptedException {
        List<String> c = new ArrayList<>(List.of(tool("ip")));
        c.addAll(List.of(args));
        Result r = exec(c);
        if (r.code != 0) {
            throw new IOException(String.join(" ", c) + " failed (exit " + r.code + "): " + r.out.strip());
        }
    }

    /** {@code ip args}, skipping the test with {@code lacks} and ip's message when it fails. */
    private static void facility(List<String> args, String lacks) throws IOException, InterruptedException {
        List<String> c = new ArrayList<>(List.of(tool("ip")));
        c.addAll(args);
        Result r = exec(c);
        Assumptions.assumeTrue(r.code == 0, lacks + ": " + String.join(" ", c) + " said: " + r.out.strip());
    }

    private static Result exec(List<String> command) throws IOException, InterruptedException {
        Path out = Files.createTempFile("jccl-netns-", ".out");
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(out.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IOException(String.join(" ", command) + " did not finish within 30 s");
            }
            return new Result(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out);
        }
    }

    /** The path of {@code name} on PATH or in the sbin directories (a non-login root shell may lack them), or null. */
    private static String tool(String name) {
        List<String> dirs = new ArrayList<>();
        String path = System.getenv("PATH");
        if (path != null) {
            dirs.addAll(List.of(path.split(":")));
        }
        dirs.addAll(List.of("/usr/sbin", "/sbin", "/usr/bin", "/bin"));
        for (String d : dirs) {
            if (d.isEmpty()) {
                continue;
            }
            Path p = Path.of(d, name);
            if (Files.isExecutable(p)) {
                return p.toString();
            }
        }
        return null;
    }
}
