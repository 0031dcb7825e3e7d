package org.jccl.cli.env;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.Jccl;
import org.jccl.internal.config.ConfigFile;
import org.jccl.internal.config.Setting;

/**
 * What {@code jccl env} prints: every setting with its effective value and source, the config
 * file, the job identity, warnings (variables without effect, a launcher convention that is
 * incomplete) and errors (values that are not allowed, a broken config file). Built from explicit
 * inputs, so tests run it on synthetic environments and files.
 *
 * @param settings one row per setting of the registry, in registry order
 * @param file the config file read, or null
 * @param warnings one sentence each
 * @param errors one sentence each; {@code jccl env} exits 1 when there are any
 * @param launch "Open MPI: rank 1 of 4 (local rank 1), root node0:29500", or null when no launcher convention is present
 */
public record EnvReport(List<Row> settings, ConfigFile.Located file, List<String> warnings, List<String> errors, String launch) {

    /** Shown instead of the job's secret. */
    static final String MASKED = "****";

    /**
     * One setting.
     *
     * @param setting the registry entry
     * @param value the effective value (masked for the secret), or null when unset
     * @param origin where it came from
     * @param error why the value is not allowed, or null
     */
    public record Row(Setting setting, String value, Config.Origin origin, String error) {
        /** "default", "env", "env (NCCL_DEBUG)", "file:/etc/jccl.conf line 3" or "code". */
        public String sourceText() {
            String s = origin.label();
            if (origin.source() == Config.Source.FILE) {
                s += " line " + origin.line();
            }
            if (origin.variable() != null && !origin.variable().equals(setting.name())) {
                s += " (" + origin.variable() + ")";
            }
            return s;
        }
    }

    /**
     * The report for this environment, home directory and system file.
     *
     * @param homeDir the user's home directory, or null to skip {@code ~/.jccl.conf}
     * @param systemFile normally {@code /etc/jccl.conf}; null to skip
     */
    public static EnvReport build(Map<String, String> env, Path homeDir, Path systemFile) {
        List<String> errors = new ArrayList<>();
        Config config;
        ConfigFile.Located file = null;
        try {
            file = ConfigFile.locate(env, homeDir, systemFile);
            config = Config.fromEnvironment(env, homeDir, systemFile);
        } catch (ConfigException e) {
            // A broken or missing config file: report it, and show what the environment alone sets.
            errors.add(e.getMessage());
            Map<String, String> withoutFile = new LinkedHashMap<>(env);
            withoutFile.remove(ConfigFile.ENV_VAR);
            config = Config.fromEnvironment(withoutFile, null, null);
            file = null;
        }
        List<Row> rows = new ArrayList<>();
        for (Setting s : Setting.all().values()) {
            String problem = s.problem(config);
            if (problem != null) {
                errors.add(problem);
            }
            String v = s.raw(config);
            if (v != null && s.name().equals("JCCL_AUTH_TOKEN")) {
                v = MASKED;
            }
            rows.add(new Row(s, v, config.origin(s.name()), problem));
        }
        List<String> warnings = new ArrayList<>(config.warnings());
        String launch = null;
        try {
            Optional<Config.Launch> l = config.launch();
            if (l.isPresent()) {
                Config.Launch x = l.get();
                launch = x.convention() + ": rank " + x.rank() + " of " + x.size() + (x.localRank() >= 0 ? " (local rank " + x.localRank()
                        + ")" : "") + ", root " + x.id().rootHostPort();
            }
        } catch (ConfigException e) {
            warnings.add("a launcher's variables are present but do not describe a job (Jccl.init(Config.fromEnvironment()) would fail): "
                    + e.getMessage());
        }
        return new EnvReport(List.copyOf(rows), file, List.copyOf(warnings), List.copyOf(errors), launch);
    }

    /** The text table. */
    public String text() {
        StringBuilder sb = new StringBuilder();
        sb.append("# jccl ").append(Jccl.version()).append(" settings. A value comes from the first of: code (Config.with),")
                .append(" the environment (JCCL_X, else NCCL_X), the config file, the default.\n");
        sb.append("# config file: ");
        if (file == null) {
            sb.append("none (the first of $JCCL_CONF_FILE, ~/.jccl.conf, /etc/jccl.conf that exists is read)");
        } else {
            sb.append(file.path()).append(" (found as ").append(file.how()).append(')');
            if (file.shadowed() != null) {
                sb.append("; ").append(file.shadowed()).append(" exists but is not read: only one file is");
            }
        }
        sb.append('\n');
        sb.append("# job: ").append(launch != null ? launch : "no launcher variables (JCCL_RANK, RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID)")
                .append('\n');
        int nameWidth = "SETTING".length();
        int valueWidth = "VALUE".length();
        for (Row r : settings) {
            nameWidth = Math.max(nameWidth, r.setting().name().length());
            valueWidth = Math.max(valueWidth, Math.min(32, display(r).length()));
        }
        sb.append(pad("SETTING", nameWidth)).append("  ").append(pad("VALUE", valueWidth)).append("  SOURCE\n");
        for (Row r : settings) {
            sb.append(pad(r.setting().name(), nameWidth)).append("  ").append(pad(display(r), valueWidth)).append("  ")
                    .append(r.sourceText());
            if (r.error() != null) {
                sb.append("  NOT ALLOWED");
            }
            sb.append('\n');
        }
        if (!warnings.isEmpty()) {
            sb.append("\nwarnings:\n");
            for (String w : warnings) {
                sb.append("  WARN ").append(w).append('\n');
            }
        }
        if (!errors.isEmpty()) {
            sb.append("\nerrors:\n");
            for (String e : errors) {
                sb.append("  ERROR ").append(e).append('\n');
            }
        }
        return sb.toString();
    }

    private static String display(Row r) {
        if (r.value() == null) {
            return "-";
        }
        return r.value().isEmpty() ? "''" : r.value();
    }

    private static String pad(String s, int width) {
        return s.length() >= width ? s : s + " ".repeat(width - s.length());
    }

    /**
     * The JSON form:
     * <pre>
     * {"jccl_version":..., "precedence":["code","env","file","default"],
     *  "config_file":{"path":..., "found_as":..., "shadowed":...} | null, "job":... | null,
     *  "settings":[{"name":..., "nccl_alias":..., "value":..., "default":..., "source":"env", "variable":..., "file":..., "line":...,
     *               "kind":..., "allowed":..., "doc":..., "error":...}, ...],
     *  "warnings":[...], "errors":[...]}
     * </pre>
     */
    public String json() {
        StringBuilder sb = new StringBuilder("{\n");
        sb.append("  \"jccl_version\": ").append(str(Jccl.version())).append(",\n");
        sb.append("  \"precedence\": [\"code\", \"env\", \"file\", \"default\"],\n");
        sb.append("  \"config_file\": ");
        if (file == null) {
            sb.append("null");
        } else {
            sb.append("{\"path\": ").append(str(file.path().toString())).append(", \"found_as\": ").append(str(file.how()))
                    .append(", \"shadowed\": ").append(file.shadowed() == null ? "null" : str(file.shadowed().toString())).append('}');
        }
        sb.append(",\n  \"job\": ").append(launch == null ? "null" : str(launch)).append(",\n");
        sb.append("  \"settings\": [\n");
        for (int i = 0; i < settings.size(); i++) {
            Row r = settings.get(i);
            Setting s = r.setting();
            Config.Origin o = r.origin();
            sb.append("    {\"name\": ").append(str(s.name()))
                    .append(", \"nccl_alias\": ").append(str(s.ncclAlias()))
                    .append(", \"value\": ").append(str(r.value()))
                    .append(", \"default\": ").append(str(s.defaultValue()))
                    .append(", \"source\": ").append(str(o.source() == Config.Source.FILE ? "file" : o.label()))
                    .append(", \"variable\": ").append(str(o.variable()))
                    .append(", \"file\": ").append(str(o.file() == null ? null : o.file().toString()))
                    .append(", \"line\": ").append(o.line() > 0 ? Integer.toString(o.line()) : "null")
                    .append(", \"kind\": ").append(str(s.kind().name().toLowerCase(java.util.Locale.ROOT)))
                    .append(", \"allowed\": ").append(str(s.allowed()))
                    .append(", \"doc\": ").append(str(s.doc()))
                    .append(", \"error\": ").append(str(r.error()))
                    .append(i + 1 < settings.size() ? "},\n" : "}\n");
        }
        sb.append("  ],\n");
        sb.append("  \"warnings\": ").append(strings(warnings)).append(",\n");
        sb.append("  \"errors\": ").append(strings(errors)).append("\n}\n");
        return sb.toString();
    }

    private static String strings(List<String> list) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < list.size(); i++) {
            sb.append(i == 0 ? "" : ", ").append(str(list.get(i)));
        }
        return sb.append(']').toString();
    }

    /** A JSON string literal, or null. */
    static String str(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\t' -> b.append("\\t");
                case '\r' -> b.append("\\r");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
