package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Group;
import org.jccl.Jccl;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The field report of DEVELOPERS.md ("all-to-all dies with Resource temporarily unavailable at 32
 * ranks"), one step further: 64 ranks as threads of one JVM over TCP on loopback, where every
 * rank sends to and receives from every other rank at once, in one group, as the very first
 * operation, so that all 64 x 63 / 2 connections are set up at the same moment (a burst at every
 * listener: accept backlog, connect retries with backoff, bounded set-up); then the same again
 * on the established connections, then an all-to-all. Contents are checked block by block.
 */
class ManyRanksPairsTest {

    @ParameterizedTest(name = "{0} ranks over TCP")
    @ValueSource(ints = {64})
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void sendRecvBetweenEveryPairAtOnce(int n) {
        Config cfg = Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo");
        List<Communicator> comms = Jccl.initLocal(n, cfg);
        try {
            Ranks.run(comms, Duration.ofSeconds(240), c -> {
                int me = c.rank();
                for (int round = 0; round < 2; round++) {
                    int[][] out = new int[n][];
                    int[][] in = new int[n][];
                    try (Group g = c.group()) {
                        for (int p = 0; p < n; p++) {
                            if (p == me) {
                                continue;
                            }
                            out[p] = new int[] {me, p, round, me * 1000 + p};
                            in[p] = new int[4];
                            c.send(Buffer.of(out[p]), p);
                            c.recv(Buffer.of(in[p]), p);
                        }
                    }
                    for (int p = 0; p < n; p++) {
                        if (p != me) {
                            assertEquals(p, in[p][0], "sender of the block from " + p);
                            assertEquals(me, in[p][1], "addressee of the block from " + p);
                            assertEquals(round, in[p][2], "round of the block from " + p);
                            assertEquals(p * 1000 + me, in[p][3], "payload from " + p);
                        }
                    }
                }
                int[] send = new int[n * 2];
                int[] recv = new int[n * 2];
                for (int j = 0; j < n; j++) {
                    send[2 * j] = me;
                    send[2 * j + 1] = j;
                }
                c.allToAll(Buffer.of(send), Buffer.of(recv));
                for (int i = 0; i < n; i++) {
                    assertEquals(i, recv[2 * i], "allToAll block from " + i);
                    assertEquals(me, recv[2 * i + 1], "allToAll block from " + i + " addressed to");
                }
            });
        } finally {
            comms.forEach(Communicator::close);
        }
    }
}
