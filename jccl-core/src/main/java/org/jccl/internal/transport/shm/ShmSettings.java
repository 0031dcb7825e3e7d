package org.jccl.internal.transport.shm;

import java.nio.file.Path;
import java.time.Duration;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;

/**
 * The SHM transport's settings, read and checked once when an endpoint opens (Aeron's
 * {@code Context.conclude()}); the endpoint reads fields afterwards, never the configuration.
 *
 * @param dir where the rings and segments live ({@code JCCL_SHM_DIR})
 * @param slots slots per ring ({@code JCCL_SHM_SLOTS})
 * @param slotBytes bytes per slot ({@code JCCL_SHM_CHUNK})
 * @param idleSpinMicros the runtime's spin phase ({@code JCCL_IDLE_SPIN_US}), which the waiting flags follow
 * @param collBuffer bytes of the shared collective segment per rank ({@code JCCL_SHM_COLL_BUFFER}); 0: none
 * @param collSlotBytes bytes per round of the shared segment ({@code JCCL_SHM_COLL_SLOT})
 * @param collRing rounds in flight in the shared segment ({@code JCCL_SHM_COLL_RING})
 * @param connectTimeout how long to wait for a peer's rings ({@code JCCL_CONNECT_TIMEOUT})
 */
record ShmSettings(Path dir, int slots, long slotBytes, long idleSpinMicros, long collBuffer, long collSlotBytes, int collRing,
                   Duration connectTimeout) {

    /**
     * Reads and checks the SHM settings of {@code config}.
     *
     * @throws ConfigException naming the variable, its value and what is allowed
     */
    static ShmSettings conclude(Config config) {
        return new ShmSettings(Path.of(Settings.SHM_DIR.getString(config)), Settings.SHM_SLOTS.getInt(config),
                Settings.SHM_CHUNK.getLong(config), Settings.IDLE_SPIN_US.getLong(config), Settings.SHM_COLL_BUFFER.getLong(config),
                Settings.SHM_COLL_SLOT.getLong(config), Settings.SHM_COLL_RING.getInt(config), Settings.CONNECT_TIMEOUT.getDuration(config));
    }
}
