package org.jccl;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.jccl.internal.config.LaunchEnvironment;
import org.jccl.internal.config.Setting;

/**
 * Settings of a communicator, and where they came from. Immutable; {@link #with} returns a copy.
 *
 * <p>Values are kept as text under their {@code JCCL_*} names (NCCL names of the same meaning,
 * such as {@code NCCL_SOCKET_IFNAME}, are accepted and stored under the jccl name) and checked
 * when they are read, with errors that name the variable, the value and what is allowed.
 *
 * <p>A config made by {@link #fromEnvironment()} also knows the job identity: rank, world size,
 * local rank and bootstrap root, read from the first launcher convention that is present
 * ({@code JCCL_*}, torchrun, Open MPI, Slurm); see {@link #launch()}.
 */
public final class Config {

    /** Where a value came from, as {@code jccl env} reports it. */
    public enum Source { DEFAULT, ENVIRONMENT, CODE }

    private final Map<String, String> values;
    private final Map<String, Source> sources;
    private final Launch launch;
    /** A launcher convention that is present but broken; thrown by {@link #launch()}, not at construction. */
    private final ConfigException launchError;

    /**
     * The job identity found in the environment.
     *
     * @param convention which launcher convention supplied it: "JCCL", "torchrun", "Open MPI", "Slurm"
     * @param id bootstrap root and secret
     * @param rank this process's rank
     * @param size number of ranks
     * @param localRank rank among this host's processes, or -1 when unknown
     */
    public record Launch(String convention, JcclId id, int rank, int size, int localRank) {
        public Launch {
            Objects.requireNonNull(convention, "convention");
            Objects.requireNonNull(id, "id");
        }
    }

    private Config(Map<String, String> values, Map<String, Source> sources, Launch launch, ConfigException launchError) {
        this.values = values;
        this.sources = sources;
        this.launch = launch;
        this.launchError = launchError;
    }

    /** Defaults only; no job identity. */
    public static Config defaults() {
        return new Config(Map.of(), Map.of(), null, null);
    }

    /** Settings and job identity from this process's environment. */
    public static Config fromEnvironment() {
        return fromEnvironment(System.getenv());
    }

    /**
     * Settings and job identity from the given variables, exactly as {@link #fromEnvironment()}
     * would read them from the environment.
     *
     * @throws ConfigException when a launcher convention is present but incomplete or inconsistent
     */
    public static Config fromEnvironment(Map<String, String> env) {
        Map<String, String> v = new LinkedHashMap<>();
        Map<String, Source> s = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : env.entrySet()) {
            Setting setting = Setting.byName(e.getKey());
            if (setting == null) {
                continue;
            }
            // The jccl name wins over the NCCL alias when both are set.
            if (e.getKey().equals(setting.name()) || !env.containsKey(setting.name())) {
                v.put(setting.name(), e.getValue());
                s.put(setting.name(), Source.ENVIRONMENT);
            }
        }
        // A half-present convention (e.g. SLURM_* inside an sbatch shell without srun) must not break
        // single-process uses (initLocal, jccl doctor): keep the error for whoever asks for the identity.
        Launch launch = null;
        ConfigException error = null;
        try {
            launch = LaunchEnvironment.detect(env).orElse(null);
        } catch (ConfigException e) {
            error = e;
        }
        return new Config(Collections.unmodifiableMap(v), Collections.unmodifiableMap(s), launch, error);
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
            throw new ConfigException("unknown setting '" + name + "'; `jccl env` lists every setting");
        }
        Map<String, String> v = new LinkedHashMap<>(values);
        Map<String, Source> s = new LinkedHashMap<>(sources);
        v.put(setting.name(), value);
        s.put(setting.name(), Source.CODE);
        return new Config(Collections.unmodifiableMap(v), Collections.unmodifiableMap(s), launch, launchError);
    }

    /** The value set for {@code name} (jccl name), or null when it is left at its default. */
    public String raw(String name) {
        return values.get(name);
    }

    /** Where the value of {@code name} came from. */
    public Source source(String name) {
        return sources.getOrDefault(name, Source.DEFAULT);
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
