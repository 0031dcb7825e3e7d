package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.testing.FdWakeTransport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Wake descriptors end to end ({@code Endpoint#wakeFd}, issue 19's SPI for UCX's worker event fd): a
 * transport found through ServiceLoader whose peers signal their sends only by writing into the receiving
 * endpoint's pipe ({@link FdWakeTransport}; its connections have no Java channels). A rank that waits long
 * enough to block (its peer sleeps 300 ms before sending) arms the descriptor, and the runtime's watcher
 * of it wakes the rank: the results are right and the watcher counted its wake-ups. Without the watcher
 * the rank would only notice the data when its timed select ran out.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FdWakeEndToEndTest {

    @BeforeEach
    void on() {
        FdWakeTransport.enable(true);
    }

    @AfterEach
    void off() {
        FdWakeTransport.enable(false);
    }

    @Test
    void aBlockedRankIsWokenThroughItsTransportsWakeDescriptor() throws Exception {
        List<Communicator> comms = Jccl.initLocal(2, Config.defaults().with("JCCL_SHM_DISABLE", "1"));
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            for (Communicator c : comms) {
                assertEquals(FdWakeTransport.NAME, ((CommunicatorImpl) c).routing().transportName(1 - c.rank()),
                        "every pair of ranks uses the test transport (priority -1)");
            }
            List<Future<int[]>> fs = new ArrayList<>();
            for (Communicator c : comms) {
                fs.add(pool.submit(() -> {
                    int[] out = new int[3];
                    for (int round = 0; round < 3; round++) {
                        if (c.rank() == 1) {
                            Thread.sleep(300); // rank 0 waits long enough to block in its selector, armed
                        }
                        int[] x = {c.rank() + 1, 10 * round};
                        c.allReduce(Buffer.of(x), ReduceOp.SUM);
                        out[round] = x[0] * 1000 + x[1];
                    }
                    return out;
                }));
            }
            for (Future<int[]> f : fs) {
                assertArrayEquals(new int[] {3000, 3020, 3040}, f.get(30, TimeUnit.SECONDS));
            }
            long wakeups = ((CommunicatorImpl) comms.get(0)).routing().fdWakeups();
            assertTrue(FdWakeTransport.arms() > 0, "rank 0 armed its descriptor before blocking");
            assertTrue(FdWakeTransport.signals() > 0, "the peers' sends went through the pipes");
            assertTrue(wakeups >= 1, "rank 0 blocked three times for 300 ms and was woken through the descriptor "
                    + wakeups + " times (arms " + FdWakeTransport.arms() + ", signals " + FdWakeTransport.signals() + ")");
        } finally {
            comms.forEach(Communicator::close);
            pool.shutdownNow();
        }
    }
}
