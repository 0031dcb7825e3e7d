package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.PeerFailedException;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.internal.control.FlightRecorder;
import org.jccl.internal.util.Json;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The control plane between ranks of one JVM (over TCP on loopback, so every byte goes through the
 * transports as between processes): the flight recorder, the per-peer counters, the JFR event, the
 * stall line naming a rank held back plus the dumps, and failure notices. Processes, kill -9 and
 * SIGSTOP are in jccl-cli's ControlPlaneProcessesTest.
 */
class ControlPlaneLocalTest {

    @TempDir
    Path dumps;

    private Config tcp() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo")
                .with("JCCL_DUMP_DIR", dumps.toString());
    }

    private static CommunicatorImpl impl(Communicator c) {
        return (CommunicatorImpl) c;
    }

    private static void parallel(List<Communicator> cs, java.util.function.Consumer<Communicator> body) throws Exception {
        List<Thread> ts = new ArrayList<>();
        List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
        for (Communicator c : cs) {
            Thread t = new Thread(() -> {
                try {
                    body.accept(c);
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            t.start();
            ts.add(t);
        }
        for (Thread t : ts) {
            t.join(60_000);
        }
        if (!errors.isEmpty()) {
            throw new AssertionError(errors.get(0));
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void flightRecorderCountersAndJfrEventsDescribeEveryOperation() throws Exception {
        List<Communicator> cs = Jccl.initLocal(2, tcp());
        Path jfr = dumps.resolve("ops.jfr");
        try (Recording rec = new Recording()) {
            rec.enable("org.jccl.Collective").withThreshold(Duration.ZERO);
            rec.start();
            parallel(cs, c -> {
                c.allReduce(new float[1024], ReduceOp.SUM);
                c.broadcast(Buffer.of(new long[16]), 1);
                c.barrier();
            });
            rec.stop();
            rec.dump(jfr);
        }
        try {
            FlightRecorder fr = impl(cs.get(0)).flightRecorder();
            List<FlightRecorder.Entry> ops = fr.snapshot();
            assertEquals(3, ops.size(), ops.toString());
            FlightRecorder.Entry ar = ops.get(0);
            assertEquals(0, ar.seq());
            assertEquals("allReduce", ar.name());
            assertEquals(4096, ar.bytes());
            assertEquals("float", ar.dtype());
            assertEquals("sum", ar.redop());
            assertEquals(-1, ar.rootOrPeer());
            assertNotNull(ar.algorithm(), "the tuner's choice is recorded");
            assertEquals("TCP", ar.transport());
            assertEquals(FlightRecorder.State.DONE, ar.state());
            assertTrue(ar.startNs() >= ar.issuedNs() && ar.endNs() >= ar.startNs(), ar.toString());
            FlightRecorder.Entry bc = ops.get(1);
            assertEquals("broadcast", bc.name());
            assertEquals(128, bc.bytes());
            assertEquals("int64", bc.dtype());
            assertEquals(1, bc.rootOrPeer());
            assertEquals("barrier", ops.get(2).name());
            assertEquals(3, fr.ops());
            assertEquals(0, fr.errors());
            assertNull(fr.current());
            assertTrue(impl(cs.get(0)).counters().sentTo(1) >= 4096, "bytes to rank 1 are counted");
            assertEquals("TCP", impl(cs.get(0)).counters().transport(1));

            List<RecordedEvent> events = RecordingFile.readAllEvents(jfr).stream()
                    .filter(e -> e.getEventType().getName().equals("org.jccl.Collective")).toList();
            assertEquals(6, events.size(), "one event per operation per rank: " + events);
            RecordedEvent e = events.stream().filter(x -> x.getInt("rank") == 0 && x.getString("op").equals("allReduce")).findFirst()
                    .orElseThrow();
            assertEquals(4096, e.getLong("bytes"));
            assertEquals(0, e.getLong("seq"));
            assertEquals("float", e.getString("dtype"));
            assertEquals("TCP", e.getString("transport"));
            assertEquals(ar.algorithm(), e.getString("algorithm"));
            assertEquals(2, e.getInt("ranks"));
            assertTrue(e.getBoolean("ok"));
            assertTrue(!e.getDuration().isNegative(), e.toString());
        } finally {
            cs.forEach(Communicator::close);
        }
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void aRankHeldBackIsNamedByEveryWaitingRankAndEveryRankDumps() throws Exception {
        List<Communicator> cs = Jccl.initLocal(4, tcp().with("JCCL_STALL_WARN", "2"));
        try {
            parallel(cs, c -> c.broadcast(Buffer.of(new int[8]), 0));
            long t0 = System.nanoTime();
            List<Work> works = new ArrayList<>();
            for (int r = 0; r < 3; r++) {
                works.add(cs.get(r).allReduceAsync(Buffer.of(new double[64]), Buffer.of(new double[64]), ReduceOp.SUM));
            }
            String host = impl(cs.get(3)).peerInfo(3).host();
            long pid = ProcessHandle.current().pid();
            String expected = "all_reduce #1 stalled ";
            String tail = "ranks 0-2 wait; rank 3 (host " + host + ", pid " + pid + ") last at #0 broadcast";
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            for (int r = 0; r < 3; r++) {
                String line;
                while ((line = impl(cs.get(r)).control().lastStallLine()) == null && System.nanoTime() < deadline) {
                    Thread.sleep(50);
                }
                assertNotNull(line, "rank " + r + " logged no stall line");
                assertTrue(line.startsWith(expected) && line.endsWith(tail), line);
            }
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
            assertTrue(seconds >= 2 && seconds < 20, "stall lines after " + seconds + " s (JCCL_STALL_WARN 2 s)");
            assertNull(impl(cs.get(3)).control().lastStallLine(), "the held-back rank waits in nothing");
            List<Path> files;
            long fileDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            do {
                try (Stream<Path> s = Files.list(dumps)) {
                    files = s.filter(p -> p.getFileName().toString().startsWith("jccl-flight-")
                            && p.getFileName().toString().endsWith(".json")).toList();
                }
            } while (files.size() < 4 && System.nanoTime() < fileDeadline && sleep());
            assertEquals(4, files.size(), "one dump per rank: " + files);
            Path r0 = files.stream().filter(p -> p.getFileName().toString().contains("-r0-")).findFirst().orElseThrow();
            Map<?, ?> dump = (Map<?, ?>) Json.parse(Files.readString(r0));
            assertEquals("jccl-flight-recorder", dump.get("format"));
            assertEquals(0L, ((Number) dump.get("rank")).longValue());
            assertTrue(((String) dump.get("reason")).endsWith(tail), dump.toString());
            List<?> ops = (List<?>) dump.get("operations");
            assertEquals(2, ops.size(), ops.toString());
            assertEquals("RUNNING", ((Map<?, ?>) ops.get(1)).get("state"));
            assertEquals("allReduce", ((Map<?, ?>) ops.get(1)).get("op"));
            List<?> ranks = (List<?>) dump.get("ranks");
            assertEquals(0L, ((Number) ((Map<?, ?>) ranks.get(3)).get("last_issued")).longValue());

            // The held-back rank arrives: everything completes, and the communicators stay usable.
            cs.get(3).allReduce(Buffer.of(new double[64]), ReduceOp.SUM);
            for (Work w : works) {
                assertTrue(w.join(Duration.ofSeconds(20)));
            }
            parallel(cs, Communicator::barrier);
            cs.forEach(Communicator::close);
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
    }

    private static boolean sleep() {
        try {
            Thread.sleep(100);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return true;
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void laterOperationsAfterAPeerFailureFailNamingThePeerAndTheOperation() throws Exception {
        List<Communicator> cs = Jccl.initLocal(3, tcp());
        try {
            parallel(cs, Communicator::barrier);
            Work w = cs.get(0).allReduceAsync(Buffer.of(new float[16]), Buffer.of(new float[16]), ReduceOp.SUM);
            Work w1 = cs.get(1).allReduceAsync(Buffer.of(new float[16]), Buffer.of(new float[16]), ReduceOp.SUM);
            Thread.sleep(300);
            // Rank 2's operation fails as a peer failure would (its link to rank 1 "breaks"): its peers learn the cause.
            impl(cs.get(2)).abort(new PeerFailedException(1, "rank 2: test: link to rank 1 broke", null));
            JcclException e0 = assertThrows(JcclException.class, () -> w.join(Duration.ofSeconds(20)));
            assertInstanceOf(PeerFailedException.class, e0, e0.toString());
            assertEquals(1, ((PeerFailedException) e0).peerRank(), e0.toString());
            assertTrue(e0.getMessage().startsWith("rank 0: allReduce #1 (64 B float sum) on communicator "), e0.getMessage());
            // Either the notice (rank 1 failed, as seen by rank 2) or rank 0's own broken link to rank 1 arrives first; both name rank 1.
            assertTrue(e0.getMessage().contains("rank 1 (host " + impl(cs.get(0)).peerInfo(1).host() + ", pid " + ProcessHandle.current().pid()
                    + ") failed, as seen by rank 2") || e0.getMessage().contains("link to rank 1 ("), e0.getMessage());
            JcclException later = assertThrows(JcclException.class, () -> cs.get(0).barrier());
            assertInstanceOf(PeerFailedException.class, later, later.toString());
            assertTrue(later.getMessage().startsWith("rank 0: communicator ") && later.getMessage().contains(" cannot be used: it was aborted: ")
                    && later.getMessage().contains("rank 1 ("), later.getMessage());
            assertThrows(JcclException.class, () -> w1.join(Duration.ofSeconds(20)));
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
    }
}
