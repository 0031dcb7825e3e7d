package org.jccl.internal.runtime;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.guard.OpGuard;

/**
 * The 32-byte signature of one collective that ranks exchange when {@code JCCL_CHECK=1}, so that
 * mismatched calls (another collective, size, data type, operator or root at the same point of the
 * sequence) are reported instead of hanging or pairing unrelated messages.
 *
 * <pre>
 *   0        4     5     6     7     8                16               24        28       32
 *   +--------+-----+-----+-----+-----+----------------+----------------+---------+--------+
 *   | magic  |coll |type |op   | 0   | collective seq | bytes (or -1)  | root    | 0      |
 *   +--------+-----+-----+-----+-----+----------------+----------------+---------+--------+
 * </pre>
 * Little-endian. {@code coll} is the index in {@link #COLLECTIVES} plus one, {@code type} and
 * {@code op} are enum ordinals plus one (0: none). {@code bytes} is the operation's size as
 * {@link Op#describe()} prints it; allToAllv sends a different amount from every rank, so its size
 * is not compared (-1). The collective sequence number counts checked collectives only (point-to-point
 * calls legitimately differ between ranks).
 */
final class OpSignature {
    static final int BYTES = org.jccl.spi.CollectiveCall.SIGNATURE_BYTES;
    /** "JSG1" */
    private static final int MAGIC = 0x3147534a;

    /** Collectives that carry a signature; the index is the wire code. Never reorder: append. */
    static final List<String> COLLECTIVES = OpGuard.COLLECTIVES;

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);

    private OpSignature() {
    }

    /** True when {@code op} is a collective that carries a signature (not a send/recv, group or internal operation). */
    static boolean checked(Op op) {
        return op instanceof LambdaOp && COLLECTIVES.contains(op.name);
    }

    /** Writes the signature of {@code op}, the {@code collSeq}-th checked collective, into {@code dst}. */
    static void encode(Op op, long collSeq, MemorySegment dst) {
        dst.set(INT, 0, MAGIC);
        dst.set(ValueLayout.JAVA_BYTE, 4, (byte) (COLLECTIVES.indexOf(op.name) + 1));
        dst.set(ValueLayout.JAVA_BYTE, 5, (byte) (op.type == null ? 0 : op.type.ordinal() + 1));
        dst.set(ValueLayout.JAVA_BYTE, 6, (byte) (op.reduceOp == null ? 0 : op.reduceOp.ordinal() + 1));
        dst.set(ValueLayout.JAVA_BYTE, 7, (byte) 0);
        dst.set(LONG, 8, collSeq);
        dst.set(LONG, 16, op.name.equals("allToAllv") ? -1 : op.bytes);
        dst.set(INT, 24, op.rootOrPeer);
        dst.set(INT, 28, 0);
    }

    /** True when the segment holds a signature at all (a peer with the check off sends data instead). */
    static boolean valid(MemorySegment s) {
        int coll = s.get(ValueLayout.JAVA_BYTE, 4);
        return s.get(INT, 0) == MAGIC && coll >= 1 && coll <= COLLECTIVES.size();
    }

    /** Where {@code mine} and {@code theirs} differ, in words ("root 0 vs 1"); empty when they agree. */
    static List<String> differences(MemorySegment theirs, MemorySegment mine) {
        List<String> d = new ArrayList<>();
        String c1 = collective(theirs);
        String c2 = collective(mine);
        if (!c1.equals(c2)) {
            d.add("collective " + c1 + " vs " + c2);
        }
        if (seq(theirs) != seq(mine)) {
            d.add("collective sequence number #" + seq(theirs) + " vs #" + seq(mine)
                    + " (a rank called fewer or more collectives before this one)");
        }
        long b1 = theirs.get(LONG, 16);
        long b2 = mine.get(LONG, 16);
        if (b1 != b2 && b1 >= 0 && b2 >= 0) {
            d.add("size " + b1 + " B vs " + b2 + " B");
        }
        String t1 = typeName(theirs);
        String t2 = typeName(mine);
        if (!t1.equals(t2)) {
            d.add("data type " + t1 + " vs " + t2);
        }
        String o1 = opName(theirs);
        String o2 = opName(mine);
        if (!o1.equals(o2)) {
            d.add("reduction op " + o1 + " vs " + o2);
        }
        int r1 = theirs.get(INT, 24);
        int r2 = mine.get(INT, 24);
        if (r1 != r2) {
            d.add("root " + (r1 < 0 ? "none" : r1) + " vs " + (r2 < 0 ? "none" : r2));
        }
        return d;
    }

    /** "broadcast #3 (8 B float root 1)", the way {@link Op#describe()} names an operation, with the collective sequence number. */
    static String describe(MemorySegment s) {
        StringBuilder sb = new StringBuilder(collective(s)).append(" (collective #").append(seq(s));
        long bytes = s.get(LONG, 16);
        if (bytes >= 0) {
            sb.append(", ").append(bytes).append(" B");
        }
        if (s.get(ValueLayout.JAVA_BYTE, 5) != 0) {
            sb.append(' ').append(typeName(s));
        }
        if (s.get(ValueLayout.JAVA_BYTE, 6) != 0) {
            sb.append(' ').append(opName(s));
        }
        int root = s.get(INT, 24);
        if (root >= 0) {
            sb.append(" root ").append(root);
        }
        return sb.append(')').toString();
    }

    private static long seq(MemorySegment s) {
        return s.get(LONG, 8);
    }

    private static String collective(MemorySegment s) {
        int c = s.get(ValueLayout.JAVA_BYTE, 4);
        return c >= 1 && c <= COLLECTIVES.size() ? COLLECTIVES.get(c - 1) : "unknown collective " + c;
    }

    private static String typeName(MemorySegment s) {
        int t = s.get(ValueLayout.JAVA_BYTE, 5);
        DataType[] all = DataType.values();
        return t == 0 ? "none" : t <= all.length ? all[t - 1].ncclName() : "type " + t;
    }

    private static String opName(MemorySegment s) {
        int o = s.get(ValueLayout.JAVA_BYTE, 6);
        ReduceOp[] all = ReduceOp.values();
        return o == 0 ? "none" : o <= all.length ? all[o - 1].ncclName() : "op " + o;
    }
}
