package org.jccl.internal.config;

import java.io.IOException;
import java.nio.charset.MalformedInputException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jccl.ConfigException;

/**
 * jccl's configuration file: which one is read, and its {@code KEY=VALUE} lines.
 *
 * <p><b>Which file.</b> Exactly one, the first of: the file named by {@code JCCL_CONF_FILE} (an
 * error when it does not exist: the user asked for it), {@code ~/.jccl.conf}, {@code /etc/jccl.conf}
 * (each skipped when absent). Only one is read, as the issue specifies, so a user's file replaces
 * the system file rather than adding to it; {@link Located#shadowed} names a system file that
 * exists but was not read, so {@code jccl env} can say so.
 *
 * <p><b>Format</b> (the one of NCCL's {@code nccl.conf}): one {@code KEY=VALUE} per line; blank
 * lines and lines starting with {@code #} are ignored; blanks around the key and the value are
 * dropped; a value in matching single or double quotes loses them; a leading {@code export } is
 * accepted, so the file can be sourced by a shell. A line without {@code =} is an error naming the
 * file and the line. Keys are not checked here (see {@link ConfigLoader}).
 *
 * <p>Stateless; the environment, home directory and system path are parameters, so tests never
 * depend on the machine's files.
 */
public final class ConfigFile {

    /** The variable that names a config file explicitly. */
    public static final String ENV_VAR = "JCCL_CONF_FILE";
    /** The per-user file's name in the home directory. */
    public static final String USER_FILE = ".jccl.conf";
    /** The system file. */
    public static final Path SYSTEM_FILE = Path.of("/etc/jccl.conf");

    private ConfigFile() {
    }

    /**
     * The file that is read and why.
     *
     * @param path the file
     * @param how how it was found: "JCCL_CONF_FILE", "~/.jccl.conf" or "/etc/jccl.conf"
     * @param shadowed a lower-priority file that exists but is not read (only one file is), or null
     */
    public record Located(Path path, String how, Path shadowed) {
        public Located {
            Objects.requireNonNull(path, "path");
            Objects.requireNonNull(how, "how");
        }
    }

    /**
     * One {@code KEY=VALUE} line.
     *
     * @param key the key, trimmed
     * @param value the value, trimmed and unquoted
     * @param line the 1-based line number
     */
    public record Line(String key, String value, int line) {
    }

    /**
     * The config file to read, or null when there is none.
     *
     * @param env the environment ({@code JCCL_CONF_FILE} is read from it)
     * @param homeDir the user's home directory, or null to skip {@code ~/.jccl.conf}
     * @param systemFile the system file ({@code /etc/jccl.conf}), or null to skip it
     * @throws ConfigException when {@code JCCL_CONF_FILE} names a file that does not exist or is a directory
     */
    public static Located locate(Map<String, String> env, Path homeDir, Path systemFile) {
        String named = env.get(ENV_VAR);
        Path system = systemFile != null && Files.isRegularFile(systemFile) ? systemFile : null;
        if (named != null && !named.isBlank()) {
            Path p = Path.of(named.trim());
            if (!Files.exists(p)) {
                throw new ConfigException(ENV_VAR + "='" + named + "' (from the environment) names a file that does not exist; create it"
                        + " (KEY=VALUE lines, # comments) or unset " + ENV_VAR + " to use ~/" + USER_FILE + " or " + SYSTEM_FILE);
            }
            if (!Files.isRegularFile(p)) {
                throw new ConfigException(ENV_VAR + "='" + named + "' (from the environment) is not a regular file; it must name a file of"
                        + " KEY=VALUE lines");
            }
            return new Located(p, ENV_VAR, system != null && !sameFile(system, p) ? system : null);
        }
        if (homeDir != null) {
            Path user = homeDir.resolve(USER_FILE);
            if (Files.isRegularFile(user)) {
                return new Located(user, "~/" + USER_FILE, system);
            }
        }
        return system != null ? new Located(system, system.toString(), null) : null;
    }

    private static boolean sameFile(Path a, Path b) {
        try {
            return Files.isSameFile(a, b);
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Reads and parses a config file.
     *
     * @throws ConfigException when it cannot be read or has a line that is not {@code KEY=VALUE};
     *         the message names the file and the line
     */
    public static List<Line> read(Path file) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (NoSuchFileException e) {
            throw new ConfigException("config file " + file + " disappeared while jccl was reading it", e);
        } catch (MalformedInputException e) {
            throw new ConfigException("config file " + file + " is not UTF-8 text; it must hold KEY=VALUE lines", e);
        } catch (IOException e) {
            throw new ConfigException("cannot read config file " + file + ": " + e + "; make it readable or set " + ENV_VAR
                    + " to another file", e);
        }
        return parse(file.toString(), lines);
    }

    /**
     * Parses the lines of a config file.
     *
     * @param name the file's name, for messages
     * @throws ConfigException for a line that is not {@code KEY=VALUE}, naming the file and the line
     */
    public static List<Line> parse(String name, List<String> lines) {
        List<Line> out = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            String raw = lines.get(i);
            String t = raw.strip();
            if (i == 0 && t.startsWith("\uFEFF")) {
                t = t.substring(1).strip();
            }
            if (t.isEmpty() || t.startsWith("#")) {
                continue;
            }
            if (t.startsWith("export ")) {
                t = t.substring("export ".length()).strip();
            }
            int eq = t.indexOf('=');
            String key = eq < 0 ? t : t.substring(0, eq).strip();
            if (eq <= 0 || !validKey(key)) {
                throw new ConfigException(name + " line " + (i + 1) + ": '" + raw.strip() + "' is not a KEY=VALUE line (e.g. JCCL_DEBUG=INFO;"
                        + " # starts a comment)");
            }
            out.add(new Line(key, unquote(t.substring(eq + 1).strip()), i + 1));
        }
        return out;
    }

    private static boolean validKey(String key) {
        if (key.isEmpty() || Character.isDigit(key.charAt(0))) {
            return false;
        }
        for (int i = 0; i < key.length(); i++) {
            char c = key.charAt(i);
            if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
                return false;
            }
        }
        return true;
    }

    private static String unquote(String v) {
        if (v.length() >= 2) {
            char a = v.charAt(0);
            char b = v.charAt(v.length() - 1);
            if ((a == '"' || a == '\'') && a == b) {
                return v.substring(1, v.length() - 1);
            }
        }
        return v;
    }
}
