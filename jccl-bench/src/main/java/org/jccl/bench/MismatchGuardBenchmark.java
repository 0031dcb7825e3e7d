package org.jccl.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
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
 * What the always-on mismatch guard adds to the CPU path of a call, without any communication: an
 * 8-byte all-reduce on a one-rank communicator (validation, the operation object with its guard
 * word, the call's start and end with the collective index and its history, the flight recorder),
 * with {@code JCCL_CHECK=0} (the guard) against {@code JCCL_CHECK=none}. The per-message and
 * per-arrive parts (one more 8-byte store by the sender, one load and compare by the receiver, in
 * lines they touch anyway) are not in it. Compare with the 8-byte all_reduce latency
 * (docs/PERFORMANCE.md, "The mismatch guard").
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--add-modules", "jdk.incubator.vector"})
public class MismatchGuardBenchmark {
    /** JCCL_CHECK: 0 = the guard (default), none = no guard. */
    @Param({"0", "none"})
    public String check;

    private Communicator comm;
    private Arena arena;
    private MemorySegment buf;

    @Setup(Level.Trial)
    public void setUp() {
        comm = Jccl.initLocal(1, Config.defaults().with("JCCL_CHECK", check)).get(0);
        arena = Arena.ofShared();
        buf = arena.allocate(8, 64);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        comm.close();
        arena.close();
    }

    /** One blocking 8-byte all-reduce (runs inline on this thread). */
    @Benchmark
    public MemorySegment allReduce8() {
        comm.allReduce(buf, buf, 2, DataType.FLOAT32, ReduceOp.SUM);
        return buf;
    }
}
