package org.jccl.internal.control;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.util.Json;

/**
 * The files a rank's control plane writes to {@code JCCL_DUMP_DIR}: the flight recorder dump on a
 * stall report ({@code jccl-flight-<comm>-r<rank>-<pid>.json}, format in docs/CONTRACTS.md,
 * "Failure detection and hang attribution"), the report common to dumps and {@code jccl status} answers, and the status
 * file that tells {@code jccl status} this rank's port and token. Called on the control thread.
 */
final class FlightDumps {
    private final String comm;
    private final int rank;
    private final int size;
    private final Peers peers;
    private final FlightRecorder recorder;
    private final Counters counters;
    private final long stallWarnNs;
    private final long timeoutNs;
    private final Path dir;

    FlightDumps(ControlPlane.Params p, Peers peers, long stallWarnNs, long timeoutNs) {
        this.comm = p.idShort();
        this.rank = p.rank();
        this.size = p.size();
        this.peers = peers;
        this.recorder = p.recorder();
        this.counters = p.counters();
        this.stallWarnNs = stallWarnNs;
        this.timeoutNs = timeoutNs;
        this.dir = p.settings().dumpDir();
    }

    /** This rank's own state now. */
    RankState self() {
        return RankState.of(rank, recorder, counters);
    }

    /** Writes this rank's flight recorder to JCCL_DUMP_DIR (format: docs/CONTRACTS.md, "Failure detection and hang attribution"). */
    void dump(String why, RankState[] states, int[] how) {
        Map<String, Object> m = report(states, how);
        m.put("reason", why);
        List<Object> ops = new ArrayList<>();
        for (FlightRecorder.Entry e : recorder.snapshot()) {
            ops.add(recorder.toMap(e));
        }
        m.put("operations", ops);
        Path file = dir.resolve("jccl-flight-" + comm + "-r" + rank + "-" + peers.self().pid() + ".json");
        try {
            ensureDir(dir);
            Path tmp = dir.resolve(file.getFileName() + ".tmp");
            Files.writeString(tmp, Json.write(m) + "\n");
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            Log.warn(Log.Subsys.COLL, rank, "comm " + comm + " flight recorder dumped to " + file);
        } catch (IOException | RuntimeException e) {
            Log.warn(Log.Subsys.COLL, rank, "comm " + comm + " cannot dump the flight recorder to " + file + ": " + e
                    + " (set " + Settings.DUMP_DIR.name() + " to a writable directory)");
        }
    }

    /**
     * The report common to dumps and status answers: every rank's state from {@code states} and
     * {@code how} ({@link ControlWire#HOW_ANSWERED}, ...), or, both null, this rank's own view.
     */
    Map<String, Object> report(RankState[] states, int[] how) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", "jccl-flight-recorder");
        m.put("version", 1);
        m.put("comm", comm);
        m.put("rank", rank);
        m.put("size", size);
        m.put("host", peers.self().host());
        m.put("pid", peers.self().pid());
        m.put("time_ms", System.currentTimeMillis());
        m.put("stall_warn_ms", TimeUnit.NANOSECONDS.toMillis(stallWarnNs));
        m.put("peer_timeout_ms", TimeUnit.NANOSECONDS.toMillis(timeoutNs));
        List<Object> rs = new ArrayList<>();
        for (int r = 0; r < size; r++) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("rank", r);
            e.put("host", peers.get(r).host());
            e.put("pid", peers.get(r).pid());
            int h = how == null ? (r == rank ? ControlWire.HOW_ANSWERED : ControlWire.HOW_SILENT) : how[r];
            e.put("answer", switch (h) {
                case ControlWire.HOW_ANSWERED -> "answered";
                case ControlWire.HOW_CLOSED -> "closed";
                case ControlWire.HOW_ABORTED -> "aborted";
                default -> "no answer";
            });
            RankState s = states == null ? (r == rank ? self() : null) : states[r];
            if (s != null) {
                e.putAll(s.toMap());
            }
            rs.add(e);
        }
        m.put("ranks", rs);
        m.put("counters", counters == null ? Map.of() : counters.toMap());
        return m;
    }

    /** Writes the status file (mode 0600) naming this rank's status {@code port} and {@code token}; returns its path. */
    Path writeStatusFile(int port, String token) throws IOException {
        ensureDir(dir);
        Path f = dir.resolve("jccl-status-" + comm + "-r" + rank + "-" + peers.self().pid());
        String text = "jccl-status 1\nport=" + port + "\ntoken=" + token + "\ncomm=" + comm + "\nrank=" + rank + "\nsize="
                + size + "\npid=" + peers.self().pid() + "\nhost=" + peers.self().host() + "\n";
        Path tmp = dir.resolve(f.getFileName() + ".tmp");
        Files.deleteIfExists(tmp);
        try {
            Files.createFile(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } catch (UnsupportedOperationException e) {
            Files.createFile(tmp);
        }
        Files.writeString(tmp, text);
        Files.move(tmp, f, StandardCopyOption.REPLACE_EXISTING);
        return f;
    }

    private static void ensureDir(Path dir) throws IOException {
        if (Files.isDirectory(dir)) {
            return;
        }
        try {
            Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (UnsupportedOperationException e) {
            Files.createDirectories(dir);
        }
    }
}
