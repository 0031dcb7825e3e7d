package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.Work;
import org.jccl.internal.log.Log;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Rank 0, the control hub, closing its communicator while the other ranks still use it (ranks as
 * threads of this JVM over TCP on loopback, so every control frame crosses a socket): by default
 * its close() returns at once and its control thread goes on supervising the others (a stall is
 * still reported, naming rank 0 as closed) until they have all closed; with {@code
 * JCCL_CONTROL_LINGER} it stops after that long, and with 0 at its close(); either way every rank
 * still open logs that supervision is off (WARN when it waits in an operation, else INFO).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HubLingerTest {
    @TempDir
    Path dir;
    private Log.Options saved;
    private Path logFile;

    @BeforeEach
    void captureLog() {
        saved = Log.options();
        logFile = dir.resolve("jccl.log");
        Log.configure(new Log.Options(Log.Level.INFO, EnumSet.of(Log.Subsys.NET), logFile.toString(), false));
    }

    @AfterEach
    void restoreLog() {
        Log.configure(saved);
    }

    private Config tcp() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo")
                .with("JCCL_DUMP_DIR", dir.resolve("dumps").toString());
    }

    private static CommunicatorImpl impl(Communicator c) {
        return (CommunicatorImpl) c;
    }

    private static boolean hubThreadAlive(Communicator c0) {
        String name = "jccl-ctl-" + impl(c0).idShort() + "-r0";
        return Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.isAlive() && t.getName().equals(name));
    }

    private static boolean within(Duration d, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + d.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(20);
        }
        return true;
    }

    private String log() {
        try {
            return Files.exists(logFile) ? Files.readString(logFile) : "";
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static String who(Communicator c, int r) {
        return "rank " + r + " (host " + impl(c).peerInfo(r).host() + ", pid " + ProcessHandle.current().pid() + ")";
    }

    @Test
    void theHubKeepsSupervisingAfterItsCloseUntilEveryRankClosed() throws Exception {
        List<Communicator> cs = Jccl.initLocal(3, tcp().with("JCCL_STALL_WARN", "2"));
        try {
            Ranks.run(cs, Duration.ofSeconds(60), Communicator::barrier);
            long t0 = System.nanoTime();
            cs.get(0).close();
            long closeMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertTrue(closeMs < 2000, "rank 0's close() waits for nobody: " + closeMs + " ms");
            assertTrue(hubThreadAlive(cs.get(0)), "the hub's control thread goes on");

            // Rank 1 waits for rank 2, which is held back: the stall is still reported, through the closed hub.
            Work w = cs.get(1).recvAsync(Buffer.of(new int[4]), 2);
            assertTrue(within(Duration.ofSeconds(30), () -> impl(cs.get(1)).control().lastStallLine() != null),
                    "rank 1 logged no stall line although its operation waited JCCL_STALL_WARN; log:\n" + log());
            String line = impl(cs.get(1)).control().lastStallLine();
            assertTrue(line.startsWith("recv #1 stalled ") && line.contains(": rank 1 waits; ")
                    && line.contains(who(cs.get(1), 0) + " closed its communicator")
                    && line.contains(who(cs.get(1), 2) + " last at #0 barrier"), line);

            int[] data = {1, 2, 3, 4};
            cs.get(2).send(Buffer.of(data), 1);
            assertTrue(w.join(Duration.ofSeconds(20)));
            cs.get(1).close();
            assertTrue(hubThreadAlive(cs.get(0)), "rank 2 still has the communicator open");
            cs.get(2).close();
            assertTrue(within(Duration.ofSeconds(10), () -> !hubThreadAlive(cs.get(0))),
                    "the hub's control thread ends once every rank closed");
            assertFalse(log().contains("the control hub"), "nobody lost supervision: " + log());
            assertFalse(log().contains("no longer supervised"), log());
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
    }

    @Test
    void withoutLingerTheRanksStillOpenAreToldThatSupervisionIsOff() throws Exception {
        List<Communicator> cs = Jccl.initLocal(3, tcp().with("JCCL_CONTROL_LINGER", "0"));
        try {
            Ranks.run(cs, Duration.ofSeconds(60), Communicator::barrier);
            Work w = cs.get(1).recvAsync(Buffer.of(new int[4]), 2);
            cs.get(0).close();
            assertTrue(within(Duration.ofSeconds(10), () -> !hubThreadAlive(cs.get(0))), "JCCL_CONTROL_LINGER=0: the hub stops at close()");
            String id = impl(cs.get(0)).idShort();
            String tail = ", the control hub, closed its communicator while this rank still has it open";
            String off = ": heartbeats, failure notices and stall reports of this communicator are off from here";
            String waiting = "[1] JCCL WARN comm " + id + ": " + who(cs.get(1), 0) + tail + " (it waits in recv #1)" + off;
            String idle = "[2] JCCL INFO comm " + id + ": " + who(cs.get(2), 0) + tail + off;
            assertTrue(within(Duration.ofSeconds(10), () -> log().contains(waiting) && log().contains(idle)),
                    "expected\n" + waiting + "\n" + idle + "\nin the log:\n" + log());
            // The ranks go on without supervision.
            cs.get(2).send(Buffer.of(new int[4]), 1);
            assertTrue(w.join(Duration.ofSeconds(20)));
            cs.get(1).close();
            cs.get(2).close();
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
    }

    @Test
    void aLingeringHubStopsAfterJcclControlLingerAndSaysWhichRanksItLeaves() throws Exception {
        List<Communicator> cs = Jccl.initLocal(3, tcp().with("JCCL_CONTROL_LINGER", "1"));
        try {
            Ranks.run(cs, Duration.ofSeconds(60), Communicator::barrier);
            Work w = cs.get(1).recvAsync(Buffer.of(new int[4]), 2);
            cs.get(0).close();
            String id = impl(cs.get(0)).idShort();
            String hub = "[0] JCCL INFO comm " + id + ": rank 0 closed its communicator 1 s ago (JCCL_CONTROL_LINGER); ranks [1, 2]"
                    + " still have it open and are no longer supervised";
            String waiting = "[1] JCCL WARN comm " + id + ": " + who(cs.get(1), 0)
                    + ", the control hub, closed its communicator while this rank still has it open (it waits in recv #1)";
            assertTrue(within(Duration.ofSeconds(15), () -> log().contains(hub) && log().contains(waiting)),
                    "expected\n" + hub + "\n" + waiting + "\nin the log:\n" + log());
            assertTrue(within(Duration.ofSeconds(5), () -> !hubThreadAlive(cs.get(0))));
            cs.get(2).send(Buffer.of(new int[4]), 1);
            assertTrue(w.join(Duration.ofSeconds(20)));
            cs.get(1).close();
            cs.get(2).close();
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
    }

    @Test
    void statusEndpointOfTheLingeringHubStillExists() throws Exception {
        List<Communicator> cs = Jccl.initLocal(2, tcp());
        try {
            Ranks.run(cs, Duration.ofSeconds(60), Communicator::barrier);
            cs.get(0).close();
            String prefix = "jccl-status-" + impl(cs.get(0)).idShort() + "-r0-";
            try (var s = Files.list(dir.resolve("dumps"))) {
                assertNotNull(s.filter(p -> p.getFileName().toString().startsWith(prefix)).findFirst().orElse(null),
                        "jccl status can still ask the lingering hub");
            }
            cs.get(1).close();
            assertTrue(within(Duration.ofSeconds(10), () -> !hubThreadAlive(cs.get(0))));
            try (var s = Files.list(dir.resolve("dumps"))) {
                assertTrue(s.noneMatch(p -> p.getFileName().toString().startsWith(prefix)), "the status file goes with the hub");
            }
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
    }
}
