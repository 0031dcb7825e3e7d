package org.jccl.internal.config;

import java.util.List;
import java.util.Locale;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.JcclId;

/**
 * The checks of text settings that have a grammar, each done by the parser that later reads the
 * value, so that {@link Config#validate()} and {@code jccl env} report exactly the errors that
 * initialisation would hit. Kept apart from {@link Settings} so the registry stays a plain list.
 * The grammars of settings read by other packages (logging, interfaces, algorithms) are registered
 * by those packages ({@link Setting#grammar(java.util.function.Supplier, java.util.function.Consumer)});
 * this class holds the ones read here and the dispatch.
 * The GPU settings' algorithm names ({@code JCCL_CUDA_ALLREDUCE}, ...) are checked by jccl-cuda
 * when it reads them, so the list of kernels lives in one place.
 */
final class SettingChecks {

    private SettingChecks() {
    }

    private static final List<String> REDUCE_VECTOR = List.of("auto", "1", "0", "true", "false", "yes", "no", "on", "off");
    private static final List<String> CHECK = List.of("0", "1", "none", "true", "yes", "on");
    private static final List<String> NET = List.of("ucx", "ib", "socket", "auto");

    /** What a text setting allows, in words, or null when it takes any text. */
    static String allowed(Setting s) {
        Setting.Grammar g = s.grammar();
        if (g != null) {
            return g.allowed().get();
        }
        if (s == Settings.REDUCE_VECTOR) {
            return "auto, 1 or 0";
        }
        if (s == Settings.CHECK) {
            return "0 (the mismatch guard), 1 (the guard and the full signature exchange) or none (no guard)";
        }
        if (s == Settings.NET) {
            return "UCX (or IB), Socket or auto";
        }
        if (s == Settings.AUTH_TOKEN) {
            return "32 hex digits (openssl rand -hex 16)";
        }
        if (s == Settings.COMM_ID) {
            return "host:port or [ipv6]:port";
        }
        if (s == Settings.CUDA_DEVICE) {
            return "a GPU index (0, 1, ...: among the GPUs CUDA_VISIBLE_DEVICES leaves visible) or a UUID or its prefix (GPU-5e0f...,"
                    + " MIG-...)";
        }
        if (s == Settings.HOSTID) {
            return "a host id, or a comma list of ids indexed by rank (a,a,b,b; id*k repeats an id k times: a*2,b*2); no empty ids";
        }
        return null;
    }

    /**
     * Checks {@code value} of text setting {@code s}.
     *
     * @throws ConfigException naming the variable, the value, what is allowed and where it was set
     */
    static void check(Setting s, String value, Config config) {
        try {
            Setting.Grammar g = s.grammar();
            if (g != null) {
                g.check().accept(value);
            } else if (s == Settings.REDUCE_VECTOR) {
                oneOf(s, value, REDUCE_VECTOR, "auto, 1 or 0");
            } else if (s == Settings.CHECK) {
                String v = value.trim().toLowerCase(Locale.ROOT);
                if (v.equals("off") || v.equals("false") || v.equals("no")) {
                    // Once "no check at all"; now that the guard is always on, the word no longer says which is meant.
                    throw new ConfigException(s.name() + "='" + value + "' is not allowed: the mismatch guard is on by default, and '"
                            + value + "' does not say whether it should stay on: write 0 (the guard only, the default) or none (no guard"
                            + " at all: mismatched calls may then return wrong results; for measurements)");
                }
                oneOf(s, value, CHECK, "0 (the mismatch guard), 1 (the guard and the full signature exchange) or none (no guard)");
            } else if (s == Settings.NET) {
                oneOf(s, value, NET, "UCX (or IB), Socket or auto");
            } else if (s == Settings.AUTH_TOKEN) {
                JcclId.parseSecret(value, s.name());
            } else if (s == Settings.COMM_ID) {
                hostPort(s, value);
            } else if (s == Settings.HOSTID) {
                HostId.parse(value);
            } else if (s == Settings.CUDA_DEVICE) {
                cudaDevice(s, value);
            }
        } catch (ConfigException e) {
            throw s.withOrigin(e, config);
        }
    }

    private static void oneOf(Setting s, String value, List<String> allowed, String words) {
        String v = value.trim().toLowerCase(Locale.ROOT);
        if (!allowed.contains(v)) {
            throw new ConfigException(s.name() + "='" + value + "' is not allowed: expected " + words
                    + DidYouMean.hint(v, allowed, "") + " (" + s.doc() + ")");
        }
    }

    /** An index, or GPU-/MIG- and hex digits and dashes (a prefix of a UUID as nvidia-smi -L prints it). */
    private static void cudaDevice(Setting s, String value) {
        String t = value.trim();
        if (t.matches("\\d{1,6}") || t.matches("(?i)(GPU|MIG)-[0-9a-f][0-9a-f-]*")) {
            return;
        }
        throw new ConfigException(s.name() + "='" + value + "' is not allowed: expected " + allowed(s)
                + (t.matches("(?i)(GPU|MIG)-?") ? "; give at least one hex digit of the UUID" : "")
                + (t.contains(",") ? "; it names one GPU, unlike CUDA_VISIBLE_DEVICES" : "") + " (" + s.doc() + ")");
    }

    /** Syntax only: resolving the host here would make {@code jccl env} wait on DNS. */
    private static void hostPort(Setting s, String value) {
        String t = value.trim();
        int colon = t.lastIndexOf(':');
        boolean ok = colon > 0 && colon < t.length() - 1 && (t.indexOf(':') == colon || t.startsWith("["));
        if (ok) {
            try {
                int port = Integer.parseInt(t.substring(colon + 1));
                ok = port >= 1 && port <= 65535;
            } catch (NumberFormatException e) {
                ok = false;
            }
        }
        if (!ok) {
            throw new ConfigException(s.name() + "='" + value + "' is not allowed: expected host:port with a port from 1 to 65535"
                    + " (or [ipv6]:port)");
        }
    }
}
