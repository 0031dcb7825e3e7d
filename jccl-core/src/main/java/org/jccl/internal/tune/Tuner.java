package org.jccl.internal.tune;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jccl.ConfigException;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.log.Log;
import org.jccl.spi.CollectiveProvider;
import org.jccl.spi.LinkCosts;
import org.jccl.internal.tune.AlgoSelector.Algo;
import org.jccl.internal.tune.AlgoSelector.Coll;

/**
 * Picks the algorithm of a collective from an alpha-beta-gamma cost model: a message of m bytes
 * between two ranks costs {@code alpha + m * beta}, reducing m bytes into a buffer costs
 * {@code m * gamma}, and copying m bytes locally {@code m * copy}. Each algorithm's cost is the sum
 * over its steps (see {@link #cost}); the cheapest one that {@code JCCL_ALGO} allows wins. Every
 * rank computes the same choice from the same arguments (the model is that of the slowest transport
 * any pair of ranks of the communicator uses, which every rank derives from the same peer table),
 * which is what keeps the ranks' message sequences matched.
 *
 * <p>{@code Algo.SHARED} is the communicator's collective provider ({@link CollectiveProvider}, a
 * transport's own path for whole collectives: SHM's shared segment), priced by the cost the provider
 * declares; the tuner knows no provider by name.
 *
 * <p>Each choice is logged once per (collective, power-of-two size class) at INFO under
 * {@code TUNING}, with the model's estimate of every candidate.
 */
public final class Tuner {

    /**
     * Constants of one transport, in seconds and seconds per byte.
     *
     * @param transport the transport name ({@code Transport.name()})
     * @param alpha latency of one message (post to completion, one way)
     * @param beta seconds per byte moved between two ranks
     * @param gamma seconds per byte of a reduction (float32 sum, dst op= src, out of cache)
     * @param copy seconds per byte of a local copy (out of cache)
     */
    public record Model(String transport, double alpha, double beta, double gamma, double copy) {
    }

    /*
     * The machine's memory constants, the same whatever the transport: measured on this project's
     * 2-core development machine (Linux x86_64, Temurin 25) on 2026-11-21 ~08:25 UTC with
     * TunerCalibration (jccl-core test scope; how to run it is in its javadoc): gamma = a float32 SUM
     * of 16 MiB into 16 MiB per byte, copy = MemorySegment.copy of 16 MiB per byte, each the least of
     * three medians: reduction 12.3 GB/s of vector, copy 26 GB/s. The transports' own costs (alpha,
     * beta) are declared by each transport (Transport#costs), measured the same day the same way.
     */
    /** Seconds per byte of a reduction (float32 sum, dst op= src, out of cache). */
    public static final double GAMMA = 8.13e-11;
    /** Seconds per byte of a local copy (out of cache). */
    public static final double COPY = 3.83e-11;

    /**
     * The model of a transport whose messages cost {@code c}, with the machine's memory constants.
     *
     * @param transport the transport's name, for log lines
     */
    public static Model model(String transport, LinkCosts c) {
        return new Model(transport, c.latencySeconds(), c.secondsPerByte(), GAMMA, COPY);
    }

    /**
     * Of several transports' costs (by name), the slowest for a 1 MiB message (the bottleneck of a
     * collective); a communicator with no pair at all is priced as {@code fallback}.
     */
    public static Model slowest(Map<String, LinkCosts> transports, Model fallback) {
        Model worst = null;
        for (Map.Entry<String, LinkCosts> e : transports.entrySet()) {
            Model m = model(e.getKey(), e.getValue());
            // >=: of equal models the last name wins (names in sorted order), so the network reads last.
            if (worst == null || m.alpha + m.beta * (1 << 20) >= worst.alpha + worst.beta * (1 << 20)) {
                worst = m;
            }
        }
        return worst == null ? fallback : worst;
    }

    /**
     * The SHM shared collective segment, the cost SHM's collective provider declares ({@code
     * ShmCollectives#cost}, through {@link #sharedCost}); kept here beside the memory constants it is
     * built from. Alpha is one synchronisation step (a
     * release store of a word, acquire loads of the peers' words: 8-128 B all-reduces, which are
     * one such step, measured 0.3-0.7 us with perf --timing median on the 2-core machine; 0.40-0.55 us,
     * median 0.43, with TunerCalibration SHM-STEP, the method and runs of the SHM transport's alpha, so
     * that the two compare like for like), beta 0 (no
     * message: the bytes move by the copies priced with the memory constants), gamma and copy the machine's
     * measured memory constants.
     */
    public static final Model SHARED = new Model("SHM shared segment", 0.43e-6, 0, GAMMA, COPY);

    /**
     * Largest all-reduce that takes the shared segment's one-step form (every rank copies its whole
     * input into its area, then reduces every area in rank order: one synchronisation, n+1 passes
     * over the data) rather than the two-step one (each rank reduces one slice, publishes it, and
     * copies the others' slices: two synchronisations per round, about 4 passes whatever n). Both
     * sides' copy of this rule must agree, so it lives here, used by the algorithm and the model.
     */
    public static boolean sharedOneShot(long bytes, int n, long slotBytes) {
        return bytes <= slotBytes && bytes <= (n <= 2 ? ONE_SHOT_MAX_2 : ONE_SHOT_MAX);
    }

    /**
     * One-step limits: at 2 ranks both forms measured level from 8 to 32 KiB (perf --timing median,
     * 2026-11-21 ~10:09 UTC) and the one step has half the synchronisations; above 2
     * ranks its reads grow with n, so it stops earlier.
     */
    private static final long ONE_SHOT_MAX_2 = 32 << 10;
    private static final long ONE_SHOT_MAX = 8 << 10;

    private final AlgoSelector selector;
    private final int n;
    private final long chunkBytes;
    private final Model model;
    private final int rank;
    private final Set<String> logged = ConcurrentHashMap.newKeySet();
    /** The communicator's collective provider ({@code Algo.SHARED}), null when it has none. */
    private final CollectiveProvider provider;

    /** The host layout when hierarchical collectives apply ({@code Algo.HIER} is then a candidate), else null. */
    private Hierarchy hierarchy;

    /** The algorithm of the last choice, for {@link #takeChoice()}. */
    private Algo lastChoice;

    public Tuner(AlgoSelector selector, int n, long chunkBytes, Model model, int rank) {
        this(selector, n, chunkBytes, model, rank, null);
    }

    /**
     * @param provider the communicator's collective provider, null when it has none (then {@code
     *        Algo.SHARED} is never a candidate)
     */
    public Tuner(AlgoSelector selector, int n, long chunkBytes, Model model, int rank, CollectiveProvider provider) {
        this.selector = selector;
        this.n = n;
        this.chunkBytes = chunkBytes;
        this.model = model;
        this.rank = rank;
        this.provider = provider;
    }

    /** The last all-reduce size and candidate list {@link #chooseAllReduceCached} priced, and its choice (same inputs, same answer). */
    private long lastAllReduceBytes = -1;
    private Algo[] lastAllReduceCandidates;
    private Algo lastAllReduce;

    /**
     * The all-reduce choice among {@code candidates} (one of a few constant lists), remembered for the
     * last size and list: a loop of equal all-reduces prices the candidates once, not per call (which
     * costs more than an 8-byte all-reduce through the shared segment). Called under the
     * communicator's execution lock only.
     */
    public Algo chooseAllReduceCached(long bytes, Algo... candidates) {
        if (bytes == lastAllReduceBytes && candidates == lastAllReduceCandidates) {
            lastChoice = lastAllReduce;
            return lastAllReduce;
        }
        Algo a = choose(Coll.ALLREDUCE, bytes, candidates);
        lastAllReduce = a;
        lastAllReduceBytes = bytes;
        lastAllReduceCandidates = candidates;
        return a;
    }

    /** The last algorithm chosen (for the flight recorder and JFR), cleared by reading it; under the execution lock. */
    public String takeChoice() {
        Algo a = lastChoice;
        lastChoice = null;
        return a == null ? null : a.token();
    }

    /** Makes {@code Algo.HIER} priced by {@code h}'s model; set once, before the first operation. */
    public void hierarchy(Hierarchy h) {
        this.hierarchy = h;
    }

    /** Whether the communicator has a collective provider ({@code Algo.SHARED} may be a candidate). */
    public boolean sharedAvailable() {
        return provider != null;
    }

    /**
     * Whether the collective provider takes calls of {@code coll} with this type and operator (null for
     * all-gather and barrier): then {@code Algo.SHARED} is a candidate, priced by the provider's cost.
     */
    public boolean providerTakes(Coll coll, DataType type, ReduceOp op) {
        return provider != null && provider.supports(kind(coll), type, op);
    }

    /** The collective provider, or null. */
    public CollectiveProvider provider() {
        return provider;
    }

    /** The provider's name of a collective (only those a provider may run). */
    private static CollectiveProvider.Collective kind(Coll coll) {
        return switch (coll) {
            case ALLREDUCE -> CollectiveProvider.Collective.ALL_REDUCE;
            case ALLGATHER -> CollectiveProvider.Collective.ALL_GATHER;
            case REDUCESCATTER -> CollectiveProvider.Collective.REDUCE_SCATTER;
            case BARRIER -> CollectiveProvider.Collective.BARRIER;
            default -> null;
        };
    }

    public Model model() {
        return model;
    }

    public AlgoSelector selector() {
        return selector;
    }

    /**
     * The cheapest of {@code candidates} that JCCL_ALGO allows for {@code coll} (ties: the earlier
     * candidate). {@code bytes} is the collective's size as {@link #cost} takes it.
     *
     * @throws ConfigException when JCCL_ALGO allows none of them
     */
    public Algo choose(Coll coll, long bytes, Algo... candidates) {
        List<Algo> ok = new ArrayList<>(candidates.length);
        for (Algo a : candidates) {
            if (selector.allowed(coll, a)) {
                ok.add(a);
            }
        }
        if (ok.isEmpty()) {
            return selector.choose(coll, candidates); // throws, naming the candidates
        }
        Algo best = null;
        double bestCost = Double.MAX_VALUE;
        double[] costs = new double[ok.size()];
        for (int i = 0; i < ok.size(); i++) {
            costs[i] = cost(coll, ok.get(i), bytes);
            // Ties (equal formulas, e.g. ring and rabenseifner at two ranks) go to the earlier candidate,
            // whatever the rounding: a later one must be cheaper by more than one part in a million.
            if (costs[i] < bestCost * (1 - 1e-6)) {
                bestCost = costs[i];
                best = ok.get(i);
            }
        }
        if (best == null) {
            // Only the collective provider is allowed, and it declines this size (Double.MAX_VALUE: its cost is infinite).
            throw new ConfigException("JCCL_ALGO allows only " + ok.stream().map(Algo::token).toList() + " for " + name(coll)
                    + ", and the collective provider (" + (provider == null ? "none" : provider.describe()) + ") declines " + bytes + " B: allow a"
                    + " point-to-point algorithm as well (for example JCCL_ALGO unset)");
        }
        if (Log.enabled(Log.Level.INFO, Log.Subsys.TUNING)) {
            String key = coll + ":" + (bytes <= 0 ? -1 : 63 - Long.numberOfLeadingZeros(bytes));
            if (logged.add(key)) {
                StringBuilder others = new StringBuilder();
                for (int i = 0; i < ok.size(); i++) {
                    if (ok.get(i) != best) {
                        others.append(others.isEmpty() ? "" : ", ").append(ok.get(i).token()).append(' ').append(us(costs[i]));
                    }
                }
                Log.info(Log.Subsys.TUNING, rank, name(coll) + " " + bytes + " B " + n + " ranks via "
                        + (best == Algo.SHARED ? provider.describe() : best == Algo.HIER ? "same-host + cross-host stages" : model.transport)
                        + ": "
                        + best.token() + " (model " + us(bestCost) + (others.isEmpty() ? "; the only one allowed" : "; " + others)
                        + ")");
            }
        }
        lastChoice = best;
        return best;
    }

    private static String us(double seconds) {
        double us = seconds * 1e6;
        return (us < 10 ? String.format(Locale.ROOT, "%.1f", us) : Long.toString(Math.round(us))) + " us";
    }

    public static String name(Coll c) {
        return switch (c) {
            case ALLREDUCE -> "all_reduce";
            case ALLGATHER -> "all_gather";
            case REDUCESCATTER -> "reduce_scatter";
            case ALLTOALL -> "all_to_all";
            default -> c.name().toLowerCase(Locale.ROOT);
        };
    }

    /** Model cost in seconds of {@code algo} for {@code coll} on this communicator. */
    public double cost(Coll coll, Algo algo, long bytes) {
        if (algo == Algo.SHARED) {
            if (provider == null || kind(coll) == null) {
                return Double.MAX_VALUE;
            }
            double c = provider.cost(kind(coll), bytes);
            // NaN or infinite (declined): never chosen.
            return c >= 0 && c < Double.MAX_VALUE ? c : Double.MAX_VALUE;
        }
        if (algo == Algo.HIER) {
            return hierarchy == null ? Double.MAX_VALUE : hierarchy.cost(coll, bytes);
        }
        return cost(coll, algo, bytes, n, chunkBytes, model, selector);
    }

    /**
     * Model cost of the shared collective segment ({@link #SHARED}'s constants), m bytes, n ranks,
     * h bytes per rank per round: barrier one step; all-reduce one-step alpha + m copy + (n-1) m
     * gamma; two-step, per round of h bytes, 2 alpha, and in all (n-1)/n m copy in + (n-1)/n m
     * gamma + m/n copy of the reduced slice into the area + (n-1)/n m copy out; all-gather and
     * reduce-scatter: one copy in and one out (or one reduction) per byte.
     */
    public static double sharedCost(Coll coll, long bytes, int n, long h) {
        if (h <= 0) {
            return Double.MAX_VALUE;
        }
        double m = bytes;
        Model s = SHARED;
        return switch (coll) {
            case BARRIER -> s.alpha;
            // m: the whole output (n blocks): one block copied in, n-1 copied out.
            case ALLGATHER -> s.alpha * Math.max(1, (bytes / n + h - 1) / h) + (m / n + (n - 1.0) / n * m) * s.copy;
            // m: the whole input (n blocks): n-1 blocks copied in, one reduced from n. One
            // synchronisation per round (arrive, wait for the peers), as all-gather's: priced at two,
            // it lost to the ring below 4 KiB at 2 ranks once SHM had its own alpha, while it measured
            // 0.4-0.6 us there against the ring's 0.6-1.5 (docs/PERFORMANCE.md, "SHM tuner constants").
            case REDUCESCATTER -> s.alpha * Math.max(1, (bytes + h - 1) / h) + (n - 1.0) / n * m * (s.copy + s.gamma);
            case ALLREDUCE -> sharedOneShot(bytes, n, h)
                    ? s.alpha + m * s.copy + (n - 1) * m * s.gamma
                    : 2 * s.alpha * Math.max(1, (bytes + h - 1) / h) + (2.0 * (n - 1) + 1) / n * m * s.copy + (double) (n - 1) / n * m * s.gamma;
            default -> Double.MAX_VALUE;
        };
    }

    private static int ceilLog2(int n) {
        return n <= 1 ? 0 : 32 - Integer.numberOfLeadingZeros(n - 1);
    }

    /**
     * Model cost in seconds. {@code bytes}: allReduce and broadcast the vector; allGather the whole
     * output (n blocks); allToAll one rank's send buffer (n blocks). With p the largest power of two
     * not above n and "fold" the extra step pair of non-powers of two:
     * <ul>
     * <li>allReduce ring: 2(n-1) alpha + (n-1)/n m (2 beta + gamma) (no credit for pipelining: transfer and
 *     reduction share the rank's CPU on these transports)</li>
     * <li>allReduce rd: k (alpha + m beta) + k' m gamma, k = log2 p (+2 fold), k' = log2 p (+1 fold)</li>
     * <li>allReduce rabenseifner: 2 log2 p alpha + 2(p-1)/p m beta + (p-1)/p m gamma (+ fold 2 (alpha + m beta) + m gamma)</li>
     * <li>allGather ring: (n-1)(alpha + m/n beta); rd: log2 p alpha + (p-1)/p m beta (+ fold 2 alpha + (m + m/n) beta);
     *     bruck: ceil(log2 n) alpha + (n-1)/n m beta</li>
     * <li>broadcast tree (binomial, pipelined in S slices of the chunk size): (d + S - 1) alpha + d m beta, d = ceil(log2 n)
     *     (the root sends every slice to each of its d children); scatter_allgather: d alpha + (n-1)/n m beta
     *     + the cheapest allowed allGather of m bytes</li>
     * <li>reduce tree (binomial): d (alpha + m beta + m gamma)</li>
     * <li>reduceScatter ring (m the whole input): (n-1)(alpha + m/n (beta + gamma))</li>
     * <li>allToAll pairwise: (n-1)(alpha + m/n beta); bruck: d (alpha + m/2 beta) + (2 + d) m copy (rotations, packing)</li>
     * </ul>
     */
    public static double cost(Coll coll, Algo algo, long bytes, int n, long chunkBytes, Model md, AlgoSelector sel) {
        double m = bytes;
        double a = md.alpha;
        double b = md.beta;
        double g = md.gamma;
        int p = Integer.highestOneBit(n);
        int lp = Integer.numberOfTrailingZeros(p);
        boolean fold = n != p;
        int d = ceilLog2(n);
        switch (coll) {
            case ALLREDUCE -> {
                switch (algo) {
                    case RING -> {
                        // The ring pipelines reducing slice k with receiving slice k+1, but on the CPU
                        // transports both run on the rank's cores (TCP's copies are kernel CPU time,
                        // LOCAL's are memcpy), so the model adds them: measured, the ring did not beat
                        // Rabenseifner at 2 or 4 ranks at any size (docs/PERFORMANCE.md).
                        return 2.0 * (n - 1) * a + (double) (n - 1) / n * m * (2 * b + g);
                    }
                    case RD -> {
                        int k = lp + (fold ? 2 : 0);
                        return k * (a + m * b) + (lp + (fold ? 1 : 0)) * m * g;
                    }
                    case RABENSEIFNER -> {
                        double c = 2.0 * lp * a + 2.0 * (p - 1) / p * m * b + (double) (p - 1) / p * m * g;
                        return fold ? c + 2 * (a + m * b) + m * g : c;
                    }
                    default -> {
                    }
                }
            }
            case ALLGATHER -> {
                switch (algo) {
                    case RING -> {
                        return (n - 1) * (a + m / n * b);
                    }
                    case RD -> {
                        double c = lp * a + (double) (p - 1) / p * m * b;
                        return fold ? c + 2 * a + (m + m / n) * b : c;
                    }
                    case BRUCK -> {
                        return d * a + (double) (n - 1) / n * m * b;
                    }
                    default -> {
                    }
                }
            }
            case BROADCAST -> {
                switch (algo) {
                    case TREE -> {
                        return d * (a + m * b);
                    }
                    case SCATTER_ALLGATHER -> {
                        double ag = Double.MAX_VALUE;
                        for (Algo x : new Algo[] {Algo.RING, Algo.RD, Algo.BRUCK}) {
                            if (sel == null || sel.allowed(Coll.ALLGATHER, x)) {
                                ag = Math.min(ag, cost(Coll.ALLGATHER, x, bytes, n, chunkBytes, md, sel));
                            }
                        }
                        return ag == Double.MAX_VALUE ? ag : d * a + (double) (n - 1) / n * m * b + ag;
                    }
                    default -> {
                    }
                }
            }
            case REDUCESCATTER -> {
                if (algo == Algo.RING) {
                    // m: the whole input (n blocks); n-1 steps, each a block sent and a block reduced.
                    return (n - 1) * (a + m / n * (b + g));
                }
            }
            case REDUCE -> {
                if (algo == Algo.TREE) {
                    // Binomial tree: the root receives and reduces from d children.
                    return d * (a + m * b + m * g);
                }
            }
            case ALLTOALL -> {
                switch (algo) {
                    case PAIRWISE -> {
                        return (n - 1) * (a + m / n * b);
                    }
                    case BRUCK -> {
                        return d * (a + m / 2 * b) + (2.0 + d) * m * md.copy;
                    }
                    default -> {
                    }
                }
            }
            default -> {
            }
        }
        return Double.MAX_VALUE;
    }
}
