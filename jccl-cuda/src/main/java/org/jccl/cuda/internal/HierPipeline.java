package org.jccl.cuda.internal;

/**
 * The order in which one rank runs the steps of a hierarchical collective, with {@code slots} steps in
 * flight. Only the cross-host leg blocks the calling thread; everything else is enqueued on the GPU's
 * streams, so while the network carries step c, the GPU runs the local kernels of the steps after it
 * and the copies of its neighbours:
 *
 * <pre>
 *   pre(0), out(0), ..., pre(S-1), out(S-1)
 *   for c: await(c), cross(c), in(c), post(c), release(c), then pre(c+S), out(c+S)
 * </pre>
 * A step reuses slot c % S only after the step before it in that slot has passed {@code release}.
 */
public final class HierPipeline {
    private HierPipeline() {
    }

    /** The legs of one step, by step index; {@code slot} is the step's pinned slot. */
    public interface Legs {
        /** Local work before the host leg (enqueued). */
        void pre(int step, int slot);

        /** Whether this rank takes part in the step's host leg. */
        boolean hostLeg(int step);

        /** Copies out into the slot (enqueued); only where {@link #hostLeg}. */
        void out(int step, int slot);

        /** The cross-host leg on the slot's pinned memory (blocking); only where {@link #hostLeg}. */
        void cross(int step, int slot);

        /** Copies back from the slot (enqueued); only where {@link #hostLeg}. */
        void in(int step, int slot);

        /** Local work after the host leg (enqueued). */
        void post(int step, int slot);
    }

    /** Runs {@code steps} steps with at most {@code slots} in flight, over {@code device}'s slots. */
    public static void run(int steps, int slots, HierDevice device, Legs legs) {
        int s = Math.max(1, Math.min(slots, steps));
        for (int c = 0; c < s; c++) {
            start(c, c % s, device, legs);
        }
        for (int c = 0; c < steps; c++) {
            int slot = c % s;
            if (legs.hostLeg(c)) {
                device.awaitHost(slot);
                legs.cross(c, slot);
                legs.in(c, slot);
            }
            legs.post(c, slot);
            device.released(slot);
            if (c + s < steps) {
                start(c + s, slot, device, legs);
            }
        }
    }

    private static void start(int c, int slot, HierDevice device, HierPipeline.Legs legs) {
        legs.pre(c, slot);
        if (legs.hostLeg(c)) {
            legs.out(c, slot);
        }
    }
}
