package org.jccl.conformance;

import org.jccl.Config;

/** {@link MismatchGuardConformance} over the in-JVM transport (the mismatch guard in the sender's request). */
class LocalGuardTest extends MismatchGuardConformance {
    @Override
    protected Config config() {
        return Config.defaults();
    }
}
