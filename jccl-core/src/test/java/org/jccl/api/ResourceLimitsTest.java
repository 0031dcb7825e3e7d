package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Running out of file descriptors: a child JVM started under {@code prlimit --nofile=N} makes 24
 * ranks over TCP and runs an all-to-all (every pair connects); the error must say that the limit
 * of open files was reached, what it is now, and how to raise it, not only "Too many open files".
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ResourceLimitsTest {

    static final int NOFILE = 160;

    @Test
    void fileDescriptorExhaustionNamesTheLimitAndTheFix() throws Exception {
        Path prlimit = Path.of("/usr/bin/prlimit");
        assumeTrue(Files.isExecutable(prlimit), "prlimit (util-linux) is not installed: cannot start a JVM with a small fd limit");
        List<String> cmd = new ArrayList<>(List.of(prlimit.toString(), "--nofile=" + NOFILE + ":" + NOFILE,
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp", System.getProperty("java.class.path"),
                Child.class.getName()));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put("JCCL_DEBUG", "WARN");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(90, TimeUnit.SECONDS), out);
        assertEquals(3, p.exitValue(), "the child should fail with a JcclException:\n" + out);
        // the ranks that hit the limit say so; the others see those ranks give up (PEER_FAILED)
        String line = out.lines().filter(l -> l.startsWith("JCCL-ERROR RESOURCE ")).findFirst().orElse("");
        assertTrue(line.contains("Too many open files") && line.contains("reached its limit of open files (ulimit -n, now " + NOFILE
                + "; hard limit " + NOFILE) && line.contains("ulimit -n 65536") && line.contains("LimitNOFILE"), out);
    }

    /** Runs in the child JVM: 24 ranks over TCP, then an all-to-all; prints the error. */
    public static final class Child {
        public static void main(String[] args) {
            Config cfg = Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo")
                    .with("JCCL_INIT_TIMEOUT", "30").with("JCCL_CONNECT_TIMEOUT", "10");
            List<Communicator> cs = null;
            try {
                cs = Jccl.initLocal(24, cfg);
            } catch (JcclException e) {
                System.out.println("JCCL-ERROR " + e.code() + " " + e.getMessage());
                System.exit(3);
            }
            List<Thread> threads = new ArrayList<>();
            java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
            for (Communicator c : cs) {
                Thread t = new Thread(() -> {
                    try {
                        int n = c.size();
                        c.allToAll(Buffer.of(new int[n]), Buffer.of(new int[n]));
                    } catch (JcclException e) {
                        failed.incrementAndGet();
                        System.out.println("JCCL-ERROR " + e.code() + " " + e.getMessage());
                    }
                });
                t.start();
                threads.add(t);
            }
            for (Thread t : threads) {
                try {
                    t.join(60_000);
                } catch (InterruptedException e) {
                    System.exit(5);
                }
            }
            cs.forEach(Communicator::abort);
            System.out.flush();
            System.exit(failed.get() > 0 ? 3 : 0);
        }
    }
}
