package org.jccl.conformance;

import java.util.stream.Stream;
import org.jccl.Config;

/**
 * {@link MismatchGuardConformance} with JCCL_ALGO forcing the algorithms the default choice need not
 * reach: recursive doubling, Rabenseifner, ring, Bruck, scatter + all-gather broadcast (over TCP,
 * where the tuner would otherwise pick by size), on 2, 3 and 5 ranks (the folds of non-powers of two).
 */
abstract class AlgorithmsGuardTest extends MismatchGuardConformance {
    protected abstract String algo();

    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_ALGO", algo());
    }

    @Override
    protected int[] ranks() {
        return new int[] {2, 3, 5};
    }

    /** Only the collectives JCCL_ALGO changes here. */
    @Override
    protected Stream<Case> cases() {
        return Stream.of(Case.ALLREDUCE_COUNT_BY_ONE, Case.ALLREDUCE_COUNT_BY_CHUNKS, Case.ALLREDUCE_TYPE, Case.ALLREDUCE_OP,
                Case.BROADCAST_ROOT, Case.BROADCAST_COUNT_BY_CHUNKS, Case.ALLGATHER_COUNT_BY_ONE, Case.ALLTOALL_COUNT_BY_ONE,
                Case.ALLREDUCE_ZERO);
    }

    /** Recursive doubling all-reduce and all-gather, scatter + all-gather broadcast. */
    static class Rd extends AlgorithmsGuardTest {
        @Override
        protected String algo() {
            return AlgorithmConformance.RECURSIVE_DOUBLING;
        }
    }

    /** Rabenseifner all-reduce, Bruck all-gather and all-to-all, scatter + Bruck all-gather broadcast. */
    static class RabenseifnerBruck extends AlgorithmsGuardTest {
        @Override
        protected String algo() {
            return AlgorithmConformance.RABENSEIFNER_BRUCK;
        }
    }

    /** Ring all-reduce and all-gather, scatter + ring all-gather broadcast, pairwise all-to-all. */
    static class Ring extends AlgorithmsGuardTest {
        @Override
        protected String algo() {
            return AlgorithmConformance.RING;
        }
    }
}
