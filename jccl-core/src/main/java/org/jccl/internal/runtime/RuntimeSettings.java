package org.jccl.internal.runtime;

import java.time.Duration;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Setting;
import org.jccl.internal.config.Settings;
import org.jccl.internal.control.ControlSettings;
import org.jccl.internal.tune.AlgoSelector;

/**
 * The runtime's settings, read and checked once when a communicator is created (Aeron's
 * {@code Context.conclude()}, as the transports' {@code TcpSettings} and {@code ShmSettings}): every
 * bad value fails here, before an endpoint opens, with the message {@link Config#validate()} gives,
 * and the communicator, its executor and its operation context read fields afterwards, never the
 * configuration. A split or shrunk communicator reuses its parent's (the same configuration).
 *
 * <p>It lives in the runtime package, not in {@code internal.config}, because it holds the runtime's
 * own types ({@link AlgoSelector}, the control plane's {@link ControlSettings}): the settings
 * package stays at the bottom of the layers, knowing names, defaults and ranges only, and each
 * layer concludes what it reads.
 *
 * <p>Not here: the transports' settings (each endpoint concludes its own when it opens), the
 * bootstrap's timeouts (read by the bootstrap package), and the GPU and NIC choice of
 * {@code TransportContextImpl} (computed when a transport asks, from the host's topology).
 *
 * @param initTimeout how long every rank waits for all ranks at initialisation ({@code JCCL_INIT_TIMEOUT})
 * @param chunkBytes pipelining chunk of ring algorithms ({@code JCCL_CHUNK_SIZE})
 * @param rdThreshold all-reduce messages up to this size use recursive doubling ({@code JCCL_RD_THRESHOLD}); -1: unset, the tuner picks
 * @param algorithms the algorithms each collective may use ({@code JCCL_ALGO})
 * @param checkLevel {@code JCCL_CHECK}: {@link Settings#CHECK_NONE}, {@link Settings#CHECK_GUARD} or {@link Settings#CHECK_FULL}
 * @param flightRecorderSize operations the flight recorder remembers ({@code JCCL_FLIGHT_RECORDER_SIZE})
 * @param maxInFlight operations issued and not finished before an asynchronous call waits ({@code JCCL_MAX_INFLIGHT})
 * @param opThreadDelayNanos how long a queued operation waits for its caller before the operation thread starts it ({@code JCCL_OP_THREAD_DELAY_US})
 * @param idleSpinNanos busy polling of a wait before it yields ({@code JCCL_IDLE_SPIN_US})
 * @param idleYieldNanos polling with Thread.yield() before a wait blocks ({@code JCCL_IDLE_YIELD_US})
 * @param idleSpinYieldNanos while spinning, a yield once every this long; 0: never ({@code JCCL_IDLE_SPIN_YIELD_US})
 * @param control the control plane's settings
 */
record RuntimeSettings(Duration initTimeout, long chunkBytes, long rdThreshold, AlgoSelector algorithms, int checkLevel,
                       int flightRecorderSize, int maxInFlight, long opThreadDelayNanos, long idleSpinNanos, long idleYieldNanos,
                       long idleSpinYieldNanos, ControlSettings control) {

    /**
     * Reads and checks the runtime's settings of {@code config}.
     *
     * @throws ConfigException naming the variable, its value and what is allowed
     */
    static RuntimeSettings conclude(Config config) {
        // The text settings by their grammar, with Config#validate()'s words (checkLevel reads any unknown word as 0).
        for (Setting s : new Setting[] {Settings.ALGO, Settings.CHECK}) {
            String problem = s.problem(config);
            if (problem != null) {
                throw new ConfigException(problem);
            }
        }
        return new RuntimeSettings(Settings.INIT_TIMEOUT.getDuration(config), Settings.CHUNK_SIZE.getLong(config),
                Settings.SMALL_MSG_BYTES.raw(config) == null ? -1 : Settings.SMALL_MSG_BYTES.getLong(config),
                AlgoSelector.parse(Settings.ALGO.getString(config)), Settings.checkLevel(config),
                Settings.FLIGHT_RECORDER_SIZE.getInt(config), Settings.MAX_INFLIGHT.getInt(config),
                micros(Settings.OP_THREAD_DELAY_US.getLong(config)), micros(Settings.IDLE_SPIN_US.getLong(config)),
                micros(Settings.IDLE_YIELD_US.getLong(config)), micros(Settings.IDLE_SPIN_YIELD_US.getLong(config)),
                ControlSettings.conclude(config));
    }

    private static long micros(long us) {
        return us * 1000;
    }

    /** Calls carry the mismatch guard's words: {@code JCCL_CHECK} is not {@code none}. */
    boolean guardOn() {
        return checkLevel != Settings.CHECK_NONE;
    }

    /** Ranks exchange the full signature of every collective: {@code JCCL_CHECK=1}. */
    boolean fullCheck() {
        return checkLevel == Settings.CHECK_FULL;
    }
}
