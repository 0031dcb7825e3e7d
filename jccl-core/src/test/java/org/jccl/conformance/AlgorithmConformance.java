package org.jccl.conformance;

import org.jccl.Config;

/**
 * The whole conformance suite again with JCCL_ALGO forcing the algorithms the tuner may pick but
 * the default sweep need not reach, on rank counts 1..5, 7, 8 (non-powers of two exercise the
 * folds and Bruck's partial last step). Counts stop at 100_003 elements: several slices of the
 * default chunk, at a fraction of the default sweep's cost.
 */
abstract class AlgorithmConformance extends CollectiveConformance {
    /** Rabenseifner all-reduce, Bruck all-gather and all-to-all, scatter + Bruck all-gather broadcast. */
    static final String RABENSEIFNER_BRUCK = "allreduce:rabenseifner;allgather:bruck;alltoall:bruck;broadcast:scatter_allgather";
    /** Recursive-doubling all-reduce and all-gather, scatter + recursive-doubling all-gather broadcast. */
    static final String RECURSIVE_DOUBLING = "allreduce:rd;allgather:rd;broadcast:scatter_allgather";
    /** Ring all-reduce (also below the rank count), ring all-gather, scatter + ring all-gather broadcast. */
    static final String RING = "allreduce:ring;allgather:ring;broadcast:scatter_allgather;alltoall:pairwise";

    private static final int[] RANKS = {1, 2, 3, 4, 5, 7, 8};
    private static final long[] COUNTS = {0, 1, 7, 1000, 100_003};

    /** The JCCL_ALGO value under test. */
    protected abstract String algo();

    /** The transport's settings (without JCCL_ALGO). */
    protected abstract Config transportConfig();

    @Override
    protected Config config() {
        return transportConfig().with("JCCL_ALGO", algo());
    }

    @Override
    protected int[] ranks() {
        return RANKS;
    }

    @Override
    protected long[] counts() {
        return COUNTS;
    }

    // Collectives whose algorithm JCCL_ALGO does not change here (reduce, reduceScatter, gather,
    // scatter, send/recv, allToAllv, barrier: one algorithm each) are left to the default suites:
    // overriding without @ParameterizedTest takes them out of these classes.

    @Override
    void reduce(int n, long count) {
    }

    @Override
    void reduceScatter(int n, long total) {
    }

    @Override
    void gatherScatter(int n, long total) {
    }

    @Override
    void groupedRingExchange(int n) {
    }

    @Override
    void allToAllv(int n) {
    }

    @Override
    void barrierOrdersSideEffects(int n) {
    }

    static Config local() {
        return Config.defaults();
    }

    static Config tcp() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_NSOCKS_PERTHREAD", "2");
    }
}
