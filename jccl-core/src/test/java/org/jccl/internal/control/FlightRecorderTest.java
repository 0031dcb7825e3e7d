package org.jccl.internal.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The ring keeps the last N operations with their states, and finds the one a rank waits in. */
class FlightRecorderTest {

    @Test
    void keepsTheLastOperationsAndTheCurrentOne() {
        FlightRecorder r = new FlightRecorder(4);
        assertNull(r.current());
        for (long s = 0; s < 6; s++) {
            r.issued(s, "allReduce", 8 * s, "float32", "sum", -1, "TCP");
            r.started(s);
            r.finished(s, s != 3, s % 2 == 0 ? "ring" : "rd");
        }
        r.issued(6, "broadcast", 64, "int8", null, 2, "TCP");
        r.issued(7, "barrier", 0, null, null, -1, "TCP");
        r.started(6);
        List<FlightRecorder.Entry> snap = r.snapshot();
        assertEquals(List.of(4L, 5L, 6L, 7L), snap.stream().map(FlightRecorder.Entry::seq).toList());
        assertEquals(FlightRecorder.State.DONE, snap.get(0).state());
        assertEquals("ring", snap.get(0).algorithm());
        assertEquals(32, snap.get(0).bytes());
        assertEquals(FlightRecorder.State.RUNNING, snap.get(2).state());
        assertEquals(2, snap.get(2).rootOrPeer());
        assertEquals(FlightRecorder.State.QUEUED, snap.get(3).state());
        assertNull(r.entry(3), "overwritten");
        assertEquals(6, r.current().seq());
        assertEquals(6, r.ops());
        assertEquals(1, r.errors());
        assertEquals(7, r.lastIssued());
        assertEquals(5, r.lastFinished());
        assertTrue(r.epochMs(snap.get(0).endNs()) > 1_600_000_000_000L);
    }

    @Test
    void anOperationStartsWhenIssuedOrWhenItsPredecessorFinishedWhicheverIsLater() throws InterruptedException {
        FlightRecorder r = new FlightRecorder(8);
        r.issued(0, "allReduce", 8, "float32", "sum", -1, "TCP");
        r.issued(1, "allReduce", 8, "float32", "sum", -1, "TCP"); // queued behind #0
        r.started(0);
        Thread.sleep(20);
        r.finished(0, true, "ring");
        r.started(1);
        FlightRecorder.Entry e0 = r.entry(0);
        FlightRecorder.Entry e1 = r.entry(1);
        assertEquals(e0.issuedNs(), e0.startNs());
        assertEquals(e0.endNs(), e1.startNs(), "#1 waited for #0");
        assertTrue(e1.startNs() - e1.issuedNs() >= 20_000_000L, e1.toString());
        r.finished(1, true, "ring");
        Thread.sleep(20);
        r.issued(2, "barrier", 0, null, null, -1, "TCP"); // after an idle gap
        r.started(2);
        FlightRecorder.Entry e2 = r.entry(2);
        assertEquals(e2.issuedNs(), e2.startNs());
        assertTrue(e2.startNs() - r.entry(1).endNs() >= 20_000_000L, e2.toString());
    }
}
