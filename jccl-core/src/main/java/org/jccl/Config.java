package org.jccl;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.jccl.internal.bootstrap.RootExchange;
import org.jccl.internal.config.ConfigFile;
import org.jccl.internal.config.ConfigLoader;
import org.jccl.internal.config.DidYouMean;
import org.jccl.internal.config.JobSecret;
import org.jccl.internal.launch.LaunchEnvironment;
import org.jccl.internal.config.Setting;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.tune.AlgoSelector;

/**
 * Settings of a communicator, and where they came from. Immutable; {@link #with} returns a copy.
 *
 * <p>Values are kept as text under their {@code JCCL_*} names (NCCL names of the same meaning,
 * such as {@code NCCL_SOCKET_IFNAME}, are accepted and stored under the jccl name) and checked
 * when they are read, with errors that name the variable, the value, what is allowed and where the
 * value came from; {@link #validate()} checks them all at once ({@link Jccl}'s init methods call it).
 *
 * <h2>Sources and precedence</h2>
 * A value is taken from the first of these that sets it (each {@link Source}):
 * <ol>
 *   <li><b>code</b>: {@link #with(String, String)} — the program's own decision wins;</li>
 *   <li><b>environment</b>: {@code JCCL_X}, else its NCCL alias {@code NCCL_X};</li>
 *   <li><b>config file</b>: the first of {@code $JCCL_CONF_FILE}, {@code ~/.jccl.conf},
 *       {@code /etc/jccl.conf} that exists (only that one is read), {@code KEY=VALUE} lines with
 *       {@code #} comments; the environment beats the file, as in NCCL (whose {@code nccl.conf}
 *       never overrides a variable that is set);</li>
 *   <li><b>default</b>: the setting's default in the registry.</li>
 * </ol>
 * Within one source the jccl name beats the NCCL alias. {@code jccl env} prints every effective
 * value with its source.
 *
 * <p>A config made by {@link #fromEnvironment()} also knows the job identity: rank, world size,
 * local rank and bootstrap root, read from the first launcher convention that is present
 * ({@code JCCL_*}, torchrun, Open MPI, Slurm); see {@link #launch()}. It also carries
 * {@link #warnings()} about variables that have no effect (unknown {@code JCCL_*} names, NCCL
 * variables that do not exist or that jccl ignores); {@link #fromEnvironment()} logs each once per
 * process.
 */
public final class Config {

    /** Where a value came from, as {@code jccl env} reports it. */
    public enum Source { DEFAULT, ENVIRONMENT, FILE, CODE }

    /**
     * Where one value came from.
     *
     * @param source the kind of source
     * @param variable the name as the user wrote it: the jccl name or its NCCL alias
     * @param file the config file ({@link Source#FILE} only), else null
     * @param line the line in {@code file} (1-based), else 0
     */
    public record Origin(Source source, String variable, Path file, int line) {
        public Origin {
            Objects.requireNonNull(source, "source");
        }

        static final Origin DEFAULT = new Origin(Source.DEFAULT, null, null, 0);

        /** {@code default}, {@code env}, {@code file:<path>} or {@code code}, as {@code jccl env} prints it. */
        public String label() {
            return switch (source) {
                case DEFAULT -> "default";
                case ENVIRONMENT -> "env";
                case FILE -> "file:" + file;
                case CODE -> "code";
            };
        }

        /**
         * For messages: "set by NCCL_DEBUG in the environment", "set by JCCL_DEBUG in
         * /home/u/.jccl.conf line 3", "set by JCCL_DEBUG in code", "the default".
         */
        public String describe() {
            return switch (source) {
                case DEFAULT -> "the default";
                case ENVIRONMENT -> "set by " + variable + " in the environment";
                case FILE -> "set by " + variable + " in " + file + " line " + line;
                case CODE -> "set by " + variable + " in code (Config.with)";
            };
        }
    }

    static {
        // The grammars of text settings are registered by the packages that read them (the settings
        // package sits below them); the facade wires them before any value can be checked.
        Log.registerGrammars();
        Interfaces.registerGrammars();
        AlgoSelector.registerGrammars();
    }

    private final Map<String, String> values;
    private final Map<String, Origin> origins;
    private final Launch launch;
    /** A launcher convention that is present but broken; thrown by {@link #launch()}, not at construction. */
    private final ConfigException launchError;
    private final ConfigFile.Located file;
    private final List<String> warnings;

    /**
     * The job identity found in the environment.
     *
     * @param convention which launcher convention supplied it: "JCCL", "torchrun", "Open MPI", "Slurm"
     * @param rank this process's rank
     * @param size number of ranks
     * @param localRank rank among this host's processes, or -1 when unknown
     * @param exchange how rank 0's bootstrap root address reaches the other ranks (internal)
     * @param secret where the job secret comes from (internal; read only at initialisation)
     */
    public record Launch(String convention, int rank, int size, int localRank, RootExchange exchange, JobSecret secret) {
        public Launch {
            Objects.requireNonNull(convention, "convention");
            Objects.requireNonNull(exchange, "exchange");
            Objects.requireNonNull(secret, "secret");
        }

        /** Where the ranks find rank 0's bootstrap root, in words ("MASTER_ADDR:MASTER_PORT=node0:29500", "torchrun's TCPStore ..."). */
        public String rootDescription() {
            return exchange.describe();
        }

        /** Where the job secret comes from, in words ("JCCL_AUTH_TOKEN", "the secret file /home/u/.jccl/secret"). */
        public String secretDescription() {
            return secret.describe();
        }
    }

    private Config(Map<String, String> values, Map<String, Origin> origins, Launch launch, ConfigException launchError,
            ConfigFile.Located file, List<String> warnings) {
        this.values = values;
        this.origins = origins;
        this.launch = launch;
        this.launchError = launchError;
        this.file = file;
        this.warnings = warnings;
    }

    /** Defaults only; no job identity. */
    public static Config defaults() {
        return new Config(Map.of(), Map.of(), null, null, null, List.of());
    }

    /**
     * Settings and job identity from this process's environment and config file
     * ({@code $JCCL_CONF_FILE}, else {@code ~/.jccl.conf}, else {@code /etc/jccl.conf}). Each
     * {@link #warnings() warning} is logged once per process (WARN, subsystem ENV).
     *
     * @throws ConfigException when {@code JCCL_CONF_FILE} names a missing file or the file has a malformed line
     */
    public static Config fromEnvironment() {
        String home = System.getProperty("user.home");
        Config c = fromEnvironment(System.getenv(), home == null || home.isBlank() ? null : Path.of(home), ConfigFile.SYSTEM_FILE);
        for (String w : c.warnings) {
            Log.warnOnce(Log.Subsys.ENV, -1, w);
        }
        return c;
    }

    /**
     * Settings and job identity from the given variables, as {@link #fromEnvironment()} would read
     * them from the environment; the map stands for the whole environment, so the only config file
     * read is the one it names with {@code JCCL_CONF_FILE} (use
     * {@link #fromEnvironment(Map, Path, Path)} to look in a home directory and a system path too).
     * Warnings are kept in {@link #warnings()}, not logged.
     *
     * @throws ConfigException when {@code JCCL_CONF_FILE} names a missing file or the file has a malformed line
     */
    public static Config fromEnvironment(Map<String, String> env) {
        return fromEnvironment(env, null, null);
    }

    /**
     * Settings and job identity from {@code env} and the config file it selects: the file named by
     * {@code JCCL_CONF_FILE}, else {@code homeDir/.jccl.conf}, else {@code systemFile}. Warnings are
     * kept in {@link #warnings()}, not logged.
     *
     * @param homeDir the user's home directory, or null to skip the per-user file
     * @param systemFile the system-wide file (normally {@code /etc/jccl.conf}), or null to skip it
     * @throws ConfigException when {@code JCCL_CONF_FILE} names a missing file or the file has a malformed line
     */
    public static Config fromEnvironment(Map<String, String> env, Path homeDir, Path systemFile) {
        ConfigLoader.Loaded l = ConfigLoader.load(env, homeDir, systemFile);
        // A half-present convention (e.g. SLURM_* inside an sbatch shell without srun) must not break
        // single-process uses (initLocal, jccl doctor): keep the error for whoever asks for the identity.
        Launch launch = null;
        ConfigException error = null;
        try {
            launch = LaunchEnvironment.detect(l.launchEnv(), homeDir != null ? homeDir.toString() : System.getProperty("user.home"))
                    .orElse(null);
        } catch (ConfigException e) {
            error = e;
        }
        return new Config(Collections.unmodifiableMap(l.values()), Collections.unmodifiableMap(l.origins()), launch, error, l.file(),
                List.copyOf(l.warnings()));
    }

    /**
     * A copy with {@code name} set to {@code value} by code (a {@code JCCL_*} name or its NCCL alias).
     *
     * @throws ConfigException for a name jccl does not know
     */
    public Config with(String name, String value) {
        Objects.requireNonNull(value, "value");
        Setting setting = Setting.byName(Objects.requireNonNull(name, "name"));
        if (setting == null) {
            throw new ConfigException("unknown setting '" + name + "'"
                    + DidYouMean.hint(name, Setting.allNames(), "")
                    + " (`jccl env` lists every setting)");
        }
        Map<String, String> v = new LinkedHashMap<>(values);
        Map<String, Origin> o = new LinkedHashMap<>(origins);
        v.put(setting.name(), value);
        o.put(setting.name(), new Origin(Source.CODE, name, null, 0));
        return new Config(Collections.unmodifiableMap(v), Collections.unmodifiableMap(o), launch, launchError, file, warnings);
    }

    /** The value set for {@code name} (jccl name), or null when it is left at its default. */
    public String raw(String name) {
        return values.get(name);
    }

    /** Where the value of {@code name} (jccl name) came from. */
    public Source source(String name) {
        return origin(name).source();
    }

    /** Where the value of {@code name} (jccl name) came from, with the variable as written and the file line. */
    public Origin origin(String name) {
        return origins.getOrDefault(name, Origin.DEFAULT);
    }

    /** The config file that was read, or null when none was (or the config was not made from the environment). */
    public Path configFile() {
        return file == null ? null : file.path();
    }

    /**
     * Variables that have no effect, one sentence each: unknown {@code JCCL_*} names (with "did
     * you mean"), NCCL variables that do not exist or that jccl does not honour, lines of the
     * config file that are not settings. Empty for configs not made from the environment.
     */
    public List<String> warnings() {
        return warnings;
    }

    /**
     * Every explicitly set value that is not allowed, one message each (naming the variable, the
     * value, what is allowed and where it was set); empty when all are valid.
     */
    public List<String> problems() {
        List<String> out = new ArrayList<>();
        for (String name : values.keySet()) {
            Setting s = Setting.byName(name);
            String p = s == null ? null : s.problem(this);
            if (p != null) {
                out.add(p);
            }
        }
        return out;
    }

    /**
     * Checks every explicitly set value.
     *
     * @return this
     * @throws ConfigException listing every value that is not allowed
     */
    public Config validate() {
        List<String> p = problems();
        if (p.size() == 1) {
            throw new ConfigException(p.get(0));
        }
        if (!p.isEmpty()) {
            throw new ConfigException(p.size() + " settings have values that are not allowed: " + String.join(" | ", p));
        }
        return this;
    }

    /** Every value that is not a default, by jccl name. */
    public Map<String, String> explicitValues() {
        return values;
    }

    /**
     * The job identity found by {@link #fromEnvironment()}, if any.
     *
     * @throws ConfigException when a launcher convention is present but incomplete or invalid
     */
    public Optional<Launch> launch() {
        if (launchError != null) {
            throw launchError;
        }
        return Optional.ofNullable(launch);
    }

    @Override
    public String toString() {
        Map<String, String> shown = new LinkedHashMap<>(values);
        shown.computeIfPresent("JCCL_AUTH_TOKEN", (k, x) -> "****");
        return "Config" + shown + (launch != null ? " launch=" + launch.convention() + " rank " + launch.rank() + "/" + launch.size() : "");
    }
}
