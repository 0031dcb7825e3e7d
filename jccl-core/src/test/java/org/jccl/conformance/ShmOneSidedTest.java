package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jccl.internal.transport.shm.ShmTransport;
import org.jccl.spi.RegisteredRegion;
import org.jccl.spi.RemoteRegion;
import org.jccl.spi.Transport;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The one-sided suite over SHM with ranks as threads (the region files are still mapped and written
 * through /dev/shm, as between processes), and what is SHM's own: a key made on another host is
 * refused, a key unpacked twice maps its file once, and a /dev/shm too small for a region fails the
 * allocation with the sizes and the fix.
 */
class ShmOneSidedTest extends OneSidedConformance {
    /** Small rings (4 x 64 KiB): the puts are not what fills /dev/shm. */
    static Map<String, String> shmSettings(Path dir) {
        return Map.of("JCCL_SHM_DIR", dir.toString(), "JCCL_SHM_CHUNK", "64K", "JCCL_SHM_SLOTS", "4", "JCCL_CONNECT_TIMEOUT", "30");
    }

    @Override
    protected Transport transport() {
        return new ShmTransport();
    }

    @Override
    protected Map<String, String> settings(Path dir) {
        return shmSettings(dir);
    }

    @Override
    protected boolean oneSided() {
        return true;
    }

    @Override
    protected boolean registersProcessMemory() {
        return false;
    }

    @Test
    void aKeyFromAnotherHostIsRefused() throws Exception {
        // Rank 1 says it runs on another host (as JCCL_HOSTID can make ranks of one machine do): its key names that host.
        threads(2, rig -> {
            if (rig.rank() == 1) {
                RegisteredRegion r = rig.endpoint().allocate(4096);
                rig.send(0, r.packedKey());
                rig.recv(0);
                r.close();
            } else {
                byte[] key = rig.recv(1);
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.connection(1).unpack(key));
                assertTrue(e.getMessage().contains("was made on another host (host id host-B; this rank's is host-A)")
                        && e.getMessage().contains("one host's shared memory"), e.getMessage());
                rig.send(1, new byte[] {1});
            }
        }, new String[] {"host-A", "host-B"});
    }

    /** Lines of /proc/self/maps that map {@code file}. */
    private static long mappingsOf(Path file) throws IOException {
        return Files.readAllLines(Path.of("/proc/self/maps")).stream().filter(l -> l.endsWith(" " + file)).count();
    }

    @Test
    void aKeyUnpackedTwiceMapsItsFileOnce() throws Exception {
        threads(2, rig -> {
            if (rig.rank() == 1) {
                RegisteredRegion r = rig.endpoint().allocate(3 * 4096);
                rig.send(0, r.packedKey());
                rig.recv(0);
                assertEquals((byte) 7, r.segment().get(ValueLayout.JAVA_BYTE, 4096));
                r.close();
            } else {
                byte[] key = rig.recv(1);
                Path file;
                try (var s = Files.list(dir)) {
                    List<Path> regions = s.filter(p -> p.getFileName().toString().contains("-mem")).toList();
                    assertEquals(1, regions.size(), regions.toString());
                    file = regions.get(0);
                }
                assertEquals(1, mappingsOf(file), "the owner's mapping (ranks are threads of this JVM)");
                RemoteRegion a = rig.connection(1).unpack(key);
                RemoteRegion b = rig.connection(1).unpack(key);
                assertEquals(2, mappingsOf(file), "the owner's mapping and one for both handles");
                a.close();
                try (Arena arena = Arena.ofConfined()) {
                    rig.drive(rig.connection(1).put(arena.allocate(1).fill((byte) 7), b, 4096));
                }
                rig.drive(rig.connection(1).flush());
                b.close();
                assertFalse(b.isOpen());
                assertEquals(1, mappingsOf(file), "unmapped when the last handle closed");
                rig.send(1, new byte[] {1});
            }
        }, null);
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void aFullDevShmFailsTheAllocationWithTheSizesAndTheFix() throws Exception {
        String why = SmallTmpfs.unavailable();
        Assumptions.assumeTrue(why == null, () -> "skipped: " + why);
        try (SpiRankServer.Pool pool = SpiRankServer.Pool.start(1, SmallTmpfs.prefix("1m"))) {
            pool.send(0, "FULL 4194304 /dev/shm");
            String threw = pool.next(0);
            assertTrue(threw.startsWith("THREW org.jccl.ResourceException "), threw + "\n" + pool.log(0));
            String msg = SpiRankServer.decode(threw.substring(threw.lastIndexOf(' ') + 1));
            assertTrue(msg.contains("not enough shared memory for a registered SHM region of 4194304 bytes in /dev/shm: it needs 4198400 bytes")
                    && msg.contains("bytes free") && msg.contains("--shm-size") && msg.contains("JCCL_SHM_DIR"), msg);
            assertEquals("LEFT 0", pool.next(0), "no file left in the full /dev/shm");
            assertFalse(pool.log(0).contains("SIGBUS"), pool.log(0));
        }
    }

    /** A private mount namespace whose /dev/shm is a fresh tmpfs of a given size (root with CAP_SYS_ADMIN). */
    static final class SmallTmpfs {
        private SmallTmpfs() {
        }

        static String unavailable() {
            try {
                Process p = new ProcessBuilder("unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm")
                        .redirectErrorStream(true).start();
                if (!p.waitFor(20, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    return "unshare -m did not finish in 20 s";
                }
                String out = new String(p.getInputStream().readAllBytes());
                return p.exitValue() == 0 ? null : "unshare -m / mount -t tmpfs not permitted here (exit " + p.exitValue() + "): " + out.trim();
            } catch (IOException e) {
                return "no unshare command: " + e.getMessage();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return "interrupted";
            }
        }

        static List<String> prefix(String size) {
            return List.of("unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=" + size + " tmpfs /dev/shm && exec \"$0\" \"$@\"");
        }
    }
}
