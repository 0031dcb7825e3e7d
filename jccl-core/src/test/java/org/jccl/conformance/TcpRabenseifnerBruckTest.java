package org.jccl.conformance;

import org.jccl.Config;

/** {@link AlgorithmConformance} with JCCL_ALGO={@value AlgorithmConformance#RABENSEIFNER_BRUCK} over TCP. */
class TcpRabenseifnerBruckTest extends AlgorithmConformance {
    @Override
    protected String algo() {
        return RABENSEIFNER_BRUCK;
    }

    @Override
    protected Config transportConfig() {
        return tcp();
    }

    @Override
    protected String transport() {
        return "TCP";
    }
}
