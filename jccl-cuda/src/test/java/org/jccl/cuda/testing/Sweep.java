package org.jccl.cuda.testing;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * Which cases a sweep runs. Three sizes, chosen with {@code -Djccl.gpu.sweep=tiny|default|full}
 * ({@code -Djccl.gpu.full=true} is the same as {@code full}):
 * <ul>
 *   <li>{@code default} (a few minutes on 4 GPUs with both backends): every type x every operator x
 *       every root x both placements for counts 1, 17, 4099, 65537; float32, bfloat16 and int32 SUM
 *       also at 3, 1000 and 2^20+5; float32 and bfloat16 SUM at 8M+3 (for allGather,
 *       reduceScatter and allToAll, whose count is a per-rank block: 8M+3 in all, n odd blocks).
 *       Roots: every rank up to 65537 elements, first and last above. The group style runs a smaller
 *       matrix.</li>
 *   <li>{@code full}: every type x operator x root x placement at 1, 3, 17, 1000, 4099, 65537,
 *       2^20+5, and float32/bfloat16 SUM at 8M+3.</li>
 *   <li>{@code tiny} (for compute-sanitizer, which slows kernels down 10-100x): a few types and
 *       operators at 1, 17 and 4099.</li>
 * </ul>
 */
public final class Sweep {
    private Sweep() {
    }

    public enum Mode { TINY, DEFAULT, FULL }

    public static final long MEG = 1L << 20;
    /** The large count: 8M + 3 elements (32 MiB of float32 per rank, 128 MiB for a 4-rank allGather). */
    public static final long LARGE = 8 * MEG + 3;

    private static final List<DataType> ALL_TYPES = List.of(DataType.values());
    private static final List<ReduceOp> ALL_OPS = List.of(ReduceOp.values());

    /** One block of the matrix. */
    private record Tier(long[] counts, List<DataType> types, List<ReduceOp> ops, boolean allRoots) {
    }

    /** The mode the system properties ask for. */
    public static Mode mode() {
        if (Boolean.getBoolean("jccl.gpu.full")) {
            return Mode.FULL;
        }
        String s = System.getProperty("jccl.gpu.sweep", "default").trim().toUpperCase(Locale.ROOT);
        try {
            return Mode.valueOf(s);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("-Djccl.gpu.sweep=" + s + ": use tiny, default or full");
        }
    }

    private static List<Tier> tiers(Mode mode, Style style) {
        List<DataType> f32bf16 = List.of(DataType.FLOAT32, DataType.BFLOAT16);
        List<DataType> f32bf16i32 = List.of(DataType.FLOAT32, DataType.BFLOAT16, DataType.INT32);
        List<ReduceOp> sum = List.of(ReduceOp.SUM);
        return switch (mode) {
            case TINY -> style == Style.THREADS
                    ? List.of(new Tier(new long[] {1, 17, 4099},
                            List.of(DataType.INT8, DataType.UINT32, DataType.FLOAT16, DataType.BFLOAT16, DataType.FLOAT32, DataType.FLOAT64),
                            List.of(ReduceOp.SUM, ReduceOp.MAX, ReduceOp.AVG), false))
                    : List.of(new Tier(new long[] {17}, List.of(DataType.FLOAT32, DataType.INT64), sum, false));
            case DEFAULT -> style == Style.THREADS
                    ? List.of(new Tier(new long[] {1, 17, 4099, 65537}, ALL_TYPES, ALL_OPS, true),
                            new Tier(new long[] {3, 1000}, f32bf16i32, sum, true),
                            new Tier(new long[] {MEG + 5}, f32bf16i32, sum, false),
                            new Tier(new long[] {LARGE}, f32bf16, sum, false))
                    : List.of(new Tier(new long[] {17, 65537}, ALL_TYPES, List.of(ReduceOp.SUM, ReduceOp.MAX, ReduceOp.AVG), false),
                            new Tier(new long[] {MEG + 5}, List.of(DataType.FLOAT32), sum, false));
            case FULL -> style == Style.THREADS
                    ? List.of(new Tier(new long[] {1, 3, 17, 1000, 4099, 65537, MEG + 5}, ALL_TYPES, ALL_OPS, true),
                            new Tier(new long[] {LARGE}, f32bf16, sum, true))
                    : List.of(new Tier(new long[] {1, 3, 17, 1000, 4099, 65537}, ALL_TYPES, ALL_OPS, true));
        };
    }

    /** Every case of {@code coll} over {@code n} ranks in this mode and style. */
    public static List<Case> cases(Mode mode, Coll coll, int n, Style style, long baseSeed) {
        List<Case> out = new ArrayList<>();
        for (Tier tier : tiers(mode, style)) {
            for (long tierCount : tier.counts()) {
                // LARGE is a whole buffer: the gather/scatter/all-to-all family takes it as n blocks (odd-sized).
                boolean blocks = coll == Coll.ALL_GATHER || coll == Coll.REDUCE_SCATTER || coll == Coll.ALL_TO_ALL;
                long count = tierCount == LARGE && blocks ? Math.max(1, LARGE / n) | 1 : tierCount;
                for (DataType type : tier.types()) {
                    List<ReduceOp> ops = coll.reduces() ? tier.ops() : Arrays.asList((ReduceOp) null);
                    for (ReduceOp op : ops) {
                        for (int root : roots(coll, n, tier.allRoots())) {
                            for (boolean inPlace : coll.hasInPlace() ? new boolean[] {false, true} : new boolean[] {false}) {
                                out.add(Case.of(coll, type, op, count, root, inPlace, style, 0, baseSeed));
                            }
                        }
                    }
                }
            }
        }
        return out;
    }

    /** Roots of a rooted collective (every rank, or first and last); shifts of send/recv (1..n-1, or 0 alone for one rank). */
    static List<Integer> roots(Coll coll, int n, boolean all) {
        Set<Integer> s = new LinkedHashSet<>();
        if (coll.rooted()) {
            if (all) {
                for (int r = 0; r < n; r++) {
                    s.add(r);
                }
            } else {
                s.add(0);
                s.add(n - 1);
            }
        } else if (coll == Coll.SEND_RECV) {
            if (n == 1) {
                s.add(0);
            } else if (all) {
                for (int k = 1; k < n; k++) {
                    s.add(k);
                }
            } else {
                s.add(1);
            }
        } else {
            s.add(-1);
        }
        return List.copyOf(s);
    }

    /** Buffers one and three elements past alignment: every collective, 4 element sizes, two counts, out of place. */
    public static List<Case> misaligned(Mode mode, int n, long baseSeed) {
        List<Case> out = new ArrayList<>();
        long[] counts = mode == Mode.TINY ? new long[] {17} : new long[] {17, 65537};
        for (Coll coll : Coll.values()) {
            for (long count : counts) {
                for (DataType type : List.of(DataType.INT8, DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64)) {
                    ReduceOp op = coll.reduces() ? ReduceOp.SUM : null;
                    int root = coll.rooted() ? n - 1 : coll == Coll.SEND_RECV ? (n == 1 ? 0 : 1) : -1;
                    out.add(Case.of(coll, type, op, count, root, false, Style.THREADS, 1, baseSeed));
                }
            }
        }
        return out;
    }
}
