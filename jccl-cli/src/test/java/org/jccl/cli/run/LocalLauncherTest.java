package org.jccl.cli.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Real processes started by {@link LocalLauncher}: environment, output, fail-fast, timeout. */
class LocalLauncherTest {

    /** Output of one launch, captured. */
    private static final class Captured {
        final ByteArrayOutputStream outBytes = new ByteArrayOutputStream();
        final ByteArrayOutputStream errBytes = new ByteArrayOutputStream();
        final PrintStream out = new PrintStream(outBytes, true, StandardCharsets.UTF_8);
        final PrintStream err = new PrintStream(errBytes, true, StandardCharsets.UTF_8);

        List<String> outLines() {
            return outBytes.toString(StandardCharsets.UTF_8).lines().toList();
        }

        String err() {
            return errBytes.toString(StandardCharsets.UTF_8);
        }
    }

    private static List<String> probe(String... args) {
        List<String> cmd = new ArrayList<>(LocalLauncher.javaCommand(RankProbe.class.getName()));
        cmd.addAll(List.of(args));
        return cmd;
    }

    /** Values of {@code NAME=value} lines per rank, from lines like {@code [2] NAME=value}. */
    private static Map<Integer, Map<String, String>> envByRank(List<String> lines) {
        Pattern p = Pattern.compile("\\[(\\d+)] ([A-Z_]+)=(.*)");
        Map<Integer, Map<String, String>> byRank = new HashMap<>();
        for (String line : lines) {
            Matcher m = p.matcher(line);
            if (m.matches()) {
                byRank.computeIfAbsent(Integer.parseInt(m.group(1)), r -> new HashMap<>()).put(m.group(2), m.group(3));
            }
        }
        return byRank;
    }

    @Test
    @Timeout(90)
    void ranksGetDistinctRanksAndTheSameIdAndToken() {
        Captured c = new Captured();
        int code = LocalLauncher.launch(3, probe("-1", "0", "0"), Map.of("JCCL_EXTRA", "yes"), c.out, c.err);
        assertEquals(0, code, c.err());

        Map<Integer, Map<String, String>> env = envByRank(c.outLines());
        assertEquals(Set.of(0, 1, 2), env.keySet(), "every rank printed, prefixed with its rank: " + c.outLines());
        Set<String> ids = new HashSet<>();
        Set<String> tokens = new HashSet<>();
        for (int r = 0; r < 3; r++) {
            Map<String, String> e = env.get(r);
            // The prefix and the rank's own JCCL_RANK agree: the prefix really names the rank.
            assertEquals(Integer.toString(r), e.get("JCCL_RANK"));
            assertEquals(Integer.toString(r), e.get("JCCL_LOCAL_RANK"));
            assertEquals("3", e.get("JCCL_WORLD_SIZE"));
            assertEquals("3", e.get("JCCL_LOCAL_SIZE"));
            assertEquals("yes", e.get("JCCL_EXTRA"));
            assertTrue(e.get("JCCL_COMM_ID").matches("127\\.0\\.0\\.1:\\d{1,5}"), e.get("JCCL_COMM_ID"));
            assertTrue(e.get("JCCL_AUTH_TOKEN").matches("[0-9a-f]{32}"), e.get("JCCL_AUTH_TOKEN"));
            ids.add(e.get("JCCL_COMM_ID"));
            tokens.add(e.get("JCCL_AUTH_TOKEN"));
        }
        assertEquals(1, ids.size(), "one bootstrap root for the job: " + ids);
        assertEquals(1, tokens.size(), "one secret for the job: " + tokens);

        // stderr lines go to our stderr, prefixed too.
        for (int r = 0; r < 3; r++) {
            assertTrue(c.err().contains("[" + r + "] stderr of rank " + r), c.err());
        }
    }

    @Test
    @Timeout(30)
    void everyRunHasAFreshToken() {
        List<String> cmd = List.of("sh", "-c", "echo $JCCL_AUTH_TOKEN");
        Captured a = new Captured();
        Captured b = new Captured();
        assertEquals(0, LocalLauncher.launch(1, cmd, Map.of(), a.out, a.err));
        assertEquals(0, LocalLauncher.launch(1, cmd, Map.of(), b.out, b.err));
        assertTrue(a.outLines().getFirst().matches("\\[0] [0-9a-f]{32}"), a.outLines().toString());
        assertNotEquals(a.outLines(), b.outLines());
    }

    @Test
    @Timeout(60)
    void aFailingRankStopsTheOthersAndItsCodeIsReturned() {
        Captured c = new Captured();
        long t0 = System.nanoTime();
        // Rank 2 exits 3 at once; the others would sleep 60 s.
        int code = LocalLauncher.launch(4, probe("2", "3", "60"), Map.of(), c.out, c.err);
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
        assertEquals(3, code, c.err());
        assertTrue(seconds < 15, "took " + seconds + " s: the sleeping ranks were not stopped promptly");
        assertTrue(c.err().contains("jccl run: rank 2 exited with code 3; stopped ranks [0, 1, 3]"), c.err());
        // Every rank that got as far as printing its pid is gone.
        // (A rank stopped while it printed may have printed other lines but not its pid yet: nothing to check there.)
        for (String pid : envByRank(c.outLines()).values().stream().map(e -> e.get("PID")).filter(java.util.Objects::nonNull).toList()) {
            assertFalse(ProcessHandle.of(Long.parseLong(pid)).map(ProcessHandle::isAlive).orElse(false), "pid " + pid + " alive");
        }
    }

    @Test
    @Timeout(30)
    void stoppingARankAlsoStopsWhatItStarted() {
        // Ranks 0 and 1 start a background sleep (a grandchild of the launcher) and wait; rank 2 fails after
        // they have printed its pid. A shell waiting in `wait` dies of SIGTERM, orphaning the sleep unless
        // the launcher stops descendants too.
        String script = "if [ \"$JCCL_RANK\" = 2 ]; then sleep 1; exit 7; fi; sleep 60 & echo \"child $!\"; wait";
        Captured c = new Captured();
        int code = LocalLauncher.launch(3, List.of("sh", "-c", script), Map.of(), c.out, c.err);
        assertEquals(7, code, c.err());
        assertTrue(c.err().contains("rank 2 exited with code 7; stopped ranks [0, 1]"), c.err());
        List<Long> children = c.outLines().stream().filter(l -> l.matches("\\[[01]] child \\d+"))
                .map(l -> Long.parseLong(l.substring(l.lastIndexOf(' ') + 1))).toList();
        assertEquals(2, children.size(), c.outLines().toString());
        for (long pid : children) {
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "grandchild " + pid + " still alive");
        }
    }

    @Test
    @Timeout(30)
    void linesOfDifferentRanksNeverMix() {
        String script = "i=0; while [ $i -lt 400 ]; do echo \"line $JCCL_RANK $i "
                + "y".repeat(300) + "\"; i=$((i+1)); done; printf 'no newline at the end'";
        Captured c = new Captured();
        assertEquals(0, LocalLauncher.launch(3, List.of("sh", "-c", script), Map.of(), c.out, c.err), c.err());
        Pattern whole = Pattern.compile("\\[(\\d)] line (\\d) (\\d+) y{300}");
        int[] count = new int[3];
        for (String line : c.outLines()) {
            if (line.endsWith("no newline at the end")) {
                assertTrue(line.matches("\\[\\d] no newline at the end"), line);
                continue;
            }
            Matcher m = whole.matcher(line);
            assertTrue(m.matches(), "mixed or broken line: " + line);
            assertEquals(m.group(1), m.group(2), "prefix names another rank: " + line);
            count[Integer.parseInt(m.group(1))]++;
        }
        assertEquals(List.of(400, 400, 400), List.of(count[0], count[1], count[2]));
    }

    @Test
    @Timeout(30)
    void aRankKilledByASignalReportsIt() {
        Captured c = new Captured();
        int code = LocalLauncher.launch(1, List.of("sh", "-c", "kill -9 $$"), Map.of(), c.out, c.err);
        assertEquals(128 + 9, code);
        assertTrue(c.err().contains("rank 0 exited with code 137 (killed by SIGKILL"), c.err());
    }

    @Test
    @Timeout(30)
    void theTimeoutStopsEveryRankAndNamesThem() {
        Captured c = new Captured();
        long t0 = System.nanoTime();
        int code = LocalLauncher.launch(2, List.of("sleep", "60"), Map.of(), c.out, c.err, Duration.ofSeconds(1));
        assertEquals(LocalLauncher.EXIT_TIMEOUT, code);
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0) < 15);
        assertTrue(c.err().contains("timed out after 1 s (--timeout); ranks still running: [0, 1]"), c.err());
    }

    @Test
    @Timeout(30)
    void aProgramThatDoesNotExistIsReported() {
        Captured c = new Captured();
        int code = LocalLauncher.launch(2, List.of("/nonexistent/jccl-test-program"), Map.of(), c.out, c.err);
        assertEquals(LocalLauncher.EXIT_CANNOT_START, code);
        assertTrue(c.err().contains("jccl run: cannot start rank 0 (/nonexistent/jccl-test-program)"), c.err());
        assertTrue(c.err().contains("Check that the program exists"), c.err());
    }

    @Test
    @Timeout(10)
    void otherLaunchersVariablesAreRemovedAndExtraEnvWins() {
        Map<String, String> env = new HashMap<>(Map.of(
                "RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "MASTER_ADDR", "h", "MASTER_PORT", "29500",
                "OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE", "8", "SLURM_PROCID", "5", "SLURM_NTASKS", "8",
                "SLURM_LOCALID", "1"));
        env.put("PATH", "/usr/bin");
        env.put("JCCL_RANK", "9");
        env.put("OMPI_MCA_btl", "self");
        Map<String, String> extra = new HashMap<>();
        extra.put("JCCL_DEBUG", "INFO");
        extra.put("PATH", null);
        RankEnvironment.apply(env, "127.0.0.1:1234", "ab".repeat(16), 1, 4, extra);
        assertEquals(Map.of("JCCL_COMM_ID", "127.0.0.1:1234", "JCCL_RANK", "1", "JCCL_WORLD_SIZE", "4",
                "JCCL_LOCAL_RANK", "1", "JCCL_LOCAL_SIZE", "4", "JCCL_AUTH_TOKEN", "ab".repeat(16),
                "JCCL_DEBUG", "INFO", "OMPI_MCA_btl", "self"), env);
        assertNull(env.get("PATH"));
    }

    @Test
    @Timeout(10)
    void javaCommandUsesThisJvmAndItsClasspath() {
        List<String> cmd = LocalLauncher.javaCommand("com.example.Main", "/opt/extra.jar");
        assertEquals(JavaCommand.javaBinary(), cmd.getFirst());
        assertEquals("--enable-native-access=ALL-UNNAMED", cmd.get(1));
        assertEquals("--add-modules", cmd.get(2));
        assertEquals("jdk.incubator.vector", cmd.get(3));
        assertEquals("-cp", cmd.get(4));
        assertTrue(cmd.get(5).endsWith(java.io.File.pathSeparator + "/opt/extra.jar"), cmd.get(5));
        assertEquals("com.example.Main", cmd.get(6));
        assertEquals(7, cmd.size());
    }
}
