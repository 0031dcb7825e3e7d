package org.jccl.internal.reduce;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Locale;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * Rough throughput check of the reduction loops: not a JUnit test and not a benchmark of record
 * (that belongs in JMH with forks). Times {@code reduce(acc, in)} over 4 MiB native segments for
 * about two seconds per case after warm-up and prints GB/s counted as bytes read plus written
 * (three buffer lengths per call). {@code -Dbytes=N} changes the buffer size, {@code -DmeasureMs=N}
 * the measuring time.
 *
 * <p>Run: {@code java -cp jccl-core/target/classes:jccl-core/target/test-classes
 * org.jccl.internal.reduce.ReductionsSpeed [type:op | copy ...] [--pollute]}. Without arguments it
 * runs float32, float64 and int32 SUM; {@code copy} times a bulk segment copy for comparison.
 * {@code --pollute} first runs the loops on heap segments of several array kinds and on unaligned
 * slices, as a real process would, to show the native numbers with a mixed type profile.
 */
public final class ReductionsSpeed {

    private static final long BYTES = Long.getLong("bytes", 4L << 20);
    private static final long MEASURE_NANOS = Long.getLong("measureMs", 2000) * 1_000_000L;

    private ReductionsSpeed() {
    }

    public static void main(String[] args) {
        boolean pollute = false;
        java.util.List<String> cases = new java.util.ArrayList<>();
        for (String a : args) {
            if (a.equals("--pollute")) {
                pollute = true;
            } else {
                cases.add(a);
            }
        }
        if (cases.isEmpty()) {
            cases.addAll(java.util.List.of("float32:sum", "float64:sum", "int32:sum"));
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment acc = arena.allocate(BYTES, 64);
            MemorySegment in = arena.allocate(BYTES, 64);
            for (long i = 0; i < BYTES; i += 8) {
                acc.set(java.lang.foreign.ValueLayout.JAVA_LONG, i, 0x3F80_0000_3F80_0000L ^ (i * 31));
                in.set(java.lang.foreign.ValueLayout.JAVA_LONG, i, 0x3F80_0000_3F80_0000L ^ (i * 17));
            }
            if (pollute) {
                pollute(arena);
            }
            for (String c : cases) {
                if (c.equals("copy")) {
                    copy(acc, in);
                    continue;
                }
                String[] p = c.split(":");
                DataType type = DataType.parse(p[0]);
                ReduceOp op = ReduceOp.parse(p.length > 1 ? p[1] : "sum");
                run(acc, in, type, op);
            }
        }
    }

    private static void run(MemorySegment acc, MemorySegment in, DataType type, ReduceOp op) {
        long count = BYTES / type.size();
        // Warm-up: enough calls for C2 to compile the loop (and its OSR version to be replaced).
        long warmEnd = System.nanoTime() + 500_000_000L;
        while (System.nanoTime() < warmEnd) {
            Reductions.reduce(acc, in, count, type, op);
        }
        long calls = 0;
        long start = System.nanoTime();
        long now;
        do {
            Reductions.reduce(acc, in, count, type, op);
            calls++;
            now = System.nanoTime();
        } while (now - start < MEASURE_NANOS);
        double seconds = (now - start) / 1e9;
        double gbps = 3.0 * BYTES * calls / seconds / 1e9;
        System.out.printf(Locale.ROOT, "%-9s %-5s %d B: %6.2f GB/s (%d calls, %.3f us/call)%n",
                type.ncclName(), op.ncclName(), BYTES, gbps, calls, seconds * 1e6 / calls);
    }

    /** The yardstick: a bulk copy of the same size, counted as bytes read plus written. */
    private static void copy(MemorySegment dst, MemorySegment src) {
        long warmEnd = System.nanoTime() + 500_000_000L;
        while (System.nanoTime() < warmEnd) {
            MemorySegment.copy(src, 0, dst, 0, BYTES);
        }
        long calls = 0;
        long start = System.nanoTime();
        long now;
        do {
            MemorySegment.copy(src, 0, dst, 0, BYTES);
            calls++;
            now = System.nanoTime();
        } while (now - start < MEASURE_NANOS);
        double seconds = (now - start) / 1e9;
        System.out.printf(Locale.ROOT, "%-15s %d B: %6.2f GB/s (%.3f us/call)%n", "memcpy", BYTES,
                2.0 * BYTES * calls / seconds / 1e9, seconds * 1e6 / calls);
    }

    private static void pollute(Arena arena) {
        MemorySegment[] kinds = {
            MemorySegment.ofArray(new byte[1 << 16]),
            MemorySegment.ofArray(new float[1 << 14]),
            MemorySegment.ofArray(new long[1 << 13]),
            arena.allocate(1 << 16).asSlice(3),
        };
        for (int rep = 0; rep < 20_000; rep++) {
            for (DataType t : new DataType[] {DataType.FLOAT32, DataType.FLOAT64, DataType.INT32}) {
                for (MemorySegment s : kinds) {
                    long n = (s.byteSize() - 8) / t.size() / 2;
                    Reductions.reduce(s, s.asSlice(n * t.size()), n, t, ReduceOp.SUM);
                }
            }
        }
    }
}
