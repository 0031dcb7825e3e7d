package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.Work;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Consecutive queued sends and receives run as one batch (Executor#runHead, OpRunner#executeBatch): all
 * posted, then waited for in issue order. When the peer goes away in the middle of a batch, the
 * operations it had completed keep their data, and every later one fails (none is left waiting), with
 * the communicator aborted once.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class P2pBatchTest {

    private static Config config(String transport) {
        Config c = Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo");
        return transport.equals("TCP") ? c.with("JCCL_SHM_DISABLE", "1") : c;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"TCP", "SHM"})
    void aPeerGoneInTheMiddleOfABatchFailsTheRestAndKeepsWhatCompleted(String transport) throws Exception {
        List<Communicator> comms = Jccl.initLocal(2, config(transport));
        Communicator sender = comms.get(0);
        Communicator receiver = comms.get(1);
        try {
            int k = 12;
            int sent = 4;
            List<int[]> got = new ArrayList<>();
            List<Work> works = new ArrayList<>();
            for (int i = 0; i < k; i++) {
                int[] b = new int[256];
                got.add(b);
                works.add(receiver.recvAsync(Buffer.of(b), 0));
            }
            for (int i = 0; i < sent; i++) {
                int[] out = new int[256];
                java.util.Arrays.fill(out, 1000 + i);
                sender.send(Buffer.of(out), 1);
            }
            // The receiver runs its queue (one batch of 12) while the sender goes away after 4 messages.
            Thread abort = Thread.ofPlatform().start(() -> {
                try {
                    Thread.sleep(300);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                sender.abort();
            });
            JcclException last = assertThrows(JcclException.class, () -> works.get(k - 1).join());
            abort.join();
            for (int i = 0; i < k; i++) {
                Work w = works.get(i);
                assertTrue(w.isDone(), "receive " + i + " is not done although the last one is");
                if (i < sent) {
                    w.join();
                    int[] want = new int[256];
                    java.util.Arrays.fill(want, 1000 + i);
                    assertArrayEquals(want, got.get(i), "receive " + i);
                } else {
                    JcclException e = assertThrows(JcclException.class, w::join, "receive " + i);
                    assertTrue(e.getMessage().contains("rank 0"), "the failure names the peer: " + e.getMessage());
                }
            }
            assertInstanceOf(JcclException.class, last);
            assertEquals(k, works.size());
        } finally {
            comms.forEach(Communicator::abort);
        }
    }
}
