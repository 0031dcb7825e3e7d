package org.jccl.internal.doctor;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Setting;

/**
 * The {@code env} check of {@code jccl doctor}: variables that do nothing and values that are not
 * allowed, as the configuration registry reports them ({@link Config#warnings()},
 * {@link Config#problems()}), so {@code jccl doctor}, {@code jccl env} and initialisation say the
 * same thing:
 * <ul>
 *   <li>a {@code JCCL_*} name jccl does not know (a typo: "did you mean");</li>
 *   <li>an {@code NCCL_*} name that does not exist in NCCL either, but circulates in blog posts;</li>
 *   <li>a real NCCL variable that jccl does not honour;</li>
 *   <li>a {@code JCCL_*} and its NCCL alias set to different values (the jccl name wins);</li>
 *   <li>a value a setting does not accept (the setting's own error message).</li>
 * </ul>
 * {@code NCCL_*} variables that are not aliases of jccl settings are also listed: NCCL reads them
 * ({@code jccl perf --backend nccl}).
 */
public final class EnvCheck {
    private EnvCheck() {
    }

    /**
     * What the environment gets wrong.
     *
     * @param problems one sentence each: unknown names, no-op names, conflicting aliases
     * @param badValues the error of each setting whose value is not allowed
     * @param ncclOnly NCCL variables jccl leaves to NCCL
     */
    public record Result(List<String> problems, List<String> badValues, List<String> ncclOnly) {
    }

    public static Result check(Map<String, String> env) {
        List<String> ncclOnly = new ArrayList<>();
        for (String name : new TreeMap<>(env).keySet()) {
            if (name.startsWith("NCCL_") && Setting.byName(name) == null) {
                ncclOnly.add(name);
            }
        }
        Config config;
        try {
            config = Config.fromEnvironment(env);
        } catch (ConfigException e) {
            // JCCL_CONF_FILE names a missing or broken file.
            Map<String, String> withoutFile = new TreeMap<>(env);
            withoutFile.remove("JCCL_CONF_FILE");
            Config rest = Config.fromEnvironment(withoutFile);
            List<String> bad = new ArrayList<>(rest.problems());
            bad.add(0, e.getMessage());
            return new Result(rest.warnings(), bad, ncclOnly);
        }
        return new Result(config.warnings(), config.problems(), ncclOnly);
    }

    /** Levenshtein distance (Doctor's "did you mean" for HCA names). */
    static int editDistance(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int c = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                cur[j] = Math.min(Math.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + c);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }
}
