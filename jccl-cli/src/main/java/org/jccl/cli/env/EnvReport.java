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
import org.jccl.internal.util.Json;

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
                        + ")" : "") + ", root " + x.rootDescription() + ", secret from " + x.secretDescription();
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
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("jccl_version", Jccl.version());
        root.put("precedence", List.of("code", "env", "file", "default"));
        if (file == null) {
            root.put("config_file", null);
        } else {
            Map<String, Object> f = new LinkedHashMap<>();
            f.put("path", file.path().toString());
            f.put("found_as", file.how());
            f.put("shadowed", file.shadowed() == null ? null : file.shadowed().toString());
            root.put("config_file", f);
        }
        root.put("job", launch);
        List<Object> rows = new ArrayList<>();
        for (Row r : settings) {
            Setting s = r.setting();
            Config.Origin o = r.origin();
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", s.name());
            m.put("nccl_alias", s.ncclAlias());
            m.put("value", r.value());
            m.put("default", s.defaultValue());
            m.put("source", o.source() == Config.Source.FILE ? "file" : o.label());
            m.put("variable", o.variable());
            m.put("file", o.file() == null ? null : o.file().toString());
            m.put("line", o.line() > 0 ? o.line() : null);
            m.put("kind", s.kind().name().toLowerCase(java.util.Locale.ROOT));
            m.put("allowed", s.allowed());
            m.put("doc", s.doc());
            m.put("error", r.error());
            rows.add(m);
        }
        root.put("settings", rows);
        root.put("warnings", warnings);
        root.put("errors", errors);
        return Json.write(root) + "\n";
    }
}
