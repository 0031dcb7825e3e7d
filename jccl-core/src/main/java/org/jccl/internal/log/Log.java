package org.jccl.internal.log;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jccl.ConfigException;
import org.jccl.internal.config.ConfigFile;
import org.jccl.internal.config.ConfigLoader;
import org.jccl.internal.config.DidYouMean;
import org.jccl.internal.config.Settings;

/**
 * jccl's logger. Lines look like NCCL's, so the same grep works on both:
 * <pre>  host:pid:thread [rank] JCCL INFO rank 0 -> rank 1 via TCP 10.0.0.2:40123</pre>
 * ({@code [-]} while no rank is known).
 *
 * <ul>
 *   <li>{@code JCCL_DEBUG} ({@code NCCL_DEBUG}): NONE, VERSION, WARN (default), INFO, TRACE. WARN
 *       and VERSION lines print whatever the subsystem; setting the variable to anything but NONE
 *       also prints the version line once per process ({@link #version}), as NCCL does.</li>
 *   <li>{@code JCCL_DEBUG_SUBSYS} ({@code NCCL_DEBUG_SUBSYS}): the subsystems whose INFO/TRACE
 *       lines print, a comma list of {@link Subsys} names or ALL; {@code ^} in front excludes the
 *       listed ones. Default INIT,ENV. An unknown name is an error with "did you mean".</li>
 *   <li>{@code JCCL_DEBUG_FILE} ({@code NCCL_DEBUG_FILE}): a file instead of stderr; {@code %h}
 *       host, {@code %p} pid, {@code %r} rank, {@code %%} a percent sign. Files are opened lazily,
 *       at the first line, in append mode. With {@code %r} each rank of the process writes its own
 *       file; lines logged before any rank is known go to a file whose {@code %r} reads {@code x}
 *       (plus the pid when the pattern has no {@code %p}), which is renamed to the first rank's file
 *       when that rank logs its first line (its contents are appended when that file already
 *       exists), so nothing logged before initialisation is lost or separated.</li>
 * </ul>
 * The values come from the environment and the config file, like every setting ({@link ConfigLoader});
 * they are read once, when this class initialises. A bad value never breaks the logger (it runs
 * in class initialisers): it prints one WARN line and uses the default, and
 * {@link org.jccl.Config#validate()} reports the same value as an error at initialisation.
 *
 * <p>Thread-safe; cheap to call when disabled ({@link #enabled}).
 */
public final class Log {

    /** Severity, from quietest to noisiest. */
    public enum Level { NONE, VERSION, WARN, INFO, TRACE }

    /** Areas of jccl that log. */
    public enum Subsys { INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, BOOTSTRAP, PROXY }

    /** The default {@code JCCL_DEBUG_SUBSYS}. */
    private static final Set<Subsys> DEFAULT_SUBSYS = EnumSet.of(Subsys.INIT, Subsys.ENV);

    /**
     * The logger's settings.
     *
     * @param level the level
     * @param subsys the subsystems whose INFO/TRACE lines print
     * @param filePattern {@code JCCL_DEBUG_FILE}, or null for stderr
     * @param explicit whether {@code JCCL_DEBUG} was set (then the version line is printed)
     */
    public record Options(Level level, Set<Subsys> subsys, String filePattern, boolean explicit) {
        public Options {
            Objects.requireNonNull(level, "level");
            subsys = subsys.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(subsys));
            if (filePattern != null && filePattern.isBlank()) {
                filePattern = null;
            }
        }

        /** WARN, INIT and ENV, stderr. */
        public static Options defaults() {
            return new Options(Level.WARN, DEFAULT_SUBSYS, null, false);
        }

        /**
         * From setting values by jccl name ({@code JCCL_DEBUG}, {@code JCCL_DEBUG_SUBSYS},
         * {@code JCCL_DEBUG_FILE}); absent ones take their default.
         *
         * @throws ConfigException for a value that is not allowed
         */
        public static Options of(Map<String, String> values) {
            List<String> problems = new ArrayList<>();
            Options o = lenient(values, problems);
            if (!problems.isEmpty()) {
                throw new ConfigException(problems.get(0));
            }
            return o;
        }

        /** Like {@link #of} but a bad value is added to {@code problems} and replaced by its default. */
        static Options lenient(Map<String, String> values, List<String> problems) {
            String lv = values.get("JCCL_DEBUG");
            Level level = Level.WARN;
            try {
                level = parseLevel(lv);
            } catch (ConfigException e) {
                problems.add(e.getMessage() + "; logging at WARN");
            }
            Set<Subsys> subsys = DEFAULT_SUBSYS;
            try {
                subsys = parseSubsys(values.get("JCCL_DEBUG_SUBSYS"));
            } catch (ConfigException e) {
                problems.add(e.getMessage() + "; logging INIT,ENV");
            }
            String file = values.get("JCCL_DEBUG_FILE");
            try {
                checkFilePattern(file);
            } catch (ConfigException e) {
                problems.add(e.getMessage() + "; logging to stderr");
                file = null;
            }
            return new Options(level, subsys, file, lv != null && !lv.isBlank());
        }
    }

    private static final String HOST = hostName();
    private static final long PID = ProcessHandle.current().pid();

    private static volatile Options options;
    /** Open log files; guarded by {@code Log.class}. */
    private static Sinks sinks = new Sinks(null);
    private static final Set<String> ONCE = ConcurrentHashMap.newKeySet();
    private static final AtomicBoolean VERSION_PRINTED = new AtomicBoolean();

    static {
        List<String> problems = new ArrayList<>();
        options = Options.lenient(processValues(problems), problems);
        sinks = new Sinks(options.filePattern());
        for (String p : problems) {
            log(Level.WARN, Subsys.ENV, -1, p);
        }
    }

    private Log() {
    }

    /** Registers the grammars of the logging settings ({@code JCCL_DEBUG}, {@code _SUBSYS}, {@code _FILE}) with their parsers. */
    public static void registerGrammars() {
        Settings.DEBUG.grammar(() -> "one of NONE, VERSION, WARN, INFO, TRACE", Log::parseLevel);
        Settings.DEBUG_SUBSYS.grammar(() -> "a comma list of " + subsystemNames() + " or ALL; ^ in front excludes the subsystems listed",
                Log::parseSubsys);
        Settings.DEBUG_FILE.grammar(() -> "a file path; %h is replaced by the host name, %p by the pid, %r by the rank, %% by %",
                Log::checkFilePattern);
    }

    /** JCCL_DEBUG* values of this process: environment and config file, or the environment alone when the file is broken. */
    private static Map<String, String> processValues(List<String> problems) {
        Map<String, String> env = System.getenv();
        String home = System.getProperty("user.home");
        try {
            return ConfigLoader.load(env, home == null || home.isBlank() ? null : Path.of(home), ConfigFile.SYSTEM_FILE).values();
        } catch (ConfigException | SecurityException e) {
            problems.add("the logger ignores the config file: " + e.getMessage());
            return ConfigLoader.merge(env, null, List.of()).values();
        }
    }

    /**
     * Replaces the logger's settings (tests, tools); closes the files opened so far and lets the
     * version line print again.
     *
     * @return the previous settings
     */
    public static Options configure(Options newOptions) {
        Objects.requireNonNull(newOptions, "newOptions");
        synchronized (Log.class) {
            Options old = options;
            sinks.close();
            sinks = new Sinks(newOptions.filePattern());
            options = newOptions;
            VERSION_PRINTED.set(false);
            return old;
        }
    }

    /** The settings in use. */
    public static Options options() {
        return options;
    }

    /**
     * Parses a {@code JCCL_DEBUG} value (null or blank: WARN).
     *
     * @throws ConfigException naming the value, the levels and the closest one
     */
    public static Level parseLevel(String value) {
        if (value == null || value.isBlank()) {
            return Level.WARN;
        }
        String v = value.trim().toUpperCase(Locale.ROOT);
        for (Level l : Level.values()) {
            if (l.name().equals(v)) {
                return l;
            }
        }
        List<String> names = Arrays.stream(Level.values()).map(Enum::name).toList();
        throw new ConfigException("JCCL_DEBUG='" + value + "' is not allowed: expected one of " + String.join(", ", names)
                + DidYouMean.hint(v, names, ""));
    }

    /** "INIT, COLL, ..." for messages. */
    public static String subsystemNames() {
        return String.join(",", Arrays.stream(Subsys.values()).map(Enum::name).toList());
    }

    /**
     * Parses a {@code JCCL_DEBUG_SUBSYS} value: a comma list, ALL, or {@code ^list} to exclude
     * (null or blank: INIT,ENV).
     *
     * @throws ConfigException naming the unknown subsystem, the closest one and the allowed names
     */
    public static Set<Subsys> parseSubsys(String spec) {
        if (spec == null || spec.isBlank()) {
            return EnumSet.copyOf(DEFAULT_SUBSYS);
        }
        String s = spec.trim();
        boolean exclude = s.startsWith("^");
        if (exclude) {
            s = s.substring(1);
        }
        EnumSet<Subsys> set = EnumSet.noneOf(Subsys.class);
        List<String> names = new ArrayList<>(Arrays.stream(Subsys.values()).map(Enum::name).toList());
        names.add("ALL");
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
                String hint = DidYouMean.hint(p, names, "");
                throw new ConfigException("JCCL_DEBUG_SUBSYS='" + spec + "' names " + part.trim() + ", which is not a subsystem"
                        + (hint.isEmpty() ? "." : hint) + " Allowed: " + subsystemNames() + " or ALL; ^ in front excludes the"
                        + " subsystems listed");
            }
        }
        return exclude ? EnumSet.complementOf(set) : set;
    }

    /**
     * Checks a {@code JCCL_DEBUG_FILE} pattern: only {@code %h %p %r %%} are replaced.
     *
     * @throws ConfigException naming the unknown {@code %} sequence
     */
    public static void checkFilePattern(String pattern) {
        if (pattern == null) {
            return;
        }
        for (int i = 0; i < pattern.length(); i++) {
            if (pattern.charAt(i) != '%') {
                continue;
            }
            char c = i + 1 < pattern.length() ? pattern.charAt(i + 1) : 0;
            if (c != 'h' && c != 'p' && c != 'r' && c != '%') {
                throw new ConfigException("JCCL_DEBUG_FILE='" + pattern + "' is not allowed: " + (c == 0 ? "it ends in %" : "%" + c
                        + " is not a placeholder") + "; expected a path where %h is replaced by the host name, %p by the pid, %r by"
                        + " the rank and %% by %");
            }
            i++;
        }
    }

    /** Expands a {@code JCCL_DEBUG_FILE} pattern; {@code rank} is the text to put for {@code %r}. */
    static String expand(String pattern, String host, long pid, String rank) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < pattern.length(); i++) {
            char c = pattern.charAt(i);
            char n = i + 1 < pattern.length() ? pattern.charAt(i + 1) : 0;
            if (c == '%' && (n == 'h' || n == 'p' || n == 'r' || n == '%')) {
                sb.append(switch (n) {
                    case 'h' -> host;
                    case 'p' -> Long.toString(pid);
                    case 'r' -> rank;
                    default -> "%";
                });
                i++;
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }

    /** Whether a line of this level and subsystem would be printed. */
    public static boolean enabled(Level level, Subsys subsys) {
        Options o = options;
        if (o.level() == Level.NONE || level == Level.NONE || level.compareTo(o.level()) > 0) {
            return false;
        }
        return level.compareTo(Level.WARN) <= 0 || o.subsys().contains(subsys);
    }

    public static void warn(Subsys subsys, int rank, String message) {
        log(Level.WARN, subsys, rank, message);
    }

    /** A WARN line printed at most once per process for the same message (e.g. a variable that has no effect). */
    public static void warnOnce(Subsys subsys, int rank, String message) {
        if (enabled(Level.WARN, subsys) && ONCE.add(message)) {
            log(Level.WARN, subsys, rank, message);
        }
    }

    public static void info(Subsys subsys, int rank, String message) {
        log(Level.INFO, subsys, rank, message);
    }

    /** An INFO line printed at most once per process for the same message. */
    public static void infoOnce(Subsys subsys, int rank, String message) {
        if (enabled(Level.INFO, subsys) && ONCE.add(message)) {
            log(Level.INFO, subsys, rank, message);
        }
    }

    public static void trace(Subsys subsys, int rank, String message) {
        log(Level.TRACE, subsys, rank, message);
    }

    /**
     * Prints {@code text} (e.g. "jccl 0.2.0 ...") once per process at level VERSION, when
     * {@code JCCL_DEBUG} was set to VERSION or noisier, as NCCL prints its version.
     */
    public static void version(int rank, String text) {
        Options o = options;
        if (o.explicit() && o.level() != Level.NONE && VERSION_PRINTED.compareAndSet(false, true)) {
            log(Level.VERSION, Subsys.INIT, rank, text);
        }
    }

    /** The line as printed, without the newline. */
    static String format(Level level, int rank, String message) {
        return HOST + ":" + PID + ":" + Thread.currentThread().getName() + " [" + (rank < 0 ? "-" : Integer.toString(rank))
                + "] JCCL " + level + " " + message;
    }

    /** Prints one line if enabled; {@code rank} &lt; 0 when no rank is known yet. */
    public static void log(Level level, Subsys subsys, int rank, String message) {
        if (!enabled(level, subsys)) {
            return;
        }
        String line = format(level, rank, message);
        PrintStream ps;
        synchronized (Log.class) {
            ps = sinks.stream(rank);
        }
        synchronized (ps) {
            ps.println(line);
            ps.flush();
        }
    }

    /** This host's name, as logs and errors print it. */
    public static String host() {
        return HOST;
    }

    private static String hostName() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            String h = System.getenv("HOSTNAME");
            return h != null ? h : "localhost";
        }
    }

    /** Where lines go; all methods are called holding {@code Log.class}. */
    private static final class Sinks {
        private final String pattern;
        private final boolean perRank;
        /** The file of a pattern without %r, or the file of lines without a rank before any rank was known. */
        private PrintStream shared;
        private Path sharedPath;
        /** The first rank that logged: it adopts the rank-less file, and later rank-less lines go to its file. */
        private int firstRank = -1;
        private final Map<Integer, PrintStream> byRank = new HashMap<>();
        private boolean failed;

        Sinks(String pattern) {
            this.pattern = pattern;
            this.perRank = pattern != null && pattern.replace("%%", "").contains("%r");
        }

        PrintStream stream(int rank) {
            if (pattern == null || failed) {
                return System.err;
            }
            if (!perRank) {
                if (shared == null) {
                    sharedPath = Path.of(expand(pattern, HOST, PID, "x"));
                    shared = open(sharedPath);
                }
                return shared != null ? shared : System.err;
            }
            if (rank < 0) {
                if (firstRank >= 0) {
                    return byRank.get(firstRank);
                }
                if (shared == null) {
                    String unknown = pattern.replace("%%", "").contains("%p") ? "x" : "x" + PID;
                    sharedPath = Path.of(expand(pattern, HOST, PID, unknown));
                    shared = open(sharedPath);
                }
                return shared != null ? shared : System.err;
            }
            PrintStream ps = byRank.get(rank);
            if (ps != null) {
                return ps;
            }
            Path path = Path.of(expand(pattern, HOST, PID, Integer.toString(rank)));
            if (firstRank < 0 && shared != null) {
                ps = adopt(path);
            } else {
                ps = open(path);
            }
            if (ps == null) {
                return System.err;
            }
            if (firstRank < 0) {
                firstRank = rank;
            }
            byRank.put(rank, ps);
            return ps;
        }

        /** The rank-less file becomes {@code path}: renamed when {@code path} is new, else appended to it and deleted. */
        private PrintStream adopt(Path path) {
            shared.flush();
            try {
                if (!Files.exists(path)) {
                    Files.move(sharedPath, path);
                    // The open stream follows the renamed file.
                    PrintStream ps = shared;
                    shared = null;
                    return ps;
                }
                shared.close();
                shared = null;
                Files.write(path, Files.readAllBytes(sharedPath), StandardOpenOption.APPEND);
                Files.delete(sharedPath);
            } catch (IOException e) {
                System.err.println(HOST + ":" + PID + " JCCL WARN cannot move the log lines of " + sharedPath + " to " + path + ": " + e
                        + "; they stay in " + sharedPath);
                if (shared != null) {
                    shared.close();
                    shared = null;
                }
            }
            return open(path);
        }

        private PrintStream open(Path path) {
            try {
                return new PrintStream(new FileOutputStream(path.toFile(), true), true, StandardCharsets.UTF_8);
            } catch (IOException e) {
                failed = true;
                System.err.println(HOST + ":" + PID + " JCCL WARN cannot open JCCL_DEBUG_FILE " + path + ": " + e.getMessage()
                        + "; logging to stderr");
                return null;
            }
        }

        void close() {
            if (shared != null) {
                shared.close();
            }
            for (PrintStream ps : byRank.values()) {
                ps.close();
            }
        }
    }
}
