package org.jccl.conformance;

import org.jccl.Config;

/** {@link AlgorithmConformance} with JCCL_ALGO={@value AlgorithmConformance#RING} over LOCAL. */
class LocalRingAlgorithmsTest extends AlgorithmConformance {
    @Override
    protected String algo() {
        return RING;
    }

    @Override
    protected Config transportConfig() {
        return local();
    }

    @Override
    protected String transport() {
        return "LOCAL";
    }
}
