package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link org.jccl.examples.CollectiveCheck} started by the real torchrun ({@code python3 -m
 * torch.distributed.run}, Debian's python3-torch 1.13 in CI) with no JCCL variable: rank, size and
 * rank 0's address come from what torchrun sets, the secret from the per-user secret file. Covered:
 * the default static rendezvous (the agent serves a TCPStore at MASTER_PORT: rank 0's root address
 * goes through it), {@code --standalone} (c10d: nobody holds MASTER_PORT, rank 0 binds it), and
 * {@code --nnodes 2} with the c10d rendezvous between two hosts made of network namespaces, each
 * with its own host name (a UTS namespace) and /etc/hosts that maps its own name to 127.0.1.1, as
 * Debian installs it. Skipped, naming what is missing, without a python3 that imports torch (or, for
 * two hosts, without root and iproute2).
 *
 * <p>torchrun 1.13 under Python 3.11 fails at start with its default {@code --redirects 0}
 * ({@code AttributeError: 'NoneType' object has no attribute 'get'}: Python 3.11 no longer lists
 * the zero flag Std.NONE when iterating the enum), so every command passes {@code --redirects 1
 * --tee 1} (worker stdout to a log file and to the console, prefixed {@code [default<r>]:}).
 */
class TorchrunTest {

    private static String python;

    @BeforeAll
    static void findTorch() {
        python = torchPython();
    }

    static String torchPython() {
        List<String> candidates = new ArrayList<>();
        String env = System.getenv("JCCL_TEST_PYTHON");
        if (env != null && !env.isBlank()) {
            candidates.add(env);
        }
        candidates.add("/usr/bin/python3");
        String path = System.getenv("PATH");
        if (path != null) {
            for (String d : path.split(File.pathSeparator)) {
                candidates.add(Path.of(d.isEmpty() ? "." : d, "python3").toString());
            }
        }
        for (String c : candidates) {
            if (!Files.isExecutable(Path.of(c))) {
                continue;
            }
            try {
                Process p = new ProcessBuilder(c, "-c", "import torch.distributed.run").redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
                if (p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0) {
                    return c;
                }
                p.destroyForcibly();
            } catch (IOException e) {
                // try the next
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }
        return null;
    }

    private static final String MISSING = "torchrun is missing: no python3 that can import torch.distributed.run (Debian:"
            + " apt-get install python3-torch; or set JCCL_TEST_PYTHON)";

    /** CollectiveCheck's arguments: every collective (the default), few counts and types so 2 cores finish quickly. */
    private static List<String> check() {
        return Processes.collectiveCheck("--counts", "0,7,1000", "--types", "float32,int64,bfloat16", "--reduce-ops", "sum,max,avg",
                "--verbose");
    }

    private static List<String> torchrun(List<String> args, List<String> program) {
        List<String> cmd = new ArrayList<>(List.of(python, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1"));
        cmd.addAll(args);
        cmd.add("--no_python");
        cmd.addAll(program);
        return cmd;
    }

    private static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new AssertionError("no free port", e);
        }
    }

    private static final Pattern CHECK_OK = Pattern.compile("(?m)^(?:\\[default\\d+]:)?CHECK OK (\\d+) checks$");

    /** One CHECK OK line (rank 0's), and every rank joined through torchrun's variables. */
    private static void assertChecked(String out, int size) {
        Matcher m = CHECK_OK.matcher(out);
        assertTrue(m.find(), "no CHECK OK line:\n" + out);
        assertTrue(Long.parseLong(m.group(1)) > 100, out);
        assertTrue(!m.find(), "more than one CHECK OK line:\n" + out);
        for (int r = 0; r < size; r++) {
            assertTrue(out.contains("rank " + r + " of " + size + ": joined through the torchrun launcher convention"), out);
        }
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void singleHostDefaultRendezvousGoesThroughTheAgentsStore() {
        assumeTrue(python != null, MISSING);
        try (Processes procs = new Processes()) {
            procs.start("torchrun", torchrun(List.of("--nproc_per_node", "2", "--master_port", Integer.toString(freePort())), check()),
                    Map.of("JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "BOOTSTRAP"));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(140));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), out);
            assertChecked(out, 2);
            assertTrue(out.contains("published the bootstrap root") && out.contains("in torchrun's TCPStore at MASTER_ADDR:MASTER_PORT="),
                    "rank 0 used the agent's store:\n" + out);
        }
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void singleHostStandalone() {
        assumeTrue(python != null, MISSING);
        try (Processes procs = new Processes()) {
            procs.start("torchrun", torchrun(List.of("--standalone", "--nproc_per_node", "2"), check()),
                    Map.of("JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "BOOTSTRAP"));
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(140));
            String out = procs.outputs();
            assertEquals(0, codes.getFirst(), out);
            assertChecked(out, 2);
        }
    }

    /**
     * Two hosts, two ranks each, torchrun's c10d rendezvous hosted on host 0's agent: which host
     * becomes node 0 is torch's choice; either way every collective is right.
     */
    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void twoHostsWithTheC10dRendezvous() throws Exception {
        assumeTrue(python != null, MISSING);
        try (NetNamespaces net = NetNamespaces.create(2); Processes procs = new Processes()) {
            for (int i = 0; i < 2; i++) {
                int other = 1 - i;
                // Debian's way: the host's own name on 127.0.1.1, the other host by its address.
                net.hosts(i, "127.0.1.1 jnode" + i + "\n" + NetNamespaces.address(other) + " jnode" + other);
            }
            // By host name, as a user writes it: torch decides that host 0's agent serves the rendezvous by comparing the
            // endpoint with its own host name (its IP addresses are looked up from the name, which maps to 127.0.1.1 here).
            String endpoint = "jnode0:" + (29_400 + (int) (ProcessHandle.current().pid() % 500));
            for (int i = 0; i < 2; i++) {
                List<String> node = torchrun(List.of("--nnodes", "2", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
                        "--rdzv_endpoint", endpoint, "--rdzv_id", "jccl-test"), check());
                // A host name of its own (UTS namespace): torchrun's MASTER_ADDR is node 0's host name.
                procs.start("node" + i, net.inHost(i, "jnode" + i, node), Map.of("JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "BOOTSTRAP"));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(220));
            String out = procs.outputs();
            assertEquals(List.of(0, 0), codes, out);
            assertChecked(out, 4);
            // Rank 0 listened on its host's name's address (127.0.1.1) and on its interface; the other host used the latter.
            assertTrue(Pattern.compile("bootstrap root listening on 127\\.0\\.1\\.1:\\d+ and 10\\.213\\.0\\.\\d:\\d+").matcher(out).find(),
                    out);
        }
    }
}
