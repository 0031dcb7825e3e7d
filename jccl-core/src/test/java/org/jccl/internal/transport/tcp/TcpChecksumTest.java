package org.jccl.internal.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code JCCL_CHECKSUM=1} end to end: two ranks (threads of this JVM) all-reduce over TCP on
 * loopback while {@link TcpConnection#receiveTap} flips one bit of one received payload byte, right
 * after the real socket delivered it, as a faulty NIC or switch would. Without checksums the
 * corruption goes through as a silently wrong sum (the control: it proves the fault reaches the
 * data); with them the operation fails with an error naming the CRC32C check and the sending peer
 * (rank, host), and no rank returns a wrong result.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpChecksumTest {

    /** 256 Ki ints = 1 MiB: stripes on the direct path (plus the small warm-up on the inline path). */
    private static final int COUNT = 256 * 1024;

    @AfterEach
    void removeTap() {
        TcpConnection.receiveTap = null;
    }

    /** Flips bit 3 of the payload byte that is the {@code at}-th one received after {@link #arm}. */
    private static final class BitFlip implements TcpConnection.ReceiveTap {
        final AtomicBoolean armed = new AtomicBoolean();
        final AtomicLong seen = new AtomicLong();
        /** Taken by the one receive that flips; {@link #flipped} is set only after {@link #victim}. */
        final AtomicBoolean claimed = new AtomicBoolean();
        final AtomicBoolean flipped = new AtomicBoolean();
        final long at;
        volatile String victim;

        BitFlip(long at) {
            this.at = at;
        }

        void arm() {
            seen.set(0);
            armed.set(true);
        }

        @Override
        public void received(TcpConnection c, ByteBuffer b, int from, int to) {
            if (!armed.get() || claimed.get()) {
                return;
            }
            // Lanes on stream threads call this concurrently: only the range that holds byte number
            // {@code at} of the shared count flips, so the position is always inside this range.
            long end = seen.addAndGet(to - from);
            long start = end - (to - from);
            if (start <= at && at < end && claimed.compareAndSet(false, true)) {
                int pos = from + (int) (at - start);
                b.put(pos, (byte) (b.get(pos) ^ 0x08));
                victim = c.toString();
                flipped.set(true); // after victim: a test that sees the flip also sees which connection
            }
        }
    }

    /** What one rank's all-reduce ended with. */
    private record Outcome(int rank, int[] result, Throwable error) {
        @Override
        public String toString() {
            return "rank " + rank + (error == null ? " returned" : " failed: " + error);
        }
    }

    private static Config config(boolean checksum) {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo")
                .with("JCCL_CHECKSUM", checksum ? "1" : "0");
    }

    private static int[] input(int rank) {
        int[] a = new int[COUNT];
        for (int i = 0; i < COUNT; i++) {
            a[i] = rank * 100_003 + i;
        }
        return a;
    }

    private static int expected(int i) {
        return 100_003 + 2 * i;
    }

    private static List<Outcome> corruptedAllReduce(boolean checksum, BitFlip flip) throws Exception {
        TcpConnection.receiveTap = flip;
        List<Communicator> comms = Jccl.initLocal(2, config(checksum));
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            List<Future<?>> warm = new ArrayList<>();
            for (Communicator c : comms) {
                warm.add(pool.submit(() -> {
                    int[] w = {c.rank() + 1};
                    c.allReduce(Buffer.of(w), ReduceOp.SUM); // connects (the tap is taken then), inline path
                    assertEquals(3, w[0]);
                    return null;
                }));
            }
            for (Future<?> f : warm) {
                f.get(60, TimeUnit.SECONDS);
            }
            List<Future<Outcome>> fs = new ArrayList<>();
            flip.arm();
            for (Communicator c : comms) {
                fs.add(pool.submit(() -> {
                    int[] a = input(c.rank());
                    try {
                        c.allReduce(Buffer.of(a), ReduceOp.SUM);
                        return new Outcome(c.rank(), a, null);
                    } catch (RuntimeException e) {
                        return new Outcome(c.rank(), null, e);
                    }
                }));
            }
            List<Outcome> out = new ArrayList<>();
            for (Future<Outcome> f : fs) {
                out.add(f.get(60, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            comms.forEach(Communicator::abort);
            pool.shutdownNow();
        }
    }

    private static boolean correct(int[] r) {
        for (int i = 0; i < COUNT; i++) {
            if (r[i] != expected(i)) {
                return false;
            }
        }
        return true;
    }

    @Test
    void withoutChecksumsAFlippedBitIsASilentlyWrongResult() throws Exception {
        BitFlip flip = new BitFlip(300_000);
        List<Outcome> out = corruptedAllReduce(false, flip);
        assertTrue(flip.flipped.get(), () -> "the tap flipped a bit (it saw " + flip.seen.get() + " bytes); the ranks ended with " + out);
        int wrong = 0;
        for (Outcome o : out) {
            assertEquals(null, o.error(), "no error without checksums");
            if (!correct(o.result())) {
                wrong++;
            }
        }
        assertTrue(wrong > 0, "the flipped bit reached a result (the control for the checksum test)");
    }

    @Test
    void withChecksumsAFlippedBitFailsTheOperationNamingThePeer() throws Exception {
        BitFlip flip = new BitFlip(300_000);
        List<Outcome> out = corruptedAllReduce(true, flip);
        assertTrue(flip.flipped.get(), () -> "the tap flipped a bit (it saw " + flip.seen.get() + " bytes); the ranks ended with " + out);
        assertNotNull(flip.victim);
        String crcMessage = null;
        for (Outcome o : out) {
            if (o.error() == null) {
                assertTrue(correct(o.result()), "rank " + o.rank() + " returned a wrong result without an error");
                continue;
            }
            for (Throwable t = o.error(); t != null; t = t.getCause()) {
                if (t.getMessage() != null && t.getMessage().contains("failed its CRC32C check")) {
                    crcMessage = o.error().getMessage();
                }
            }
        }
        assertNotNull(crcMessage, "one rank reports the CRC32C mismatch: " + out);
        System.out.println("CRC error seen by the receiving rank: " + crcMessage);
        assertTrue(crcMessage.contains("failed its CRC32C check (JCCL_CHECKSUM=1)"), crcMessage);
        // The sender is named by rank and host ("rank 0 (host pid N)"), and the fix is spelled out.
        assertTrue(crcMessage.matches("(?s).*TCP data from rank [01] \\(\\S+ pid \\d+\\).*"), crcMessage);
        assertTrue(crcMessage.contains("corrupted between the two processes"), crcMessage);
    }
}
