package org.jccl.internal.config;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.jccl.Config;
import org.jccl.ConfigException;

/**
 * One named setting: its {@code JCCL_*} name, the NCCL name with the same meaning (if any), its
 * default, the allowed range and one line of documentation. Every setting jccl reads is declared
 * in {@link Settings}; values come from a {@link Config}, which in turn was filled from code, the
 * environment and the config file (in that order of precedence, see {@link Config}).
 *
 * <p>Every value is checked for its {@link Kind} and range, and settings with a grammar of their
 * own ({@code JCCL_DEBUG_SUBSYS}, {@code JCCL_SOCKET_IFNAME}, {@code JCCL_ALGO}, ...) by the
 * parser that reads them: the package that owns such a setting registers its grammar
 * ({@link #grammar(Supplier, Consumer)}; {@code Log}, {@code Interfaces}, {@code AlgoSelector}, wired
 * by {@link Config}), and {@link SettingChecks} holds the few this package owns. Registration keeps
 * this package free of the layers above it. A bad value is a {@link ConfigException} naming
 * the variable, the value, what is allowed and where the value was set.
 */
public final class Setting {

    /** How a value is checked and converted. */
    public enum Kind { STRING, INT, BOOL, DURATION_SECONDS, BYTES }

    private static final Map<String, Setting> REGISTRY = new LinkedHashMap<>();

    private final String name;
    private final String ncclAlias;
    private final Kind kind;
    private final String defaultValue;
    private final long min;
    private final long max;
    private final String doc;
    /** The grammar of a text setting, registered by the package that reads it; null: none registered. */
    private volatile Grammar grammar;

    /**
     * What a text setting allows, in words, and the check of a value: the parser that later reads
     * it, so that validation reports exactly the errors initialisation would hit.
     *
     * @param allowed what is allowed, in words (evaluated when asked, so it may list what the owner knows)
     * @param check throws {@link ConfigException} naming the variable, the value and what is allowed
     */
    public record Grammar(Supplier<String> allowed, Consumer<String> check) {
    }

    private Setting(String name, String ncclAlias, Kind kind, String defaultValue, long min, long max, String doc) {
        this.name = name;
        this.ncclAlias = ncclAlias;
        this.kind = kind;
        this.defaultValue = defaultValue;
        this.min = min;
        this.max = max;
        this.doc = doc;
    }

    static Setting define(String name, String ncclAlias, Kind kind, String defaultValue, long min, long max, String doc) {
        Setting s = new Setting(name, ncclAlias, kind, defaultValue, min, max, doc);
        synchronized (REGISTRY) {
            if (REGISTRY.putIfAbsent(name, s) != null) {
                throw new IllegalStateException("setting defined twice: " + name);
            }
        }
        return s;
    }

    /**
     * Registers the grammar of this text setting; called once by the package that owns it (a second
     * registration with another grammar is a programming error).
     */
    public void grammar(Supplier<String> allowed, Consumer<String> check) {
        if (kind != Kind.STRING) {
            throw new IllegalStateException(name + " is not a text setting");
        }
        synchronized (this) {
            if (grammar != null) {
                throw new IllegalStateException("grammar of " + name + " registered twice");
            }
            grammar = new Grammar(allowed, check);
        }
    }

    /** The grammar registered for this setting, or null. */
    Grammar grammar() {
        return grammar;
    }

    /** Every declared setting, in declaration order. */
    public static Map<String, Setting> all() {
        Settings.init();
        synchronized (REGISTRY) {
            return Collections.unmodifiableMap(new LinkedHashMap<>(REGISTRY));
        }
    }

    /** Every setting name and NCCL alias, for "did you mean". */
    public static java.util.List<String> allNames() {
        java.util.List<String> out = new java.util.ArrayList<>();
        for (Setting s : all().values()) {
            out.add(s.name);
            if (s.ncclAlias != null) {
                out.add(s.ncclAlias);
            }
        }
        return out;
    }

    /** The setting called {@code name} or whose NCCL alias is {@code name}, or null. */
    public static Setting byName(String name) {
        Settings.init();
        synchronized (REGISTRY) {
            Setting s = REGISTRY.get(name);
            if (s != null) {
                return s;
            }
            for (Setting t : REGISTRY.values()) {
                if (name.equals(t.ncclAlias)) {
                    return t;
                }
            }
            return null;
        }
    }

    public String name() {
        return name;
    }

    /** NCCL's variable of the same meaning, or null. */
    public String ncclAlias() {
        return ncclAlias;
    }

    public Kind kind() {
        return kind;
    }

    /** Default as text, or null when the setting has none. */
    public String defaultValue() {
        return defaultValue;
    }

    public String doc() {
        return doc;
    }

    /** Smallest allowed value (numbers: the value; durations: seconds; bytes: bytes); 0 for STRING and BOOL. */
    public long min() {
        return min;
    }

    /** Largest allowed value, as {@link #min()}. */
    public long max() {
        return max;
    }

    /** What values are allowed, in words, e.g. "an integer from 1 to 16" (for {@code jccl env} and messages). */
    public String allowed() {
        return switch (kind) {
            case INT -> "an integer from " + min + " to " + max;
            case BYTES -> "a byte count from " + bytes(min) + " to " + bytes(max) + " (e.g. 4194304, 4096K or 4M)";
            case DURATION_SECONDS -> "seconds from " + min + " to " + max + " (e.g. 120, 2.5 or 500ms)";
            case BOOL -> "1/0, true/false, yes/no or on/off";
            case STRING -> {
                String c = SettingChecks.allowed(this);
                yield c != null ? c : "text";
            }
        };
    }

    private static String bytes(long b) {
        if (b >= 1L << 30 && b % (1L << 30) == 0) {
            return (b >> 30) + "G";
        }
        if (b >= 1L << 20 && b % (1L << 20) == 0) {
            return (b >> 20) + "M";
        }
        if (b >= 1L << 10 && b % (1L << 10) == 0) {
            return (b >> 10) + "K";
        }
        return Long.toString(b);
    }

    /**
     * Checks the value {@code config} sets for this setting: its kind, its range and, for settings
     * with a grammar, the parser that reads it.
     *
     * @return null when it is allowed (or unset), else the message a {@link ConfigException} would carry
     */
    public String problem(Config config) {
        String v = config.raw(name);
        if (v == null) {
            return null;
        }
        try {
            switch (kind) {
                case INT, BYTES -> getLong(config);
                case BOOL -> getBool(config);
                case DURATION_SECONDS -> getDuration(config);
                case STRING -> SettingChecks.check(this, v, config);
            }
            return null;
        } catch (ConfigException e) {
            return e.getMessage();
        }
    }

    /** A message of a parser that names the variable itself, with where the value was set appended. */
    ConfigException withOrigin(ConfigException e, Config config) {
        Config.Origin o = config.origin(name);
        if (o.source() == Config.Source.DEFAULT) {
            return e;
        }
        return new ConfigException(e.getMessage() + "; " + o.describe(), e);
    }

    /** The raw effective value (from the config, else the default); may be null. */
    public String raw(Config config) {
        String v = config.raw(name);
        return v != null ? v : defaultValue;
    }

    public String getString(Config config) {
        return raw(config);
    }

    public long getLong(Config config) {
        String v = raw(config);
        if (v == null) {
            throw new ConfigException(name + " is not set");
        }
        long x = parseLong(v, config);
        if (x < min || x > max) {
            throw bad(config, v, allowed());
        }
        return x;
    }

    public int getInt(Config config) {
        return Math.toIntExact(getLong(config));
    }

    public boolean getBool(Config config) {
        String v = raw(config);
        if (v == null) {
            return false;
        }
        return switch (v.trim().toLowerCase(Locale.ROOT)) {
            case "1", "true", "yes", "on" -> true;
            case "0", "false", "no", "off", "" -> false;
            default -> throw bad(config, v, "1/0, true/false, yes/no or on/off");
        };
    }

    public Duration getDuration(Config config) {
        String v = raw(config);
        if (v == null) {
            throw new ConfigException(name + " is not set");
        }
        String t = v.trim().toLowerCase(Locale.ROOT);
        Duration d;
        try {
            if (t.endsWith("ms")) {
                d = Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2).trim()));
            } else if (t.endsWith("s")) {
                d = Duration.ofMillis(Math.round(Double.parseDouble(t.substring(0, t.length() - 1).trim()) * 1000));
            } else {
                d = Duration.ofMillis(Math.round(Double.parseDouble(t) * 1000));
            }
        } catch (NumberFormatException e) {
            throw bad(config, v, "a number of seconds (e.g. 120, 2.5 or 500ms)");
        }
        if (d.toMillis() < min * 1000 || d.toMillis() > max * 1000) {
            throw bad(config, v, "between " + min + " and " + max + " seconds");
        }
        return d;
    }

    private long parseLong(String v, Config config) {
        String t = v.trim().toUpperCase(Locale.ROOT);
        long mult = 1;
        if (kind == Kind.BYTES && !t.isEmpty()) {
            char c = t.charAt(t.length() - 1);
            switch (c) {
                case 'K' -> mult = 1L << 10;
                case 'M' -> mult = 1L << 20;
                case 'G' -> mult = 1L << 30;
                default -> { }
            }
            if (mult != 1) {
                t = t.substring(0, t.length() - 1);
            }
        }
        try {
            return Math.multiplyExact(Long.parseLong(t.trim()), mult);
        } catch (NumberFormatException | ArithmeticException e) {
            throw bad(config, v, kind == Kind.BYTES ? "a byte count such as 4194304, 4096K or 4M" : "an integer");
        }
    }

    private ConfigException bad(Config config, String value, String allowed) {
        Config.Origin o = config.origin(name);
        return new ConfigException(name + "='" + value + "' is not allowed: expected " + allowed + " (" + doc + ")"
                + (o.source() == Config.Source.DEFAULT ? "" : "; " + o.describe()));
    }

    @Override
    public String toString() {
        return name;
    }
}
