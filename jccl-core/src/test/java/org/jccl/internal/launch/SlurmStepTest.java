package org.jccl.internal.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A Slurm step from its tasks' variables: node list, task layout, derived port, and where rank 0 must be. */
@Timeout(10)
class SlurmStepTest {

    /** What srun 22.05 sets for `srun -N 4 -n 7` with block distribution, as seen by task 0 (layout 2,2,2,1). */
    private static Map<String, String> step() {
        Map<String, String> m = new HashMap<>();
        m.put("SLURM_JOB_ID", "4711");
        m.put("SLURM_STEP_ID", "0");
        m.put("SLURM_STEP_NODELIST", "node[01-03,07]");
        m.put("SLURM_JOB_NODELIST", "node[01-08]");
        m.put("SLURM_STEP_TASKS_PER_NODE", "2(x3),1");
        m.put("SLURM_TASKS_PER_NODE", "2(x8)");
        m.put("SLURM_NODEID", "0");
        m.put("SLURMD_NODENAME", "node01");
        m.put("SLURM_PROCID", "0");
        m.put("SLURM_NTASKS", "7");
        return m;
    }

    private static String error(Map<String, String> env, int ntasks) {
        return assertThrows(IllegalArgumentException.class, () -> SlurmStep.from(env, ntasks)).getMessage();
    }

    @Test
    void stepVariablesWinOverTheJobs() {
        SlurmStep s = SlurmStep.from(step(), 7);
        assertEquals(List.of("node01", "node02", "node03", "node07"), s.nodes());
        assertEquals(List.of(2, 2, 2, 1), s.tasksPerNode());
        assertEquals("node01", s.rootHost());
        assertEquals("SLURM_STEP_NODELIST", s.nodelistVar());
        assertNull(s.rankZeroProblem());
        assertNull(s.distributionProblem());
        assertTrue(s.describe().contains("first node node01 of SLURM_STEP_NODELIST=node[01-03,07], port " + s.port()), s.describe());
    }

    @Test
    void jobVariablesWhenTheStepsAreAbsent() {
        Map<String, String> e = step();
        e.remove("SLURM_STEP_NODELIST");
        e.remove("SLURM_STEP_TASKS_PER_NODE");
        e.put("SLURM_NTASKS", "16");
        SlurmStep s = SlurmStep.from(e, 16);
        assertEquals(8, s.nodes().size());
        assertEquals("SLURM_JOB_NODELIST", s.nodelistVar());
        // Old names of the ids.
        e.remove("SLURM_JOB_ID");
        e.remove("SLURM_STEP_ID");
        e.put("SLURM_JOBID", "4711");
        e.put("SLURM_STEPID", "0");
        assertEquals(s.port(), SlurmStep.from(e, 16).port());
    }

    @Test
    void tasksPerNodeSyntax() {
        assertEquals(List.of(2, 2, 2, 1), SlurmStep.tasksPerNode("2(x3),1", "V"));
        assertEquals(List.of(4), SlurmStep.tasksPerNode("4", "V"));
        assertEquals(List.of(1, 3, 3), SlurmStep.tasksPerNode("1,3(x2)", "V"));
        for (String bad : new String[] {"", "2(3)", "2(x)", "x", "2(x3", "-1", "2(x0)"}) {
            String msg = assertThrows(IllegalArgumentException.class, () -> SlurmStep.tasksPerNode(bad, "SLURM_TASKS_PER_NODE")).getMessage();
            assertTrue(msg.startsWith("SLURM_TASKS_PER_NODE='" + bad + "'"), msg);
        }
    }

    @Test
    void inconsistentLayoutsAreNamed() {
        Map<String, String> e = step();
        e.put("SLURM_STEP_TASKS_PER_NODE", "2(x3)");
        assertTrue(error(e, 7).contains("describes 3 nodes but SLURM_STEP_NODELIST=node[01-03,07] names 4"));
        assertTrue(error(step(), 8).contains("places 7 tasks but the job has 8"));
        e = step();
        e.put("SLURM_NODEID", "4");
        assertTrue(error(e, 7).contains("SLURM_NODEID=4 is not an index of the 4 nodes"));
        e.put("SLURM_STEP_NODELIST", "node[3-1]");
        assertTrue(error(e, 7).contains("SLURM_STEP_NODELIST: host list 'node[3-1]'"));
    }

    @Test
    void aBatchScriptIsNotAStep() {
        Map<String, String> e = step();
        e.remove("SLURM_STEP_ID");
        String msg = error(e, 7);
        assertTrue(msg.contains("runs in job 4711's batch script") && msg.contains("start the ranks with srun"), msg);
        e = step();
        e.remove("SLURM_JOB_ID");
        assertTrue(error(e, 7).contains("SLURM_JOB_ID is not set"));
        e = step();
        e.remove("SLURM_STEP_NODELIST");
        e.remove("SLURM_JOB_NODELIST");
        assertTrue(error(e, 7).contains("neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST"));
    }

    @Test
    void rankZeroOffTheFirstNodeIsNamed() {
        Map<String, String> e = step();
        e.put("SLURM_NODEID", "2");
        e.put("SLURMD_NODENAME", "node03");
        e.put("SLURM_DISTRIBUTION", "block:cyclic");
        String p = SlurmStep.from(e, 7).rankZeroProblem();
        assertTrue(p.startsWith("rank 0 runs on node03 (SLURM_NODEID=2), not on node01, the first node of SLURM_STEP_NODELIST"), p);
        assertTrue(p.contains("srun --mpi=pmix") && p.contains("JCCL_COMM_ID"), p);
        e.put("SLURM_NODEID", "0");
        assertTrue(SlurmStep.from(e, 7).rankZeroProblem().startsWith("rank 0 runs on node03 (SLURM_NODEID=0), not on node01"));
        e.remove("SLURMD_NODENAME");
        e.remove("SLURM_NODEID");
        assertNull(SlurmStep.from(e, 7).rankZeroProblem(), "nothing says where it runs");
    }

    @Test
    void arbitraryDistributionDerivesNothing() {
        for (String d : new String[] {"arbitrary", "Arbitrary", "arbitrary:cyclic"}) {
            Map<String, String> e = step();
            e.put("SLURM_DISTRIBUTION", d);
            String p = SlurmStep.from(e, 7).distributionProblem();
            assertTrue(p != null && p.contains("srun --mpi=pmix") && p.contains("JCCL_COMM_ID"), d + ": " + p);
        }
        for (String d : new String[] {"block", "cyclic", "plane=4", "block:block,Pack", "cyclic:cyclic"}) {
            Map<String, String> e = step();
            e.put("SLURM_DISTRIBUTION", d);
            assertNull(SlurmStep.from(e, 7).distributionProblem(), d);
        }
    }

    @Test
    void derivedPortsAreInTheirRangeStableAndSpread() {
        assertEquals(SlurmStep.port("4711", "0"), SlurmStep.port("4711", "0"));
        Set<Integer> ports = new HashSet<>();
        int n = 0;
        for (int job = 1000; job < 1500; job++) {
            for (int stepId = 0; stepId < 4; stepId++) {
                int p = SlurmStep.port(Integer.toString(job), Integer.toString(stepId));
                assertTrue(p >= SlurmStep.PORT_BASE && p <= SlurmStep.PORT_LAST, "port " + p);
                assertTrue(p < 32768, "below the ephemeral range");
                ports.add(p);
                n++;
            }
        }
        // 2000 draws from 12000 ports: about 160 collide if the hash spreads them like random draws.
        assertTrue(ports.size() > n - 300, ports.size() + " distinct ports of " + n);
        // Neighbouring jobs and steps differ.
        assertTrue(SlurmStep.port("4711", "0") != SlurmStep.port("4711", "1"));
        assertTrue(SlurmStep.port("4711", "0") != SlurmStep.port("4712", "0"));
        assertTrue(SlurmStep.port("1", "10") != SlurmStep.port("11", "0"));
    }
}
