package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Map;
import org.jccl.internal.transport.local.LocalTransport;
import org.jccl.spi.Transport;
import org.junit.jupiter.api.Test;

/**
 * The one-sided suite over the in-JVM transport (ranks as threads): registration of the caller's own
 * segments and allocation, puts as one copy. Also: a key made in another JVM (a real second process)
 * is refused, not taken for a region of this one.
 */
class LocalOneSidedTest extends OneSidedConformance {
    @Override
    protected Transport transport() {
        return new LocalTransport();
    }

    @Override
    protected Map<String, String> settings(Path dir) {
        return Map.of("JCCL_SHM_DIR", dir.toString());
    }

    @Override
    protected boolean oneSided() {
        return true;
    }

    @Override
    protected boolean registersProcessMemory() {
        return true;
    }

    @Test
    void aKeyFromAnotherJvmIsRefused() throws Exception {
        String key;
        try (SpiRankServer.Pool pool = SpiRankServer.Pool.start(1)) {
            key = pool.localKey(0);
        }
        byte[] foreign = HexFormat.of().parseHex(key);
        threads(2, rig -> {
            if (rig.rank() == 0) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.connection(1).unpack(foreign));
                assertTrue(e.getMessage().contains("was made in another JVM") && e.getMessage().contains("valid only among ranks of the JVM"),
                        e.getMessage());
            }
        }, null);
    }
}
