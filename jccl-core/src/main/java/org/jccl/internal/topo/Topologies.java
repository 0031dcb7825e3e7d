package org.jccl.internal.topo;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Supplier;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.util.Json;

/**
 * Where a process gets its topology: {@code JCCL_TOPO_FILE} (a saved one) or discovery, and
 * {@code JCCL_TOPO_DUMP_FILE} to save what was found.
 */
public final class Topologies {
    private Topologies() {
    }

    /** This host's topology as {@code config} asks: loaded from JCCL_TOPO_FILE, else discovered; dumped if asked. */
    public static Topology forHost(Config config) {
        return obtain(config, () -> SysfsDiscovery.discoverHost(Settings.SHM_DIR.getString(config)));
    }

    /**
     * {@code JCCL_TOPO_FILE} if set, else {@code discover}; then written to {@code JCCL_TOPO_DUMP_FILE} if set.
     *
     * @throws ConfigException when the file cannot be read or is not a jccl topology (the message names the file and why)
     */
    public static Topology obtain(Config config, Supplier<Topology> discover) {
        String file = Settings.TOPO_FILE.getString(config);
        Topology t;
        if (file != null && !file.isBlank()) {
            t = read(Path.of(file.trim()));
            Log.info(Log.Subsys.GRAPH, -1, "topology read from " + file + " (JCCL_TOPO_FILE): " + t.gpus().size() + " GPU(s), "
                    + t.rdmaDevices().size() + " RDMA device(s)");
        } else {
            t = discover.get();
        }
        String dump = Settings.TOPO_DUMP_FILE.getString(config);
        if (dump != null && !dump.isBlank()) {
            Path p = Path.of(expand(dump.trim(), t.hostname()));
            write(t, p);
            Log.info(Log.Subsys.GRAPH, -1, "topology written to " + p + " (JCCL_TOPO_DUMP_FILE)");
        }
        return t;
    }

    /** {@code %h} host, {@code %p} pid. */
    static String expand(String pattern, String host) {
        return pattern.replace("%h", host.isEmpty() ? "host" : host).replace("%p", Long.toString(ProcessHandle.current().pid()));
    }

    /** Reads a saved topology. */
    public static Topology read(Path file) {
        String text;
        try {
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ConfigException("JCCL_TOPO_FILE=" + file + " cannot be read (" + e + "); write one with jccl topo --json > " + file);
        }
        try {
            return Topology.fromJson(Json.parse(text));
        } catch (IllegalArgumentException e) {
            throw new ConfigException("JCCL_TOPO_FILE=" + file + " is not a usable jccl topology: " + e.getMessage());
        }
    }

    /** Writes {@code t} as JSON to {@code file} (replacing it). */
    public static void write(Topology t, Path file) {
        try {
            Path parent = file.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            Files.writeString(file, Json.write(t.toJson()) + "\n", StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new JcclException(ErrorCode.RESOURCE, "cannot write the topology to " + file + " (JCCL_TOPO_DUMP_FILE): " + e, e);
        }
    }
}
