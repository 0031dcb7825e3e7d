package org.jccl.internal.config;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;

/**
 * One named setting: its {@code JCCL_*} name, the NCCL name with the same meaning (if any), its
 * default, the allowed range and one line of documentation. Every setting jccl reads is declared
 * in {@link Settings}; values come from a {@link Config}, which in turn was filled from the
 * environment and from code.
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

    /** Every declared setting, in declaration order. */
    public static Map<String, Setting> all() {
        Settings.init();
        synchronized (REGISTRY) {
            return Collections.unmodifiableMap(new LinkedHashMap<>(REGISTRY));
        }
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
        long x = parseLong(v);
        if (x < min || x > max) {
            throw bad(v, "a value between " + min + " and " + max);
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
            default -> throw bad(v, "1/0, true/false, yes/no or on/off");
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
            throw bad(v, "a number of seconds (e.g. 120, 2.5 or 500ms)");
        }
        if (d.toMillis() < min * 1000 || d.toMillis() > max * 1000) {
            throw bad(v, "between " + min + " and " + max + " seconds");
        }
        return d;
    }

    private long parseLong(String v) {
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
            throw bad(v, kind == Kind.BYTES ? "a byte count such as 4194304, 4096K or 4M" : "an integer");
        }
    }

    private ConfigException bad(String value, String allowed) {
        return new ConfigException(name + "='" + value + "' is not allowed: expected " + allowed + " (" + doc + ")");
    }

    @Override
    public String toString() {
        return name;
    }
}
