package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.tune.AlgoSelector;
import org.junit.jupiter.api.Test;

/**
 * The runtime's settings concluded once ({@link RuntimeSettings#conclude}): the defaults, the values
 * derived from them, and every bad value refused with the words {@link Config#validate()} uses.
 */
class RuntimeSettingsTest {

    @Test
    void defaults() {
        RuntimeSettings s = RuntimeSettings.conclude(Config.defaults());
        assertEquals(Duration.ofSeconds(120), s.initTimeout());
        assertEquals(512 << 10, s.chunkBytes());
        assertEquals(-1, s.rdThreshold(), "JCCL_RD_THRESHOLD unset: the tuner picks");
        for (AlgoSelector.Coll c : AlgoSelector.Coll.values()) {
            for (AlgoSelector.Algo a : AlgoSelector.Algo.values()) {
                assertTrue(s.algorithms().allowed(c, a), c + " " + a);
            }
        }
        assertEquals(Settings.CHECK_GUARD, s.checkLevel());
        assertTrue(s.guardOn());
        assertFalse(s.fullCheck());
        assertEquals(1024, s.flightRecorderSize());
        assertEquals(128, s.maxInFlight());
        assertEquals(1_000_000L, s.opThreadDelayNanos());
        assertEquals(200_000L, s.idleSpinNanos());
        assertEquals(2_000_000L, s.idleYieldNanos());
        assertEquals(0L, s.idleSpinYieldNanos());
        assertEquals(Duration.ofSeconds(10), s.control().peerTimeout());
        assertEquals(Duration.ofSeconds(30), s.control().stallWarn());
        assertEquals(Duration.ofSeconds(300), s.control().linger());
        assertEquals(Duration.ofSeconds(30), s.control().connectTimeout());
        assertNull(s.control().tls(), "JCCL_TLS is off by default");
        assertTrue(s.control().dumpDir().getFileName().toString().startsWith("jccl-"), s.control().dumpDir().toString());
    }

    @Test
    void derivedValues() {
        RuntimeSettings s = RuntimeSettings.conclude(Config.defaults().with("JCCL_IDLE_SPIN_US", "5").with("JCCL_IDLE_YIELD_US", "7")
                .with("JCCL_IDLE_SPIN_YIELD_US", "3").with("JCCL_OP_THREAD_DELAY_US", "0").with("JCCL_MAX_INFLIGHT", "1")
                .with("JCCL_RD_THRESHOLD", "64K").with("JCCL_CHUNK_SIZE", "1M").with("JCCL_ALGO", "allreduce:ring")
                .with("JCCL_CHECK", "1").with("JCCL_INIT_TIMEOUT", "2.5").with("JCCL_DUMP_DIR", "/x/y"));
        assertEquals(5_000L, s.idleSpinNanos());
        assertEquals(7_000L, s.idleYieldNanos());
        assertEquals(3_000L, s.idleSpinYieldNanos());
        assertEquals(0L, s.opThreadDelayNanos());
        assertEquals(1, s.maxInFlight());
        assertEquals(65_536L, s.rdThreshold());
        assertEquals(1L << 20, s.chunkBytes());
        assertTrue(s.algorithms().allowed(AlgoSelector.Coll.ALLREDUCE, AlgoSelector.Algo.RING));
        assertFalse(s.algorithms().allowed(AlgoSelector.Coll.ALLREDUCE, AlgoSelector.Algo.RD));
        assertTrue(s.algorithms().allowed(AlgoSelector.Coll.BROADCAST, AlgoSelector.Algo.TREE), "other collectives unrestricted");
        assertEquals(Settings.CHECK_FULL, s.checkLevel());
        assertTrue(s.guardOn());
        assertTrue(s.fullCheck());
        assertEquals(Duration.ofMillis(2500), s.initTimeout());
        assertEquals("/x/y", s.control().dumpDir().toString());

        RuntimeSettings none = RuntimeSettings.conclude(Config.defaults().with("JCCL_CHECK", "none"));
        assertEquals(Settings.CHECK_NONE, none.checkLevel());
        assertFalse(none.guardOn());
        assertFalse(none.fullCheck());
        assertEquals(Settings.CHECK_GUARD, RuntimeSettings.conclude(Config.defaults().with("JCCL_CHECK", "0")).checkLevel());
    }

    /** Each bad value: conclude refuses it with exactly the message of Config#validate(), which names the variable and value. */
    @Test
    void everyBadValueIsRefusedWithTheValidateMessage() {
        String[][] bad = {
            {"JCCL_MAX_INFLIGHT", "0", "an integer from 1 to 1048576"},
            {"JCCL_MAX_INFLIGHT", "many", "an integer"},
            {"JCCL_OP_THREAD_DELAY_US", "-1", "an integer from 0 to 100000000"},
            {"JCCL_IDLE_SPIN_US", "abc", "an integer"},
            {"JCCL_IDLE_YIELD_US", "200000000", "an integer from 0 to 100000000"},
            {"JCCL_IDLE_SPIN_YIELD_US", "-5", "an integer from 0 to 100000000"},
            {"JCCL_CHUNK_SIZE", "1K", "a byte count from 4K to 1G"},
            {"JCCL_RD_THRESHOLD", "lots", "a byte count such as 4194304, 4096K or 4M"},
            {"JCCL_FLIGHT_RECORDER_SIZE", "8", "an integer from 16 to 1048576"},
            {"JCCL_INIT_TIMEOUT", "0", "between 1 and 86400 seconds"},
            {"JCCL_ALGO", "bogus", "names algorithm 'bogus'"},
            {"JCCL_CHECK", "maybe", "0 (the mismatch guard), 1 (the guard and the full signature exchange) or none"},
            {"JCCL_CHECK", "off", "does not say whether it should stay on"},
            {"JCCL_PEER_TIMEOUT", "0.5", "between 1 and 86400 seconds"},
            {"JCCL_STALL_WARN", "soon", "a number of seconds"},
            {"JCCL_CONTROL_LINGER", "-1", "between 0 and 86400 seconds"},
            {"JCCL_CONNECT_TIMEOUT", "100000", "between 1 and 86400 seconds"},
        };
        for (String[] b : bad) {
            Config c = Config.defaults().with(b[0], b[1]);
            ConfigException e = assertThrows(ConfigException.class, () -> RuntimeSettings.conclude(c), b[0] + "=" + b[1]);
            String m = e.getMessage();
            assertTrue(m.contains(b[0]) && m.contains(b[1]) && m.contains(b[2]), b[0] + "=" + b[1] + ": " + m);
            ConfigException v = assertThrows(ConfigException.class, c::validate, b[0] + "=" + b[1]);
            assertEquals(v.getMessage(), m, "conclude and validate must say the same for " + b[0] + "=" + b[1]);
        }
    }

    @Test
    void tlsWithoutItsStoresIsRefusedBeforeAnythingOpens() {
        ConfigException e = assertThrows(ConfigException.class, () -> RuntimeSettings.conclude(Config.defaults().with("JCCL_TLS", "1")));
        assertTrue(e.getMessage().contains("JCCL_TLS=1 needs JCCL_TLS_KEYSTORE"), e.getMessage());
    }
}
