package org.jccl.internal.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.junit.jupiter.api.Test;

/** The control plane's settings: defaults and range checks that name the variable, the value and what is allowed. */
class ControlSettingsTest {

    @Test
    void defaults() {
        Config c = Config.defaults();
        assertEquals(Duration.ofSeconds(10), Settings.PEER_TIMEOUT.getDuration(c));
        assertEquals(Duration.ofSeconds(30), Settings.STALL_WARN.getDuration(c));
        assertEquals(1024, Settings.FLIGHT_RECORDER_SIZE.getInt(c));
        assertNull(Settings.DUMP_DIR.getString(c));
        assertTrue(ControlPlane.dumpDir(c).getFileName().toString().startsWith("jccl-"));
        assertEquals("/x/y", ControlPlane.dumpDir(c.with("JCCL_DUMP_DIR", "/x/y")).toString());
    }

    @Test
    void outOfRangeValuesAreErrorsNamingTheVariable() {
        String p = Settings.PEER_TIMEOUT.problem(Config.defaults().with("JCCL_PEER_TIMEOUT", "0.5"));
        assertTrue(p != null && p.contains("JCCL_PEER_TIMEOUT") && p.contains("0.5") && p.contains("between 1 and 86400 seconds"), p);
        String s = Settings.STALL_WARN.problem(Config.defaults().with("JCCL_STALL_WARN", "soon"));
        assertTrue(s != null && s.contains("JCCL_STALL_WARN") && s.contains("soon"), s);
        String f = Settings.FLIGHT_RECORDER_SIZE.problem(Config.defaults().with("JCCL_FLIGHT_RECORDER_SIZE", "8"));
        assertTrue(f != null && f.contains("JCCL_FLIGHT_RECORDER_SIZE") && f.contains("8"), f);
        assertNull(Settings.STALL_WARN.problem(Config.defaults().with("JCCL_STALL_WARN", "2.5")));
    }

    @Test
    void concludedOnceWithDerivedValues() {
        ControlSettings s = ControlSettings.conclude(Config.defaults());
        assertEquals(Duration.ofSeconds(10), s.peerTimeout());
        assertEquals(10_000_000_000L, s.peerTimeoutNanos());
        assertEquals(30_000_000_000L, s.stallWarnNanos());
        assertEquals(300_000_000_000L, s.lingerNanos());
        assertEquals(Duration.ofSeconds(30), s.connectTimeout());
        assertNull(s.tls());
        assertEquals(ControlPlane.dumpDir(Config.defaults()), s.dumpDir());
        // Collecting the ranks' states waits half the peer timeout, kept within 0.5 and 2 s.
        assertEquals(2_000_000_000L, s.collectNanos());
        assertEquals(1_500_000_000L, ControlSettings.conclude(Config.defaults().with("JCCL_PEER_TIMEOUT", "3")).collectNanos());
        assertEquals(500_000_000L, ControlSettings.conclude(Config.defaults().with("JCCL_PEER_TIMEOUT", "1")).collectNanos());
        assertEquals(0L, ControlSettings.conclude(Config.defaults().with("JCCL_CONTROL_LINGER", "0")).lingerNanos());
        assertEquals("/x/y", ControlSettings.conclude(Config.defaults().with("JCCL_DUMP_DIR", "/x/y")).dumpDir().toString());
    }
}
