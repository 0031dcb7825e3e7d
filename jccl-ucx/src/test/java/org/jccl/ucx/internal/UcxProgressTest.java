package org.jccl.ucx.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.spi.Connection;
import org.jccl.spi.P2pRequest;
import org.jccl.testing.TestTransportContext;
import org.jccl.ucx.UcxTests;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A connection's progress skips testing its requests when nothing happened on the worker since it last tested them
 * (UcxConnection#progress). The worker is shared by all of a rank's connections, so "nothing happened" must be the
 * worker's: here rank 0's progress on its connection to rank 1 takes in rank 2's message, and the very next progress
 * call on rank 0's connection to rank 2, whose worker call finds nothing new, must still report that receive done.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class UcxProgressTest {
    private UcxRanks ranks;
    private Connection[][] c;

    @BeforeEach
    void open() throws IOException {
        UcxTests.assumeUcx();
        ranks = UcxRanks.open(3);
        c = ranks.c;
    }

    @AfterEach
    void close() {
        if (ranks != null) {
            ranks.close();
        }
    }

    private void drive(List<P2pRequest> reqs) throws IOException {
        TestTransportContext.drive("", 20_000, List.of(c[0][1], c[0][2], c[1][0], c[2][0]), reqs);
    }

    @Test
    void aReceiveCompletedByAnotherConnectionsProgressIsReportedByTheNextProgressOfItsOwn() throws IOException {
        try (Arena a = Arena.ofShared()) {
            // Wire-up both ways on both pairs first, so that later worker events are the message under test.
            drive(List.of(c[1][0].send(a.allocate(8)), c[0][1].recv(a.allocate(8)), c[0][1].send(a.allocate(8)), c[1][0].recv(a.allocate(8)),
                    c[2][0].send(a.allocate(8)), c[0][2].recv(a.allocate(8)), c[0][2].send(a.allocate(8)), c[2][0].recv(a.allocate(8))));
            for (int i = 0; i < 100; i++) {
                c[0][1].progress();
                c[0][2].progress();
            }
            MemorySegment dst = a.allocate(64);
            P2pRequest recv = c[0][2].recv(dst);
            for (int i = 0; i < 3; i++) {
                c[0][2].progress(); // its requests tested, nothing arrived: later idle calls may skip the tests
            }
            assertFalse(recv.isDone(), "the receive completed before rank 2 sent anything");
            MemorySegment src = a.allocate(64);
            for (int i = 0; i < 64; i++) {
                src.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 3 + 1));
            }
            P2pRequest send = c[2][0].send(src);
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!send.isDone() && System.nanoTime() < deadline) {
                c[2][0].progress();
            }
            assertTrue(send.isDone() && send.error() == null, "rank 2's send did not complete in 10 s: " + send.error());
            // Rank 0's worker takes the message in through the connection to rank 1 (which has nothing pending itself).
            int work = 0;
            while (work == 0 && System.nanoTime() < deadline) {
                work = c[0][1].progress();
            }
            assertTrue(work > 0, "rank 0's worker reported no work within 10 s of rank 2's send");
            assertFalse(recv.isDone(), "only the receive's own connection completes it");
            int own = c[0][2].progress();
            assertTrue(recv.isDone(), "one progress call on the receive's own connection did not find it done");
            assertTrue(own > 0, "progress found the receive done but reported no work: " + own);
            assertNull(recv.error());
            assertArrayEquals(src.toArray(ValueLayout.JAVA_BYTE), dst.toArray(ValueLayout.JAVA_BYTE));
        }
    }
}
