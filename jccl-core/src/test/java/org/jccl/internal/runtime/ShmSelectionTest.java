package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.PeerFailedException;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Which transport ranks of one host get, and the SHM transport's file hygiene, with ranks as threads
 * of this JVM (the multi-process cases are in jccl-cli's mproc tests). Each test uses its own
 * JCCL_SHM_DIR under /dev/shm so that "no file left" is checked on a directory nobody else writes.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShmSelectionTest {
    private Path dir;

    @BeforeEach
    void makeDir() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-shmtest-");
    }

    @AfterEach
    void removeDir() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.toList()) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(dir);
    }

    private Config shm() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DIR", dir.toString())
                .with("JCCL_SHM_CHUNK", "64K").with("JCCL_SHM_SLOTS", "4");
    }

    private static String via(Communicator c, int peer) {
        return ((CommunicatorImpl) c).transportName(peer);
    }

    private List<String> files() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).toList();
        }
    }

    @Test
    void sameHostRanksWithoutLocalUseShmAndLeaveNoFile() throws IOException {
        List<Communicator> cs = Jccl.initLocal(3, shm());
        try {
            for (Communicator c : cs) {
                for (int p = 0; p < 3; p++) {
                    if (p != c.rank()) {
                        assertEquals("SHM", via(c, p));
                    }
                }
            }
            // Every ring is mapped by both sides during creation, and unlinked then.
            assertEquals(List.of(), files());
            Ranks.run(cs, Duration.ofSeconds(60), c -> {
                float[] v = new float[300_001];
                java.util.Arrays.fill(v, c.rank() + 1);
                c.allReduce(Buffer.of(v), Buffer.of(v), ReduceOp.SUM);
                for (float x : v) {
                    assertEquals(6f, x);
                }
            });
        } finally {
            cs.forEach(Communicator::close);
        }
        assertEquals(List.of(), files());
    }

    @Test
    void localStaysFirstAndShmDisableFallsBackToTcp() {
        List<Communicator> local = Jccl.initLocal(2, Config.defaults().with("JCCL_SHM_DIR", dir.toString()));
        try {
            assertEquals("LOCAL", via(local.get(0), 1));
        } finally {
            local.forEach(Communicator::close);
        }
        for (String name : new String[] {"JCCL_SHM_DISABLE", "NCCL_SHM_DISABLE"}) {
            List<Communicator> tcp = Jccl.initLocal(2, shm().with(name, "1"));
            try {
                assertEquals("TCP", via(tcp.get(0), 1), name);
                assertEquals("TCP", via(tcp.get(1), 0), name);
            } finally {
                tcp.forEach(Communicator::close);
            }
        }
    }

    @Test
    void messagesOfEverySizeAroundTheSlotAndRingArriveInOrder() {
        List<Communicator> cs = Jccl.initLocal(2, shm());
        try {
            Ranks.run(cs, Duration.ofSeconds(60), c -> {
                // 64 KiB slots, 4 of them: sizes below, at and beyond one slot and the whole ring.
                int[] sizes = {0, 1, 65_535, 65_536, 65_537, 262_144, 262_145, 3_000_001};
                for (int n : sizes) {
                    byte[] b = new byte[n];
                    if (c.rank() == 0) {
                        for (int i = 0; i < n; i++) {
                            b[i] = (byte) (i * 31 + n);
                        }
                        c.send(Buffer.of(b), 1);
                    } else {
                        c.recv(Buffer.of(b), 0);
                        byte[] want = new byte[n];
                        for (int i = 0; i < n; i++) {
                            want[i] = (byte) (i * 31 + n);
                        }
                        assertArrayEquals(want, b, "size " + n);
                    }
                }
            });
        } finally {
            cs.forEach(Communicator::close);
        }
    }

    @Test
    void aSizeMismatchIsReportedWithBothSizes() {
        List<Communicator> cs = Jccl.initLocal(2, shm());
        try {
            Throwable t = assertThrows(Throwable.class, () -> Ranks.run(cs, Duration.ofSeconds(30), c -> {
                if (c.rank() == 0) {
                    c.send(Buffer.of(new byte[100]), 1);
                } else {
                    c.recv(Buffer.of(new byte[60]), 0);
                }
            }));
            String all = Stream.iterate(t, x -> x != null, Throwable::getCause).map(String::valueOf).reduce("", String::concat);
            assertTrue(all.contains("sent a message of 100 bytes where this rank expected 60"), all);
        } finally {
            cs.forEach(Communicator::abort);
        }
    }

    @Test
    void aPeerThatClosedFailsTheWaitingRankInsteadOfHangingIt() {
        List<Communicator> cs = Jccl.initLocal(2, shm());
        try {
            cs.get(1).close();
            JcclException e = assertThrows(JcclException.class, () -> cs.get(0).recv(Buffer.of(new byte[8]), 1));
            assertTrue(e instanceof PeerFailedException, e.toString());
            assertTrue(e.getMessage().contains("SHM connection to rank 1 (") && e.getMessage().contains("closed by the peer")
                    && e.getMessage().contains("closed its communicator after an error of its own"), e.getMessage());
        } finally {
            cs.forEach(Communicator::abort);
        }
    }
}
