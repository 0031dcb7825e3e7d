package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.PeerFailedException;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A failed operation's exception carries where it happened as fields (rank, peer, operation,
 * sequence number), not only in its message, over every transport ranks of one JVM can use.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ExceptionContextTest {

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    void aMismatchNamesTheRankThePeerTheOperationAndItsNumber(String transport) {
        List<Communicator> cs = Jccl.initLocal(2, CollectiveMismatchTest.config(transport).with("JCCL_CHECK", "0"));
        ConcurrentHashMap<Integer, JcclException> errors = new ConcurrentHashMap<>();
        try {
            Ranks.run(cs, Duration.ofSeconds(30), c -> {
                c.allReduce(Buffer.of(new float[8]), ReduceOp.SUM); // operation #0 agrees
                try {
                    c.allReduce(Buffer.of(new float[c.rank() == 0 ? 8 : 4]), ReduceOp.SUM); // #1 differs in size
                } catch (JcclException e) {
                    errors.put(c.rank(), e);
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
        // Every rank fails; at least one found the mismatch itself (the other may fail with its report).
        assertEquals(2, errors.size(), errors.toString());
        boolean found = false;
        for (var en : errors.entrySet()) {
            int r = en.getKey();
            JcclException e = en.getValue();
            assertEquals(ErrorCode.MISMATCH, e.code(), e.getMessage());
            assertInstanceOf(InvalidUsageException.class, e);
            if (e.getMessage().startsWith("rank " + r + ": allReduce #1 ")) {
                found = true;
                assertEquals(r, e.rank(), e.getMessage());
                assertEquals(1 - r, e.peer(), e.getMessage());
                assertEquals("allReduce", e.operation(), e.getMessage());
                assertEquals(1, e.sequence(), e.getMessage());
            }
        }
        assertTrue(found, "no rank reported the mismatch of its own allReduce #1: " + errors);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    void aPeerThatLeftIsThePeerOfTheFailure(String transport) {
        List<Communicator> cs = Jccl.initLocal(2, CollectiveMismatchTest.config(transport).with("JCCL_CHECK", "0"));
        JcclException[] seen = new JcclException[1];
        try {
            Ranks.run(cs, Duration.ofSeconds(30), c -> {
                c.allReduce(Buffer.of(new float[8]), ReduceOp.SUM);
                if (c.rank() == 1) {
                    c.abort(); // rank 1 leaves while rank 0 waits in its operation #1
                    return;
                }
                try {
                    c.broadcast(Buffer.of(new float[8]), 1);
                } catch (JcclException e) {
                    seen[0] = e;
                }
            });
        } finally {
            cs.forEach(Communicator::abort);
            cs.forEach(Communicator::close);
        }
        JcclException e = seen[0];
        assertNotNull(e, "rank 0 waited for a rank that aborted and got no error");
        assertEquals(0, e.rank(), e.toString());
        assertEquals("broadcast", e.operation(), e.toString());
        assertEquals(1, e.sequence(), e.toString());
        PeerFailedException pf = assertInstanceOf(PeerFailedException.class, e);
        assertEquals(1, pf.peerRank());
        assertEquals(1, e.peer(), e.toString());
    }
}
