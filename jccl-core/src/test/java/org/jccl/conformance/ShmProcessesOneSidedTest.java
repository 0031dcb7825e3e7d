package org.jccl.conformance;

import java.nio.file.Path;
import java.util.Map;
import org.jccl.internal.transport.shm.ShmTransport;
import org.jccl.spi.Transport;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.TestInstance;

/**
 * The one-sided suite over SHM with ranks as real processes ({@link SpiRankServer}): region files are
 * mapped by other address spaces, keys cross process boundaries, and the directory must be empty once
 * the processes closed their endpoints. Three rank JVMs are started once for the class (a JVM start
 * costs seconds on a 2-core machine) and restarted after a failure. {@code capabilitiesAreAsDeclared}
 * runs its two ranks as threads: what a transport declares does not depend on where its ranks run.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ShmProcessesOneSidedTest extends OneSidedConformance {
    private SpiRankServer.Pool pool;

    @Override
    protected Transport transport() {
        return new ShmTransport();
    }

    @Override
    protected Map<String, String> settings(Path dir) {
        return ShmOneSidedTest.shmSettings(dir);
    }

    @Override
    protected boolean oneSided() {
        return true;
    }

    @Override
    protected boolean registersProcessMemory() {
        return false;
    }

    @Override
    protected void runRanks(int n, String scenario) throws Exception {
        if (pool == null) {
            pool = SpiRankServer.Pool.start(3);
        }
        try {
            pool.run(ShmTransport.NAME, scenario, n, settings(dir));
        } catch (Throwable t) {
            // A failed scenario may leave servers waiting mid-protocol: start fresh ones for the next test.
            pool.close();
            pool = null;
            throw t;
        }
    }

    @AfterAll
    void stopServers() {
        if (pool != null) {
            pool.close();
        }
    }
}
