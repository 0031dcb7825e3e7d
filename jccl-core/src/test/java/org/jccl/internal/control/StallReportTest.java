package org.jccl.internal.control;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.jccl.spi.PeerInfo;
import org.junit.jupiter.api.Test;

/** The stall line, built from every rank's state: laggards, mismatches, ranks that passed, left or did not answer. */
class StallReportTest {

    private static PeerInfo[] peers(int n) {
        PeerInfo[] p = new PeerInfo[n];
        for (int r = 0; r < n; r++) {
            p[r] = new PeerInfo(r, "host" + (char) ('a' + r), 800 + r, "h", "j", Map.of());
        }
        return p;
    }

    private static RankState waiting(int r, long seq, String name, long bytes, String type, String redop, int root) {
        return new RankState(r, seq, name, seq - 1, seq, name, bytes, type, redop, root, true, 30_000, seq, 0, 0, 0);
    }

    private static RankState idle(int r, long last, String lastName) {
        return new RankState(r, last, lastName, last, -1, "", 0, "", "", -1, false, 0, last + 1, 0, 0, 0);
    }

    private static int[] answered(int n) {
        int[] h = new int[n];
        Arrays.fill(h, ControlWire.HOW_ANSWERED);
        return h;
    }

    @Test
    void namesTheRankThatIsBehind() {
        RankState[] s = new RankState[8];
        for (int r = 0; r < 8; r++) {
            s[r] = r == 3 ? idle(3, 41, "broadcast") : waiting(r, 42, "allReduce", 4096, "float32", "sum", -1);
        }
        assertEquals("all_reduce #42 stalled 30 s: ranks 0-2,4-7 wait; rank 3 (host hostd, pid 803) last at #41 broadcast",
                StallReport.line("allReduce", 42, 30_000, s, answered(8), peers(8)));
    }

    @Test
    void namesRanksThatCalledAnotherCollectiveAtTheSameSequenceNumber() {
        RankState[] s = new RankState[4];
        for (int r = 0; r < 4; r++) {
            s[r] = r == 2 ? waiting(2, 7, "broadcast", 4096, "float32", "", 0) : waiting(r, 7, "allReduce", 4096, "float32", "sum", -1);
        }
        assertEquals("all_reduce #7 stalled 2.5 s: mismatched collectives at #7: ranks 0-1,3 called all_reduce 4096 B float32 sum,"
                        + " rank 2 (host hostc, pid 802) called broadcast 4096 B float32 root 0",
                StallReport.line("allReduce", 7, 2_500, s, answered(4), peers(4)));
    }

    @Test
    void differentCountsRootsAndTypesAreMismatchesToo() {
        RankState[] s = {waiting(0, 3, "broadcast", 64, "int8", "", 0), waiting(1, 3, "broadcast", 64, "int8", "", 1),
            waiting(2, 3, "broadcast", 64, "int8", "", 0)};
        assertEquals("broadcast #3 stalled 3.0 s: mismatched collectives at #3: ranks 0,2 called broadcast 64 B int8 root 0,"
                        + " rank 1 (host hostb, pid 801) called broadcast 64 B int8 root 1",
                StallReport.line("broadcast", 3, 3_000, s, answered(3), peers(3)));
    }

    @Test
    void ranksThatPassedLeftOrAreSilentAreNamed() {
        RankState[] s = new RankState[6];
        s[0] = waiting(0, 5, "allGather", 80, "int32", "", -1);
        s[1] = waiting(1, 5, "allGather", 80, "int32", "", -1);
        s[2] = new RankState(2, 6, "barrier", 5, 6, "barrier", 0, "", "", -1, true, 100, 6, 0, 0, 0);
        s[3] = idle(3, -1, "");
        int[] how = answered(6);
        how[4] = ControlWire.HOW_SILENT;
        how[5] = ControlWire.HOW_CLOSED;
        assertEquals("all_gather #5 stalled 12 s: ranks 0-1 wait; rank 2 (host hostc, pid 802) passed it, waits at #6 barrier;"
                        + " rank 3 (host hostd, pid 803) has issued no operation; rank 4 (host hoste, pid 804) did not answer;"
                        + " rank 5 (host hostf, pid 805) closed its communicator",
                StallReport.line("allGather", 5, 12_400, s, how, peers(6)));
    }

    @Test
    void largeGroupsAreRanges() {
        assertEquals("0-2,4-7,9", StallReport.ranges(List.of(0, 1, 2, 4, 5, 6, 7, 9)));
        assertEquals("ranks 3-7", StallReport.who(List.of(3, 4, 5, 6, 7), peers(8)));
    }
}
