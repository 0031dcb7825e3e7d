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
            r.issued(s, "allReduce", 8 * s, "float32", "sum", -1, "TCP", true, false);
            r.started(s);
            r.finished(s, s != 3, s % 2 == 0 ? "ring" : "rd");
        }
        r.issued(6, "broadcast", 64, "int8", null, 2, "TCP", true, false);
        r.issued(7, "barrier", 0, null, null, -1, "TCP", true, false);
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
        r.issued(0, "allReduce", 8, "float32", "sum", -1, "TCP", true, false);
        r.issued(1, "allReduce", 8, "float32", "sum", -1, "TCP", true, false); // queued behind #0
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
        r.issued(2, "barrier", 0, null, null, -1, "TCP", true, false); // after an idle gap
        r.started(2);
        FlightRecorder.Entry e2 = r.entry(2);
        assertEquals(e2.issuedNs(), e2.startNs());
        assertTrue(e2.startNs() - r.entry(1).endNs() >= 20_000_000L, e2.toString());
    }

    @Test
    void aSmallInlineOperationIsTimedOnlyWhenItWaitsFailsOrIsSeenRunningByTheWatchdog() {
        FlightRecorder r = new FlightRecorder(8);
        // finished within its first polls: no clock read at all, and the dump says so
        r.issued(0, "allReduce", 8, "float32", "sum", -1, "SHM", false, true);
        FlightRecorder.Entry running = r.current();
        assertEquals(FlightRecorder.State.RUNNING, running.state());
        assertEquals(0, running.elapsedMs(System.nanoTime()), "an unstamped running operation has just started");
        r.finished(0, true, "shared");
        FlightRecorder.Entry e0 = r.entry(0);
        assertEquals(FlightRecorder.State.DONE, e0.state());
        assertEquals(0, e0.issuedNs() | e0.startNs() | e0.endNs(), e0.toString());
        assertEquals(-1L, r.toMap(e0).get("duration_us"));
        assertEquals(0L, r.toMap(e0).get("issued_ms"));

        // its wait's first clock read stamps it; then it reads the clock when it finishes
        r.issued(1, "allReduce", 8, "float32", "sum", -1, "SHM", false, true);
        long t = System.nanoTime();
        r.stamp(1, t);
        r.stamp(1, t + 5); // only the first stamp counts
        assertEquals(t, r.current().startNs());
        assertEquals(t, r.current().issuedNs());
        r.finished(1, true, "shared");
        FlightRecorder.Entry e1 = r.entry(1);
        assertTrue(e1.endNs() >= t, e1.toString());

        // the watchdog stamps what it finds running unstamped, and nothing else
        r.issued(2, "allReduce", 8, "float32", "sum", -1, "SHM", false, true);
        long w = System.nanoTime();
        assertEquals(w, r.currentStamped(w).startNs());
        assertEquals(w, r.currentStamped(w + 1_000_000).startNs());
        r.finished(2, true, "shared");

        // a failure always has an end time
        r.issued(3, "allReduce", 8, "float32", "sum", -1, "SHM", false, true);
        r.finished(3, false, "shared");
        assertTrue(r.entry(3).endNs() != 0);
        assertEquals(1, r.errors());

        // a queued (timed) operation is never re-stamped
        r.issued(4, "barrier", 0, null, null, -1, "SHM", true, false);
        long issued = r.entry(4).issuedNs();
        r.stamp(4, issued + 99); // not running yet
        r.started(4);
        assertEquals(issued, r.entry(4).issuedNs());
        assertTrue(r.entry(4).startNs() >= issued && r.entry(4).startNs() != issued + 99);
    }
}
