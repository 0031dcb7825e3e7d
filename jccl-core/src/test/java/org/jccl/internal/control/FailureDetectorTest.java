package org.jccl.internal.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.internal.control.FailureDetector.Cause;
import org.jccl.internal.control.FailureDetector.Link;
import org.jccl.internal.control.FailureDetector.LingerEnd;
import org.jccl.internal.control.FailureDetector.Suspect;
import org.junit.jupiter.api.Test;

/**
 * The failure detector's rules, driven with synthetic timestamps: no sockets, no threads, no clock.
 * T = 8 s throughout unless a test says otherwise: heartbeats every 2 s, a grace of 1 s after a
 * lost connection, ticks every 250 ms, a tick gap over 4 s forgives the silence.
 */
class FailureDetectorTest {

    private static final long S = TimeUnit.SECONDS.toNanos(1);
    private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final long T = 8 * S;
    /** Any base, far from 0, as System.nanoTime() values are; the detector only subtracts. */
    private static final long T0 = 123_456_789_000L;

    /** Ticks every 250 ms from {@code from} (exclusive) up to {@code to} (inclusive); returns the first suspect, or null. */
    private static Suspect tickUntil(FailureDetector d, long from, long to, List<Integer> heartbeats) {
        for (long t = from + 250 * MS; t - to <= 0; t += 250 * MS) {
            Suspect s = d.tick(t, heartbeats::add);
            if (s != null) {
                return s;
            }
        }
        return null;
    }

    /** A rank other than the hub: its one link is to rank 0. */
    private static FailureDetector rank(int r, int size) {
        FailureDetector d = new FailureDetector(r, size, T, T0);
        d.connected(0, T0);
        return d;
    }

    /** The hub of {@code size} ranks, linked to ranks 1..size-1. */
    private static FailureDetector hub(int size) {
        FailureDetector d = new FailureDetector(0, size, T, T0);
        for (int r = 1; r < size; r++) {
            d.connected(r, T0);
        }
        return d;
    }

    @Test
    void derivedTimesFollowThePeerTimeout() {
        FailureDetector d = rank(1, 2);
        assertEquals(2 * S, d.heartbeatNs(), "heartbeats every T/4");
        assertEquals(1 * S, d.graceNs(), "grace min(1 s, T/4)");
        assertEquals(250, d.tickMs(), "tick T/8, at most 250 ms");
        FailureDetector fast = new FailureDetector(1, 2, 2 * S, T0);
        assertEquals(500 * MS, fast.graceNs(), "grace min(1 s, T/4) with T = 2 s");
        assertEquals(250, FailureDetector.tickMs(2 * S), "2 s / 8 = 250 ms");
        assertEquals(125, FailureDetector.tickMs(1 * S));
        assertEquals(20, FailureDetector.tickMs(100 * MS), "at least 20 ms");
        assertEquals(250, FailureDetector.tickMs(60 * S));
    }

    @Test
    void silenceOfExactlyTheTimeoutIsNoVerdictOneNanosecondMoreIsATimeout() {
        FailureDetector d = rank(1, 2);
        List<Integer> hb = new ArrayList<>();
        assertNull(tickUntil(d, T0, T0 + T, hb), "silent for T, not more: no verdict");
        assertEquals(Link.OPEN, d.link(0));
        Suspect s = d.tick(T0 + T + 1, hb::add);
        assertNotNull(s, "silent for T + 1 ns: a timeout of the hub");
        assertEquals(0, s.peer());
        assertEquals(Cause.SILENT, s.cause());
        assertEquals(T + 1, s.silentNs());
        // Heartbeats went out meanwhile: at T/4, then every T/4 after each one recorded as sent (none recorded here: every tick).
        assertTrue(hb.size() > 4 && hb.stream().allMatch(r -> r == 0), hb.toString());
    }

    @Test
    void anyFrameHeardRestartsTheTimeout() {
        FailureDetector d = rank(2, 4);
        List<Integer> hb = new ArrayList<>();
        assertNull(tickUntil(d, T0, T0 + 7 * S, hb));
        d.heard(0, T0 + 7 * S);
        assertNull(tickUntil(d, T0 + 7 * S, T0 + 15 * S, hb), "heard at 7 s: silent only 8 s at 15 s");
        Suspect s = d.tick(T0 + 15 * S + 1, hb::add);
        assertEquals(new Suspect(0, Cause.SILENT, T + 1), s);
    }

    @Test
    void heartbeatsAreDueAQuarterOfTheTimeoutAfterTheLastFrameSent() {
        FailureDetector d = hub(3);
        List<Integer> hb = new ArrayList<>();
        d.tick(T0 + 2 * S - 1, hb::add);
        assertEquals(List.of(), hb, "nothing sent for just under T/4: no heartbeat");
        d.tick(T0 + 2 * S, hb::add);
        assertEquals(List.of(1, 2), hb, "T/4 without sending: a heartbeat to each rank, in rank order");
        d.sent(1, T0 + 2 * S);
        d.sent(2, T0 + 2 * S + 100 * MS);
        hb.clear();
        d.tick(T0 + 4 * S, hb::add);
        assertEquals(List.of(1), hb, "rank 2 was written to 100 ms later");
        d.tick(T0 + 4 * S + 100 * MS, hb::add);
        assertEquals(List.of(1, 1, 2), hb, "rank 1 was never recorded as sent again, rank 2 now due");
    }

    @Test
    void aLostConnectionWithoutGoodbyeIsAFailureAfterTheGraceAndOnlyOnce() {
        FailureDetector d = hub(3);
        long lost = T0 + 3 * S;
        assertNull(tickUntil(d, T0, lost, new ArrayList<>()));
        d.lost(2, lost);
        assertEquals(Link.DEAD, d.link(2));
        assertNull(d.tick(lost + S - 1, r -> { }), "within the grace: a data transport may report it first");
        Suspect s = d.tick(lost + S, r -> { });
        assertEquals(2, s.peer());
        assertEquals(Cause.CLOSED_WITHOUT_GOODBYE, s.cause());
        assertNull(d.tick(lost + S + 250 * MS, r -> { }), "declared once");
        d.lost(2, lost + 2 * S);
        assertNull(d.tick(lost + 4 * S, r -> { }), "a second loss of a dead link is no news");
    }

    @Test
    void aGoodbyeOrAnAbortBeforeTheLossMakesItHarmless() {
        FailureDetector d = hub(4);
        d.saidGoodbye(1);
        d.lost(1, T0 + S);
        d.aborted(2);
        d.lost(2, T0 + S);
        assertEquals(Link.CLOSED, d.link(1));
        assertEquals(Link.ABORTED, d.link(2));
        List<Integer> hb = new ArrayList<>();
        for (long t = T0 + 250 * MS; t - (T0 + 30 * S) <= 0; t += 250 * MS) {
            d.heard(3, t);
            d.sent(3, t);
            assertNull(d.tick(t, hb::add), "at " + (t - T0) / MS + " ms");
        }
        assertEquals(List.of(), hb, "no heartbeats to ranks that left, none due to the rank heard and written every tick");
        assertEquals(List.of(3), d.openPeers());
    }

    @Test
    void aTickGapOverHalfTheTimeoutForgivesTheSilenceItCouldNotHear() {
        FailureDetector d = rank(1, 2);
        assertNull(tickUntil(d, T0, T0 + 3 * S, new ArrayList<>()));
        // The control thread was not scheduled for 20 s (a GC pause): the hub's silence is its own.
        long resumed = T0 + 23 * S;
        assertNull(d.tick(resumed, r -> { }), "a gap over T/2 forgives");
        assertNull(tickUntil(d, resumed, resumed + T, new ArrayList<>()), "the silence counts from the resumed tick");
        assertEquals(new Suspect(0, Cause.SILENT, T + 1), d.tick(resumed + T + 1, r -> { }));
    }

    @Test
    void aTickGapOfHalfTheTimeoutForgivesNothing() {
        FailureDetector d = rank(1, 2);
        assertNull(d.tick(T0 + 4 * S, r -> { }), "a gap of exactly T/2");
        assertNull(d.tick(T0 + T, r -> { }), "another gap of exactly T/2, silent for T");
        assertEquals(new Suspect(0, Cause.SILENT, T + 1), d.tick(T0 + T + 1, r -> { }));
    }

    @Test
    void aPeerThatReadsNothingCountsAsSilent() {
        FailureDetector d = hub(2);
        d.heard(1, T0 + S);
        d.backlogged(1, T0 + S + 10 * MS);
        Suspect s = d.tick(T0 + S + 20 * MS, r -> { });
        assertNotNull(s, "its queue passed the bound: silent for the whole timeout");
        assertEquals(Cause.SILENT, s.cause());
        assertEquals(T + 1 + 10 * MS, s.silentNs());
    }

    @Test
    void oneVerdictPerTickTheFirstInRankOrderAfterTheHeartbeatsBeforeIt() {
        FailureDetector d = hub(4);
        List<Integer> hb = new ArrayList<>();
        for (long t = T0 + 250 * MS; t - (T0 + T) <= 0; t += 250 * MS) {
            d.heard(1, t);
            assertNull(d.tick(t, hb::add));
        }
        hb.clear();
        Suspect s = d.tick(T0 + T + 1, hb::add);
        assertEquals(new Suspect(2, Cause.SILENT, T + 1), s, "ranks 2 and 3 are silent: rank 2 first");
        assertEquals(List.of(1), hb, "rank 1 got its heartbeat first; rank 3 was not reached");
        assertEquals(new Suspect(2, Cause.SILENT, T + 2), d.tick(T0 + T + 2, hb::add),
                "a silence is not forgotten once named (the control plane stops at its first verdict)");
    }

    @Test
    void aSilentHubIsNamedByThisRanksOwnTimer() {
        FailureDetector d = rank(2, 3);
        long hbPlusGrace = d.heartbeatNs() + d.graceNs();
        assertEquals(Long.MIN_VALUE, d.silentHubVerdictDue(T0, T0 + hbPlusGrace), "heard within T/4 + grace: not silent");
        long now = T0 + hbPlusGrace + 1;
        long due = T0 + T + d.graceNs() + 2 * 250 * MS;
        assertEquals(due, d.silentHubVerdictDue(now, now), "when this rank's timer fires: heard + T + grace + 2 ticks");
        assertEquals(T0 + T, d.silentHubVerdictDue(T0, now), "at most T after the break was seen");
        d.heard(0, now);
        assertEquals(Long.MIN_VALUE, d.silentHubVerdictDue(now, now + S), "heard again");
        FailureDetector hub = hub(3);
        assertEquals(Long.MIN_VALUE, hub.silentHubVerdictDue(T0, T0 + 60 * S), "the hub has no hub");
    }

    @Test
    void theHubLingersUntilEveryLinkClosedOrTheLingerPassed() {
        FailureDetector d = hub(4);
        assertEquals(LingerEnd.GO_ON, d.lingerCheck(T0), "not lingering");
        assertTrue(!d.lingering());
        long closed = T0 + S;
        d.startLinger(closed, 300 * S);
        assertTrue(d.lingering());
        assertEquals(LingerEnd.GO_ON, d.lingerCheck(closed));
        d.saidGoodbye(1);
        d.lost(2, closed + S); // a crash: no longer open either
        assertEquals(LingerEnd.GO_ON, d.lingerCheck(closed + 300 * S - 1), "rank 3 still open, the linger not over");
        assertEquals(LingerEnd.EXPIRED, d.lingerCheck(closed + 300 * S));
        assertEquals(List.of(3), d.openPeers());
        d.aborted(3);
        assertEquals(LingerEnd.ALL_CLOSED, d.lingerCheck(closed + 2 * S), "no open link: stop at once");
        // Lingering, the hub still supervises: the crashed rank 2 is declared after the grace.
        assertEquals(new Suspect(2, Cause.CLOSED_WITHOUT_GOODBYE, 3 * S), d.tick(closed + 2 * S, r -> { }));
    }
}
