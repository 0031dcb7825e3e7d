package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * An idle communicator uses (almost) no CPU: after operations finish, jccl's threads (operation
 * threads, acceptors) block instead of polling. Measured with per-thread CPU time over one second.
 */
class IdleCpuTest {

    @ParameterizedTest(name = "transport={0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void idleCommunicatorsDoNotBurnCpu(String transport) throws Exception {
        List<Communicator> comms = Jccl.initLocal(3, Config.defaults().with("JCCL_LOCAL_DISABLE", transport.equals("LOCAL") ? "0" : "1")
                .with("JCCL_SHM_DISABLE", transport.equals("TCP") ? "1" : "0"));
        try {
            Ranks.run(comms, Duration.ofSeconds(30), c -> {
                float[] x = new float[100_000];
                for (int i = 0; i < 5; i++) {
                    c.allReduce(x, ReduceOp.SUM);
                }
                c.barrier();
            });
            // Let the wait loops finish their spin/yield phases (JCCL_IDLE_SPIN_US + JCCL_IDLE_YIELD_US, ~2 ms).
            Thread.sleep(100);
            ThreadMXBean mx = ManagementFactory.getThreadMXBean();
            Map<Long, Long> before = jcclThreadCpu(mx);
            assertTrue(!before.isEmpty(), "no jccl threads found");
            Thread.sleep(1000);
            Map<Long, Long> after = jcclThreadCpu(mx);
            long used = 0;
            for (Map.Entry<Long, Long> e : after.entrySet()) {
                used += e.getValue() - before.getOrDefault(e.getKey(), e.getValue());
            }
            // 3 ranks x (operation thread + acceptor): 50 ms of CPU in 1 s would already be a busy-poll.
            assertTrue(used < 50_000_000L, "jccl threads used " + used / 1_000_000 + " ms of CPU in 1 s of idleness");
        } finally {
            comms.forEach(Communicator::close);
        }
    }

    private static Map<Long, Long> jcclThreadCpu(ThreadMXBean mx) {
        Map<Long, Long> m = new HashMap<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("jccl")) {
                long cpu = mx.getThreadCpuTime(t.threadId());
                if (cpu >= 0) {
                    m.put(t.threadId(), cpu);
                }
            }
        }
        return m;
    }
}
