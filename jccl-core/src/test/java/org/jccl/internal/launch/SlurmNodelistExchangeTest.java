package org.jccl.internal.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ResourceException;
import org.jccl.internal.bootstrap.RootExchange;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Slurm node-list channel's checks, each failing at once with the fix instead of a timeout. */
@Timeout(10)
class SlurmNodelistExchangeTest {

    private static SlurmStep step(String job, String nodelist, String nodeId, String nodeName) {
        Map<String, String> e = new HashMap<>();
        e.put("SLURM_JOB_ID", job);
        e.put("SLURM_STEP_ID", "0");
        e.put("SLURM_STEP_NODELIST", nodelist);
        e.put("SLURM_NODEID", nodeId);
        if (nodeName != null) {
            e.put("SLURMD_NODENAME", nodeName);
        }
        return SlurmStep.from(e, -1);
    }

    @Test
    void everyRankSeesTheSameRootAndJob() {
        SlurmStep s = step("77", "127.0.0.1,127.0.0.2", "0", "127.0.0.1");
        RootExchange.Published p0 = new SlurmNodelistExchange(s, 0).publish(List.of(), null, "h", Config.defaults(), 0);
        RootExchange.Published p1 = new SlurmNodelistExchange(step("77", "127.0.0.1,127.0.0.2", "0", "127.0.0.1"), 1)
                .lookup(Config.defaults(), 0);
        assertEquals(List.of(new InetSocketAddress("127.0.0.1", s.port())), p1.addresses());
        assertEquals(p0.addresses(), p1.addresses());
        assertEquals(p0.jobKey(), p1.jobKey());
    }

    @Test
    void rankZeroOnAnotherNodeFailsBeforeBinding() {
        SlurmNodelistExchange x = new SlurmNodelistExchange(step("77", "n[1-2]", "1", "n2"), 0);
        String msg = assertThrows(ConfigException.class, () -> x.bindAddresses(Config.defaults())).getMessage();
        assertTrue(msg.startsWith("rank 0 runs on n2 (SLURM_NODEID=1), not on n1"), msg);
    }

    @Test
    void aTakenPortNamesJcclCommId() throws IOException {
        String job = "4242";
        SlurmStep s = step(job, "127.0.0.1", "0", "127.0.0.1");
        try (ServerSocket holder = new ServerSocket()) {
            try {
                holder.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), s.port()));
            } catch (IOException e) {
                assumeTrue(false, "port " + s.port() + " is already taken here: " + e);
            }
            SlurmNodelistExchange x = new SlurmNodelistExchange(s, 0);
            String msg = assertThrows(ResourceException.class, () -> x.bindAddresses(Config.defaults())).getMessage();
            assertTrue(msg.startsWith("rank 0 cannot listen on port " + s.port() + " of 127.0.0.1"), msg);
            assertTrue(msg.contains("SLURM_JOB_ID=" + job + " and SLURM_STEP_ID=0") && msg.contains("JCCL_COMM_ID=127.0.0.1:<a free port>")
                    && msg.contains("srun --mpi=pmix"), msg);
        }
        // Free again: rank 0 would bind there, and on the selected interface.
        List<InetSocketAddress> binds = new SlurmNodelistExchange(s, 0).bindAddresses(Config.defaults());
        assertEquals(new InetSocketAddress("127.0.0.1", s.port()), binds.getFirst());
    }

    @Test
    void aLoopbackRootSeenFromAnotherNodeIsNamed() {
        SlurmNodelistExchange x = new SlurmNodelistExchange(step("77", "localhost,n2", "1", "n2"), 3);
        String msg = assertThrows(ConfigException.class, () -> x.lookup(Config.defaults(), 0)).getMessage();
        assertTrue(msg.contains("rank 3 runs on node 1") && msg.contains("a loopback address") && msg.contains("getent hosts localhost"),
                msg);
    }

    @Test
    void aLoopbackAddressInTheListSeenFromAnotherNodeIsNamed() {
        SlurmNodelistExchange x = new SlurmNodelistExchange(step("77", "127.0.0.1,127.0.0.2", "1", "127.0.0.2"), 1);
        String msg = assertThrows(ConfigException.class, () -> x.lookup(Config.defaults(), 0)).getMessage();
        assertTrue(msg.contains("SLURM_STEP_NODELIST=127.0.0.1,127.0.0.2, which names 127.0.0.1, a loopback address, as rank 0's node"), msg);
    }

    @Test
    void anUnresolvableNodeIsNamed() {
        SlurmNodelistExchange x = new SlurmNodelistExchange(step("77", "no-such-node.invalid", "0", null), 1);
        String msg = assertThrows(ConfigException.class, () -> x.lookup(Config.defaults(), 0)).getMessage();
        assertTrue(msg.startsWith("rank 0's node no-such-node.invalid (first node of SLURM_STEP_NODELIST=no-such-node.invalid) does not"
                + " resolve"), msg);
    }
}
