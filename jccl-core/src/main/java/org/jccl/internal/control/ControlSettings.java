package org.jccl.internal.control;

import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.net.Tls;

/**
 * The control plane's settings, read and checked once when a communicator is created (Aeron's
 * {@code Context.conclude()}, as the transports' {@code TcpSettings} and {@code ShmSettings}): every
 * bad value fails there, before a port is held, and the control plane reads fields afterwards, never
 * the configuration. Split and shrink reuse their parent's (the same configuration).
 *
 * @param peerTimeout silence after which a peer is declared failed ({@code JCCL_PEER_TIMEOUT}); heartbeats every quarter of it
 * @param stallWarn how long an operation may wait before the ranks compare where they are ({@code JCCL_STALL_WARN})
 * @param linger how long the hub supervises after its own close() ({@code JCCL_CONTROL_LINGER})
 * @param connectTimeout how long the star may take to connect ({@code JCCL_CONNECT_TIMEOUT})
 * @param tls TLS for the control connections ({@code JCCL_TLS}), or null
 * @param dumpDir where flight-recorder dumps and status files go ({@code JCCL_DUMP_DIR}, else /tmp/jccl-&lt;user&gt;)
 */
public record ControlSettings(Duration peerTimeout, Duration stallWarn, Duration linger, Duration connectTimeout, Tls tls,
                              Path dumpDir) {

    /**
     * Reads and checks the control plane's settings of {@code config}.
     *
     * @throws ConfigException naming the variable, its value and what is allowed
     */
    public static ControlSettings conclude(Config config) {
        return new ControlSettings(Settings.PEER_TIMEOUT.getDuration(config), Settings.STALL_WARN.getDuration(config),
                Settings.CONTROL_LINGER.getDuration(config), Settings.CONNECT_TIMEOUT.getDuration(config), Tls.fromConfig(config),
                dumpDir(config));
    }

    /** The flight recorder dump and status files go here: {@code JCCL_DUMP_DIR}, else {@code <tmpdir>/jccl-<user>}. */
    static Path dumpDir(Config config) {
        String d = Settings.DUMP_DIR.getString(config);
        if (d != null && !d.isBlank()) {
            return Path.of(d);
        }
        return Path.of(System.getProperty("java.io.tmpdir"), "jccl-" + System.getProperty("user.name", "user"));
    }

    /** {@link #peerTimeout} in nanoseconds. */
    long peerTimeoutNanos() {
        return peerTimeout.toNanos();
    }

    /** {@link #stallWarn} in nanoseconds. */
    long stallWarnNanos() {
        return stallWarn.toNanos();
    }

    /** {@link #linger} in nanoseconds. */
    long lingerNanos() {
        return linger.toNanos();
    }

    /** How long collecting the ranks' states (stall report, status query) waits for answers: half the peer timeout, within 0.5 to 2 s. */
    long collectNanos() {
        return Math.max(TimeUnit.MILLISECONDS.toNanos(500), Math.min(TimeUnit.SECONDS.toNanos(2), peerTimeoutNanos() / 2));
    }
}
