package org.jccl.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintStream;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.Group;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.examples.CollectiveCheck.Collective;
import org.jccl.examples.CollectiveCheck.MismatchException;
import org.jccl.examples.CollectiveCheck.Selection;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * CollectiveCheck's own checks, with ranks as threads of this JVM ({@link Jccl#initLocal}): a
 * correct jccl passes, and a communicator that gets one element or one block wrong is caught,
 * named precisely. (Real processes run it in jccl-cli's org.jccl.cli.mproc tests.)
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CollectiveCheckTest {

    private static final PrintStream QUIET = new PrintStream(OutputStream.nullOutputStream());

    /**
     * Runs body on one thread per rank. The first rank that fails aborts every communicator, so the
     * others fail too instead of waiting for it; returns each rank's result or exception.
     */
    private static List<Object> onRanks(List<Communicator> comms, Function<Communicator, Object> body) {
        List<CompletableFuture<Object>> futures = new ArrayList<>();
        for (Communicator c : comms) {
            CompletableFuture<Object> f = new CompletableFuture<>();
            Thread.ofPlatform().daemon().name("rank-" + c.rank()).start(() -> {
                try {
                    f.complete(body.apply(c));
                } catch (Throwable t) {
                    comms.forEach(Communicator::abort);
                    f.completeExceptionally(t);
                }
            });
            futures.add(f);
        }
        List<Object> results = new ArrayList<>();
        for (CompletableFuture<Object> f : futures) {
            try {
                results.add(f.get(100, TimeUnit.SECONDS));
            } catch (ExecutionException e) {
                results.add(e.getCause());
            } catch (Exception e) {
                comms.forEach(Communicator::abort);
                throw new AssertionError("a rank did not finish: " + e, e);
            }
        }
        comms.forEach(Communicator::close);
        return results;
    }

    @Test
    void theDefaultsCoverEverything() {
        Selection s = Selection.parse();
        assertEquals(EnumSet.allOf(Collective.class), s.collectives());
        assertEquals(List.of(0L, 1L, 7L, 1000L, 1_000_003L), s.counts());
        assertEquals(List.of(DataType.values()), s.types());
        assertEquals(List.of(ReduceOp.values()), s.reduceOps());
        assertEquals(CollectiveCheck.Memory.BOTH, s.memory());
    }

    @Test
    void optionsSelectASubset() {
        Selection s = Selection.parse("--collectives", "all_reduce,ReduceScatter,send-recv", "--counts", "0,1_000", "--types", "bf16,float",
                "--reduce-ops", "avg", "--memory", "heap", "--exhaustive", "--verbose");
        assertEquals(EnumSet.of(Collective.ALLREDUCE, Collective.REDUCESCATTER, Collective.SENDRECV), s.collectives());
        assertEquals(List.of(0L, 1000L), s.counts());
        assertEquals(List.of(DataType.BFLOAT16, DataType.FLOAT32), s.types());
        assertEquals(List.of(ReduceOp.AVG), s.reduceOps());
        assertEquals(CollectiveCheck.Memory.HEAP, s.memory());
        assertTrue(s.exhaustive() && s.verbose());
    }

    @Test
    void badArgumentsAreNamed() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Selection.parse("--collectives", "allreduse")).getMessage()
                .contains("unknown collective 'allreduse'"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Selection.parse("--counts", "-1")).getMessage()
                .contains("counts must be >= 0"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Selection.parse("--counts")).getMessage()
                .contains("option --counts needs a value"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Selection.parse("--frobnicate", "1")).getMessage()
                .contains("unknown option '--frobnicate'"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Selection.parse("--types", "float128")).getMessage()
                .contains("unknown data type 'float128'"));
    }

    @Test
    void everyCollectivePassesOnThreadRanks() {
        Selection s = Selection.parse("--counts", "0,1,7,1000", "--types", "float32,bfloat16,uint8,int64");
        List<Object> results = onRanks(Jccl.initLocal(3, Config.defaults()), c -> CollectiveCheck.run(c, s, QUIET));
        assertInstanceOf(Long.class, results.getFirst(), String.valueOf(results.getFirst()));
        assertEquals(List.of(results.getFirst(), results.getFirst(), results.getFirst()), results, "every rank ran the same checks");
        assertTrue((Long) results.getFirst() > 500, "checks: " + results.getFirst());
    }

    @Test
    void aWrongElementIsFoundAndNamed() {
        Selection s = Selection.parse("--collectives", "allreduce", "--counts", "7", "--types", "float32", "--reduce-ops", "sum",
                "--memory", "native");
        List<Communicator> comms = new ArrayList<>(Jccl.initLocal(3, Config.defaults()));
        // Rank 1's all-reduce gets element 3 wrong (one ulp) after the real one completes.
        comms.set(1, new Corrupting(comms.get(1)) {
            @Override
            public Work allReduceAsync(Buffer send, Buffer recv, ReduceOp op) {
                Work w = inner.allReduceAsync(send, recv, op);
                w.join();
                MemorySegment r = recv.segment();
                r.set(ValueLayout.JAVA_INT_UNALIGNED, 12, r.get(ValueLayout.JAVA_INT_UNALIGNED, 12) + 1);
                return w;
            }
        });
        List<Object> results = onRanks(comms, c -> CollectiveCheck.run(c, s, QUIET));
        MismatchException e = assertInstanceOf(MismatchException.class, results.get(1), String.valueOf(results.get(1)));
        assertTrue(e.getMessage().startsWith("allReduce FLOAT32 SUM count=7 out-of-place native (check 0), rank 1 of 3: recv element 3 is "),
                e.getMessage());
    }

    @Test
    void aBlockFromTheWrongRankIsFound() {
        Selection s = Selection.parse("--collectives", "allgather", "--counts", "5", "--types", "int32", "--memory", "heap");
        List<Communicator> comms = new ArrayList<>(Jccl.initLocal(3, Config.defaults()));
        // Rank 0 ends up with rank 1's block where rank 2's belongs.
        comms.set(0, new Corrupting(comms.get(0)) {
            @Override
            public Work allGatherAsync(Buffer send, Buffer recv) {
                Work w = inner.allGatherAsync(send, recv);
                w.join();
                MemorySegment r = recv.segment();
                long block = send.byteSize();
                MemorySegment.copy(r, block, r, 2 * block, block);
                return w;
            }
        });
        List<Object> results = onRanks(comms, c -> CollectiveCheck.run(c, s, QUIET));
        MismatchException e = assertInstanceOf(MismatchException.class, results.get(0), String.valueOf(results.get(0)));
        assertTrue(e.getMessage().contains("allGather INT32 count=5 out-of-place heap (check 0), rank 0 of 3: recv element 10 is 0x"),
                e.getMessage());
    }

    @Test
    void anUntouchedOutputIsReportedAsNeverWritten() {
        Selection s = Selection.parse("--collectives", "broadcast", "--counts", "3", "--types", "uint8");
        List<Communicator> comms = new ArrayList<>(Jccl.initLocal(2, Config.defaults()));
        // Rank 1 takes part in the broadcast but receives into a scratch buffer instead of its recv.
        comms.set(1, new Corrupting(comms.get(1)) {
            @Override
            public Work broadcastAsync(Buffer send, Buffer recv, int root) {
                return inner.broadcastAsync(send, Buffer.of(new byte[(int) recv.count()], DataType.UINT8), root);
            }
        });
        List<Object> results = onRanks(comms, c -> CollectiveCheck.run(c, s, QUIET));
        MismatchException e = assertInstanceOf(MismatchException.class, results.get(1), String.valueOf(results.get(1)));
        assertTrue(e.getMessage().contains("recv element 0 is 0xa5, expected 0x") && e.getMessage().endsWith("(never written)"),
                e.getMessage());
    }

    /** Delegates everything to a real communicator; tests override the one call they break. */
    private abstract static class Corrupting implements Communicator {
        final Communicator inner;

        Corrupting(Communicator inner) {
            this.inner = inner;
        }

        @Override
        public int rank() {
            return inner.rank();
        }

        @Override
        public int size() {
            return inner.size();
        }

        @Override
        public Work allReduceAsync(Buffer send, Buffer recv, ReduceOp op) {
            return inner.allReduceAsync(send, recv, op);
        }

        @Override
        public Work broadcastAsync(Buffer send, Buffer recv, int root) {
            return inner.broadcastAsync(send, recv, root);
        }

        @Override
        public Work reduceAsync(Buffer send, Buffer recv, ReduceOp op, int root) {
            return inner.reduceAsync(send, recv, op, root);
        }

        @Override
        public Work allGatherAsync(Buffer send, Buffer recv) {
            return inner.allGatherAsync(send, recv);
        }

        @Override
        public Work reduceScatterAsync(Buffer send, Buffer recv, ReduceOp op) {
            return inner.reduceScatterAsync(send, recv, op);
        }

        @Override
        public Work allToAllAsync(Buffer send, Buffer recv) {
            return inner.allToAllAsync(send, recv);
        }

        @Override
        public Work allToAllvAsync(Buffer send, long[] sendCounts, long[] sendDispls, Buffer recv, long[] recvCounts, long[] recvDispls) {
            return inner.allToAllvAsync(send, sendCounts, sendDispls, recv, recvCounts, recvDispls);
        }

        @Override
        public Work gatherAsync(Buffer send, Buffer recv, int root) {
            return inner.gatherAsync(send, recv, root);
        }

        @Override
        public Work scatterAsync(Buffer send, Buffer recv, int root) {
            return inner.scatterAsync(send, recv, root);
        }

        @Override
        public Work barrierAsync() {
            return inner.barrierAsync();
        }

        @Override
        public Work sendAsync(Buffer buf, int peer) {
            return inner.sendAsync(buf, peer);
        }

        @Override
        public Work recvAsync(Buffer buf, int peer) {
            return inner.recvAsync(buf, peer);
        }

        @Override
        public Group group() {
            return inner.group();
        }

        @Override
        public Communicator split(int color, int key) {
            return inner.split(color, key);
        }

        @Override
        public Communicator dup() {
            return inner.dup();
        }

        @Override
        public Communicator shrink(int... excludedRanks) {
            return inner.shrink(excludedRanks);
        }

        @Override
        public org.jccl.CommStats stats() {
            return inner.stats();
        }

        @Override
        public void abort() {
            inner.abort();
        }

        @Override
        public void close() {
            inner.close();
        }
    }
}
