package org.jccl.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The CPU path of a call without communication, an 8-byte all-reduce on a one-rank communicator:
 * blocking (runs inline on the caller's thread) against nccl-tests' pattern, 20 asynchronous calls
 * and a wait for the last (the executor's queue, and whoever runs it). Per operation. Compare with
 * the 8-byte all_reduce latency (docs/PERFORMANCE.md, "The async path on 2 cores").
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--add-modules", "jdk.incubator.vector"})
public class AsyncPathBenchmark {
    private static final int BURST = 20;

    private Communicator comm;
    private Arena arena;
    private MemorySegment buf;

    @Setup(Level.Trial)
    public void setUp() {
        comm = Jccl.initLocal(1, Config.defaults()).get(0);
        arena = Arena.ofShared();
        buf = arena.allocate(8, 64);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        comm.close();
        arena.close();
    }

    /** One blocking 8-byte all-reduce. */
    @Benchmark
    public MemorySegment blocking() {
        comm.allReduce(buf, buf, 2, DataType.FLOAT32, ReduceOp.SUM);
        return buf;
    }

    /** 20 asynchronous 8-byte all-reduces, then a wait for the last; time per operation. */
    @Benchmark
    @OperationsPerInvocation(BURST)
    public Work asyncBurst() {
        Work w = null;
        for (int i = 0; i < BURST; i++) {
            w = comm.allReduceAsync(buf, buf, 2, DataType.FLOAT32, ReduceOp.SUM);
        }
        w.join();
        return w;
    }
}
