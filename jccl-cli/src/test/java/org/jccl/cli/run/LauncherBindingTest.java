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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** CPU binding of local ranks ({@code jccl run --bind-to}). */
class LauncherBindingTest {

    private static final List<String> CMD = List.of("sh", "-c", "true");

    @Test
    void autoBindsOnlyWhenEveryRankGetsItsOwnCpu() {
        List<Integer> cpus = List.of(4, 5);
        assertEquals(List.of("/usr/bin/taskset", "-c", "5", "sh", "-c", "true"),
                LocalLauncher.bound(CMD, 1, 2, LocalLauncher.Binding.AUTO, cpus, "/usr/bin/taskset"));
        assertEquals(CMD, LocalLauncher.bound(CMD, 1, 3, LocalLauncher.Binding.AUTO, cpus, "/usr/bin/taskset"),
                "more ranks than CPUs: the scheduler places them");
        assertEquals(CMD, LocalLauncher.bound(CMD, 0, 2, LocalLauncher.Binding.AUTO, cpus, null), "no taskset: no binding");
        assertEquals(CMD, LocalLauncher.bound(CMD, 0, 1, LocalLauncher.Binding.NONE, cpus, "/usr/bin/taskset"));
        assertEquals(List.of("t", "-c", "4", "sh", "-c", "true"), LocalLauncher.bound(CMD, 2, 3, LocalLauncher.Binding.CORE, cpus, "t"),
                "core wraps around the allowed CPUs");
    }

    @Test
    void allowedCpusAreThisProcesssAffinity() {
        List<Integer> cpus = LocalLauncher.allowedCpus();
        assertTrue(!cpus.isEmpty() && cpus.size() <= Runtime.getRuntime().availableProcessors() + 64, "cpus " + cpus);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void boundRanksReallyRunOnDistinctCpus() {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/taskset")) || Files.isExecutable(Path.of("/bin/taskset")),
                "taskset not installed (Debian package util-linux)");
        List<Integer> cpus = LocalLauncher.allowedCpus();
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
}
