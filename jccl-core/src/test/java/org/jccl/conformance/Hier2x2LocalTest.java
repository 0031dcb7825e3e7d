package org.jccl.conformance;

import org.jccl.Config;

/** {@link HierConformance} with JCCL_HOSTID=a,a,b,b and the in-JVM transport (not SHM) inside each "host". */
class Hier2x2LocalTest extends HierConformance {
    @Override
    protected String layout() {
        return "a,a,b,b";
    }

    @Override
    protected Config sameHost() {
        return Config.defaults();
    }

    @Override
    protected String transport() {
        return "LOCAL+TCP " + layout();
    }
}
