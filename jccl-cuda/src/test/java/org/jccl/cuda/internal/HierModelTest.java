package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.jccl.cuda.internal.HierPlan.Form;
import org.junit.jupiter.api.Test;

/** What the model says 64 hosts x 8 GPUs (8 NICs per host, 400 Gb/s each) would pick, and why. */
class HierModelTest {
    private static final long CHUNK = 8 << 20;

    @Test
    void sixtyFourByEight() {
        HierModel m = HierModel.cluster(64, 8, 8);
        HierModel.Choice small = m.choose(8, CHUNK, 4);
        assertEquals(Form.WHOLE, small.form(), small.why());
        assertEquals("rd", small.crossAlgo(), "8 bytes among 64 hosts: 6 doubling steps beat 126 ring steps: " + small.why());
        HierModel.Choice big = m.choose(1L << 30, CHUNK, 4);
        assertEquals(Form.SLICE, big.form(), big.why());
        assertEquals(128, big.steps());
        assertTrue(big.crossAlgo().equals("ring") || big.crossAlgo().equals("rabenseifner"), big.why());
        // Each GPU carries 1/8 of a step over its own NIC: the network stage of a step (Rabenseifner: 2 log2 64 alphas and
        // 2 x 63/64 x 1 MiB at 48 GB/s) is the slowest stage, and the pipeline costs about one per step.
        double perStep = 2 * 6 * 6e-6 + 2.0 * 63 / 64 * (1 << 20) / 48e9;
        assertTrue(big.seconds() > 128 * perStep && big.seconds() < 128 * perStep * 1.1, big.why() + " " + big.seconds());
        assertTrue(big.why().contains("8 GPU(s) per host crossing over 8 NIC(s)"), big.why());
        System.out.println("64 x 8, 8 B:  " + small.why());
        System.out.println("64 x 8, 1 GiB: " + big.why());
    }

    @Test
    void sharedNicSlowsTheSliceFormButItStillWinsForLargeMessages() {
        HierModel eight = HierModel.cluster(64, 8, 8);
        HierModel one = HierModel.cluster(64, 8, 1);
        HierModel.Choice a = eight.cost(Form.SLICE, 1L << 30, CHUNK, 4);
        HierModel.Choice b = one.cost(Form.SLICE, 1L << 30, CHUNK, 4);
        // 8x the bytes per NIC; the alphas stay: about 3.6x the time per step here
        assertTrue(b.seconds() > 3 * a.seconds(), "one NIC for 8 GPUs: " + a.why() + " | " + b.why());
        assertEquals(Form.SLICE, one.choose(1L << 30, CHUNK, 4).form());
        assertTrue(one.cost(Form.WHOLE, 1L << 30, CHUNK, 4).seconds() > b.seconds(), "WHOLE sends L times the bytes");
    }

    @Test
    void pipeliningHidesTheCopies() {
        HierModel m = HierModel.cluster(2, 2, 2);
        double one = m.cost(Form.SLICE, 256L << 20, CHUNK, 1).seconds();
        double four = m.cost(Form.SLICE, 256L << 20, CHUNK, 4).seconds();
        assertTrue(four < one * 0.8, "4 slots overlap copies and network: " + four + " vs " + one);
    }
}
