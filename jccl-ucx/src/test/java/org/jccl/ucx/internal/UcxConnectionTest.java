package org.jccl.ucx.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.spi.Connection;
import org.jccl.spi.GuardMismatchException;
import org.jccl.spi.P2pRequest;
import org.jccl.spi.PeerInfo;
import org.jccl.testing.TestTransportContext;
import org.jccl.ucx.UcxTests;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Two UCX endpoints of this JVM (UCX's tcp), driven through the SPI as the runtime drives them: messages in order
 * per direction whatever their protocol (eager, rendezvous), a message of the wrong size that had already arrived
 * when its receive was posted (UCX 1.13 completes such a receive at once without saying the length: the transport
 * posts receives with NO_IMM_CMPL), the guard word compared, and the worker's event fd waking a waiter.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class UcxConnectionTest {
    private UcxRanks ranks;
    private UcxEndpoint[] eps;
    private Connection c01;
    private Connection c10;

    @BeforeEach
    void open() throws IOException {
        UcxTests.assumeUcx();
        ranks = UcxRanks.open(2);
        eps = ranks.eps;
        c01 = ranks.c[0][1];
        c10 = ranks.c[1][0];
    }

    @AfterEach
    void close() {
        if (ranks != null) {
            ranks.close();
        }
    }

    private void drive(List<P2pRequest> reqs) throws IOException {
        TestTransportContext.drive("", 20_000, List.of(c01, c10), reqs);
    }

    @Test
    void messagesArriveInOrderPerDirectionEagerAndRendezvous() throws IOException {
        try (Arena a = Arena.ofShared()) {
            // Below the split (one IOV message), across it (head and body: 512 KiB over tcp alone), eager and rendezvous.
            // Also both sides of the small contiguous copy (UcxConnection.SMALL_MAX).
            long[] sizes = {0, 1, 8, UcxConnection.SMALL_MAX, UcxConnection.SMALL_MAX + 1, 4096, 8192, 65_536 + 3, 300_001, (512 << 10) - 1,
                512 << 10, 4 << 20};
            MemorySegment[] src = new MemorySegment[sizes.length];
            MemorySegment[] dst = new MemorySegment[sizes.length];
            List<P2pRequest> reqs = new java.util.ArrayList<>();
            for (int i = 0; i < sizes.length; i++) {
                src[i] = a.allocate(Math.max(1, sizes[i])).asSlice(0, sizes[i]);
                for (long k = 0; k < sizes[i]; k++) {
                    src[i].set(ValueLayout.JAVA_BYTE, k, (byte) (i * 31 + k * 7));
                }
                reqs.add(c01.send(src[i], 0x5eed_0000L + i)); // all sent before any receive is posted
            }
            for (int i = 0; i < sizes.length; i++) {
                dst[i] = a.allocate(Math.max(1, sizes[i])).asSlice(0, sizes[i]);
                reqs.add(c10.recv(dst[i], 0x5eed_0000L + i));
            }
            drive(reqs);
            for (int i = 0; i < sizes.length; i++) {
                assertArrayEquals(src[i].toArray(ValueLayout.JAVA_BYTE), dst[i].toArray(ValueLayout.JAVA_BYTE), "message " + i);
            }
        }
    }

    @Test
    void aPairSplitsAtTheSmallerOfTheTwoPublishedSizesAndAPeerWithoutTheHeaderIsRefused() throws IOException {
        assertEquals(UcxSettings.TCP_RNDV_THRESH, eps[0].splitAt, "over tcp alone a rank splits at the rendezvous threshold");
        assertEquals(UcxSettings.TCP_RNDV_THRESH, ((UcxConnection) c01).splitAt());
        byte[] published = eps[1].address();
        java.nio.ByteBuffer.wrap(published).putInt(4, 8192); // a peer that splits at 8 KiB (UCX with RDMA or shared memory)
        byte[] raw = java.util.Arrays.copyOfRange(published, UcxEndpoint.ADDRESS_HEADER, published.length);
        // A rank 0 of a 4-rank context whose ranks 2 and 3 are the peer above, published two ways.
        TestTransportContext four = new TestTransportContext(new byte[16], 0, 4, new byte[16],
                Config.defaults().with("JCCL_NET", "UCX").with("JCCL_UCX_TLS", "tcp"));
        four.setPeer(2, new PeerInfo(2, "testhost", ProcessHandle.current().pid(), "host-2", "jvm", Map.of("UCX", published)));
        four.setPeer(3, new PeerInfo(3, "testhost", ProcessHandle.current().pid(), "host-3", "jvm", Map.of("UCX", raw)));
        UcxEndpoint e0 = (UcxEndpoint) new UcxTransport().open(four);
        try {
            assertEquals(8192, ((UcxConnection) e0.connect(2)).splitAt(), "the pair takes the smaller split");
            IOException e = assertThrows(IOException.class, () -> e0.connect(3));
            assertTrue(e.getMessage().contains("another version of jccl"), e.getMessage());
        } finally {
            e0.close();
        }
    }

    @Test
    void aMessageOfAnotherSizeThatAlreadyArrivedFailsItsReceiveNamingBothSizes() throws IOException, InterruptedException {
        try (Arena a = Arena.ofShared()) {
            P2pRequest s = c01.send(a.allocate(5));
            drive(List.of(s));
            for (int i = 0; i < 200; i++) { // let it arrive: an unexpected eager message in rank 1's worker
                c10.progress();
                Thread.sleep(1);
            }
            P2pRequest r = c10.recv(a.allocate(8));
            IOException e = assertThrows(IOException.class, () -> drive(List.of(r)));
            assertTrue(r.isDone() && r.error() != null);
            assertTrue(e.getMessage().contains("receive of 8 B") && e.getMessage().contains("got a message of 5 B"), e.getMessage());
        }
    }

    @Test
    void aMessageOfAnotherCallFailsWithBothGuardWords() throws IOException {
        try (Arena a = Arena.ofShared()) {
            for (long size : new long[] {16, UcxConnection.SMALL_MAX + 1, 1 << 20}) { // a small copy, an IOV message, head and body
                close();
                open();
                P2pRequest s = c01.send(a.allocate(size), 0x1111L);
                P2pRequest r = c10.recv(a.allocate(size), 0x2222L);
                assertThrows(IOException.class, () -> drive(List.of(s, r)));
                GuardMismatchException g = assertInstanceOf(GuardMismatchException.class, r.error(), String.valueOf(r.error()));
                assertEquals(0, g.peer());
                assertEquals(0x2222L, g.expected());
                assertEquals(0x1111L, g.received());
            }
        }
    }

    /**
     * A guarded message of at least SPLIT_AT bytes goes as a head (guard word, size) and a contiguous body, a smaller one
     * as one IOV message: calls of different sizes on either side of the split, either way round, fail the receive
     * naming both sizes (the receive of heads ignores the split bit), instead of waiting for a message that never comes.
     */
    @Test
    void guardedCallsOfSizesAcrossTheSplitFailNamingBothSizes() throws IOException {
        long small = ((UcxConnection) c01).splitAt() / 2;
        long large = ((UcxConnection) c01).splitAt() * 8;
        try (Arena a = Arena.ofShared()) {
            for (long[] sr : new long[][] {{small, large}, {large, small}, {large, large + 8}}) {
                close();
                open();
                P2pRequest s = c01.send(a.allocate(sr[0]), 0x3333L);
                P2pRequest r = c10.recv(a.allocate(sr[1]), 0x3333L);
                IOException e = assertThrows(IOException.class, () -> drive(List.of(s, r)));
                assertTrue(r.isDone() && r.error() != null, "the receive failed");
                String m = r.error().getMessage();
                assertTrue(m.contains("receive of " + sr[1] + " B") && m.contains("got a message of " + sr[0] + " B"), m + " / " + e.getMessage());
            }
        }
    }

    /**
     * Guarded messages up to SMALL_MAX bytes go as one contiguous copy (guard word, data), larger ones below the split as
     * a two-entry IOV of the same bytes: calls of different sizes across that boundary fail the receive naming its size,
     * and the sender's when it fits (a larger message is cut short by UCX, which says so).
     */
    @Test
    void guardedCallsOfSizesAcrossTheSmallCopyFailNamingTheirSizes() throws IOException {
        long small = UcxConnection.SMALL_MAX;
        long iov = UcxConnection.SMALL_MAX + 8;
        try (Arena a = Arena.ofShared()) {
            for (long[] sr : new long[][] {{small, iov}, {iov, small}, {small - 8, small}}) {
                close();
                open();
                P2pRequest s = c01.send(a.allocate(sr[0]), 0x4444L);
                P2pRequest r = c10.recv(a.allocate(sr[1]), 0x4444L);
                assertThrows(IOException.class, () -> drive(List.of(s, r)));
                assertTrue(r.isDone() && r.error() != null, "the receive failed");
                String m = r.error().getMessage();
                assertTrue(m.contains("receive of " + sr[1] + " B"), m);
                assertTrue(sr[0] < sr[1] ? m.contains("got a message of " + sr[0] + " B") : m.contains("got a larger message"), m);
            }
        }
    }

    @Test
    void thePeersSendMakesTheArmedEventFdReadable() throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle poll = linker.downcallHandle(linker.defaultLookup().find("poll").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
        try (Arena a = Arena.ofShared()) {
            int fd = eps[1].wakeFd();
            assertTrue(fd >= 0);
            MemorySegment pfd = a.allocate(8, 4);
            // Armed with nothing to do (the endpoints' wire-up done: BUSY until then, as the runtime sees it), the descriptor stays quiet.
            boolean armed = false;
            for (long end = System.nanoTime() + 5_000_000_000L; !armed && System.nanoTime() < end; ) {
                c01.progress();
                c10.progress();
                armed = eps[1].armWakeFd();
            }
            assertTrue(armed, "ucp_worker_arm stayed BUSY for 5 s with nothing sent");
            pfd.set(ValueLayout.JAVA_INT, 0, fd);
            pfd.set(ValueLayout.JAVA_SHORT, 4, (short) 1); // POLLIN
            assertEquals(0, (int) poll.invokeExact(pfd, 1L, 100));
            P2pRequest s = c01.send(a.allocate(64));
            long deadline = System.nanoTime() + 10_000_000_000L;
            int n = 0;
            while (n == 0 && System.nanoTime() < deadline) {
                c01.progress(); // rank 0 drives its send; rank 1 only waits on its descriptor
                pfd.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
                n = (int) poll.invokeExact(pfd, 1L, 10);
            }
            assertEquals(1, n, "rank 1's event fd did not become readable when rank 0 sent");
            P2pRequest r = c10.recv(a.allocate(64));
            drive(List.of(s, r));
            assertFalse(r.error() != null);
        }
    }

    @Test
    void whenThePeerIsGoneASendFailsAndTheEndpointErrorFailsThePendingReceiveToo() throws IOException {
        try (Arena a = Arena.ofShared()) {
            // a first message, so that the endpoints are wired up both ways
            drive(List.of(c10.send(a.allocate(8)), c01.recv(a.allocate(8))));
            P2pRequest r = c01.recv(a.allocate(64)); // rank 1 will never send it
            eps[1].close(); // rank 1 goes away: its worker and sockets are gone
            P2pRequest s = c01.send(a.allocate(1 << 20));
            long deadline = System.nanoTime() + 30_000_000_000L;
            IOException failed = null;
            while (!(r.isDone() && s.isDone()) && System.nanoTime() < deadline) {
                try {
                    c01.progress();
                } catch (IOException e) {
                    failed = e;
                }
            }
            assertTrue(s.isDone() && s.error() != null, "the send to the departed peer did not fail within 30 s: " + s.error());
            // A receive is a worker-wide tag match that no endpoint error completes: the connection fails it with the send.
            assertTrue(r.isDone(), "the receive from the departed peer is still pending after the send failed: " + s.error());
            assertTrue(String.valueOf(r.error()).contains("the endpoint to rank 1") && String.valueOf(r.error()).contains("failed"),
                    String.valueOf(r.error()));
            assertTrue(failed != null && failed.getMessage().contains("the peer or the link to it failed"), String.valueOf(failed));
            // and every later progress call says so too, idle as the worker now is (no pass skips the failure)
            for (int i = 0; i < 20; i++) {
                IOException again = assertThrows(IOException.class, c01::progress, "progress call " + i + " after the failure");
                assertTrue(again.getMessage().contains("the peer or the link to it failed"), again.getMessage());
            }
        }
    }
}
