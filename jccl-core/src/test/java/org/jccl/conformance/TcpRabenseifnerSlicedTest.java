package org.jccl.conformance;

import org.jccl.Config;

/**
 * {@link AlgorithmConformance} with JCCL_ALGO={@value AlgorithmConformance#RABENSEIFNER_BRUCK} over TCP with the
 * smallest JCCL_CHUNK_SIZE (4 KiB), so that every halving step of Rabenseifner's all-reduce moves and reduces its
 * half in many slices (the last one short), out of place and in place, folded and not.
 */
class TcpRabenseifnerSlicedTest extends AlgorithmConformance {
    @Override
    protected String algo() {
        return RABENSEIFNER_BRUCK;
    }

    @Override
    protected Config transportConfig() {
        return tcp();
    }

    @Override
    protected Config config() {
        return super.config().with("JCCL_CHUNK_SIZE", "4096");
    }

    @Override
    protected String transport() {
        return "TCP";
    }
}
