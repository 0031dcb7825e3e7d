package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.function.Executable;

/**
 * What the public-API tests share: the two ways ranks of one JVM can talk (so every behaviour is
 * checked over both), and the "is this communicator still healthy" probe that follows every
 * provoked failure.
 */
final class ApiSupport {
    private ApiSupport() {
    }

    /** The transports ranks of one JVM can use; the API must behave the same over each. */
    enum Net {
        /** The in-JVM transport, the default between threads of one JVM. */
        LOCAL,
        /** Real TCP sockets on loopback, as between processes. */
        TCP;

        Config config() {
            Config base = Config.defaults().with("JCCL_INIT_TIMEOUT", "30");
            return this == LOCAL ? base : base.with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo");
        }

        List<Communicator> init(int n) {
            return Jccl.initLocal(n, config());
        }
    }

    /**
     * Communicators of one rank count, made once per transport and shared by the tests of a class
     * (initialisation over TCP costs more than most checks); a test that fails discards them, so
     * that one broken communicator does not fail every later test too.
     */
    static final class Shared {
        private final int n;
        private final Map<Net, List<Communicator>> comms = new EnumMap<>(Net.class);

        Shared(int n) {
            this.n = n;
        }

        synchronized List<Communicator> get(Net net) {
            return comms.computeIfAbsent(net, k -> k.init(n));
        }

        /** Runs {@code body} on every rank (one thread each); on any failure the communicators are aborted and dropped. */
        void run(Net net, Duration timeout, Ranks.Body body) {
            List<Communicator> cs = get(net);
            try {
                Ranks.run(cs, timeout, body);
            } catch (Throwable t) {
                synchronized (this) {
                    comms.remove(net);
                }
                abortAll(cs);
                throw t;
            }
        }

        synchronized void closeAll() {
            comms.values().forEach(ApiSupport::closeAll);
            comms.clear();
        }
    }

    /** Elements of the probe all-reduce: above one ring chunk's worth of small messages, still quick. */
    static final int PROBE_COUNT = 1031;

    /**
     * A real all-reduce on every rank (each must call it) whose sum is checked element by element:
     * after a bad call, this proves that nothing of the bad call was queued or sent (a stray
     * operation would pair with this one and corrupt or stall it) and that the communicator works.
     */
    static void probeAllReduce(Communicator c, int salt) {
        int n = c.size();
        int[] send = new int[PROBE_COUNT];
        int[] recv = new int[PROBE_COUNT];
        for (int i = 0; i < PROBE_COUNT; i++) {
            send[i] = probeValue(c.rank(), i, salt);
            recv[i] = Integer.MIN_VALUE;
        }
        c.allReduce(Buffer.of(send), Buffer.of(recv), ReduceOp.SUM);
        for (int i = 0; i < PROBE_COUNT; i++) {
            int expected = 0;
            for (int r = 0; r < n; r++) {
                expected += probeValue(r, i, salt);
            }
            if (recv[i] != expected) {
                assertEquals(expected, recv[i], "rank " + c.rank() + ": probe allReduce element " + i + " (salt " + salt + ")");
            }
        }
    }

    static int probeValue(int rank, int i, int salt) {
        return (rank + 1) * 1_000 + i * 7 + salt * 13;
    }

    /**
     * Asserts that {@code call} throws exactly {@code type} (or a subclass) and that its message
     * contains every fragment: users act on the message, so it must name the argument at fault.
     */
    static <T extends Throwable> T assertThrowsNaming(Class<T> type, Executable call, String... fragments) {
        T e = assertThrows(type, call);
        String m = String.valueOf(e.getMessage());
        for (String f : fragments) {
            assertTrue(m.contains(f), () -> type.getSimpleName() + " message lacks '" + f + "': " + m);
        }
        return e;
    }

    static void closeAll(List<Communicator> comms) {
        for (Communicator c : comms) {
            c.close();
        }
    }

    static void abortAll(List<Communicator> comms) {
        for (Communicator c : comms) {
            c.abort();
        }
    }
}
