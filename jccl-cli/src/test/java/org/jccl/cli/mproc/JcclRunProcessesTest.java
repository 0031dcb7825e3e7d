package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jccl.cli.run.LocalLauncher;
import org.jccl.examples.AllReduceExample;
import org.jccl.examples.CollectiveCheck;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@code jccl run}'s engine ({@link LocalLauncher}) starting real JVMs that talk TCP over loopback:
 * {@link CollectiveCheck} must pass on 2, 3 and 4 ranks, and a rank that dies must end the job fast
 * with its exit code, the other ranks stopped.
 */
class JcclRunProcessesTest {

    /** The job's own limit: the launcher stops every rank itself before JUnit's timeout would. */
    private static final Duration JOB_LIMIT = Duration.ofSeconds(100);

    /** Output of one launch, captured. */
    private static final class Captured {
        final ByteArrayOutputStream outBytes = new ByteArrayOutputStream();
        final ByteArrayOutputStream errBytes = new ByteArrayOutputStream();
        final PrintStream out = new PrintStream(outBytes, true, StandardCharsets.UTF_8);
        final PrintStream err = new PrintStream(errBytes, true, StandardCharsets.UTF_8);

        String out() {
            return outBytes.toString(StandardCharsets.UTF_8);
        }

        String err() {
            return errBytes.toString(StandardCharsets.UTF_8);
        }

        String both() {
            return "stdout:\n" + out() + "stderr:\n" + err();
        }
    }

    private static Captured runCheck(int np, String... args) {
        List<String> cmd = new ArrayList<>(LocalLauncher.javaCommand(CollectiveCheck.class.getName()));
        cmd.addAll(List.of(args));
        Captured c = new Captured();
        int code = LocalLauncher.launch(np, cmd, Map.of(), c.out, c.err, JOB_LIMIT);
        assertEquals(0, code, "CollectiveCheck on " + np + " ranks exited " + code + "\n" + c.both());
        assertTrue(Processes.checkOk(c.out()) > 0, c.both());
        assertTrue(c.out().contains("[0] CHECK OK "), "rank 0 reports the verdict: " + c.both());
        assertFalse(c.out().contains("CHECK FAILED") || c.err().contains("CHECK ERROR"), c.both());
        return c;
    }

    /** Small selections: the repeated runs only show that jobs of other sizes form and agree. */
    static Stream<Arguments> smallSelections() {
        return Stream.of(
                Arguments.of(2, List.of("--counts", "0,1,7,1000", "--types", "float32,bfloat16,int8,uint32,float64")),
                Arguments.of(4, List.of("--counts", "0,7,1000", "--types", "float32,int64,uint8", "--reduce-ops", "sum,min,avg")));
    }

    @ParameterizedTest(name = "CollectiveCheck on {0} ranks, {1}")
    @MethodSource("smallSelections")
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void collectiveCheckPassesOnASelection(int np, List<String> args) {
        runCheck(np, args.toArray(String[]::new));
    }

    /** The one full run: every collective, count (1,000,003 included), type, operator, root and placement. */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void fullCollectiveCheckPassesOnThreeRanks() {
        runCheck(3);
    }

    /** The README's example, as a user runs it with jccl run: every rank prints 0 + 1 + 2 = 3. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void theReadmeExampleSumsTheRanks() {
        Captured c = new Captured();
        int code = LocalLauncher.launch(3, LocalLauncher.javaCommand(AllReduceExample.class.getName()), Map.of(), c.out, c.err,
                Duration.ofSeconds(50));
        assertEquals(0, code, c.both());
        for (int r = 0; r < 3; r++) {
            assertTrue(c.out().contains("[" + r + "] rank " + r + " of 3: sum 3.0"), c.both());
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aRankThatDiesEndsTheJobFastWithItsExitCode() {
        Captured c = new Captured();
        long t0 = System.nanoTime();
        // Rank 1 exits 3 right after init; ranks 0 and 2 wait in a barrier that can never complete.
        int code = LocalLauncher.launch(3, Processes.javaMain(DyingRank.class.getName(), "1", "3"), Map.of(), c.out, c.err,
                Duration.ofSeconds(50));
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
        assertEquals(3, code, c.both());
        assertTrue(seconds < 60, "took " + seconds + " s");
        assertTrue(c.err().contains("jccl run: rank 1 exited with code 3"), c.both());
        assertFalse(c.out().contains("BARRIER COMPLETED"), "a barrier completed without rank 1: " + c.both());
        // Every rank that got as far as printing its pid is gone: the survivors failed or were stopped.
        Matcher m = Pattern.compile("\\[(\\d)] PID=(\\d+) rank (\\d) joined").matcher(c.out());
        int joined = 0;
        while (m.find()) {
            joined++;
            assertEquals(m.group(1), m.group(3), "the launcher's prefix and the rank jccl assigned agree: " + c.out());
            long pid = Long.parseLong(m.group(2));
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "rank " + m.group(1) + " pid " + pid
                    + " is still alive");
        }
        assertTrue(joined >= 1, "rank 1 printed its pid before dying: " + c.both());
    }
}
