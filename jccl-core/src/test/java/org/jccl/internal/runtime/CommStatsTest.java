package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.CommStats;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Group;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.internal.control.FlightRecorder;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link Communicator#stats()}: operations, failures and bytes per collective, and bytes per peer and
 * per transport, over TCP on loopback (what the algorithms post) and through the SHM shared
 * collective segment (what peers read out of each other's areas, counted once per operation).
 * Failures counted per collective: CollectiveMismatchTest.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CommStatsTest {
    static final Duration STEP = Duration.ofSeconds(60);

    @TempDir
    Path dumps;

    private Config tcp() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo")
                .with("JCCL_DUMP_DIR", dumps.toString());
    }

    @Test
    void countsOperationsPerCollectiveAndBytesPerPeerAndTransport() {
        List<Communicator> cs = Jccl.initLocal(3, tcp());
        Map<Integer, CommStats> first = new ConcurrentHashMap<>();
        Map<Integer, CommStats> second = new ConcurrentHashMap<>();
        try {
            Ranks.run(cs, STEP, c -> {
                int r = c.rank();
                // Point-to-point alone first: exactly the payload, to that peer only.
                if (r == 0) {
                    c.send(Buffer.of(new byte[1000]), 1);
                } else if (r == 1) {
                    c.recv(Buffer.of(new byte[1000]), 0);
                }
                c.barrier();
                first.put(r, c.stats());
                c.allReduce(new float[256], ReduceOp.SUM);
                c.allReduce(new float[256], ReduceOp.SUM);
                c.broadcast(Buffer.of(new long[16]), 1);
                try (Group g = c.group()) {
                    c.send(Buffer.of(new int[10]), (r + 1) % 3);
                    c.recv(Buffer.of(new int[10]), (r + 2) % 3);
                }
                second.put(r, c.stats());
            });
        } finally {
            cs.forEach(Communicator::close);
        }
        CommStats s0 = first.get(0);
        assertEquals(0, s0.rank());
        assertEquals(3, s0.size());
        assertEquals(1000, s0.peer(1).bytesSent(), s0.toString());
        assertEquals("TCP", s0.peer(1).transport());
        assertEquals(1, s0.collective("send").operations());
        assertEquals(1000, s0.collective("send").bytes());
        assertEquals(1, s0.collective("barrier").operations());
        assertEquals(2, s0.operations());
        assertEquals(0, s0.errors());
        CommStats s1 = first.get(1);
        assertEquals(1000, s1.peer(0).bytesReceived(), s1.toString());
        assertEquals(1, s1.collective("recv").operations());
        assertEquals(0, first.get(2).collective("send").operations() + first.get(2).collective("recv").operations());
        // Bytes to each peer beyond the point-to-point message are the barrier's (0-byte messages): nothing else moved.
        assertEquals(0, first.get(2).peer(0).bytesSent() + first.get(2).peer(1).bytesSent(), first.get(2).toString());

        for (int r = 0; r < 3; r++) {
            CommStats s = second.get(r);
            assertEquals(2, s.collective("allReduce").operations(), s.toString());
            assertEquals(2048, s.collective("allReduce").bytes());
            assertEquals(1, s.collective("broadcast").operations());
            assertEquals(128, s.collective("broadcast").bytes());
            assertEquals(1, s.collective("barrier").operations());
            // the group's send and recv count as themselves, not as one "group"
            assertEquals((r == 0 ? 1 : 0) + 1, s.collective("send").operations(), s.toString());
            assertEquals((r == 1 ? 1 : 0) + 1, s.collective("recv").operations(), s.toString());
            assertEquals(s.collectives().stream().mapToLong(CommStats.CollectiveCount::operations).sum(), s.operations());
            assertEquals(0, s.errors());
            assertEquals(CommStats.COLLECTIVES, s.collectives().stream().map(CommStats.CollectiveCount::name).toList());
            assertEquals(List.of(new CommStats.TransportTraffic("TCP", s.bytesSent(), s.bytesReceived())), s.transports());
            assertEquals(new CommStats.TransportTraffic("SHM", 0, 0), s.transport("SHM"));
            // Whatever the tuner picked, each all-reduce of 1 KiB on 3 ranks sends at least the 2/3 of its vector
            // that the others reduce (682 B) beyond the point-to-point messages (the group's 40 B, rank 0's 1000 B).
            long p2p = 40 + (r == 0 ? 1000 : 0);
            assertTrue(s.bytesSent() >= p2p + 2 * 682, s.toString());
            assertTrue(s.toString().startsWith("rank " + r + "/3: ") && s.toString().contains("allReduce 2"), s.toString());
        }
        // Every byte one rank counts as sent to a peer, that peer counts as received from it.
        for (int a = 0; a < 3; a++) {
            for (int b = 0; b < 3; b++) {
                if (a != b) {
                    assertEquals(second.get(a).peer(b).bytesSent(), second.get(b).peer(a).bytesReceived(), a + " -> " + b);
                }
            }
        }
        // Snapshots are immutable: the first did not move, and cannot be changed.
        assertEquals(2, first.get(0).operations());
        assertThrows(UnsupportedOperationException.class, () -> first.get(0).collectives().clear());
        IllegalArgumentException unknown = assertThrows(IllegalArgumentException.class, () -> s0.collective("allreduce"));
        assertTrue(unknown.getMessage().contains("no collective 'allreduce'") && unknown.getMessage().contains("allReduce"),
                unknown.getMessage());
        IllegalArgumentException self = assertThrows(IllegalArgumentException.class, () -> s0.peer(0));
        assertTrue(self.getMessage().contains("rank 0 has no peer 0"), self.getMessage());
        // and stats() still answers after close
        assertEquals(second.get(0), cs.get(0).stats());
    }

    @Test
    void theSharedSegmentCountsWhatPeersReadOutOfEachOthersAreas() throws IOException {
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-statstest-");
        Config shm = Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DIR", dir.toString())
                .with("JCCL_SHM_COLL_BUFFER", "96K").with("JCCL_SHM_COLL_SLOT", "32K").with("JCCL_SHM_COLL_RING", "1").with("JCCL_DUMP_DIR", dumps.toString())
                .with("JCCL_ALGO", "allreduce:shared;allgather:shared");
        List<Communicator> cs = Jccl.initLocal(3, shm);
        try {
            CommunicatorImpl c0 = (CommunicatorImpl) cs.get(0);
            assertTrue(SharedAreas.of(c0) != null, "three ranks of one JVM over SHM share a collective segment");
            // 32 KiB per rank per round (the far mode's rounds, always taken): 8192 floats, cut into slices of 2731, 2731 and 2730 floats
            Ranks.run(cs, STEP, c -> {
                c.allReduce(new float[8], ReduceOp.SUM);        // one step: every rank reads every area, 32 B each
                c.allReduce(new float[8192 + 7], ReduceOp.SUM); // two steps, two rounds: 8192 floats, then 7 (slices 3, 2, 2)
                c.allGather(Buffer.of(new int[5]), Buffer.of(new int[15]));  // 20 B out of each area
            });
            assertTrue(SharedAreas.of(c0).far());
            assertEquals(32 << 10, SharedAreas.of(c0).slotBytes());
            for (Communicator c : cs) {
                for (FlightRecorder.Entry e : ((CommunicatorImpl) c).flightRecorder().snapshot()) {
                    assertEquals("shared", e.algorithm(), e.toString());
                }
            }
            // Per pair and direction: one-step 32 B + two-step (slice of a + slice of b per round) x 4 B + 20 B.
            long[][] twoStep = {{0, 2731 + 2731 + 3 + 2, 2731 + 2730 + 3 + 2}, {0, 0, 2731 + 2730 + 2 + 2}};
            for (int a = 0; a < 3; a++) {
                CommStats s = cs.get(a).stats();
                for (int b = 0; b < 3; b++) {
                    if (a == b) {
                        continue;
                    }
                    long pair = 32 + 4 * twoStep[Math.min(a, b)][Math.max(a, b)] + 20;
                    assertEquals("SHM", s.peer(b).transport());
                    assertEquals(pair, s.peer(b).bytesSent(), "rank " + a + " to rank " + b + ": " + s);
                    assertEquals(pair, s.peer(b).bytesReceived(), "rank " + a + " from rank " + b + ": " + s);
                }
                assertEquals(s.bytesSent(), s.transport("SHM").bytesSent());
                assertEquals(2, s.collective("allReduce").operations());
                assertEquals(1, s.collective("allGather").operations());
            }
        } finally {
            cs.forEach(Communicator::close);
            try (Stream<Path> s = Files.list(dir)) {
                for (Path p : s.toList()) {
                    Files.deleteIfExists(p);
                }
            }
            Files.deleteIfExists(dir);
        }
    }
}
