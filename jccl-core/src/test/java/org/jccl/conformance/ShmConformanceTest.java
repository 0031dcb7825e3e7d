package org.jccl.conformance;

import org.jccl.Config;

/**
 * The conformance suite over the shared-memory transport: ranks are threads of this JVM with the
 * in-JVM transport off, so same-host SHM is the first transport that accepts them. Small rings (4
 * slots of 64 KiB) keep 8 ranks within a small /dev/shm and make large messages wrap the ring many times.
 */
class ShmConformanceTest extends CollectiveConformance {
    @Override
    protected Config config() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_CHUNK", "64K").with("JCCL_SHM_SLOTS", "4");
    }

    @Override
    protected String transport() {
        return "SHM";
    }
}
