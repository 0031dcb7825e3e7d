package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * close() issued while an operation is still running, and that operation then fails because its
 * peer went away: close() must still return (the failure's abort must not swallow close()'s stop
 * request, leaving the operation thread waiting for work forever).
 */
class CloseDuringFailureTest {

    @ParameterizedTest(name = "transport={0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void closeReturnsWhenTheRunningOperationFails(String transport) throws Exception {
        List<Communicator> cs = Jccl.initLocal(2, Config.defaults().with("JCCL_LOCAL_DISABLE", transport.equals("LOCAL") ? "0" : "1")
                .with("JCCL_SHM_DISABLE", transport.equals("TCP") ? "1" : "0"));
        Communicator c0 = cs.get(0);
        try {
            float[] x = new float[1000];
            Work w = c0.allReduceAsync(Buffer.of(x), Buffer.of(x), ReduceOp.SUM); // rank 1 never joins
            Thread.sleep(200);
            assertFalse(w.isDone(), "an all-reduce finished without rank 1");
            Thread closer = new Thread(c0::close, "closer");
            closer.start();
            Thread.sleep(200);   // close() has queued its stop request and waits for the operation
            cs.get(1).abort();   // rank 1 drops its connections: rank 0's all-reduce fails on its operation thread
            closer.join(10_000);
            assertFalse(closer.isAlive(), "close() did not return after the running operation failed");
            JcclException e = assertThrows(JcclException.class, w::join);
            assertEquals(ErrorCode.PEER_FAILED, e.code(), e.toString());
        } finally {
            cs.forEach(Communicator::abort);
        }
    }
}
