package org.jccl.cuda.testing;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import java.util.regex.Pattern;
import org.jccl.cuda.Cuda;
import org.jccl.cuda.CudaDevice;

/**
 * The GPU tests' settings (system properties) and the communicator sets they share.
 *
 * <table>
 *   <caption>System properties</caption>
 *   <tr><td>jccl.gpu.sweep</td><td>tiny, default or full (see {@link Sweep})</td></tr>
 *   <tr><td>jccl.gpu.full</td><td>true: the same as jccl.gpu.sweep=full</td></tr>
 *   <tr><td>jccl.gpu.backends</td><td>comma list of jccl, nccl (default both; nccl is skipped where libnccl.so.2 is missing)</td></tr>
 *   <tr><td>jccl.gpu.ranks</td><td>comma list of rank counts (default: every visible GPU, and 2 when there are 3 or more)</td></tr>
 *   <tr><td>jccl.gpu.seed</td><td>base seed, decimal or 0x hex, or "random" (default fixed)</td></tr>
 *   <tr><td>jccl.gpu.filter</td><td>a regular expression: only cases whose name it finds run (e.g. "allReduce bfloat16 sum")</td></tr>
 *   <tr><td>jccl.gpu.caseTimeoutSeconds</td><td>deadline of one case before the communicators are aborted (default 30)</td></tr>
 *   <tr><td>jccl.gpu.maxFailures</td><td>failing cases reported per test before it stops (default 12)</td></tr>
 *   <tr><td>jccl.gpu.maxBreaks</td><td>communicator sets of one backend that may break (hang, CUDA error) before its remaining tests are skipped (default 3)</td></tr>
 * </table>
 *
 * <p>Sets are cached one at a time (tests are ordered so that consecutive tests share a set); a set
 * that broke is replaced by a fresh one; a backend that broke {@code jccl.gpu.maxBreaks} sets is
 * skipped from then on, so a hanging implementation costs a few deadlines, not one per test.
 */
public final class GpuEnv {
    private GpuEnv() {
    }

    public static final long SEED = parseSeed(System.getProperty("jccl.gpu.seed", "0x6a63636c"));
    public static final Duration CREATE_TIMEOUT = Duration.ofSeconds(120);

    private static RankSet current;
    private static final Map<Backend, List<String>> BREAKS = new EnumMap<>(Backend.class);
    private static final Map<String, String> CREATE_FAILED = new java.util.HashMap<>();

    private static long parseSeed(String s) {
        String v = s.trim();
        if (v.equalsIgnoreCase("random")) {
            return System.nanoTime() ^ Elements.mix(ProcessHandle.current().pid());
        }
        return v.startsWith("0x") || v.startsWith("0X") ? Long.parseUnsignedLong(v.substring(2), 16) : Long.parseLong(v);
    }

    /** The backends asked for (available or not). */
    public static List<Backend> backends() {
        List<Backend> out = new ArrayList<>();
        for (String s : System.getProperty("jccl.gpu.backends", "jccl,nccl").split(",")) {
            if (!s.isBlank()) {
                out.add(Backend.parse(s));
            }
        }
        return out;
    }

    /** The rank counts to test, each at most the number of visible GPUs. */
    public static List<Integer> rankCounts() {
        int gpus = Cuda.deviceCount();
        Set<Integer> out = new LinkedHashSet<>();
        String p = System.getProperty("jccl.gpu.ranks");
        if (p == null || p.isBlank()) {
            out.add(gpus);
            if (gpus >= 3) {
                out.add(2);
            }
        } else {
            for (String s : p.split(",")) {
                int n = Integer.parseInt(s.trim());
                if (n >= 1 && n <= gpus) {
                    out.add(n);
                }
            }
        }
        return List.copyOf(out);
    }

    /** The first n GPUs. */
    public static List<CudaDevice> devices(int n) {
        return Cuda.devicesList().subList(0, n);
    }

    public static Predicate<Case> filter() {
        String f = System.getProperty("jccl.gpu.filter");
        if (f == null || f.isBlank()) {
            return c -> true;
        }
        Pattern p = Pattern.compile(f);
        return c -> p.matcher(c.name()).find();
    }

    public static int maxFailures() {
        return Integer.getInteger("jccl.gpu.maxFailures", 12);
    }

    /** Null when the backend may run; else why the test should be skipped. */
    public static synchronized String skipReason(Backend b) {
        if (!b.available()) {
            return "skipped: " + b + " is not available here: " + b.unavailableReason();
        }
        List<String> breaks = BREAKS.getOrDefault(b, List.of());
        int max = Integer.getInteger("jccl.gpu.maxBreaks", 3);
        if (breaks.size() >= max) {
            return "skipped: " + b + " communicators already broke " + breaks.size() + " times in this run (" + String.join("; ", breaks) + ")";
        }
        return null;
    }

    /** The shared set of {@code backend} over the first {@code n} GPUs, created (and the previous one closed) when needed. */
    public static synchronized RankSet set(Backend backend, int n) {
        if (current != null && current.backend() == backend && current.size() == n && current.usable()) {
            return current;
        }
        if (current != null) {
            noteIfBroken(current);
            current.close();
            current = null;
        }
        String key = backend + " x" + n;
        String failed = CREATE_FAILED.get(key);
        if (failed != null) {
            throw new AssertionError("creating " + key + " failed earlier in this run: " + failed);
        }
        try {
            current = RankSet.create(backend, devices(n), CREATE_TIMEOUT);
        } catch (RuntimeException | AssertionError e) {
            CREATE_FAILED.put(key, String.valueOf(e));
            throw e;
        }
        return current;
    }

    /** Records that a set broke (counted toward {@link #skipReason}). */
    public static synchronized void noteIfBroken(RankSet set) {
        String why = set.brokenReason();
        if (why != null) {
            List<String> l = BREAKS.computeIfAbsent(set.backend(), k -> new ArrayList<>());
            String first = why.lines().findFirst().orElse("");
            String shortWhy = set.describe() + ": " + (first.length() > 160 ? first.substring(0, 160) + "..." : first);
            if (!l.contains(shortWhy)) {
                l.add(shortWhy);
            }
        }
    }

    /** Closes the cached set. */
    public static synchronized void closeAll() {
        if (current != null) {
            noteIfBroken(current);
            current.close();
            current = null;
        }
    }
}
