package org.jccl.internal.topo;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Setting;

/**
 * The {@code env} check of {@code jccl doctor}: variables that do nothing. Kept apart from the
 * other checks so that it can be swapped for the configuration registry's own validation when that
 * exists; it uses only {@link Setting#byName}, {@link Setting#all} and the typed getters.
 *
 * <ul>
 *   <li>a {@code JCCL_*} name jccl does not know (a typo: "did you mean");</li>
 *   <li>an {@code NCCL_*} name that does not exist in NCCL either, but circulates in blog posts;</li>
 *   <li>a {@code JCCL_*} and its NCCL alias set to different values (the jccl name wins);</li>
 *   <li>a value a setting does not accept (the setting's own error message).</li>
 * </ul>
 * Other {@code NCCL_*} variables are NCCL's (used by {@code jccl perf --backend nccl}) and only listed.
 */
public final class EnvCheck {
    private EnvCheck() {
    }

    /** NCCL variables that NCCL has never read; each maps to what the writer probably wanted. */
    static final Map<String, String> NCCL_NONEXISTENT = Map.of(
            "NCCL_IB_MTU", "the IB MTU is the port's (ibv_devinfo shows active_mtu); set it on the switch/subnet manager",
            "NCCL_RX_RING_SIZE", "ring sizes of NICs are set with ethtool -G",
            "NCCL_IB_DISABLE_ECN", "ECN is configured on the NIC and switches (e.g. mlnx_qos / the switch's QoS), not by NCCL");

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
        List<String> problems = new ArrayList<>();
        List<String> bad = new ArrayList<>();
        List<String> ncclOnly = new ArrayList<>();
        Map<String, String> sorted = new TreeMap<>(env);
        for (Map.Entry<String, String> e : sorted.entrySet()) {
            String name = e.getKey();
            if (name.startsWith("JCCL_")) {
                if (Setting.byName(name) == null) {
                    String near = closest(name);
                    problems.add(name + " is not a jccl setting" + (near == null ? "" : " (did you mean " + near + "?)")
                            + "; it has no effect");
                }
            } else if (name.startsWith("NCCL_")) {
                if (NCCL_NONEXISTENT.containsKey(name)) {
                    problems.add(name + " does not exist in NCCL or jccl and has no effect anywhere: " + NCCL_NONEXISTENT.get(name));
                } else {
                    Setting s = Setting.byName(name);
                    if (s == null) {
                        ncclOnly.add(name);
                    } else if (env.containsKey(s.name()) && !env.get(s.name()).equals(e.getValue())) {
                        problems.add(name + "=" + e.getValue() + " is ignored: " + s.name() + "=" + env.get(s.name()) + " is also set and wins");
                    }
                }
            }
        }
        Config config = Config.fromEnvironment(env);
        for (Setting s : Setting.all().values()) {
            if (config.raw(s.name()) == null) {
                continue;
            }
            try {
                switch (s.kind()) {
                    case INT, BYTES -> s.getLong(config);
                    case BOOL -> s.getBool(config);
                    case DURATION_SECONDS -> s.getDuration(config);
                    case STRING -> { }
                }
            } catch (ConfigException x) {
                bad.add(x.getMessage());
            }
        }
        return new Result(problems, bad, ncclOnly);
    }

    /** The known name nearest to {@code name} (edit distance at most 3), or null. */
    static String closest(String name) {
        String best = null;
        int bestD = 4;
        Set<String> names = Setting.all().keySet();
        for (String k : names) {
            int d = editDistance(name, k);
            if (d < bestD) {
                bestD = d;
                best = k;
            }
        }
        return best;
    }

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
