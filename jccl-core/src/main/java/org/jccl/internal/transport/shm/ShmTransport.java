package org.jccl.internal.transport.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.spi.Endpoint;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.jccl.spi.TransportContext;

/**
 * Ranks on one host (same boot id and host name, {@link PeerInfo#hostHash()}) move messages through
 * rings in memory-mapped files under {@code JCCL_SHM_DIR} (default /dev/shm): see {@link
 * ShmEndpoint} for the set-up and {@link ShmConnection} for the protocol. Priority 20: after the
 * in-JVM transport (0), before TCP (100). Off with {@code JCCL_SHM_DISABLE=1} ({@code NCCL_SHM_DISABLE}).
 */
public final class ShmTransport implements Transport {
    /** The transport's name, also the key of its address in {@link PeerInfo#addresses()}. */
    public static final String NAME = "SHM";
    /** Between LOCAL (0) and TCP (100). */
    public static final int PRIORITY = 20;

    /** Creates the transport; it holds no state, every endpoint is independent. */
    public ShmTransport() {
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    /** On unless disabled, and only where the directory exists (not on hosts without /dev/shm). */
    @Override
    public boolean isEnabled(Config config) {
        if (Settings.SHM_DISABLE.getBool(config)) {
            return false;
        }
        Path dir = Path.of(Settings.SHM_DIR.getString(config));
        if (!Files.isDirectory(dir) || !Files.isWritable(dir)) {
            Log.warn(Log.Subsys.INIT, -1, "SHM transport off: JCCL_SHM_DIR " + dir + " is not a writable directory");
            return false;
        }
        return true;
    }

    @Override
    public Endpoint open(TransportContext context) throws IOException {
        return new ShmEndpoint(context);
    }

    /**
     * Makes or maps the communicator's shared collective segment through this transport's endpoint
     * ({@link ShmCollArea}); for the runtime, once, after every endpoint's {@code prepare}, when every
     * pair of ranks uses SHM. Null when rank 0 asked for none ({@code JCCL_SHM_COLL_BUFFER=0}).
     *
     * @throws IOException when the segment cannot be made or mapped in time
     */
    public static ShmCollArea openCollArea(Endpoint endpoint) throws IOException {
        return ((ShmEndpoint) endpoint).openCollArea();
    }

    /** True for two ranks of one host that both opened an SHM endpoint. */
    @Override
    public boolean canConnect(PeerInfo self, PeerInfo peer) {
        return self.hostHash().equals(peer.hostHash()) && self.addresses().containsKey(NAME) && peer.addresses().containsKey(NAME);
    }
}
