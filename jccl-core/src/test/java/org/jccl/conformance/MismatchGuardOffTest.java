package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What the guard is for, shown with it off and on, over every transport ranks of one JVM use: rank 0
 * all-reduces 1000 floats, rank 1 1000 int32s (the same size). With {@code JCCL_CHECK=none} both
 * calls return without an error and both results are wrong (each rank reduced the other's bits as
 * its own type): the failure the guard prevents. At the default the same calls fail on both ranks
 * with MISMATCH. If the guard stopped checking, the second half fails (and {@link
 * MismatchGuardConformance}'s type and op cases with it).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MismatchGuardOffTest {

    static Config config(String transport) {
        Config base = Config.defaults().with("JCCL_INIT_TIMEOUT", "30");
        return switch (transport) {
            case "LOCAL" -> base;
            case "TCP" -> base.with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1");
            case "SHM" -> base.with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_COLL_BUFFER", "0");
            case "SHARED" -> base.with("JCCL_LOCAL_DISABLE", "1").with("JCCL_ALGO", "allreduce:shared");
            default -> throw new IllegalArgumentException(transport);
        };
    }

    /** Runs the float-vs-int32 all-reduce; returns each rank's error (or null) and result. */
    static Map<Integer, Object> run(Config config, Map<Integer, JcclException> errors) {
        Map<Integer, Object> results = new ConcurrentHashMap<>();
        List<Communicator> cs = Jccl.initLocal(2, config);
        try {
            Ranks.run(cs, java.time.Duration.ofSeconds(60), c -> {
                try {
                    if (c.rank() == 0) {
                        float[] x = new float[1000];
                        java.util.Arrays.fill(x, 1f);
                        c.allReduce(Buffer.of(x), ReduceOp.SUM);
                        results.put(0, x);
                    } else {
                        int[] x = new int[1000];
                        java.util.Arrays.fill(x, 1);
                        c.allReduce(Buffer.of(x), ReduceOp.SUM);
                        results.put(1, x);
                    }
                } catch (JcclException e) {
                    errors.put(c.rank(), e);
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
        return results;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM", "SHARED"})
    void withoutTheGuardAWrongResultIsSilentWithItEveryRankFails(String transport) {
        Map<Integer, JcclException> errors = new ConcurrentHashMap<>();
        Map<Integer, Object> results = run(config(transport).with("JCCL_CHECK", "none"), errors);
        assertNull(errors.get(0), "guard off: rank 0 failed");
        assertNull(errors.get(1), "guard off: rank 1 failed");
        // 1.0f + (the float whose bits are int 1) = 1.0f, not 2; 1 + (the int whose bits are 1.0f) is not 2 either
        assertNotEquals(2f, ((float[]) results.get(0))[999], "guard off: rank 0's result");
        assertNotEquals(2, ((int[]) results.get(1))[999], "guard off: rank 1's result");

        errors.clear();
        results = run(config(transport), errors);
        assertEquals(Map.of(), results, "with the guard no rank may return");
        for (int r = 0; r < 2; r++) {
            MismatchGuardConformance.assertMismatch(r, errors.get(r), "allReduce (1000 x float sum)", "allReduce (1000 x int32 sum)");
            assertEquals(ErrorCode.MISMATCH, errors.get(r).code());
        }
    }
}
