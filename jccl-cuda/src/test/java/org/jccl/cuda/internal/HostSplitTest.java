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
}
