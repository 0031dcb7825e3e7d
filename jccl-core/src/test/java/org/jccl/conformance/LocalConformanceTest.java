package org.jccl.conformance;

import org.jccl.Config;

/** The conformance suite over the in-JVM transport. */
class LocalConformanceTest extends CollectiveConformance {
    @Override
    protected Config config() {
        return Config.defaults();
    }

    @Override
    protected String transport() {
        return "LOCAL";
    }
}
