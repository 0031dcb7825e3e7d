package org.jccl.cli.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.internal.topo.CpuBinding;
import org.jccl.internal.topo.PciLocation;
import org.jccl.internal.topo.Topologies;
import org.jccl.internal.topo.Topology;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** CPU binding of local ranks ({@code jccl run --bind-to}). */
class LauncherBindingTest {

    private static final List<String> CMD = List.of("sh", "-c", "true");

    @Test
    void aPlanBecomesTasksetWithItsCpuList() {
        CpuBinding.Plan node = CpuBinding.plan(CpuBinding.Mode.CORE, null, Map.of(), 2, List.of(4, 5)).get(1);
        assertEquals(List.of("/usr/bin/taskset", "-c", "5", "sh", "-c", "true"), RankBinding.bound(CMD, node, "/usr/bin/taskset"));
        CpuBinding.Plan many = new CpuBinding.Plan(CpuBinding.parse("0-55,112-167"), "test");
        assertEquals(List.of("t", "-c", "0-55,112-167", "sh", "-c", "true"), RankBinding.bound(CMD, many, "t"));
        assertEquals(CMD, RankBinding.bound(CMD, many, null), "no taskset: no binding");
        assertEquals(CMD, RankBinding.bound(CMD, new CpuBinding.Plan(List.of(), "none"), "t"));
        // On a host without GPUs auto gives each rank a core when there are enough (the CPU rule).
        List<CpuBinding.Plan> auto = RankBinding.plans(LocalLauncher.Binding.AUTO, 2, Map.of("JCCL_TOPO_FILE", "/nonexistent/x.json"),
                List.of(4, 5));
        assertEquals(List.of("4", "5"), auto.stream().map(CpuBinding.Plan::cpuList).toList(), "an unreadable topology: CPU ranks");
    }

    @Test
    void allowedCpusAreThisProcesssAffinity() {
        List<Integer> cpus = RankBinding.allowedCpus();
        assertTrue(!cpus.isEmpty() && cpus.size() <= Runtime.getRuntime().availableProcessors() + 64, "cpus " + cpus);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void boundRanksReallyRunOnDistinctCpus() {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/taskset")) || Files.isExecutable(Path.of("/bin/taskset")),
                "taskset not installed (Debian package util-linux)");
        List<Integer> cpus = RankBinding.allowedCpus();
        int np = Math.min(2, cpus.size());
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        int rc = LocalLauncher.launch(np, List.of("sh", "-c", "taskset -pc $$"), Map.of(), ps, ps, null, LocalLauncher.Binding.CORE);
        assertEquals(0, rc, out.toString(StandardCharsets.UTF_8));
        // "[r] pid 123's current affinity list: 1"
        Matcher m = Pattern.compile("\\[(\\d+)] pid \\d+'s current affinity list: (\\S+)").matcher(out.toString(StandardCharsets.UTF_8));
        TreeSet<String> seen = new TreeSet<>();
        int lines = 0;
        while (m.find()) {
            int rank = Integer.parseInt(m.group(1));
            assertEquals(Integer.toString(cpus.get(rank)), m.group(2), "rank " + rank + " runs on exactly its CPU");
            seen.add(m.group(2));
            lines++;
        }
        assertEquals(np, lines, out.toString(StandardCharsets.UTF_8));
        assertEquals(np, seen.size(), "each rank on its own CPU");
    }

    @TempDir
    Path dir;

    /**
     * A saved host whose two GPUs sit on NUMA nodes with this machine's CPUs in reverse (node 0 = the
     * second allowed CPU, node 1 = the first): auto must give rank 0 (GPU 0) the second CPU and rank 1
     * the first, which no core-by-rank binding would do. Each rank reports its Cpus_allowed_list.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void autoReallyBindsGpuRanksToTheirGpusNode() {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/taskset")) || Files.isExecutable(Path.of("/bin/taskset")),
                "taskset not installed (Debian package util-linux)");
        List<Integer> cpus = RankBinding.allowedCpus();
        assumeTrue(cpus.size() >= 2, "needs 2 allowed CPUs, this process has " + cpus);
        int first = cpus.get(0);
        int second = cpus.get(1);
        List<Topology.Gpu> gpus = List.of(
                new Topology.Gpu(PciLocation.fromSysfsPath("pci0000:13/0000:13:01.0/0000:13:00.0", 0), "0x2335", "", List.of()),
                new Topology.Gpu(PciLocation.fromSysfsPath("pci0000:93/0000:93:01.0/0000:93:00.0", 1), "0x2335", "", List.of()));
        Topology t = new Topology("gpu2", 2, List.of(new Topology.NumaNode(0, Integer.toString(second), -1),
                new Topology.NumaNode(1, Integer.toString(first), -1)), List.of(), List.of(), gpus,
                new Topology.GpuDirect("", false, false, "6.5.0", "", false), new Topology.Shm("/dev/shm", 1L << 30, 1L << 30),
                new Topology.Limits(-1, -1, 1024, 1024, -1, 4096, 4096), new Topology.Container("", ""), "not used");
        Path f = dir.resolve("gpu2.json");
        Topologies.write(t, f);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        int rc = LocalLauncher.launch(2, List.of("sh", "-c", "grep Cpus_allowed_list /proc/self/status"),
                Map.of("JCCL_TOPO_FILE", f.toString(), "JCCL_DEBUG", "INFO"), ps, ps, null, LocalLauncher.Binding.AUTO);
        String text = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        assertTrue(text.contains("[0] Cpus_allowed_list:\t" + second + "\n"), text);
        assertTrue(text.contains("[1] Cpus_allowed_list:\t" + first + "\n"), text);
        // JCCL_DEBUG=INFO: the launcher says what it bound and why.
        assertTrue(text.contains("jccl run: rank 0 bound to CPUs " + second + ": GPU rank: NUMA node 0 of its GPU 0 (0000:13:00.0, by"
                + " local rank 0 of 2"), text);
        assertTrue(text.contains("jccl run: rank 1 bound to CPUs " + first + ": GPU rank: NUMA node 1 of its GPU 1 (0000:93:00.0"), text);
        // none leaves both on every allowed CPU.
        out.reset();
        assertEquals(0, LocalLauncher.launch(2, List.of("sh", "-c", "grep Cpus_allowed_list /proc/self/status"),
                Map.of("JCCL_TOPO_FILE", f.toString()), ps, ps, null, LocalLauncher.Binding.NONE));
        String all = CpuBinding.format(cpus);
        assertTrue(out.toString(StandardCharsets.UTF_8).contains("[0] Cpus_allowed_list:\t" + all + "\n"), out.toString(StandardCharsets.UTF_8));
        assertTrue(out.toString(StandardCharsets.UTF_8).contains("[1] Cpus_allowed_list:\t" + all + "\n"), out.toString(StandardCharsets.UTF_8));
    }
}
