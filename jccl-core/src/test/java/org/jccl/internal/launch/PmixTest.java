package org.jccl.internal.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The PMIx gate without a PMIx server: what makes it refuse, and that it never calls PMIx_Init
 * then. The calls themselves are tested between real processes under mpirun and srun --mpi=pmix
 * (jccl-cli: PmixProcessesTest, SlurmTest).
 */
@Timeout(20)
class PmixTest {

    private static final Map<String, String> SERVER = Map.of("PMIX_NAMESPACE", "1234", "PMIX_RANK", "0",
            "PMIX_SERVER_URI41", "1234.0;tcp4://127.0.0.1:1");

    private static boolean libraryPresent() {
        try {
            SymbolLookup.libraryLookup(Pmix.LIBRARY, Arena.global());
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    @Test
    void noServerInTheEnvironmentMeansNotAvailable() {
        String why = Pmix.unavailable(Map.of("PATH", "/usr/bin")).orElseThrow();
        assertTrue(why.startsWith("no PMIx server started this process (PMIX_NAMESPACE and PMIX_SERVER_URI* are not set"), why);
        assertTrue(Pmix.serverMissing(Map.of("PMIX_NAMESPACE", "x")).contains("no PMIX_SERVER_URI* variable"));
        assertTrue(Pmix.serverMissing(Map.of("PMIX_SERVER_URI2", "x;tcp4://127.0.0.1:1")).contains("PMIX_NAMESPACE is not set"));
        assertTrue(Pmix.serverMissing(Map.of("PMIX_NAMESPACE", "x", "PMIX_SERVER_URI3", " ")).contains("no PMIX_SERVER_URI*"));
        assertNull(Pmix.serverMissing(SERVER));
    }

    /** A process no PMIx server started fails at once, without PMIx_Init (which could wait for a server). */
    @Test
    @Timeout(5)
    void clientWithoutServerFailsAtOnce() {
        PmixException e = assertThrows(PmixException.class, () -> Pmix.client(Map.of()));
        assertTrue(e.getMessage().startsWith("no PMIx server started this process"), e.getMessage());
    }

    @Test
    void versions() {
        assertEquals(3, Pmix.majorVersion("3.2.5"));
        assertEquals(4, Pmix.majorVersion("OpenPMIx 4.2.2rc2 (PMIx Standard: 4.2, Stable ABI: 0.0, Provisional ABI: 0.0)"));
        assertEquals(-1, Pmix.majorVersion("unknown"));
        assertNull(Pmix.unsupported("3.2.5"));
        assertNull(Pmix.unsupported("OpenPMIx 5.0.11"));
        assertNull(Pmix.unsupported("OpenPMIx 6.1.0, repo rev: v6.1.0"));
        for (String v : new String[] {"2.2.5", "OpenPMIx 7.0.0", "", "garbage"}) {
            String why = Pmix.unsupported(v);
            assertNotNull(why, v);
            assertTrue(why.contains("PMIx 3.x to 6.x only") && why.contains("JCCL_COMM_ID"), why);
        }
    }

    /**
     * With this machine's libpmix.so.2 and a server named in the environment, the gate loads the
     * library, accepts its version and finds pmix_info_t laid out as jccl reads it (PMIx_Info_load
     * filling a guarded buffer) — without connecting to anything.
     */
    @Test
    void thisMachinesLibraryPassesTheLayoutCheck() {
        assumeTrue(libraryPresent(), Pmix.LIBRARY + " not found (Debian package libpmix2)");
        Optional<String> why = Pmix.unavailable(SERVER);
        assertTrue(why.isEmpty(), () -> "refused: " + why.get());
    }
}
