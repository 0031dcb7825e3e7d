package org.jccl.internal.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.util.HashMap;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.bootstrap.FixedAddressExchange;
import org.jccl.internal.launch.LaunchEnvironment;
import org.jccl.internal.launch.Pmix;
import org.jccl.internal.launch.PmixExchange;
import org.jccl.internal.launch.SlurmNodelistExchange;
import org.jccl.internal.launch.SlurmStep;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The MPI launchers' and srun's variables (MVAPICH, PMI, PMIx beside Open MPI and Slurm) and the
 * channel each launch gets for rank 0's address: PMIx, the Slurm node list, or a fixed address, with
 * the reasons when none applies. Nothing here connects anywhere (no PMIx_Init).
 */
@Timeout(10)
class LauncherConventionsTest {

    private static Map<String, String> env(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    private static Config.Launch detect(Map<String, String> env) {
        return LaunchEnvironment.detect(env, "/nonexistent-home").orElseThrow(() -> new AssertionError("nothing detected in " + env));
    }

    private static String error(Map<String, String> env) {
        return assertThrows(ConfigException.class, () -> LaunchEnvironment.detect(env, "/nonexistent-home")).getMessage();
    }

    private static boolean pmixLibrary() {
        try {
            SymbolLookup.libraryLookup(Pmix.LIBRARY, Arena.global());
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /** What srun 22.05 sets for the tasks of a 3-task step on one node (plain srun, no MPI plugin). */
    private static Map<String, String> srunTask(int rank) {
        return env("SLURM_JOB_ID", "812", "SLURM_STEP_ID", "0", "SLURM_PROCID", Integer.toString(rank), "SLURM_NTASKS", "3",
                "SLURM_LOCALID", Integer.toString(rank), "SLURM_NODEID", "0", "SLURM_STEP_NODELIST", "127.0.0.1", "SLURM_JOB_NODELIST",
                "127.0.0.1", "SLURM_STEP_TASKS_PER_NODE", "3", "SLURMD_NODENAME", "127.0.0.1");
    }

    /** mpirun's PMIx variables for {@code rank} (PMIX_SERVER_URI* names a server; nothing connects in these tests). */
    private static Map<String, String> pmix(int rank) {
        return env("PMIX_NAMESPACE", "1327890433", "PMIX_RANK", Integer.toString(rank), "PMIX_SERVER_URI41",
                "1327890432.0;tcp4://127.0.0.1:1", "PMIX_VERSION", "4.2.2");
    }

    // ------------------------------------------------------------------ rank, size and local rank

    @Test
    void mvapich() {
        Config.Launch l = detect(env("MV2_COMM_WORLD_RANK", "2", "MV2_COMM_WORLD_SIZE", "4", "MV2_COMM_WORLD_LOCAL_RANK", "0",
                "JCCL_COMM_ID", "127.0.0.1:5000"));
        assertEquals("MVAPICH", l.convention());
        assertEquals(2, l.rank());
        assertEquals(4, l.size());
        assertEquals(0, l.localRank());
    }

    @Test
    void pmiOfHydraAndOfCrayPals() {
        Config.Launch hydra = detect(env("PMI_RANK", "1", "PMI_SIZE", "3", "MPI_LOCALRANKID", "1", "MPI_LOCALNRANKS", "3",
                "PMI_FD", "7", "JCCL_COMM_ID", "127.0.0.1:5000"));
        assertEquals("PMI", hydra.convention());
        assertEquals(1, hydra.rank());
        assertEquals(3, hydra.size());
        assertEquals(1, hydra.localRank());
        Config.Launch pals = detect(env("PMI_RANK", "5", "PMI_SIZE", "8", "PMI_LOCAL_RANK", "1", "JCCL_COMM_ID", "127.0.0.1:5000"));
        assertEquals(1, pals.localRank());
        String e = error(env("PMI_RANK", "9", "PMI_SIZE", "8", "JCCL_COMM_ID", "127.0.0.1:5000"));
        assertTrue(e.contains("PMI_RANK=9 is not below PMI_SIZE=8") && e.contains("launcher convention PMI"), e);
    }

    @Test
    void mpiVariablesComeBeforeTheSlurmAllocationsAroundThem() {
        Map<String, String> e = srunTask(0);
        e.putAll(env("PMI_RANK", "2", "PMI_SIZE", "3", "JCCL_COMM_ID", "127.0.0.1:5000"));
        assertEquals("PMI", detect(e).convention());
        e.putAll(env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "3"));
        assertEquals("Open MPI", detect(e).convention());
    }

    @Test
    void pmixAloneNeedsTheServerForTheSize() {
        Map<String, String> e = pmix(0);
        e.remove("PMIX_SERVER_URI41");
        String msg = error(e);
        assertTrue(msg.contains("PMIX_RANK is set but the job's size can only come from the PMIx server")
                && msg.contains("no PMIX_SERVER_URI*") && msg.contains("JCCL_WORLD_SIZE"), msg);
    }

    // ------------------------------------------------------------------ which channel carries rank 0's address

    @Test
    void plainSrunUsesTheNodeList() {
        for (int r = 0; r < 3; r++) {
            Config.Launch l = detect(srunTask(r));
            assertEquals("Slurm", l.convention());
            SlurmNodelistExchange x = assertInstanceOf(SlurmNodelistExchange.class, l.exchange());
            assertEquals(SlurmStep.port("812", "0"), x.step().port());
            assertTrue(l.rootDescription().startsWith("Slurm step 812.0: first node 127.0.0.1 of SLURM_STEP_NODELIST=127.0.0.1, port "),
                    l.rootDescription());
            // No trusted channel: the secret is the per-user file unless JCCL_AUTH_TOKEN is set.
            assertFalse(l.exchange().carriesSecret());
            assertFalse(l.secret().isExplicit());
        }
    }

    @Test
    void pmiUnderSrunUsesTheNodeListToo() {
        Map<String, String> e = srunTask(1);
        e.putAll(env("PMI_RANK", "1", "PMI_SIZE", "3", "PMI_FD", "9", "PMI_JOBID", "812.0"));
        Config.Launch l = detect(e);
        assertEquals("PMI", l.convention());
        assertInstanceOf(SlurmNodelistExchange.class, l.exchange());
    }

    @Test
    void anExplicitAddressWins() {
        Map<String, String> e = srunTask(0);
        e.put("JCCL_COMM_ID", "127.0.0.1:4444");
        assertInstanceOf(FixedAddressExchange.class, detect(e).exchange());
        e = srunTask(0);
        e.put("MASTER_ADDR", "127.0.0.1");
        assertInstanceOf(FixedAddressExchange.class, detect(e).exchange());
        e = srunTask(0);
        e.putAll(pmix(0));
        e.put("JCCL_COMM_ID", "127.0.0.1:4444");
        assertInstanceOf(FixedAddressExchange.class, detect(e).exchange());
    }

    @Test
    void mpirunUsesPmix() {
        assumeTrue(pmixLibrary(), Pmix.LIBRARY + " not found (Debian package libpmix2)");
        Map<String, String> e = pmix(2);
        e.putAll(env("OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "3", "OMPI_COMM_WORLD_LOCAL_RANK", "2"));
        Config.Launch l = detect(e);
        assertEquals("Open MPI", l.convention());
        PmixExchange x = assertInstanceOf(PmixExchange.class, l.exchange());
        assertTrue(x.carriesSecret());
        assertTrue(l.rootDescription().contains("PMIx server of Open MPI (namespace 1327890433"), l.rootDescription());
    }

    @Test
    void srunWithPmixUsesPmixAndFallsBackToTheNodeListWithoutIt() {
        Map<String, String> e = srunTask(1);
        e.putAll(pmix(1));
        if (pmixLibrary()) {
            assertInstanceOf(PmixExchange.class, detect(e).exchange());
        }
        e.remove("PMIX_SERVER_URI41"); // e.g. a PMIx variable leaked from an outer job: no server to talk to
        assertInstanceOf(SlurmNodelistExchange.class, detect(e).exchange());
    }

    @Test
    void withoutAnyChannelTheErrorSaysWhyEachWasNotUsed() {
        // Open MPI alone (no PMIx server named): today's message, nothing to add.
        String plain = error(env("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2"));
        assertTrue(plain.contains("Open MPI does not say where rank 0 is: set JCCL_COMM_ID=<rank 0's host>:<port>"), plain);
        // PMIx variables of another layer.
        Map<String, String> e = env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2");
        e.putAll(pmix(0));
        String msg = error(e);
        assertTrue(msg.contains("PMIx not used: PMIX_RANK=0 is not this process's rank 1"), msg);
        // mpirun inside an sbatch allocation, PMIx unusable: the allocation's Slurm variables describe another layer.
        e = env("OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4", "SLURM_JOB_ID", "9", "SLURM_STEP_ID", "0", "SLURM_PROCID", "0",
                "SLURM_NTASKS", "1", "SLURM_STEP_NODELIST", "n1", "PMIX_NAMESPACE", "9");
        msg = error(e);
        assertTrue(msg.contains("PMIx not used: PMIX_NAMESPACE is set but PMIX_RANK is not"), msg);
        assertTrue(msg.contains("the Slurm node list not used: SLURM_PROCID=0 and SLURM_NTASKS=1 are not this process's rank 3 and"
                + " size 4"), msg);
    }

    @Test
    void aBatchScriptIsToldToUseSrun() {
        // What sbatch's script sees: job, rank 0 of the job's tasks, but no step.
        String msg = error(env("SLURM_JOB_ID", "5", "SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_LOCALID", "0", "SLURM_NODEID", "0",
                "SLURM_JOB_NODELIST", "vm", "SLURM_TASKS_PER_NODE", "2"));
        assertTrue(msg.contains("Slurm does not say where rank 0 is") && msg.contains("runs in job 5's batch script, not in a job step;"
                + " start the ranks with srun"), msg);
    }

    @Test
    void arbitraryDistributionIsNamed() {
        Map<String, String> e = srunTask(0);
        e.put("SLURM_DISTRIBUTION", "arbitrary");
        String msg = error(e);
        assertTrue(msg.contains("SLURM_DISTRIBUTION=arbitrary: with an arbitrary distribution task 0 need not run on the first node"),
                msg);
    }
}
