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
 *
 * <p>Locked memory: jccl-core locks none (no mlock, no pinned segments); jccl-cuda page-locks its
 * staging buffers, and when that fails its error is built by {@code ResourceLimits.lockedMemoryAdvice}.
 * A child JVM under {@code prlimit --memlock} shows that the advice reads the limit as it is now and
 * names the fix, and that {@code jccl doctor}'s discovery reads the same value.
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

    @Test
    void lockedMemoryLimitIsReadAsItIsNowAndNamedWithTheFix() throws Exception {
        Path prlimit = Path.of("/usr/bin/prlimit");
        assumeTrue(Files.isExecutable(prlimit), "prlimit (util-linux) is not installed: cannot start a JVM with a small memlock limit");
        List<String> cmd = new ArrayList<>(List.of(prlimit.toString(), "--memlock=65536:131072",
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp", System.getProperty("java.class.path"),
                MemlockChild.class.getName()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(90, TimeUnit.SECONDS), out);
        assertEquals(0, p.exitValue(), out);
        String advice = out.lines().filter(l -> l.startsWith("ADVICE ")).findFirst().orElse("");
        assertTrue(advice.contains("could not page-lock 1048576 bytes (1 MiB)")
                && advice.contains("RLIMIT_MEMLOCK (ulimit -l) is now 65536 bytes (64 KiB), hard limit 131072 bytes (128 KiB)")
                && advice.contains("`ulimit -l unlimited`") && advice.contains("`docker run --ulimit memlock=-1`")
                && advice.contains("LimitMEMLOCK=infinity") && advice.contains("Kubernetes"), out);
        // The doctor reads the real limit; on a host without RDMA nothing is registered against it (PASS, the value shown).
        String doctor = out.lines().filter(l -> l.startsWith("DOCTOR ")).findFirst().orElse("");
        assertTrue(doctor.contains("limits 65536/131072") && doctor.contains("max locked memory: 64.0 KiB (hard 128.0 KiB)"), out);
    }

    /** Runs in the child JVM under prlimit --memlock: prints the advice jccl-cuda gives and the doctor's memlock finding. */
    public static final class MemlockChild {
        public static void main(String[] args) {
            System.out.println("ADVICE " + org.jccl.internal.util.ResourceLimits.lockedMemoryAdvice(1 << 20));
            org.jccl.internal.topo.Topology t = org.jccl.internal.topo.SysfsDiscovery.discoverHost("/dev/shm");
            org.jccl.internal.doctor.Doctor.Finding f = org.jccl.internal.doctor.Doctor.run(new org.jccl.internal.doctor.Doctor.Input(t,
                    java.util.Map.of(), 2, List.of(), org.jccl.internal.topo.GpuProbe.absent("test"))).get("memlock");
            System.out.println("DOCTOR limits " + t.limits().memlockSoft() + "/" + t.limits().memlockHard() + " " + f);
            System.exit(0);
        }
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
