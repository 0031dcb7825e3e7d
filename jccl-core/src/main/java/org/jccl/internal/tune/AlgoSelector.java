package org.jccl.internal.tune;

import java.util.EnumMap;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;

/**
 * Which algorithms a collective may use, from {@code JCCL_ALGO} in NCCL's grammar:
 * {@code ring,rd} (only these), {@code ^rd} (all but these), or per collective
 * {@code allreduce:ring;broadcast:tree}. An unknown collective or algorithm name is an error, never
 * a silent fallback. Each collective asks {@link #allowed} for its candidates in its own order of
 * preference and takes the first allowed one.
 */
public final class AlgoSelector {

    /** Algorithms jccl implements, by their JCCL_ALGO token. */
    public enum Algo {
        /** Pipelined ring (allReduce, allGather, reduceScatter). */
        RING("ring"),
        /** Recursive doubling (allReduce, allGather); alias recursive_doubling. */
        RD("rd"),
        /** Binomial tree (broadcast, reduce). */
        TREE("tree"),
        /** Pairwise exchange (allToAll). */
        PAIRWISE("pairwise"),
        /** Direct to/from the root (gather, scatter). */
        DIRECT("direct"),
        /** Reduce-scatter by recursive halving + all-gather by recursive doubling (allReduce). */
        RABENSEIFNER("rabenseifner"),
        /** Bruck's log2 n-step algorithms (allGather, allToAll). */
        BRUCK("bruck"),
        /** Binomial scatter + all-gather (broadcast); the all-gather stage is the allGather choice. */
        SCATTER_ALLGATHER("scatter_allgather"),
        /**
         * Through the communicator's collective provider (allReduce, allGather, reduceScatter, barrier),
         * the path of its own that the transport every pair uses may offer ({@code
         * org.jccl.spi.CollectiveProvider}): SHM's shared collective segment (one copy in, reads of the
         * peers' areas, no messages). Priced by the provider's declared cost.
         */
        SHARED("shared"),
        /**
         * Hierarchical (allReduce, broadcast, reduce, allGather, reduceScatter), when the ranks span several hosts
         * and some host has more than one: a same-host stage, one cross-host stage among one rank
         * per host (or per slice), a same-host stage ({@link Hierarchy}). Its stages pick their own
         * algorithms from the others JCCL_ALGO allows.
         */
        HIER("hier");

        final String token;

        Algo(String token) {
            this.token = token;
        }

        /** The JCCL_ALGO name. */
        public String token() {
            return token;
        }

        static Algo parse(String t, String spec) {
            String x = t.trim().toLowerCase(Locale.ROOT).replace('-', '_');
            switch (x) {
                case "recursive_doubling", "recursivedoubling" -> {
                    return RD;
                }
                case "scatterallgather", "scatter_ag" -> {
                    return SCATTER_ALLGATHER;
                }
                default -> {
                }
            }
            for (Algo a : values()) {
                if (a.token.equals(x)) {
                    return a;
                }
            }
            StringBuilder names = new StringBuilder();
            for (Algo a : values()) {
                names.append(names.isEmpty() ? "" : ", ").append(a.token);
            }
            throw new ConfigException("JCCL_ALGO='" + spec + "' names algorithm '" + t.trim()
                    + "', which jccl does not have; allowed names: " + names + " (recursive_doubling for rd)");
        }
    }

    /** Collectives as JCCL_ALGO names them. */
    public enum Coll {
        ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER, BARRIER;

        static Coll parse(String t, String spec) {
            String x = t.trim().toLowerCase(Locale.ROOT).replace("_", "");
            for (Coll c : values()) {
                if (c.name().toLowerCase(Locale.ROOT).equals(x)) {
                    return c;
                }
            }
            throw new ConfigException("JCCL_ALGO='" + spec + "' names collective '" + t.trim()
                    + "'; use allreduce, broadcast, reduce, allgather, reducescatter, alltoall, gather, scatter or barrier");
        }
    }

    private final Map<Coll, Set<Algo>> allowed = new EnumMap<>(Coll.class);

    private AlgoSelector() {
        for (Coll c : Coll.values()) {
            allowed.put(c, EnumSet.allOf(Algo.class));
        }
    }

    /** Registers the grammar of {@code JCCL_ALGO} with its parser. */
    public static void registerGrammars() {
        Settings.ALGO.grammar(() -> "NCCL's JCCL_ALGO grammar: ring,rd | ^rd | allreduce:ring;broadcast:tree", AlgoSelector::parse);
    }

    /** Parses a JCCL_ALGO value; null or blank allows everything. */
    public static AlgoSelector parse(String spec) {
        AlgoSelector sel = new AlgoSelector();
        if (spec == null || spec.isBlank()) {
            return sel;
        }
        for (String part : spec.split(";")) {
            if (part.isBlank()) {
                continue;
            }
            int colon = part.indexOf(':');
            if (colon >= 0) {
                Coll c = Coll.parse(part.substring(0, colon), spec);
                sel.allowed.put(c, parseList(part.substring(colon + 1), spec));
            } else {
                Set<Algo> set = parseList(part, spec);
                for (Coll c : Coll.values()) {
                    sel.allowed.put(c, EnumSet.copyOf(set));
                }
            }
        }
        return sel;
    }

    private static Set<Algo> parseList(String list, String spec) {
        String t = list.trim();
        boolean exclude = t.startsWith("^");
        if (exclude) {
            t = t.substring(1);
        }
        EnumSet<Algo> set = EnumSet.noneOf(Algo.class);
        for (String a : t.split(",")) {
            if (!a.isBlank()) {
                set.add(Algo.parse(a, spec));
            }
        }
        if (set.isEmpty()) {
            throw new ConfigException("JCCL_ALGO='" + spec + "' has an empty algorithm list");
        }
        return exclude ? EnumSet.complementOf(set) : set;
    }

    /**
     * The selector of the stages of a hierarchical collective: what this one allows without
     * {@code hier} itself; a collective that allows nothing else ({@code allreduce:hier}) leaves its
     * stages free to use every other algorithm.
     */
    public AlgoSelector stages() {
        AlgoSelector sel = new AlgoSelector();
        for (Coll c : Coll.values()) {
            EnumSet<Algo> set = EnumSet.copyOf(allowed.get(c));
            set.remove(Algo.HIER);
            if (set.isEmpty()) {
                set = EnumSet.complementOf(EnumSet.of(Algo.HIER));
            }
            sel.allowed.put(c, set);
        }
        return sel;
    }

    /** Whether {@code algo} may be used for {@code coll}. */
    public boolean allowed(Coll coll, Algo algo) {
        return allowed.get(coll).contains(algo);
    }

    /**
     * The first of {@code preference} that is allowed for {@code coll}. For collectives with a single
     * algorithm; the others ask the {@link Tuner}.
     *
     * @throws ConfigException when JCCL_ALGO excludes every algorithm this collective has
     */
    public Algo choose(Coll coll, Algo... preference) {
        for (Algo a : preference) {
            if (allowed(coll, a)) {
                return a;
            }
        }
        StringBuilder names = new StringBuilder();
        for (Algo a : preference) {
            names.append(names.isEmpty() ? "" : ", ").append(a.token);
        }
        boolean hierOnly = allowed(coll, Algo.HIER) && java.util.Arrays.stream(preference).noneMatch(a -> a == Algo.HIER);
        throw new ConfigException("JCCL_ALGO excludes every algorithm " + coll.name().toLowerCase(Locale.ROOT)
                + " has (" + names + ")" + (hierOnly ? "; hier applies only when the ranks span several hosts and some host"
                + " has more than one" : ""));
    }
}
