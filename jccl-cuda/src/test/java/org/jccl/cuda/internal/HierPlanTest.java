package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.jccl.cuda.internal.HierPlan.Form;
import org.jccl.cuda.internal.HierPlan.Step;
import org.junit.jupiter.api.Test;

/** The chunk plans: steps cover the vector exactly once, slices divide by L, sizes follow the settings. */
class HierPlanTest {

    private static void covers(List<Step> steps, long count) {
        long next = 0;
        for (int i = 0; i < steps.size(); i++) {
            Step s = steps.get(i);
            assertEquals(i, s.index());
            assertEquals(next, s.offset(), "steps are contiguous: " + steps);
            assertTrue(s.count() > 0);
            next += s.count();
        }
        assertEquals(count, next, "steps cover the vector");
    }

    @Test
    void stepSize() {
        assertEquals(HierPlan.MIN_STEP, HierPlan.stepBytes(1 << 20, 8 << 20, 4), "1 MB in 4 steps of 256 KiB");
        assertEquals(4 << 20, HierPlan.stepBytes(16 << 20, 8 << 20, 4));
        assertEquals(8 << 20, HierPlan.stepBytes(1L << 30, 8 << 20, 4), "capped at JCCL_CUDA_HIER_CHUNK");
        assertEquals(4096, HierPlan.stepBytes(1 << 20, 4096, 4), "a chunk setting below the minimum wins");
    }

    @Test
    void sliceStepsDivideByLocalAndTailIsWhole() {
        long count = 1_000_003; // odd, not a multiple of 4
        List<Step> steps = HierPlan.allReduce(count, 4, 4, true, 1 << 20, 4, 128 << 10);
        covers(steps, count);
        Step last = steps.get(steps.size() - 1);
        assertEquals(Form.WHOLE, last.form());
        assertEquals(count % 4, last.count());
        for (Step s : steps.subList(0, steps.size() - 1)) {
            assertEquals(Form.SLICE, s.form());
            assertEquals(0, s.count() % 4, "a slice step splits into L equal slices");
        }
        assertEquals(0, steps.get(0).count() * 4 / 4 % 256, "full steps are whole slices of 256 bytes");
    }

    @Test
    void smallMessagesOneHostPerGpuAndUnevenHosts() {
        List<Step> small = HierPlan.allReduce(2, 4, 2, true, 8 << 20, 4, 128 << 10);
        assertEquals(List.of(new Step(0, Form.WHOLE, 0, 2)), small, "8 bytes: one WHOLE step");
        List<Step> fourByOne = HierPlan.allReduce(1 << 20, 4, 1, true, 8 << 20, 4, 0);
        covers(fourByOne, 1 << 20);
        assertTrue(fourByOne.stream().allMatch(s -> s.form() == Form.WHOLE));
        assertEquals(4, fourByOne.size(), "4 MB in 4 steps of 1 MB");
        List<Step> uneven = HierPlan.allReduce(777_777, 2, 2, false, 8 << 20, 4, 0);
        covers(uneven, 777_777);
        assertTrue(uneven.stream().allMatch(s -> s.form() == Form.LEADER));
    }

    @Test
    void blockSteps() {
        List<Step> steps = HierPlan.blocks(100_001, 4, 8, 1 << 20, 4, Form.SLICE);
        covers(steps, 100_001);
        assertTrue(steps.get(0).count() * 4 * 8 <= 1 << 20, "a step moves at most the chunk over all blocks");
        assertEquals(0, steps.get(0).count() % 64, "aligned to 256 bytes");
    }
}
