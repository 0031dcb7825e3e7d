package org.jccl.cuda.internal;

import java.util.ArrayList;
import java.util.List;

/**
 * The chunk plans of the hierarchical GPU collectives: which parts of the vector each pipeline step
 * moves. Pure arithmetic, the same on every rank (every rank plans from the same count, type and
 * split).
 */
public final class HierPlan {
    /** The smallest step (below it per-step costs dominate). */
    public static final long MIN_STEP = 256 << 10;
    /** Step boundaries fall on this many bytes where the sizes allow it (vector loads in the kernels). */
    static final long ALIGN = 256;

    private HierPlan() {
    }

    /** How a step of an all-reduce runs. */
    public enum Form {
        /** reduce-scatter in the host, each GPU all-reduces its 1/L across hosts, all-gather in the host */
        SLICE,
        /** all-reduce in the host, every GPU all-reduces the whole step across hosts (small messages, the tail) */
        WHOLE,
        /** reduce to the host's first GPU, the first GPUs all-reduce across hosts, broadcast in the host (uneven hosts) */
        LEADER
    }

    /** One step: {@code count} elements from element {@code offset} (of the vector, or of every block). */
    public record Step(int index, Form form, long offset, long count) {
    }

    /**
     * The step size in bytes for a message of {@code bytes}: at most {@code chunk}, at least {@link
     * #MIN_STEP}, and small enough that a message of a few steps still fills {@code slots} of them.
     */
    public static long stepBytes(long bytes, long chunk, int slots) {
        long spread = (bytes + slots - 1) / Math.max(1, slots);
        return Math.max(Math.min(chunk, MIN_STEP), Math.min(chunk, Math.max(MIN_STEP, spread)));
    }

    /**
     * An all-reduce of {@code count} elements of {@code elem} bytes over {@code local} GPUs per host.
     * Uneven hosts: LEADER steps. Equal hosts: WHOLE where the message is at most {@code wholeMax}
     * bytes or a host has one GPU; otherwise SLICE steps, each a multiple of {@code local} elements
     * (aligned where possible), and one WHOLE step for the last count % local elements.
     */
    public static List<Step> allReduce(long count, int elem, int local, boolean equalHosts, long chunk, int slots, long wholeMax) {
        List<Step> steps = new ArrayList<>();
        if (count == 0) {
            return steps;
        }
        long bytes = count * elem;
        long step = stepBytes(bytes, chunk, slots);
        if (!equalHosts) {
            return even(count, Math.max(1, step / elem), Form.LEADER);
        }
        if (local == 1 || bytes <= wholeMax || count < local) {
            return even(count, Math.max(1, step / elem), Form.WHOLE);
        }
        long main = count - count % local;
        long unit = local * Math.max(1, ALIGN / elem); // a step of the main part: a multiple of local slices of ALIGN bytes
        long per = Math.max(1, step / elem);
        per = per >= unit ? per / unit * unit : (per + local - 1) / local * local;
        long off = 0;
        int i = 0;
        while (off < main) {
            long n = Math.min(per, main - off);
            steps.add(new Step(i++, Form.SLICE, off, n));
            off += n;
        }
        if (main < count) {
            steps.add(new Step(i, Form.WHOLE, main, count - main));
        }
        return steps;
    }

    /**
     * Steps over a vector of {@code count} elements (broadcast, reduce) or over the same range of every one of {@code blocks}
     * blocks of {@code count} elements (reduce-scatter, all-gather, all-to-all: a step moves {@code blocks} pieces), with the
     * step's bytes summed over the blocks.
     */
    public static List<Step> blocks(long count, int elem, int blocks, long chunk, int slots, Form form) {
        if (count == 0) {
            return new ArrayList<>();
        }
        long step = stepBytes(count * elem * blocks, chunk, slots);
        long per = Math.max(1, step / ((long) elem * blocks));
        long a = Math.max(1, ALIGN / elem);
        if (per > a) {
            per = per / a * a;
        }
        return even(count, per, form);
    }

    private static List<Step> even(long count, long per, Form form) {
        List<Step> steps = new ArrayList<>();
        int i = 0;
        for (long off = 0; off < count; off += per) {
            steps.add(new Step(i++, form, off, Math.min(per, count - off)));
        }
        return steps;
    }
}
