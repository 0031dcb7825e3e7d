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
import org.junit.jupiter.api.Assumptions;

/**
 * A switch and {@code n} hosts made of Linux network namespaces: namespace {@code <tag>-sw} holds
 * a bridge {@code br0}; namespace {@code <tag>-r<i>} holds interface {@link #IFNAME} with address
 * {@code 10.213.0.<i+1>/24}, one end of a veth pair whose other end, {@code p<i>}, is a port of the
 * bridge. Taking a port down cuts that host off without either side seeing an error (a switch
 * port failing); {@code tc netem} on a host's interface delays what it sends.
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
