package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class PerfSizeSweepTest {

    @Test
    void parsesSizesLikeNcclTests() {
        assertEquals(8, SizeSweep.parseSize("8", "-b"));
        assertEquals(1024, SizeSweep.parseSize("1K", "-b"));
        assertEquals(1024, SizeSweep.parseSize("1k", "-b"));
        assertEquals(32L << 20, SizeSweep.parseSize("32M", "-b"));
        assertEquals(8L << 30, SizeSweep.parseSize("8G", "-b"));
        assertEquals(8L << 30, SizeSweep.parseSize("8g", "-b"));
        assertEquals(1536, SizeSweep.parseSize("1.5K", "-b"), "fraction scaled, then truncated");
        assertEquals(1000, SizeSweep.parseSize("1e3", "-b"));
        assertEquals(32L << 20, SizeSweep.parseSize("32MB", "-b"), "a B after the unit is ignored, as by nccl-tests");
        assertEquals(32L << 20, SizeSweep.parseSize("32MiB", "-b"));
        assertEquals(0, SizeSweep.parseSize("0", "-b"));
    }

    @Test
    void rejectsBadSizesNamingTheFlag() {
        for (String bad : new String[] {"", "abc", "-1", "32X", "1.2.3", "M", "12 34"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SizeSweep.parseSize(bad, "-e/--maxbytes"),
                    bad);
            assertTrue(e.getMessage().contains("-e/--maxbytes"), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> SizeSweep.parseSize("9000000000G", "-e"));
    }

    @Test
    void multiplicativeSweep() {
        // all_reduce_perf -b 8 -e 64M -f 4
        List<Long> s = SizeSweep.sizes(8, 64L << 20, 1 << 20, 4);
        assertEquals(List.of(8L, 32L, 128L, 512L, 2048L, 8192L, 32768L, 131072L, 524288L, 2097152L, 8388608L, 33554432L), s);
        // the anchor command: -b 8 -e 8G -f 4 ends at 8G exactly
        List<Long> big = SizeSweep.sizes(8, 8L << 30, 1 << 20, 4);
        assertEquals(16, big.size());
        assertEquals(8589934592L, big.getLast());
        assertEquals(List.of(8L, 16L, 32L, 64L), SizeSweep.sizes(8, 64, 1, 2));
    }

    @Test
    void additiveSweepWhenFactorIsOneOrLess() {
        assertEquals(List.of(1024L, 2048L, 3072L, 4096L), SizeSweep.sizes(1024, 4096, 1024, 1));
        assertEquals(List.of(1024L, 2048L, 3072L, 4096L), SizeSweep.sizes(1024, 4096, 1024, 0));
        assertEquals(List.of(100L, 250L, 400L), SizeSweep.sizes(100, 500, 150, 1), "stops at the last size <= max");
        // nccl-tests defaults: -b 32M -e 32M -i 1M -> one size
        assertEquals(List.of(32L << 20), SizeSweep.sizes(32L << 20, 32L << 20, 1L << 20, 1));
        assertEquals(List.of(0L, 10L, 20L), SizeSweep.sizes(0, 20, 10, 1));
    }

    @Test
    void singleSizeWithZeroStepDoesNotLoop() {
        assertEquals(List.of(64L), SizeSweep.sizes(64, 64, 0, 1));
        assertEquals(List.of(0L), SizeSweep.sizes(0, 0, 0, 4));
    }

    @Test
    void endlessSweepsAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> SizeSweep.sizes(0, 1024, 1, 2), "0 * factor stays 0");
        assertThrows(IllegalArgumentException.class, () -> SizeSweep.sizes(8, 1024, 0, 1), "step 0 never grows");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SizeSweep.sizes(64, 8, 1, 2));
        assertTrue(e.getMessage().contains("64 > 8"), e.getMessage());
    }

    @Test
    void sweepStopsBeforeOverflow() {
        List<Long> s = SizeSweep.sizes(1L << 61, Long.MAX_VALUE, 1, 4);
        assertEquals(List.of(1L << 61), s);
    }

    @Test
    void warmupDoublesFromMinToMax() {
        assertEquals(List.of(8L, 16L, 32L, 64L), SizeSweep.warmupSizes(8, 100));
        assertEquals(List.of(0L, 1L, 2L, 4L), SizeSweep.warmupSizes(0, 4));
        assertEquals(List.of(32L << 20), SizeSweep.warmupSizes(32L << 20, 32L << 20));
    }
}
