package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The upper end of the supported rank counts (up to 64), as threads of one JVM: every collective
 * on the in-JVM transport, and over TCP on loopback. Counts stay small; the conformance sweep
 * covers sizes and types.
 */
class ManyRanksTest {

    @ParameterizedTest(name = "{0} ranks, local disabled={1}, JCCL_ALGO={2}")
    @CsvSource(value = {"16, 0, ''", "33, 0, ''", "64, 0, ''", "17, 1, ''", "64, 1, ''",
        "33, 0, allreduce:rabenseifner;allgather:bruck;alltoall:bruck;broadcast:scatter_allgather",
        "64, 0, allreduce:rabenseifner;allgather:rd;alltoall:bruck;broadcast:scatter_allgather",
        "17, 1, allreduce:rd;allgather:rd;broadcast:scatter_allgather"}, delimiter = ',', quoteCharacter = '\'')
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void everyCollective(int n, int tcp, String algo) {
        Config cfg = Config.defaults().with("JCCL_LOCAL_DISABLE", Integer.toString(tcp))
                // TCP, not SHM: 64 ranks would reserve 64 x 63 shared-memory rings (16 GiB at the default size).
                .with("JCCL_SHM_DISABLE", Integer.toString(tcp));
        if (algo != null && !algo.isBlank()) {
            cfg = cfg.with("JCCL_ALGO", algo);
        }
        List<Communicator> comms = Jccl.initLocal(n, cfg);
        try {
            Ranks.run(comms, Duration.ofSeconds(240), c -> {
                int me = c.rank();
                for (int count : new int[] {0, 1, 7, 1000}) {
                    // allReduce: the tuner's choice (or JCCL_ALGO's) for these sizes, and for a bigger message below
                    long[] x = new long[count];
                    java.util.Arrays.fill(x, me + 1);
                    c.allReduce(Buffer.of(x), ReduceOp.SUM);
                    for (long v : x) {
                        assertEquals((long) n * (n + 1) / 2, v, "allReduce count " + count);
                    }
                    // broadcast from the last rank
                    int[] b = new int[count];
                    if (me == n - 1) {
                        java.util.Arrays.fill(b, 42);
                    }
                    c.broadcast(b, n - 1);
                    for (int v : b) {
                        assertEquals(42, v, "broadcast");
                    }
                    // allGather + reduceScatter + reduce
                    int[] mine = new int[count];
                    java.util.Arrays.fill(mine, me);
                    int[] all = new int[count * n];
                    c.allGather(Buffer.of(mine), Buffer.of(all));
                    for (int r = 0; r < n; r++) {
                        for (int i = 0; i < count; i++) {
                            assertEquals(r, all[r * count + i], "allGather block " + r);
                        }
                    }
                    // every rank passes the same gathered array: block r holds r everywhere, so its max is r;
                    // adding the rank makes the contributions differ: max over ranks of (r + rank) = me + n - 1
                    for (int i = 0; i < all.length; i++) {
                        all[i] += me;
                    }
                    int[] rs = new int[count];
                    c.reduceScatter(Buffer.of(all), Buffer.of(rs), ReduceOp.MAX);
                    for (int v : rs) {
                        assertEquals(me + n - 1, v, "reduceScatter max");
                    }
                    int[] red = new int[count];
                    c.reduce(Buffer.of(mine), Buffer.of(red), ReduceOp.SUM, 0);
                    if (me == 0) {
                        for (int v : red) {
                            assertEquals(n * (n - 1) / 2, v, "reduce");
                        }
                    }
                }
                // allToAll: block j of rank i holds i*100+j
                int[] send = new int[n * 3];
                int[] recv = new int[n * 3];
                for (int j = 0; j < n; j++) {
                    java.util.Arrays.fill(send, j * 3, j * 3 + 3, me * 100 + j);
                }
                c.allToAll(Buffer.of(send), Buffer.of(recv));
                for (int i = 0; i < n; i++) {
                    assertEquals(i * 100 + me, recv[i * 3 + 2], "allToAll from " + i);
                }
                // a bigger all-reduce: ring or rabenseifner by the tuner at these rank counts
                float[] big = new float[40_000];
                java.util.Arrays.fill(big, 1f);
                c.allReduce(big, ReduceOp.SUM);
                assertEquals(n, big[0]);
                assertEquals(n, big[big.length - 1]);
                c.barrier();
            });
        } finally {
            comms.forEach(Communicator::close);
        }
    }
}
