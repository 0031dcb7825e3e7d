package org.jccl.internal.guard;

import java.util.ArrayList;
import java.util.List;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * The always-on mismatch guard's signature of one call, packed into one 64-bit word that every
 * transport carries with what it already exchanges (TCP stripe headers, SHM slot metas, the in-JVM
 * mailbox, the shared segment's arrive line, the GPU mailbox records), so that ranks which call the
 * same collective with different counts, data types, ops or roots fail instead of pairing unrelated
 * bytes. Receivers compare the word with their own before they use a byte.
 *
 * <pre>
 *  63     60 59    56 55  53 52               37 36                                 1  0
 *  +--------+--------+------+-------------------+------------------------------------+---+
 *  | kind   | type   | op   | root + 1 (0 none) | count in elements (36 bits)        | p |
 *  +--------+--------+------+-------------------+------------------------------------+---+
 * </pre>
 * {@code kind}: 1-10 the collectives of {@link #COLLECTIVES} in that order, {@link
 * #KIND_P2P} a send or receive (which compare no arguments: the transports already refuse messages
 * of the wrong size, and legitimate send/recv pairs may differ in type), {@link #KIND_INTERNAL} an
 * operation jccl runs itself; {@code type} and {@code op} enum ordinals plus one (0: none); {@code
 * root} modulo 65535; {@code count} the operation's elements (the operation's bytes / type size, the size
 * the operation's description prints) modulo 2^36, all ones for allToAllv (whose counts legitimately
 * differ per rank). {@code p} is 0 here; the shared segment stores the round's parity in it.
 * The word 0 means "no guard" (the sender runs with {@code JCCL_CHECK=none}).
 */
public final class OpGuard {
    /** Kind of a send or receive. */
    public static final int KIND_P2P = 11;
    /** Kind of an operation jccl runs itself (measurements). */
    public static final int KIND_INTERNAL = 12;
    /** Count field value of allToAllv, whose per-rank counts differ legitimately. */
    public static final long COUNT_ANY = (1L << 36) - 1;
    private static final int ROOT_MOD = 0xFFFF;

    /** The collectives in the order of their kind (1 = allReduce ...); the wire formats depend on this order. */
    public static final List<String> COLLECTIVES = List.of("allReduce", "broadcast", "reduce", "allGather", "reduceScatter",
            "allToAll", "allToAllv", "gather", "scatter", "barrier");

    private OpGuard() {
    }

    /** The guard word of a send or receive. */
    public static long p2p() {
        return (long) KIND_P2P << 60;
    }

    /**
     * The guard word of collective {@code name} (one of {@link #COLLECTIVES}) of {@code count}
     * elements of {@code type} (null: none) with {@code op} (null: none) and {@code root} (-1: none).
     */
    public static long collective(String name, long count, DataType type, ReduceOp op, int root) {
        int kind = kindOf(name);
        if (kind == 0) {
            throw new IllegalArgumentException("not a collective: " + name);
        }
        return of(kind, count, type, op, root);
    }

    /** The guard word of collective kind {@code kind} ({@link #kindOf}); see {@link #collective}. */
    public static long of(int kind, long count, DataType type, ReduceOp op, int root) {
        long t = type == null ? 0 : type.ordinal() + 1;
        long o = op == null ? 0 : op.ordinal() + 1;
        long r = root < 0 ? 0 : root % ROOT_MOD + 1;
        return (long) kind << 60 | t << 56 | o << 53 | r << 37 | (count & COUNT_ANY) << 1;
    }

    /** Whether {@code theirs} and {@code mine} say two different calls (a word of 0 carries no guard and matches anything). */
    public static boolean mismatch(long theirs, long mine) {
        return theirs != mine && theirs != 0 && mine != 0;
    }

    /** 1-10: the index of {@code name} in {@link #COLLECTIVES} plus one; 0: not a collective. */
    public static int kindOf(String name) {
        return switch (name) {
            case "allReduce" -> 1;
            case "broadcast" -> 2;
            case "reduce" -> 3;
            case "allGather" -> 4;
            case "reduceScatter" -> 5;
            case "allToAll" -> 6;
            case "allToAllv" -> 7;
            case "gather" -> 8;
            case "scatter" -> 9;
            case "barrier" -> 10;
            default -> 0;
        };
    }

    /** Whether {@code g} is the guard of a collective (not of a send/recv, an internal operation, or none). */
    public static boolean isCollective(long g) {
        int k = kind(g);
        return k >= 1 && k <= 10;
    }

    /**
     * Whether a call of guard {@code g} needs the ring confirmation (every rank sends its guard to the
     * next rank and receives the previous one's, beside the algorithm's messages): the rooted
     * collectives, where some ranks only send (a broadcast's root, a reduce's leaves) and would
     * otherwise return without having compared anything, and every collective of 0 elements, which
     * moves no data at all. allToAllv (counts legitimately differ, 0 included) and barrier (every rank
     * receives) need none.
     */
    public static boolean needsConfirmation(long g) {
        int k = kind(g);
        return switch (k) {
            case 2, 3, 8, 9 -> true;
            case 1, 4, 5, 6 -> count(g) == 0;
            default -> false;
        };
    }

    public static int kind(long g) {
        return (int) (g >>> 60);
    }

    private static String kindName(long g) {
        int k = kind(g);
        if (k >= 1 && k <= COLLECTIVES.size()) {
            return COLLECTIVES.get(k - 1);
        }
        return switch (k) {
            case KIND_P2P -> "send/recv";
            case KIND_INTERNAL -> "an internal operation";
            case 0 -> "an unguarded operation";
            default -> "unknown operation kind " + k;
        };
    }

    private static String typeName(long g) {
        int t = (int) (g >>> 56 & 0xF);
        DataType[] all = DataType.values();
        return t == 0 ? "none" : t <= all.length ? all[t - 1].ncclName() : "type " + t;
    }

    private static String opName(long g) {
        int o = (int) (g >>> 53 & 0x7);
        ReduceOp[] all = ReduceOp.values();
        return o == 0 ? "none" : o <= all.length ? all[o - 1].ncclName() : "op " + o;
    }

    /** Root, or -1 for none. */
    private static int root(long g) {
        return (int) (g >>> 37 & 0xFFFF) - 1;
    }

    private static long count(long g) {
        return g >>> 1 & COUNT_ANY;
    }

    /** "allReduce (300000 x float sum)", "broadcast (8 x int32 root 1)", "barrier", "send/recv". */
    public static String describe(long g) {
        int k = kind(g);
        if (k < 1 || k > COLLECTIVES.size()) {
            return kindName(g);
        }
        StringBuilder sb = new StringBuilder(kindName(g));
        StringBuilder args = new StringBuilder();
        long c = count(g);
        boolean typed = (g >>> 56 & 0xF) != 0;
        if (c == COUNT_ANY) {
            args.append("per-rank counts");
            if (typed) {
                args.append(' ').append(typeName(g));
            }
        } else if (typed) {
            args.append(c).append(" x ").append(typeName(g));
        }
        if ((g >>> 53 & 0x7) != 0) {
            args.append(args.isEmpty() ? "" : " ").append(opName(g));
        }
        if (root(g) >= 0) {
            args.append(args.isEmpty() ? "" : " ").append("root ").append(root(g));
        }
        return args.isEmpty() ? sb.toString() : sb.append(" (").append(args).append(')').toString();
    }

    /** Where the two calls differ, in words, {@code theirs} first ("count 300000 vs 200000"); empty when they agree. */
    public static List<String> differences(long theirs, long mine) {
        List<String> d = new ArrayList<>();
        if (kind(theirs) != kind(mine)) {
            d.add("collective " + kindName(theirs) + " vs " + kindName(mine));
            return d;
        }
        if (count(theirs) != count(mine)) {
            d.add("count " + count(theirs) + " vs " + count(mine));
        }
        if (!typeName(theirs).equals(typeName(mine))) {
            d.add("data type " + typeName(theirs) + " vs " + typeName(mine));
        }
        if (!opName(theirs).equals(opName(mine))) {
            d.add("reduction op " + opName(theirs) + " vs " + opName(mine));
        }
        if (root(theirs) != root(mine)) {
            d.add("root " + (root(theirs) < 0 ? "none" : root(theirs)) + " vs " + (root(mine) < 0 ? "none" : root(mine)));
        }
        return d;
    }
}
