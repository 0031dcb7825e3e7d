package org.jccl.internal.doctor;

import java.util.List;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.internal.doctor.Doctor.Finding;
import org.jccl.internal.doctor.Doctor.Input;
import org.jccl.internal.doctor.Doctor.Status;
import org.jccl.internal.net.DeviceList;
import org.jccl.internal.topo.TopoText;
import org.jccl.internal.topo.Topology;
import org.jccl.internal.topo.Topology.Limits;
import org.jccl.internal.topo.Topology.RdmaDevice;

/**
 * What every group of {@link Doctor}'s checks shares: the input (topology, environment, N,
 * interfaces), the settings of that environment, the world size and the helpers that make a
 * {@link Finding}.
 */
abstract class Checks {

    final Input in;
    final Topology t;
    final Config config;

    /** {@code config}: the settings of {@code in}'s environment, read once for every group ({@link Config#fromEnvironment(java.util.Map)}). */
    Checks(Input in, Config config) {
        this.in = in;
        this.t = in.topo();
        this.config = config;
    }

    static Finding pass(String id, String msg) {
        return new Finding(id, Status.PASS, msg, "");
    }

    static Finding skip(String id, String why) {
        return new Finding(id, Status.SKIP, why, "");
    }

    static Finding warn(String id, String msg, String fix) {
        return new Finding(id, Status.WARN, msg, fix);
    }

    static Finding fail(String id, String msg, String fix) {
        return new Finding(id, Status.FAIL, msg, fix);
    }

    static String limit(long v, boolean bytes) {
        if (v == Limits.UNLIMITED) {
            return "unlimited";
        }
        if (v == Limits.UNKNOWN) {
            return "unknown";
        }
        return bytes ? TopoText.bytes(v) : Long.toString(v);
    }

    /** World size: the environment's if it says more than N (a multi-host job), else N. */
    int world() {
        for (String k : List.of("JCCL_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")) {
            String v = in.env().get(k);
            if (v != null && v.trim().matches("\\d+")) {
                return Math.max(in.localRanks(), Integer.parseInt(v.trim()));
            }
        }
        return in.localRanks();
    }

    /** TCP sockets per peer: JCCL_SOCKET_NTHREADS x JCCL_NSOCKS_PERTHREAD, twice with JCCL_SOCKET_SPLIT (each direction its own). */
    int socketsPerPeer() {
        int perWay = Settings.SOCKET_NTHREADS.getInt(config) * Settings.NSOCKS_PERTHREAD.getInt(config);
        return Settings.SOCKET_SPLIT.getBool(config) ? 2 * Math.min(perWay, 32) : Math.min(perWay, 64);
    }

    List<RdmaDevice> allowedRdma() {
        DeviceList spec = DeviceList.parse(Settings.IB_HCA.name(), Settings.IB_HCA.getString(config), true);
        return t.rdmaDevices().stream().filter(d -> d.ports().stream().anyMatch(p -> spec.accepts(d.name(), p.number()))).toList();
    }
}
