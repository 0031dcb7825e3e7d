package org.jccl.conformance;

import org.jccl.Config;

/** {@link AlgorithmConformance} with JCCL_ALGO={@value AlgorithmConformance#RABENSEIFNER_BRUCK} over LOCAL. */
class LocalRabenseifnerBruckTest extends AlgorithmConformance {
    @Override
    protected String algo() {
        return RABENSEIFNER_BRUCK;
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
