package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.spi.CollectiveProvider.Collective;
import org.jccl.testing.ProviderTransport;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The runtime's side of the collective provider SPI: a transport it knows only through ServiceLoader
 * ({@link ProviderTransport}, TESTCOLL) gets its collective path used where the tuner picks it (calls counted,
 * results checked), the point-to-point algorithms run where it declines (a size, a collective) or JCCL_ALGO
 * excludes it, a mismatch it hands to the call fails with the mismatch guard's own message, and transports that
 * offer no provider (LOCAL, TCP) have none. SHM's provider is covered by SharedSegmentTest, ShmSharedSegmentTest,
 * ShmSharedGuardTest and CollectiveProviderConformance.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CollectiveProviderRuntimeTest {
    private static final Duration STEP = Duration.ofSeconds(60);

    @AfterEach
    void off() {
        ProviderTransport.enable(false);
    }

    private static CommunicatorImpl impl(Communicator c) {
        return (CommunicatorImpl) c;
    }

    private static List<Communicator> testColl(int n, Config config) {
        ProviderTransport.enable(true);
        try {
            return Jccl.initLocal(n, config);
        } finally {
            ProviderTransport.enable(false); // communicators made from here on do not see it; the counts start at 0
        }
    }

    @Test
    void aTransportFoundThroughTheSpiGetsItsCollectivePathUsed() {
        List<Communicator> cs = testColl(3, Config.defaults());
        try {
            for (Communicator c : cs) {
                assertEquals(ProviderTransport.NAME, impl(c).transportName((c.rank() + 1) % 3));
                assertEquals(ProviderTransport.NAME + " test board", impl(c).provider().describe());
            }
            Ranks.run(cs, STEP, c -> {
                float[] small = new float[100]; // 400 B: the provider's
                float[] large = new float[10_000]; // 40 KB: declined (infinite cost), point-to-point
                for (int i = 0; i < small.length; i++) {
                    small[i] = c.rank() + i;
                }
                for (int i = 0; i < large.length; i++) {
                    large[i] = c.rank() * 2 + i % 7;
                }
                c.allReduce(small, ReduceOp.SUM);
                c.allReduce(large, ReduceOp.SUM);
                for (int i = 0; i < small.length; i++) {
                    assertEquals(3 + 3 * i, small[i], 0);
                }
                for (int i = 0; i < large.length; i++) {
                    assertEquals(6 + 3 * (i % 7), large[i], 0);
                }
                int[] mine = {c.rank(), c.rank() * 10};
                int[] all = new int[6];
                c.allGather(Buffer.of(mine), Buffer.of(all));
                assertEquals(List.of(0, 0, 1, 10, 2, 20), java.util.Arrays.stream(all).boxed().toList());
                double[] rsIn = {1, 2, 3, 4, 5, 6};
                double[] rsOut = new double[2];
                c.reduceScatter(Buffer.of(rsIn), Buffer.of(rsOut), ReduceOp.SUM); // not supported: the ring
                assertEquals(3 * (2 * c.rank() + 1), rsOut[0], 0);
                c.barrier();
            });
            // every rank counts its own calls
            assertEquals(3, ProviderTransport.calls(Collective.ALL_REDUCE), "the small all-reduce only");
            assertEquals(3, ProviderTransport.calls(Collective.ALL_GATHER));
            assertTrue(ProviderTransport.calls(Collective.BARRIER) >= 3, "barriers: " + ProviderTransport.calls(Collective.BARRIER));
            assertEquals(0, ProviderTransport.calls(Collective.REDUCE_SCATTER));
            for (Communicator c : cs) {
                assertTrue(c.stats().bytesSent() > 400, "the provider's bytes are counted: " + c.stats());
            }
        } finally {
            cs.forEach(Communicator::close);
        }
    }

    @Test
    void jcclAlgoExcludesTheProviderByItsName() {
        List<Communicator> cs = testColl(2, Config.defaults().with("JCCL_ALGO", "allreduce:^shared"));
        try {
            Ranks.run(cs, STEP, c -> {
                float[] small = {1, 2, 3};
                c.allReduce(small, ReduceOp.SUM);
                assertEquals(2, small[0], 0);
            });
            assertEquals(0, ProviderTransport.calls(Collective.ALL_REDUCE));
        } finally {
            cs.forEach(Communicator::close);
        }
        // Only the provider allowed, and it declines the size: a clear error, not a silent fallback.
        List<Communicator> only = testColl(2, Config.defaults().with("JCCL_ALGO", "allreduce:shared"));
        try {
            JcclException e = assertThrows(JcclException.class, () -> only.get(0).allReduce(new float[10_000], ReduceOp.SUM));
            assertTrue(e.getMessage().contains("declines 40000 B"), e.getMessage());
        } finally {
            only.forEach(Communicator::abort);
        }
    }

    @Test
    void aMismatchTheProviderFindsFailsWithTheGuardsMessage() {
        List<Communicator> cs = testColl(2, Config.defaults());
        try {
            List<Throwable> errors = new java.util.concurrent.CopyOnWriteArrayList<>();
            Ranks.run(cs, STEP, c -> {
                try {
                    c.allReduce(new float[c.rank() == 0 ? 8 : 7], ReduceOp.SUM);
                } catch (JcclException e) {
                    errors.add(e);
                }
            });
            assertTrue(!errors.isEmpty(), "neither rank failed");
            assertTrue(ProviderTransport.calls(Collective.ALL_REDUCE) > 0, "the calls went to the provider");
            boolean found = false;
            for (Throwable t : errors) {
                if (t instanceof InvalidUsageException u && u.code() == ErrorCode.MISMATCH) {
                    found = true;
                    assertTrue(u.getMessage().contains("mismatched collective calls: rank ") && u.getMessage().contains("(found by the mismatch guard)")
                            && u.getMessage().contains("they differ in count"), u.getMessage());
                }
            }
            assertTrue(found, "no mismatch error: " + errors);
        } finally {
            cs.forEach(Communicator::abort);
        }
    }

    @Test
    void transportsWithoutAProviderRunThePointToPointAlgorithms() {
        for (Config cfg : new Config[] {Config.defaults(), Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1")}) {
            List<Communicator> cs = Jccl.initLocal(2, cfg);
            try {
                for (Communicator c : cs) {
                    assertNull(impl(c).provider(), impl(c).transportName(1 - c.rank()));
                    assertTrue(!impl(c).tuner().sharedAvailable());
                }
                Ranks.run(cs, STEP, c -> {
                    float[] v = {c.rank() + 1f};
                    c.allReduce(v, ReduceOp.SUM);
                    assertEquals(3, v[0], 0);
                    c.barrier();
                });
            } finally {
                cs.forEach(Communicator::close);
            }
        }
    }
}
