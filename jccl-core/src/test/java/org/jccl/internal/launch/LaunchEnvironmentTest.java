package org.jccl.internal.launch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ErrorCode;
import org.jccl.internal.bootstrap.FixedAddressExchange;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Job identity from each launcher's variables, their precedence, and every error a user can make with them. */
@Timeout(10)
class LaunchEnvironmentTest {

    private static final String TOKEN = "00112233445566778899aabbccddeeff";

    private static Map<String, String> env(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    private static Config.Launch detect(Map<String, String> env) {
        return LaunchEnvironment.detect(env).orElseThrow(() -> new AssertionError("no convention detected in " + env));
    }

    private static String error(Map<String, String> env) {
        ConfigException e = assertThrows(ConfigException.class, () -> LaunchEnvironment.detect(env));
        assertEquals(ErrorCode.CONFIG, e.code());
        return e.getMessage();
    }

    private static InetSocketAddress root(Config.Launch l) {
        return ((FixedAddressExchange) l.exchange()).root();
    }

    private static void assertRoot(Config.Launch l, String host, int port) {
        InetSocketAddress a = root(l);
        assertEquals(host, a.getAddress().getHostAddress());
        assertEquals(port, a.getPort());
        assertTrue(l.secret().isExplicit());
        assertEquals("JCCL_AUTH_TOKEN", l.secretDescription());
        assertArrayEquals(HexFormat.of().parseHex(TOKEN), l.secret().resolve().secret());
    }

    private static Map<String, String> jccl() {
        return env("JCCL_COMM_ID", "127.0.0.1:4000", "JCCL_RANK", "1", "JCCL_WORLD_SIZE", "4", "JCCL_AUTH_TOKEN", TOKEN,
                "JCCL_LOCAL_RANK", "1");
    }

    private static Map<String, String> torchrun() {
        return env("MASTER_ADDR", "127.0.0.2", "MASTER_PORT", "29501", "RANK", "2", "WORLD_SIZE", "8", "LOCAL_RANK", "0",
                "JCCL_AUTH_TOKEN", TOKEN);
    }

    private static Map<String, String> ompi() {
        return env("OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "16", "OMPI_COMM_WORLD_LOCAL_RANK", "3",
                "MASTER_ADDR", "127.0.0.3", "JCCL_AUTH_TOKEN", TOKEN);
    }

    private static Map<String, String> slurm() {
        return env("SLURM_PROCID", "5", "SLURM_NTASKS", "6", "SLURM_LOCALID", "1", "JCCL_COMM_ID", "127.0.0.4:7000",
                "JCCL_AUTH_TOKEN", TOKEN);
    }

    // ------------------------------------------------------------------ each convention

    @Test
    void nothingPresentIsEmpty() {
        assertTrue(LaunchEnvironment.detect(Map.of()).isEmpty());
        // Root address and token alone do not make a job identity.
        assertTrue(LaunchEnvironment.detect(env("MASTER_ADDR", "x", "JCCL_COMM_ID", "a:1", "JCCL_AUTH_TOKEN", TOKEN,
                "LOCAL_RANK", "0", "PATH", "/bin")).isEmpty());
    }

    @Test
    void jcclConvention() {
        Config.Launch l = detect(jccl());
        assertEquals("JCCL", l.convention());
        assertEquals(1, l.rank());
        assertEquals(4, l.size());
        assertEquals(1, l.localRank());
        assertRoot(l, "127.0.0.1", 4000);
    }

    @Test
    void jcclAcceptsNcclCommIdAndUnknownLocalRank() {
        Map<String, String> e = jccl();
        e.remove("JCCL_COMM_ID");
        e.remove("JCCL_LOCAL_RANK");
        e.put("NCCL_COMM_ID", "127.0.0.9:4001");
        Config.Launch l = detect(e);
        assertEquals(-1, l.localRank());
        assertRoot(l, "127.0.0.9", 4001);
    }

    @Test
    void torchrunConvention() {
        Config.Launch l = detect(torchrun());
        assertEquals("torchrun", l.convention());
        assertEquals(2, l.rank());
        assertEquals(8, l.size());
        assertEquals(0, l.localRank());
        assertRoot(l, "127.0.0.2", 29501);
    }

    @Test
    void torchrunRootCanBeOverriddenByJcclCommId() {
        Map<String, String> e = torchrun();
        e.put("JCCL_COMM_ID", "127.0.0.7:30000");
        assertRoot(detect(e), "127.0.0.7", 30000);
    }

    @Test
    void torchrunWithIpv6MasterAddr() {
        Map<String, String> e = torchrun();
        e.put("MASTER_ADDR", "::1");
        InetSocketAddress a = root(detect(e));
        assertTrue(a.getAddress().isLoopbackAddress() && a.getPort() == 29501, a.toString());
    }

    @Test
    void openMpiConvention() {
        Config.Launch l = detect(ompi());
        assertEquals("Open MPI", l.convention());
        assertEquals(3, l.rank());
        assertEquals(16, l.size());
        assertEquals(3, l.localRank());
        assertRoot(l, "127.0.0.3", LaunchEnvironment.DEFAULT_PORT);
        Map<String, String> e = ompi();
        e.put("MASTER_PORT", "1234");
        assertRoot(detect(e), "127.0.0.3", 1234);
        e.put("JCCL_COMM_ID", "127.0.0.8:999");
        assertRoot(detect(e), "127.0.0.8", 999);
    }

    @Test
    void slurmConvention() {
        Config.Launch l = detect(slurm());
        assertEquals("Slurm", l.convention());
        assertEquals(5, l.rank());
        assertEquals(6, l.size());
        assertEquals(1, l.localRank());
        assertRoot(l, "127.0.0.4", 7000);
        Map<String, String> e = slurm();
        e.remove("SLURM_NTASKS");
        e.put("SLURM_NPROCS", "6");
        assertEquals(6, detect(e).size());
        e = slurm();
        e.remove("JCCL_COMM_ID");
        e.put("MASTER_ADDR", "127.0.0.5");
        assertRoot(detect(e), "127.0.0.5", LaunchEnvironment.DEFAULT_PORT);
    }

    // ------------------------------------------------------------------ precedence

    @Test
    void precedenceIsJcclTorchrunOpenMpiSlurm() {
        Map<String, String> all = new HashMap<>();
        all.putAll(slurm());
        all.putAll(ompi());
        all.putAll(torchrun());
        all.putAll(jccl());
        assertEquals("JCCL", detect(all).convention());
        all.remove("JCCL_RANK");
        all.remove("JCCL_WORLD_SIZE");
        Config.Launch t = detect(all);
        assertEquals("torchrun", t.convention());
        assertEquals(2, t.rank());
        all.remove("RANK");
        all.remove("WORLD_SIZE");
        Config.Launch o = detect(all);
        assertEquals("Open MPI", o.convention());
        assertEquals(3, o.rank());
        all.remove("OMPI_COMM_WORLD_RANK");
        all.remove("OMPI_COMM_WORLD_SIZE");
        Config.Launch s = detect(all);
        assertEquals("Slurm", s.convention());
        assertEquals(5, s.rank());
    }

    @Test
    void anIncompleteEarlierConventionIsAnErrorNotAFallback() {
        Map<String, String> e = slurm();
        e.put("WORLD_SIZE", "6");
        String m = error(e);
        assertTrue(m.startsWith("RANK is not set"), m);
        assertTrue(m.contains("launcher convention torchrun, detected from WORLD_SIZE"), m);
        assertTrue(m.contains("unset WORLD_SIZE") && m.contains("Slurm"), m);
    }

    // ------------------------------------------------------------------ errors

    @Test
    void withoutTokenEveryConventionUsesThePerUserSecretFile() {
        for (Map<String, String> e : java.util.List.of(jccl(), torchrun(), ompi(), slurm())) {
            e.remove("JCCL_AUTH_TOKEN");
            Config.Launch l = LaunchEnvironment.detect(e, "/home/someone").orElseThrow();
            assertFalse(l.secret().isExplicit());
            assertEquals(Path.of("/home/someone/.jccl/secret"), l.secret().file());
            assertEquals("the secret file /home/someone/.jccl/secret", l.secretDescription());
            e.put("JCCL_SECRET_FILE", "/shared/job.secret");
            assertEquals(Path.of("/shared/job.secret"), LaunchEnvironment.detect(e, "/home/someone").orElseThrow().secret().file());
        }
    }

    @Test
    void withoutTokenAndHomeTheErrorSaysWhatToSet() {
        Map<String, String> e = torchrun();
        e.remove("JCCL_AUTH_TOKEN");
        ConfigException x = assertThrows(ConfigException.class, () -> LaunchEnvironment.detect(e, null));
        assertTrue(x.getMessage().contains("no home directory") && x.getMessage().contains("JCCL_SECRET_FILE")
                && x.getMessage().contains("JCCL_AUTH_TOKEN"), x.getMessage());
    }

    @Test
    void emptyTokenIsAnErrorNotTheFile() {
        Map<String, String> e = ompi();
        e.put("JCCL_AUTH_TOKEN", " ");
        String m = error(e);
        assertTrue(m.startsWith("JCCL_AUTH_TOKEN is set but empty: every rank needs the same 32-hex-digit secret; make one with"
                + " `openssl rand -hex 16` and export it to all ranks (mpirun -x JCCL_AUTH_TOKEN, srun --export=ALL,JCCL_AUTH_TOKEN=...)"), m);
        assertTrue(m.contains("~/.jccl/secret") && m.contains("Open MPI"), m);
    }

    @Test
    void anExplicitTokenWinsOverTheSecretFile() {
        Map<String, String> e = torchrun();
        e.put("JCCL_SECRET_FILE", "/shared/job.secret");
        Config.Launch l = detect(e);
        assertTrue(l.secret().isExplicit());
        assertArrayEquals(HexFormat.of().parseHex(TOKEN), l.secret().resolve().secret());
    }

    @Test
    void badTokenIsNamedButNotEchoed() {
        Map<String, String> e = torchrun();
        e.put("JCCL_AUTH_TOKEN", "secret-but-too-short");
        String m = error(e);
        assertTrue(m.contains("JCCL_AUTH_TOKEN must be 32 hex digits"), m);
        assertFalse(m.contains("secret-but-too-short"), m);
        e.put("JCCL_AUTH_TOKEN", "zz112233445566778899aabbccddeeff");
        m = error(e);
        assertTrue(m.contains("hex digits only"), m);
        assertFalse(m.contains("zz11"), m);
    }

    @Test
    void rankNotBelowSize() {
        Map<String, String> e = torchrun();
        e.put("RANK", "8");
        String m = error(e);
        assertTrue(m.startsWith("RANK=8 is not below WORLD_SIZE=8: ranks run from 0 to 7"), m);
        e = slurm();
        e.put("SLURM_LOCALID", "6");
        assertTrue(error(e).startsWith("SLURM_LOCALID=6 is not below SLURM_NTASKS=6"));
    }

    @Test
    void nonNumericAndNegativeValues() {
        Map<String, String> e = jccl();
        e.put("JCCL_RANK", "one");
        assertTrue(error(e).startsWith("JCCL_RANK='one' is not a number: it must be this process's rank, an integer from 0 to 3"));
        e = ompi();
        e.put("OMPI_COMM_WORLD_SIZE", "0");
        assertTrue(error(e).contains("OMPI_COMM_WORLD_SIZE=0 is not allowed"));
        e = slurm();
        e.put("SLURM_PROCID", "-1");
        assertTrue(error(e).contains("SLURM_PROCID=-1 is not allowed"));
        e = torchrun();
        e.put("LOCAL_RANK", "x");
        assertTrue(error(e).contains("LOCAL_RANK='x' is not a number"));
        e = torchrun();
        e.put("WORLD_SIZE", " ");
        assertTrue(error(e).contains("WORLD_SIZE is set but empty"));
    }

    @Test
    void everyProblemIsReportedAtOnce() {
        String m = error(env("JCCL_RANK", "0", "JCCL_AUTH_TOKEN", "xyz"));
        assertTrue(m.contains("JCCL_WORLD_SIZE is not set"), m);
        assertTrue(m.contains("JCCL_COMM_ID is not set"), m);
        assertTrue(m.contains("JCCL_AUTH_TOKEN must be 32 hex digits"), m);
    }

    @Test
    void openMpiAndSlurmWithoutRootAddress() {
        Map<String, String> e = ompi();
        e.remove("MASTER_ADDR");
        String m = error(e);
        assertTrue(m.startsWith("Open MPI does not say where rank 0 is: set JCCL_COMM_ID=<rank 0's host>:<port> or MASTER_ADDR"), m);
        assertTrue(m.contains("mpirun -x JCCL_COMM_ID"), m);
        e = slurm();
        e.remove("JCCL_COMM_ID");
        m = error(e);
        assertTrue(m.startsWith("Slurm does not say where rank 0 is: set JCCL_COMM_ID=<rank 0's host>:<port> or MASTER_ADDR"), m);
    }

    @Test
    void torchrunWithoutMasterAddrOrPort() {
        Map<String, String> e = torchrun();
        e.remove("MASTER_PORT");
        assertTrue(error(e).startsWith("MASTER_PORT is not set"));
        e = torchrun();
        e.remove("MASTER_ADDR");
        assertTrue(error(e).startsWith("MASTER_ADDR is not set"));
    }

    @Test
    void badRootAddresses() {
        Map<String, String> e = jccl();
        e.put("JCCL_COMM_ID", "127.0.0.1");
        assertTrue(error(e).contains("JCCL_COMM_ID='127.0.0.1' is not an address"));
        e.put("JCCL_COMM_ID", "127.0.0.1:99999");
        assertTrue(error(e).contains("outside 1..65535"));
        e.put("JCCL_COMM_ID", "127.0.0.1:4000/" + TOKEN);
        String m = error(e);
        assertTrue(m.contains("JCCL_COMM_ID contains a '/'"), m);
        assertFalse(m.contains(TOKEN), m);
        e = ompi();
        e.put("MASTER_PORT", "http");
        assertTrue(error(e).contains("MASTER_ADDR:MASTER_PORT='127.0.0.3:http' has a port that is not a number"));
    }

    /** Which loopback resolutions of a root's host name are another host's name resolving here (an error at once). */
    @Test
    void anotherHostsNameResolvedToLoopbackIsRecognised() throws Exception {
        java.net.InetAddress debian = java.net.InetAddress.getByName("127.0.1.1");
        java.net.InetAddress lo = java.net.InetAddress.getByName("127.0.0.1");
        java.util.List<java.net.InetAddress> localhost = java.util.List.of(lo);
        // node1 resolves node0 to 127.0.1.1 (an /etc/hosts copied from node0): another host's name.
        assertTrue(FixedAddressExchange.otherHostOnLoopback("node0", debian, "node1", java.util.List.of(), localhost));
        assertTrue(FixedAddressExchange.otherHostOnLoopback("node0.cluster", debian, "node1", java.util.List.of(), localhost));
        // On node0 itself, or through an alias of node0's own address, or by its fully qualified name: fine.
        assertFalse(FixedAddressExchange.otherHostOnLoopback("node0", debian, "node0", java.util.List.of(debian), localhost));
        assertFalse(FixedAddressExchange.otherHostOnLoopback("node0.cluster", debian, "node0", java.util.List.of(), localhost));
        assertFalse(FixedAddressExchange.otherHostOnLoopback("gpu-a", debian, "node0", java.util.List.of(debian), localhost));
        // localhost's addresses and literal addresses mean "this host" whatever the name: several torchrun nodes on one host.
        assertFalse(FixedAddressExchange.otherHostOnLoopback("localhost", lo, "node1", java.util.List.of(), localhost));
        assertFalse(FixedAddressExchange.otherHostOnLoopback("127.0.1.1", debian, "node1", java.util.List.of(), localhost));
        assertFalse(FixedAddressExchange.otherHostOnLoopback("::1", java.net.InetAddress.getByName("::1"), "node1", java.util.List.of(),
                localhost));
        // Unknown own name: no verdict.
        assertFalse(FixedAddressExchange.otherHostOnLoopback("node0", debian, null, java.util.List.of(), localhost));
    }

    @Test
    void aLoopbackRootThatIsNotAnotherHostsNameJoinsAsUsual() {
        Map<String, String> e = torchrun();
        e.put("MASTER_ADDR", "localhost");
        e.put("GROUP_RANK", "1"); // a second torchrun node on the same host is legitimate
        assertEquals(29501, detect(e).exchange().lookup(Config.defaults(), System.nanoTime()).addresses().getFirst().getPort());
    }

    /** A root name that does not resolve yet is no error when the environment is read: the ranks resolve it until the deadline. */
    @Test
    void aRootNameThatDoesNotResolveYetIsRetriedUntilTheDeadline() {
        Map<String, String> e = jccl();
        e.put("JCCL_COMM_ID", "jccl-pod-0.no-such-service.invalid:29500");
        Config.Launch l = detect(e);
        assertTrue(root(l).isUnresolved());
        long t0 = System.nanoTime();
        org.jccl.JcclTimeoutException x = assertThrows(org.jccl.JcclTimeoutException.class,
                () -> l.exchange().lookup(Config.defaults(), System.nanoTime() + 300_000_000L));
        assertTrue(System.nanoTime() - t0 >= 250_000_000L, "retried until the deadline");
        assertTrue(x.getMessage().startsWith("the name 'jccl-pod-0.no-such-service.invalid' of rank 0's host"
                + " (JCCL_COMM_ID=jccl-pod-0.no-such-service.invalid:29500) did not resolve") && x.getMessage().contains("publishNotReadyAddresses"),
                x.getMessage());
    }

    @Test
    void configFromEnvironmentCarriesTheLaunch() {
        Config c = Config.fromEnvironment(torchrun());
        assertEquals("torchrun", c.launch().orElseThrow().convention());
        assertTrue(Config.fromEnvironment(Map.of()).launch().isEmpty());
    }
}
