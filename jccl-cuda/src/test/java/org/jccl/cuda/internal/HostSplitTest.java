package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The split of a GPU communicator by host identity: 2x2, interleaved, 4x1, uneven 2+1, one host. */
class HostSplitTest {

    @Test
    void twoByTwo() {
        HostSplit s = HostSplit.of(3, List.of("a", "a", "b", "b"));
        assertTrue(s.multiHost());
        assertTrue(s.equalHosts());
        assertEquals(2, s.hosts());
        assertEquals(1, s.myHost());
        assertEquals(1, s.myLocal());
        assertEquals(2, s.localSize());
        assertArrayEquals(new int[] {1, 3}, s.crossGroup());
        assertArrayEquals(new int[] {1, 3}, s.localColorKey());
        assertArrayEquals(new int[] {1, 1}, s.crossColorKey());
        assertEquals("2 hosts: 0,1 | 2,3", s.describe());
        assertEquals("local group [2, 3] (host 1 of 2), cross-host group [1, 3] (local index 1)", s.groups());
    }

    @Test
    void interleavedPlacementKeysCrossRanksByHost() {
        // hosts by lowest rank: a = {0, 3} is host 0, b = {1, 2} is host 1; rank 2 is b's first rank
        HostSplit s = HostSplit.of(2, List.of("a", "b", "b", "a"));
        assertEquals(1, s.myHost());
        assertEquals(1, s.myLocal());
        assertArrayEquals(new int[] {3, 2}, s.crossGroup(), "by host index, not by rank");
        assertArrayEquals(new int[] {1, 1}, s.crossColorKey());
        assertEquals(3, s.member(0, 1));
    }

    @Test
    void fourByOneAndOneHost() {
        HostSplit s = HostSplit.of(2, List.of("a", "b", "c", "d"));
        assertTrue(s.equalHosts());
        assertEquals(1, s.localSize());
        assertArrayEquals(new int[] {0, 1, 2, 3}, s.crossGroup());
        HostSplit one = HostSplit.of(1, List.of("x", "x", "x"));
        assertFalse(one.multiHost());
    }

    @Test
    void unevenHosts() {
        HostSplit s = HostSplit.of(1, List.of("a", "a", "b"));
        assertFalse(s.equalHosts());
        assertArrayEquals(new int[] {1}, s.crossGroup(), "local index 1 exists on host a only");
        assertArrayEquals(new int[] {0, 2}, HostSplit.of(2, List.of("a", "a", "b")).crossGroup());
        assertTrue(s.groups().contains("uneven hosts: leader forms"));
    }

    /** The messages of the first GPU run's kill check, from rank 1's cross-host group [1, 3]. */
    @Test
    void groupMessagesNameWorldRanks() {
        int[] cross = HostSplit.of(1, List.of("a", "a", "b", "b")).crossGroup();
        assertArrayEquals(new int[] {1, 3}, cross);
        assertEquals("rank 3 (host vm, pid 6270) exited or crashed: its control connection closed without a goodbye",
                HostSplit.inWorldRanks("rank 1 (host vm, pid 6270) exited or crashed: its control connection closed without a goodbye", cross));
        assertEquals("rank 1: allReduce #8354 failed: link to rank 3 (vm pid 6270) broke: TCP connection from rank 1 to rank 3 (socket 0 of 1);"
                        + " rank 0 of 2",
                HostSplit.inWorldRanks("rank 0: allReduce #8354 failed: link to rank 1 (vm pid 6270) broke: TCP connection from rank 0 to rank 1"
                        + " (socket 0 of 1); rank 0 of 2", cross));
        // a rank outside the group's numbering is left as it is
        assertEquals("rank 7 and ranks", HostSplit.inWorldRanks("rank 7 and ranks", cross));
        org.jccl.JcclException x = HostSplit.inWorldRanks(new org.jccl.PeerFailedException(1, "rank 1 exited", null), cross);
        assertTrue(x instanceof org.jccl.PeerFailedException p && p.peerRank() == 3, x.toString());
        assertEquals("rank 3 exited", x.getMessage());
        assertEquals(3, x.peer());
        // the local group [2, 3] of host b: local rank 0 is rank 2
        assertEquals("rank 2's kernel timed out", HostSplit.inWorldRanks("rank 0's kernel timed out",
                HostSplit.of(3, List.of("a", "a", "b", "b")).localGroup()));
    }
}
