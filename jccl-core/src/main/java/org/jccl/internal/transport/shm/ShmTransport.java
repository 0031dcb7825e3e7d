package org.jccl.internal.transport.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.spi.CollectiveProvider;
import org.jccl.spi.Endpoint;
import org.jccl.spi.LinkCosts;
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

    /*
     * The /dev/shm rings, measured inside real algorithms rather than by a ping-pong (whose 0.23 us
     * alpha priced the point-to-point algorithms below the shared segment they lose to):
     * TunerCalibration SHM-STEP, 2026-11-21 14:55-14:57 UTC, load 2-3, six runs, medians: two ranks,
     * each blocking all-reduce timed alone after a barrier; alpha = recursive doubling's 8-byte
     * all-reduce (one exchange step, call included: 0.51-1.21 us, median 0.56; the ring's two steps
     * 0.79-2.82, median 0.97), beta = the ring's slope between 1 MiB and 16 MiB (2.3e-10 s/B, median)
     * less its reduction (gamma / 2): 1.86e-10 s/B, 5.4 GB/s, the two copies per transfer of the
     * rings included.
     */
    /** What a message costs over the rings. */
    public static final LinkCosts COSTS = new LinkCosts(0.56e-6, 1.86e-10, "inside algorithms, TunerCalibration SHM-STEP, 2026-11-21");

    /*
     * As the same-host stage of a hierarchical collective: beta is the rings' ping-pong slope between
     * 1 MiB and 16 MiB, TunerCalibration, 2026-11-21 (docs/PERFORMANCE.md, "SHM tuner constants":
     * 12.8 GB/s); alpha stays loopback TCP's, as when that stage was measured (docs/PERFORMANCE.md,
     * "Hierarchical collectives"): with the rings' per-step alpha (0.56 us) the model prices the
     * hierarchical all-reduce below flat recursive doubling from 8 B (one cross-host step instead of
     * two), where on this 2-core machine with 4 rank JVMs flat measured faster up to 32 KiB (each of
     * the hierarchy's three stages waits for a core). Flat collectives use COSTS.
     */
    /** What a message costs over the rings as the same-host stage of a hierarchical collective. */
    public static final LinkCosts HOST_STAGE_COSTS = new LinkCosts(6.43e-6, 7.8e-11,
            "ping-pong slope, TunerCalibration 2026-11-21; loopback TCP's alpha (hierarchical stage)");

    @Override
    public LinkCosts costs() {
        return COSTS;
    }

    @Override
    public LinkCosts hostStageCosts() {
        return HOST_STAGE_COSTS;
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
     * SHM's collective provider ({@link ShmCollectives}): makes or maps the communicator's shared
     * collective segment through this transport's endpoint ({@link ShmCollArea}); the runtime asks once,
     * after every endpoint's {@code prepare}, when every pair of ranks uses SHM. Null when rank 0 asked
     * for none ({@code JCCL_SHM_COLL_BUFFER=0}): every rank reads that from rank 0's address.
     *
     * @throws IOException when the segment cannot be made or mapped in time
     */
    @Override
    public CollectiveProvider openCollectives(Endpoint endpoint) throws IOException {
        ShmCollArea area = ((ShmEndpoint) endpoint).openCollArea();
        return area == null ? null : new ShmCollectives(area);
    }

    /** True for two ranks of one host that both opened an SHM endpoint. */
    @Override
    public boolean canConnect(PeerInfo self, PeerInfo peer) {
        return self.hostHash().equals(peer.hostHash()) && self.addresses().containsKey(NAME) && peer.addresses().containsKey(NAME);
    }
}
