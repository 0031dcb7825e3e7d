package org.jccl.internal.log;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;
import org.jccl.ConfigException;

/**
 * jccl's logger. Lines look like NCCL's, so the same grep works on both:
 * <pre>  host:pid:thread [rank] JCCL INFO rank 0 -> rank 1 via TCP 10.0.0.2:40123</pre>
 * Level from {@code JCCL_DEBUG} (or {@code NCCL_DEBUG}), subsystems from {@code JCCL_DEBUG_SUBSYS}
 * ({@code ^} excludes), destination {@code JCCL_DEBUG_FILE} with {@code %h} host, {@code %p} pid
 * and {@code %r} rank (else stderr). WARN lines are always printed unless the level is NONE.
 *
 * <p>Read from the process environment once; cheap to call when disabled ({@link #enabled}).
 */
public final class Log {

    /** Severity, from quietest to noisiest. */
    public enum Level { NONE, VERSION, WARN, INFO, TRACE }

    /** Areas of jccl that log. */
    public enum Subsys { INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, BOOTSTRAP, PROXY }

    private static final String HOST = hostName();
    private static final long PID = ProcessHandle.current().pid();
    private static final Level LEVEL;
    private static final Set<Subsys> SUBSYS;
    private static volatile PrintStream out;
    private static final String FILE_PATTERN;

    static {
        String lv = env("JCCL_DEBUG", "NCCL_DEBUG");
        Level level = Level.WARN;
        if (lv != null && !lv.isBlank()) {
            try {
                level = Level.valueOf(lv.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                System.err.println(HOST + ":" + PID + " JCCL WARN JCCL_DEBUG='" + lv
                        + "' is not a level (NONE, VERSION, WARN, INFO, TRACE); using WARN");
            }
        }
        LEVEL = level;
        SUBSYS = parseSubsys(env("JCCL_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS"));
        FILE_PATTERN = env("JCCL_DEBUG_FILE", "NCCL_DEBUG_FILE");
    }

    private Log() {
    }

    /** Parses a {@code JCCL_DEBUG_SUBSYS} value: a comma list, ALL, or {@code ^list} to exclude. */
    public static Set<Subsys> parseSubsys(String spec) {
        if (spec == null || spec.isBlank()) {
            return EnumSet.of(Subsys.INIT, Subsys.ENV);
        }
        String s = spec.trim();
        boolean exclude = s.startsWith("^");
        if (exclude) {
            s = s.substring(1);
        }
        EnumSet<Subsys> set = EnumSet.noneOf(Subsys.class);
        for (String part : s.split(",")) {
            String p = part.trim().toUpperCase(Locale.ROOT);
            if (p.isEmpty()) {
                continue;
            }
            if (p.equals("ALL")) {
                set = EnumSet.allOf(Subsys.class);
                continue;
            }
            try {
                set.add(Subsys.valueOf(p));
            } catch (IllegalArgumentException e) {
                throw new ConfigException("JCCL_DEBUG_SUBSYS names '" + part.trim() + "', which is not a subsystem; use "
                        + EnumSet.allOf(Subsys.class) + " or ALL, ^ to exclude");
            }
        }
        return exclude ? EnumSet.complementOf(set) : set;
    }

    /** Whether a line of this level and subsystem would be printed. */
    public static boolean enabled(Level level, Subsys subsys) {
        if (LEVEL == Level.NONE || level.compareTo(LEVEL) > 0) {
            return false;
        }
        return level.compareTo(Level.WARN) <= 0 || SUBSYS.contains(subsys);
    }

    public static void warn(Subsys subsys, int rank, String message) {
        log(Level.WARN, subsys, rank, message);
    }

    public static void info(Subsys subsys, int rank, String message) {
        log(Level.INFO, subsys, rank, message);
    }

    public static void trace(Subsys subsys, int rank, String message) {
        log(Level.TRACE, subsys, rank, message);
    }

    /** Prints one line if enabled; {@code rank} &lt; 0 when no rank is known yet. */
    public static void log(Level level, Subsys subsys, int rank, String message) {
        if (!enabled(level, subsys)) {
            return;
        }
        String line = HOST + ":" + PID + ":" + Thread.currentThread().getName() + " [" + (rank < 0 ? "-" : Integer.toString(rank))
                + "] JCCL " + level + " " + message;
        PrintStream ps = stream(rank);
        synchronized (ps) {
            ps.println(line);
            ps.flush();
        }
    }

    private static PrintStream stream(int rank) {
        PrintStream ps = out;
        if (ps != null) {
            return ps;
        }
        synchronized (Log.class) {
            if (out == null) {
                out = System.err;
                if (FILE_PATTERN != null && !FILE_PATTERN.isBlank()) {
                    String path = FILE_PATTERN.replace("%h", HOST).replace("%p", Long.toString(PID))
                            .replace("%r", rank < 0 ? "x" : Integer.toString(rank));
                    try {
                        out = new PrintStream(new FileOutputStream(path, true), true, StandardCharsets.UTF_8);
                    } catch (IOException e) {
                        System.err.println(HOST + ":" + PID + " JCCL WARN cannot open JCCL_DEBUG_FILE " + path + ": " + e.getMessage()
                                + "; logging to stderr");
                    }
                }
            }
            return out;
        }
    }

    /** This host's name, as logs and errors print it. */
    public static String host() {
        return HOST;
    }

    private static String env(String name, String alias) {
        String v = System.getenv(name);
        return v != null ? v : System.getenv(alias);
    }

    private static String hostName() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            String h = System.getenv("HOSTNAME");
            return h != null ? h : "localhost";
        }
    }
}
