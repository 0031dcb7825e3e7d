package org.jccl.bench;

import java.util.concurrent.TimeUnit;
import org.jccl.internal.control.CollectiveEvent;
import org.jccl.internal.control.Counters;
import org.jccl.internal.control.FlightRecorder;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What the control plane adds to every operation of a communicator, without the operation: the
 * flight recorder's issue/start/finish of one slot, the JFR event (no recording: disabled), and the
 * per-peer byte counters of one send and one receive, as {@code CommunicatorImpl} and
 * {@code OpContext} call them. Compare with the 8-byte all_reduce latency (docs/PERFORMANCE.md,
 * "Control plane overhead").
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--add-modules", "jdk.incubator.vector"})
public class ControlPlaneBenchmark {
    private final FlightRecorder recorder = new FlightRecorder(1024);
    private final Counters counters = new Counters(new String[] {null, "SHM"});
    private long seq;

    /** One queued operation's bookkeeping (timed: two clock reads). */
    @Benchmark
    public long perOperation() {
        long s = seq++;
        recorder.issued(s, "all_reduce", 8, "float", "sum", -1, "SHM", true, false);
        recorder.started(s);
        CollectiveEvent ev = new CollectiveEvent();
        ev.begin();
        counters.sent(1, 8);
        counters.received(1, 8);
        recorder.finished(s, true, "ring");
        if (ev.shouldCommit()) {
            ev.seq = s;
            ev.commit();
        }
        return recorder.lastFinished();
    }

    /** The flight recorder alone, for a queued operation (timed). */
    @Benchmark
    public long recorderOnly() {
        long s = seq++;
        recorder.issued(s, "all_reduce", 8, "float", "sum", -1, "SHM", true, false);
        recorder.started(s);
        recorder.finished(s, true, "ring");
        return recorder.lastFinished();
    }

    /** The flight recorder alone, for a small operation run inline that did not wait (no clock read). */
    @Benchmark
    public long recorderInlineUntimed() {
        long s = seq++;
        recorder.issued(s, "all_reduce", 8, "float", "sum", -1, "SHM", false, true);
        recorder.finished(s, true, "shared");
        return recorder.lastFinished();
    }
}
