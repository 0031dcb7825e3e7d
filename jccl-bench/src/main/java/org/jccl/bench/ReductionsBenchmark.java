package org.jccl.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.reduce.Reductions;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The element-wise reduction kernels ({@link Reductions#reduce}) that every reducing collective runs
 * on each received chunk: {@code acc[i] = acc[i] op in[i]} over native memory, once with the scalar
 * kernels and once with the Vector API ones ({@code impl}).
 *
 * <p>Score: microseconds per call. Memory traffic per call is 3 x bytes (two reads, one write), so
 * GB/s = 3 * bytes / (score * 1000). Compare with this machine's memory bandwidth (single-thread
 * memcpy here: ~15.6 GB/s copied = ~31 GB/s read+write from main memory; much more from cache,
 * which the 4 MiB case mostly hits). Run, e.g.:
 * <pre>
 *   ./mvnw -q -B -pl jccl-bench -am package -DskipTests
 *   java -jar jccl-bench/target/jccl-benchmarks.jar ReductionsBenchmark -p type=FLOAT32,BFLOAT16 -p op=SUM
 * </pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--add-modules", "jdk.incubator.vector"})
public class ReductionsBenchmark {

    @Param({"INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64"})
    public DataType type;

    @Param({"SUM", "PROD", "MIN", "MAX", "AVG"})
    public ReduceOp op;

    /** Which kernels: SCALAR (staged C2 loops) or VECTOR (jdk.incubator.vector), whatever JCCL_REDUCE_VECTOR says. */
    @Param({"SCALAR", "VECTOR"})
    public Reductions.Impl impl;

    /** Bytes per operand: in cache (64 KiB), last-level cache (4 MiB), main memory (64 MiB). */
    @Param({"65536", "4194304", "67108864"})
    public long bytes;

    private Arena arena;
    private MemorySegment acc;
    private MemorySegment in;
    private long count;

    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofConfined();
        acc = arena.allocate(bytes, 64);
        in = arena.allocate(bytes, 64);
        count = bytes / type.size();
        // Small values so that sums, products and averages stay finite and exact-ish for every type.
        for (long i = 0; i < bytes; i++) {
            acc.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i % 3));
            in.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i % 5 == 0 ? 1 : 0));
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public MemorySegment reduce() {
        Reductions.reduceWith(impl, acc, acc, in, count, type, op);
        return acc;
    }
}
