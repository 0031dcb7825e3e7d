package org.jccl.conformance;

import org.jccl.Config;

/** {@link AlgorithmConformance} with JCCL_ALGO={@value AlgorithmConformance#RECURSIVE_DOUBLING} over LOCAL. */
class LocalRecursiveDoublingTest extends AlgorithmConformance {
    @Override
    protected String algo() {
        return RECURSIVE_DOUBLING;
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
