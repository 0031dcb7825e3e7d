package org.jccl.cuda.internal;

/**
 * The order in which one rank runs the steps of a hierarchical collective, with {@code slots} steps in
 * flight. Nothing blocks the calling thread but the wait for a step's copies out and for its cross-host
 * leg; the legs themselves run on the host communicators' executors, queued as soon as their data is on
 * the host, so the network goes from one step's leg to the next without waiting for this thread (which
 * meanwhile enqueues the GPU work of the steps around it):
 *
 * <pre>
 *   pre(0), out(0), ..., pre(S-1), out(S-1)
 *   for c: for every started step d whose leg is not queued: await(d), queue cross(d)
 *          join cross(c), in(c), post(c), release(c), then pre(c+S), out(c+S)
 * </pre>
 * A step reuses slot c % S only after the step before it in that slot has passed {@code release}. Every
 * wait is for work queued in an earlier iteration (on this rank or its peers), so the order cannot
 * deadlock where the blocking order (leg c run to its end before step c+1's is queued) did not.
 */
public final class HierPipeline {
    private HierPipeline() {
    }

    /** A queued cross-host leg. */
    public interface Leg {
        /** Waits for the leg; throws its failure. */
        void join();
    }

    /** The legs of one step, by step index; {@code slot} is the step's pinned slot. */
    public interface Legs {
        /** Local work before the host leg (enqueued); none by default. */
        default void pre(int step, int slot) {
        }

        /** Whether this rank takes part in the step's host leg; every rank by default. */
        default boolean hostLeg(int step) {
            return true;
        }

        /** Copies out into the slot (enqueued); only where {@link #hostLeg}. */
        void out(int step, int slot);

        /** Queues the cross-host leg on the slot's pinned memory; only where {@link #hostLeg}. */
        Leg cross(int step, int slot);

        /** Copies back from the slot (enqueued); only where {@link #hostLeg}. */
        void in(int step, int slot);

        /** Local work after the host leg (enqueued). */
        void post(int step, int slot);
    }

    /** Runs {@code steps} steps with at most {@code slots} in flight, over {@code device}'s slots. */
    public static void run(int steps, int slots, HierDevice device, Legs legs) {
        int s = Math.max(1, Math.min(slots, steps));
        Leg[] queued = new Leg[s];
        for (int c = 0; c < s; c++) {
            start(c, c % s, device, legs);
        }
        int next = 0; // the first step whose leg is not queued yet
        for (int c = 0; c < steps; c++) {
            int slot = c % s;
            for (; next < Math.min(steps, c + s); next++) {
                if (legs.hostLeg(next)) {
                    device.awaitHost(next % s);
                    queued[next % s] = legs.cross(next, next % s);
                }
            }
            if (legs.hostLeg(c)) {
                Leg l = queued[slot];
                queued[slot] = null;
                l.join();
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
