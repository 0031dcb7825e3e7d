package org.jccl.internal.transport.shm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A peer that sends its last message and closes its communicator between a receiver's read of the ring
 * (empty) and its look at the peer's state must not fail the receive with "closed by the peer": the
 * message is in the ring. Made deterministic with {@link ShmConnection#beforeCheckPeer}: rank 1's
 * receive finds the ring empty, then (in the hook) lets rank 0 send and close, and only then looks at
 * rank 0's state.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShmCloseRaceTest {
    @Test
    void aMessageSentRightBeforeThePeerClosedIsReceived() throws Exception {
        Config cfg = Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_INIT_TIMEOUT", "30");
        List<Communicator> cs = Jccl.initLocal(2, cfg);
        CountDownLatch go = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        AtomicBoolean hooked = new AtomicBoolean();
        int[] want = {7, 8, 9, 10};
        try {
            Ranks.run(cs, Duration.ofSeconds(30), c -> {
                // The SHM connection between the two ranks is up before the race.
                int[] warm = {c.rank()};
                if (c.rank() == 0) {
                    c.send(Buffer.of(warm), 1);
                } else {
                    c.recv(Buffer.of(warm), 0);
                }
                if (c.rank() == 0) {
                    assertTrue(go.await(20, TimeUnit.SECONDS), "rank 1's receive never found the ring empty");
                    c.send(Buffer.of(want.clone()), 1);
                    c.close();
                    closed.countDown();
                } else {
                    ShmConnection.beforeCheckPeer = () -> {
                        if (hooked.compareAndSet(false, true)) {
                            go.countDown();
                            try {
                                assertTrue(closed.await(20, TimeUnit.SECONDS), "rank 0 did not close");
                            } catch (InterruptedException e) {
                                Thread.currentThread().interrupt();
                            }
                        }
                    };
                    int[] got = new int[4];
                    c.recv(Buffer.of(got), 0);
                    assertArrayEquals(want, got);
                }
            });
        } finally {
            ShmConnection.beforeCheckPeer = null;
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
        assertTrue(hooked.get(), "the receive never met the hook: the race was not made");
    }
}
