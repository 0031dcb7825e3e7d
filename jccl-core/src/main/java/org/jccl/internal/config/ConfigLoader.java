package org.jccl.internal.config;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jccl.Config;
import org.jccl.Config.Origin;
import org.jccl.Config.Source;

/**
 * Merges the environment and the config file into setting values with their origins, and finds
 * the variables that have no effect. The precedence is environment over file (code, applied later
 * by {@link Config#with}, beats both); within one source the jccl name beats the NCCL alias.
 *
 * <p>Logs nothing (the logger itself uses it to read {@code JCCL_DEBUG*}); {@link Config#fromEnvironment()}
 * logs the warnings. Stateless.
 */
public final class ConfigLoader {

    private ConfigLoader() {
    }

    /**
     * The merged result.
     *
     * @param values effective explicit values by jccl name
     * @param origins where each came from
     * @param file the config file read, or null
     * @param warnings one sentence per variable or file line that has no effect
     * @param launchEnv the variables launcher conventions are read from: the file's setting lines
     *        overlaid by the environment
     */
    public record Loaded(Map<String, String> values, Map<String, Origin> origins, ConfigFile.Located file, List<String> warnings,
            Map<String, String> launchEnv) {
    }

    /**
     * Reads the config file that {@code env}, {@code homeDir} and {@code systemFile} select (see
     * {@link ConfigFile#locate}) and merges it with {@code env}.
     *
     * @throws org.jccl.ConfigException when {@code JCCL_CONF_FILE} names a missing file, or the
     *         file cannot be read or has a malformed line
     */
    public static Loaded load(Map<String, String> env, Path homeDir, Path systemFile) {
        ConfigFile.Located located = ConfigFile.locate(env, homeDir, systemFile);
        List<ConfigFile.Line> lines = located == null ? List.of() : ConfigFile.read(located.path());
        return merge(env, located, lines);
    }

    /** {@link #load} with the file already read (tests, {@code jccl env}). */
    public static Loaded merge(Map<String, String> env, ConfigFile.Located located, List<ConfigFile.Line> lines) {
        Map<String, String> values = new LinkedHashMap<>();
        Map<String, Origin> origins = new LinkedHashMap<>();
        Map<String, String> launchEnv = new LinkedHashMap<>();
        List<String> warnings = new ArrayList<>();
        Path path = located == null ? null : located.path();

        Map<String, ConfigFile.Line> seen = new LinkedHashMap<>();
        for (ConfigFile.Line l : lines) {
            Setting s = Setting.byName(l.key());
            ConfigFile.Line before = seen.put(l.key(), l);
            if (before != null && !before.value().equals(l.value())) {
                warnings.add(path + " line " + l.line() + " sets " + l.key() + " again (line " + before.line() + " set '" + before.value()
                        + "'); the later line wins");
            }
            if (s == null) {
                continue;
            }
            if (s.name().equals(ConfigFile.ENV_VAR)) {
                warnings.add(where(path, l) + ": " + l.key() + " has no effect inside a config file (it names the file to read);"
                        + " set it in the environment");
                continue;
            }
            launchEnv.put(l.key(), l.value());
            put(values, origins, s, l.key(), l.value(), new Origin(Source.FILE, l.key(), path, l.line()));
        }
        // The environment beats the file: values from it replace the file's, whatever name either used.
        Map<String, Origin> fromEnv = new LinkedHashMap<>();
        Map<String, String> envValues = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : new TreeMap<>(env).entrySet()) {
            Setting s = Setting.byName(e.getKey());
            if (s != null) {
                put(envValues, fromEnv, s, e.getKey(), e.getValue(), new Origin(Source.ENVIRONMENT, e.getKey(), null, 0));
            }
        }
        values.putAll(envValues);
        origins.putAll(fromEnv);
        launchEnv.putAll(env);

        warnings.addAll(warnings(env, lines, path));
        return new Loaded(values, origins, located, warnings, launchEnv);
    }

    /**
     * This process's value of a JVM-wide setting (environment, then config file), or null: for
     * class initialisers that read a setting once ({@code JCCL_REDUCE_VECTOR}). A broken config
     * file is ignored here; {@link Config#fromEnvironment()} reports it.
     */
    public static String processValue(Setting s) {
        return ProcessValues.VALUES.get(s.name());
    }

    /** Read once, on first use. */
    private static final class ProcessValues {
        static final Map<String, String> VALUES = read();

        private static Map<String, String> read() {
            Map<String, String> env = System.getenv();
            String home = System.getProperty("user.home");
            try {
                return load(env, home == null || home.isBlank() ? null : Path.of(home), ConfigFile.SYSTEM_FILE).values();
            } catch (RuntimeException e) {
                return merge(env, null, List.of()).values();
            }
        }
    }

    /** Records a value unless the same source already set the setting under its jccl name (which beats the alias). */
    private static void put(Map<String, String> values, Map<String, Origin> origins, Setting s, String key, String value, Origin origin) {
        Origin prev = origins.get(s.name());
        if (prev != null && prev.source() == origin.source() && prev.variable().equals(s.name()) && !key.equals(s.name())) {
            return;
        }
        values.put(s.name(), value);
        origins.put(s.name(), origin);
    }

    private static String where(Path file, ConfigFile.Line l) {
        return file + " line " + l.line();
    }

    /**
     * One sentence per variable that has no effect, environment first, then file lines:
     * <ul>
     *   <li>an unknown {@code JCCL_*} name, with "did you mean" when a setting is close;</li>
     *   <li>an NCCL name that NCCL never had ({@code NCCL_IB_MTU}, ...): no effect anywhere;</li>
     *   <li>a real NCCL variable that jccl does not honour, with the nearest jccl setting;</li>
     *   <li>an {@code NCCL_*} name close to one jccl knows (a typo);</li>
     *   <li>a jccl name and its NCCL alias set to different values in one source;</li>
     *   <li>a file line whose key is neither a jccl nor an NCCL name.</li>
     * </ul>
     */
    public static List<String> warnings(Map<String, String> env, List<ConfigFile.Line> fileLines, Path file) {
        List<String> out = new ArrayList<>();
        for (String name : new TreeMap<>(env).keySet()) {
            String w = warning(name, "(environment)", true);
            if (w != null) {
                out.add(w);
            }
        }
        conflicts(env, "in the environment", out);
        Map<String, String> fileMap = new LinkedHashMap<>();
        for (ConfigFile.Line l : fileLines) {
            fileMap.put(l.key(), l.value());
            String w = warning(l.key(), "(" + where(file, l) + ")", false);
            if (w != null) {
                out.add(w);
            } else if (!KnownVariables.isJcclName(l.key()) && !KnownVariables.isNcclName(l.key())) {
                out.add(l.key() + " (" + where(file, l) + ") is neither a jccl nor an NCCL variable: ignored (jccl reads only settings"
                        + " from its config file and sets no environment variables)");
            }
        }
        conflicts(fileMap, "in " + file, out);
        return out;
    }

    private static String warning(String name, String where, boolean fromEnv) {
        if (Setting.byName(name) != null) {
            return null;
        }
        if (KnownVariables.isJcclName(name)) {
            if (fromEnv && KnownVariables.JCCL_SCRIPT_VARIABLES.contains(name)) {
                return null;
            }
            String near = DidYouMean.closest(name, Setting.all().keySet(), "JCCL_");
            return name + " " + where + " is not a jccl setting and has no effect; "
                    + (near != null ? "did you mean " + near + "?" : "`jccl env` lists every setting");
        }
        if (!KnownVariables.isNcclName(name)) {
            return null;
        }
        String fake = KnownVariables.NCCL_NONEXISTENT.get(name);
        if (fake != null) {
            return name + " " + where + " has no effect anywhere: NCCL has no such variable (it circulates in blog posts and old scripts)"
                    + " and jccl has none either; " + fake;
        }
        String ignored = KnownVariables.NCCL_IGNORED.get(name);
        if (ignored != null) {
            return name + " " + where + " is an NCCL variable that jccl ignores" + (fromEnv ? " (it still applies to NCCL itself)" : "")
                    + (ignored.isEmpty() ? "" : "; " + ignored);
        }
        String near = DidYouMean.closest(name, KnownVariables.ncclNames(), "NCCL_");
        if (near != null) {
            return name + " " + where + " is not an NCCL variable that jccl knows and has no effect on jccl; did you mean " + near + "?";
        }
        return null;
    }

    /** JCCL_X and its alias NCCL_X both set, to different values: say which one jccl uses. */
    private static void conflicts(Map<String, String> vars, String where, List<String> out) {
        for (Setting s : Setting.all().values()) {
            String alias = s.ncclAlias();
            if (alias == null || !vars.containsKey(s.name()) || !vars.containsKey(alias)) {
                continue;
            }
            String a = vars.get(s.name());
            String b = vars.get(alias);
            if (!a.equals(b)) {
                out.add(s.name() + "=" + a + " and " + alias + "=" + b + " are both set " + where + "; jccl uses " + s.name()
                        + (where.equals("in the environment") ? " (NCCL uses " + alias + ")" : ""));
            }
        }
    }
}
