package org.jccl.api;

import static org.jccl.api.ApiSupport.assertThrowsNaming;
import static org.jccl.api.ApiSupport.probeAllReduce;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ErrorCode;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.JcclId;
import org.jccl.JcclTimeoutException;
import org.jccl.api.ApiSupport.Net;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Forming a job through the public entry points, with ranks as threads of this JVM and the
 * bootstrap over real loopback sockets: {@link JcclId} made by one thread and passed to the others
 * as text, {@link Jccl#init(Config)} from launcher variables, and the failures {@link Jccl#init}
 * promises to report (wrong secret, missing rank at the deadline, duplicate rank, disagreeing
 * world size, rank out of range), each with the error code a caller switches on. The secret must
 * never appear in toString() or in an error message.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ApiInitTest {

    private ExecutorService pool;
    private final List<Communicator> made = new ArrayList<>();

    @BeforeEach
    void setUp() {
        pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "init-rank");
            t.setDaemon(true);
            return t;
        });
    }

    @AfterEach
    void tearDown() {
        pool.shutdownNow();
        synchronized (made) {
            made.forEach(Communicator::abort);
        }
    }

    /** Loopback only: the rendezvous must not depend on this machine's other interfaces. */
    private static Config config(Net net) {
        return net.config().with("JCCL_SOCKET_IFNAME", "lo");
    }

    private Future<Communicator> rank(Supplier<Communicator> init) {
        return pool.submit(() -> {
            Communicator c = init.get();
            synchronized (made) {
                made.add(c);
            }
            return c;
        });
    }

    private static Communicator get(Future<Communicator> f) throws Exception {
        try {
            return f.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw new AssertionError("init failed: " + e.getCause(), e.getCause());
        }
    }

    private static JcclException failure(Future<Communicator> f) throws Exception {
        try {
            Communicator c = f.get(30, TimeUnit.SECONDS);
            c.abort();
            throw new AssertionError("init succeeded where it must fail: " + c);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof JcclException je) {
                return je;
            }
            throw new AssertionError("init failed with " + e.getCause() + ", not a JcclException", e.getCause());
        }
    }

    /** Runs the probe all-reduce on every communicator of a job at once (one thread each), then closes them. */
    private void probeAndClose(List<Communicator> job) throws Exception {
        List<Future<?>> fs = new ArrayList<>();
        for (Communicator c : job) {
            fs.add(pool.submit(() -> {
                probeAllReduce(c, c.size());
                c.close();
                return null;
            }));
        }
        for (Future<?> f : fs) {
            try {
                f.get(30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                throw new AssertionError("probe failed: " + e.getCause(), e.getCause());
            }
        }
    }

    private static void assertNoSecret(String text, byte[] secret) {
        String hex = HexFormat.of().formatHex(secret);
        assertFalse(text.toLowerCase().contains(hex), "the secret appears in: " + text);
    }

    // -------------------------------------------------------------------------------- a job forms

    @ParameterizedTest
    @EnumSource(Net.class)
    void jobFromAnEncodedIdPassedToOtherThreads(Net net) throws Exception {
        Config cfg = config(net);
        JcclId id = JcclId.create(cfg);
        String text = id.encode();
        int n = 3;
        List<Future<Communicator>> fs = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            int rank = r;
            fs.add(rank(() -> {
                JcclId parsed = JcclId.parse(text);
                assertEquals(id, parsed);
                assertEquals(text, parsed.encode());
                return Jccl.init(parsed, rank, n, cfg);
            }));
        }
        List<Communicator> job = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            Communicator c = get(fs.get(r));
            assertEquals(r, c.rank());
            assertEquals(n, c.size());
            job.add(c);
        }
        probeAndClose(job);
    }

    /** The JCCL_* launcher convention, read from a map exactly as from the environment; rank 0 starts the root. */
    @ParameterizedTest
    @EnumSource(Net.class)
    void jobFromJcclEnvironmentVariables(Net net) throws Exception {
        int port = freePort();
        byte[] secret = new byte[JcclId.SECRET_BYTES];
        new java.security.SecureRandom().nextBytes(secret);
        String token = HexFormat.of().formatHex(secret);
        int n = 3;
        List<Future<Communicator>> fs = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            Map<String, String> env = new HashMap<>();
            env.put("JCCL_COMM_ID", "127.0.0.1:" + port);
            env.put("JCCL_RANK", Integer.toString(r));
            env.put("JCCL_WORLD_SIZE", Integer.toString(n));
            env.put("JCCL_AUTH_TOKEN", token);
            env.put("JCCL_SOCKET_IFNAME", "lo");
            env.put("JCCL_INIT_TIMEOUT", "30");
            env.put("PATH", "/usr/bin"); // unrelated variables are ignored
            if (net == Net.TCP) {
                env.put("JCCL_LOCAL_DISABLE", "1");
                env.put("JCCL_SHM_DISABLE", "1");
            }
            Config cfg = Config.fromEnvironment(env);
            Config.Launch launch = cfg.launch().orElseThrow();
            assertEquals("JCCL", launch.convention());
            assertEquals(r, launch.rank());
            assertEquals(n, launch.size());
            assertEquals(port, ((org.jccl.internal.bootstrap.FixedAddressExchange) launch.exchange()).root().getPort());
            assertEquals(Config.Source.ENVIRONMENT, cfg.source("JCCL_AUTH_TOKEN"));
            assertNoSecret(cfg.toString(), launch.secret().resolve().secret());
            fs.add(rank(() -> Jccl.init(cfg)));
        }
        List<Communicator> job = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            Communicator c = get(fs.get(r));
            assertEquals(r, c.rank());
            job.add(c);
        }
        probeAndClose(job);
    }

    /** torchrun's variables (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK) with jccl's token. */
    @Test
    void jobFromTorchrunEnvironmentVariables() throws Exception {
        int port = freePort();
        String token = "00112233445566778899aabbccddeeff";
        int n = 2;
        List<Future<Communicator>> fs = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            Config cfg = Config.fromEnvironment(Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", Integer.toString(port),
                    "RANK", Integer.toString(r), "WORLD_SIZE", Integer.toString(n), "LOCAL_RANK", Integer.toString(r),
                    "JCCL_AUTH_TOKEN", token, "JCCL_SOCKET_IFNAME", "lo"));
            assertEquals("torchrun", cfg.launch().orElseThrow().convention());
            assertEquals(r, cfg.launch().orElseThrow().localRank());
            fs.add(rank(() -> Jccl.init(cfg)));
        }
        probeAndClose(List.of(get(fs.get(0)), get(fs.get(1))));
    }

    /** Without JCCL_AUTH_TOKEN the ranks take the per-user secret file: made by the first, read by the others; the job forms. */
    @Test
    void jobFromTheSecretFileWithoutToken(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
        int port = freePort();
        String file = dir.resolve("home/.jccl/secret").toString();
        int n = 2;
        List<Future<Communicator>> fs = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            Config cfg = Config.fromEnvironment(Map.of("JCCL_COMM_ID", "127.0.0.1:" + port, "JCCL_RANK", Integer.toString(r),
                    "JCCL_WORLD_SIZE", Integer.toString(n), "JCCL_SECRET_FILE", file, "JCCL_SOCKET_IFNAME", "lo"));
            assertEquals("the secret file " + file, cfg.launch().orElseThrow().secretDescription());
            fs.add(rank(() -> Jccl.init(cfg)));
        }
        probeAndClose(List.of(get(fs.get(0)), get(fs.get(1))));
        assertTrue(java.nio.file.Files.isRegularFile(java.nio.file.Path.of(file)));
    }

    /** Two hosts whose secret files differ (home not shared): the joining rank says the secrets differ and names the file as the fix. */
    @Test
    void ranksWithDifferentSecretFilesFailSayingTheSecretsDiffer(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        int port = freePort();
        List<Future<Communicator>> fs = new ArrayList<>();
        for (int r = 0; r < 2; r++) {
            String file = dir.resolve("host" + r + "/.jccl/secret").toString();
            Config cfg = Config.fromEnvironment(Map.of("JCCL_COMM_ID", "127.0.0.1:" + port, "JCCL_RANK", Integer.toString(r),
                    "JCCL_WORLD_SIZE", "2", "JCCL_SECRET_FILE", file, "JCCL_SOCKET_IFNAME", "lo", "JCCL_INIT_TIMEOUT", "3"));
            fs.add(rank(() -> Jccl.init(cfg)));
        }
        JcclException joiner = failure(fs.get(1));
        assertEquals(ErrorCode.AUTHENTICATION, joiner.code());
        String m = joiner.getMessage();
        assertTrue(m.contains("the secrets differ") && m.contains("This rank's secret comes from the secret file "
                + dir.resolve("host1/.jccl/secret")) && m.contains("fingerprint ") && m.contains("JCCL_AUTH_TOKEN")
                && m.contains("same secret file"), m);
        JcclException root = failure(fs.get(0));
        assertEquals(ErrorCode.TIMEOUT, root.code());
        assertTrue(root.getMessage().contains("wrong JCCL_AUTH_TOKEN or secret file"), root.getMessage());
    }

    // -------------------------------------------------------------------------------- failures

    /** A rank with another secret is refused as AUTHENTICATION, naming the token, without echoing either secret; the job then forms. */
    @Test
    void wrongSecretFailsThatRankAndTheJobStillForms() throws Exception {
        Config cfg = config(Net.LOCAL);
        JcclId id = JcclId.create(cfg);
        byte[] wrong = id.secret();
        wrong[5] ^= 0x40;
        JcclId impostor = JcclId.of(id.rootAddress(), wrong);
        Future<Communicator> r0 = rank(() -> Jccl.init(id, 0, 3, cfg));
        Future<Communicator> r1 = rank(() -> Jccl.init(id, 1, 3, cfg));
        long t = System.nanoTime();
        JcclException e = failure(rank(() -> Jccl.init(impostor, 2, 3, cfg)));
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t);
        assertEquals(ErrorCode.AUTHENTICATION, e.code(), e.toString());
        assertTrue(e.getMessage().contains("JCCL_AUTH_TOKEN"), e.getMessage());
        assertTrue(e.getMessage().contains("rank 2"), e.getMessage());
        assertNoSecret(e.getMessage(), id.secret());
        assertNoSecret(e.getMessage(), wrong);
        assertTrue(ms < 10_000, "a wrong secret is not retried until the deadline: failed after " + ms + " ms");
        Future<Communicator> r2 = rank(() -> Jccl.init(id, 2, 3, cfg));
        probeAndClose(List.of(get(r0), get(r1), get(r2)));
    }

    @Test
    void missingRankFailsTheArrivedRanksAtTheDeadlineNamingIt() throws Exception {
        Config cfg = config(Net.LOCAL).with("JCCL_INIT_TIMEOUT", "2");
        JcclId id = JcclId.create(cfg);
        long t = System.nanoTime();
        Future<Communicator> r0 = rank(() -> Jccl.init(id, 0, 3, cfg));
        Future<Communicator> r1 = rank(() -> Jccl.init(id, 1, 3, cfg));
        for (Future<Communicator> f : List.of(r0, r1)) {
            JcclException e = failure(f);
            assertInstanceOf(JcclTimeoutException.class, e, e.toString());
            assertEquals(ErrorCode.TIMEOUT, e.code());
            assertTrue(e.getMessage().contains("rank [2] of 3 never arrived"), e.getMessage());
            assertTrue(e.getMessage().contains("JCCL_INIT_TIMEOUT"), e.getMessage());
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t);
        assertTrue(ms >= 1_500 && ms <= 5_000, "the arrived ranks failed after " + ms + " ms, expected about 2000");
    }

    /**
     * Two threads claim rank 1 at once: whichever registers second is refused with MISMATCH naming
     * the duplicate rank ({@link Jccl#init}: "@throws JcclException when the job cannot be formed
     * (... duplicate rank ...)"); the first stays in the job, which forms once rank 2 comes.
     */
    @Test
    void duplicateRankIsRefusedAndTheJobStillForms() throws Exception {
        duplicateRank(Net.TCP);
    }

    /**
     * The same with the in-JVM transport enabled (the default for ranks of one JVM). Today the
     * second claimant fails in the transport before the bootstrap sees it, with
     * "IllegalStateException: in-JVM endpoint &lt;comm id&gt;:1 opened twice": not a JcclException, no
     * error code, no mention of a duplicate rank.
     */
    @Test
    void duplicateRankIsRefusedAndTheJobStillFormsWithTheInJvmTransport() throws Exception {
        duplicateRank(Net.LOCAL);
    }

    private void duplicateRank(Net net) throws Exception {
        Config cfg = config(net);
        JcclId id = JcclId.create(cfg);
        Future<Communicator> r0 = rank(() -> Jccl.init(id, 0, 3, cfg));
        Future<Communicator> a = rank(() -> Jccl.init(id, 1, 3, cfg));
        Future<Communicator> b = rank(() -> Jccl.init(id, 1, 3, cfg));
        Future<Communicator> loser = firstDone(a, b);
        Future<Communicator> winner = loser == a ? b : a;
        JcclException e = failure(loser);
        assertEquals(ErrorCode.MISMATCH, e.code(), e.toString());
        assertTrue(e.getMessage().contains("duplicate rank 1"), e.getMessage());
        assertFalse(winner.isDone(), "the first rank 1 waits for rank 2");
        Future<Communicator> r2 = rank(() -> Jccl.init(id, 2, 3, cfg));
        probeAndClose(List.of(get(r0), get(winner), get(r2)));
    }

    /**
     * Rank 0 says the job has 2 ranks and rank 1 says 3, at once: whichever registers second is
     * refused with MISMATCH naming both sizes; the job of the first then forms with the right ranks.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void worldSizeMismatchIsRefusedAndTheFirstJobStillForms(Net net) throws Exception {
        Config cfg = config(net);
        JcclId id = JcclId.create(cfg);
        Future<Communicator> ofTwo = rank(() -> Jccl.init(id, 0, 2, cfg));
        Future<Communicator> ofThree = rank(() -> Jccl.init(id, 1, 3, cfg));
        Future<Communicator> loser = firstDone(ofTwo, ofThree);
        JcclException e = failure(loser);
        assertEquals(ErrorCode.MISMATCH, e.code(), e.toString());
        assertTrue(e.getMessage().contains("world size mismatch"), e.getMessage());
        assertTrue(e.getMessage().contains("says 2") && e.getMessage().contains("says 3"), e.getMessage());
        if (loser == ofThree) {
            Future<Communicator> r1 = rank(() -> Jccl.init(id, 1, 2, cfg));
            probeAndClose(List.of(get(ofTwo), get(r1)));
        } else {
            Future<Communicator> r0 = rank(() -> Jccl.init(id, 0, 3, cfg));
            Future<Communicator> r2 = rank(() -> Jccl.init(id, 2, 3, cfg));
            probeAndClose(List.of(get(r0), get(ofThree), get(r2)));
        }
    }

    /** Out-of-range ranks and sizes are IllegalArgumentException at once, before any connection (the root address is unused). */
    @Test
    void rankOutsideTheJobIsIllegalArgument() {
        Config cfg = config(Net.LOCAL);
        JcclId nowhere = JcclId.of(new InetSocketAddress(InetAddress.getLoopbackAddress(), 9), new byte[JcclId.SECRET_BYTES]);
        assertThrowsNaming(IllegalArgumentException.class, () -> Jccl.init(nowhere, 3, 3, cfg), "rank 3 is outside [0, 3)");
        assertThrowsNaming(IllegalArgumentException.class, () -> Jccl.init(nowhere, -1, 3, cfg), "rank -1 is outside [0, 3)");
        assertThrowsNaming(IllegalArgumentException.class, () -> Jccl.init(nowhere, 0, 0, cfg), "size must be >= 1");
        assertThrowsNaming(IllegalArgumentException.class, () -> Jccl.initLocal(0, cfg), "n must be >= 1");
        assertThrows(NullPointerException.class, () -> Jccl.init(null, 0, 1, cfg));
        // Through the environment, the same mistake is a ConfigException naming the variables.
        Map<String, String> env = Map.of("JCCL_COMM_ID", "127.0.0.1:9", "JCCL_RANK", "3", "JCCL_WORLD_SIZE", "3",
                "JCCL_AUTH_TOKEN", "00112233445566778899aabbccddeeff");
        ConfigException ce = assertThrowsNaming(ConfigException.class, () -> Jccl.init(Config.fromEnvironment(env)),
                "JCCL_RANK=3", "JCCL_WORLD_SIZE=3");
        assertNoSecret(ce.getMessage(), HexFormat.of().parseHex("00112233445566778899aabbccddeeff"));
        assertThrowsNaming(ConfigException.class, () -> Jccl.init(Config.fromEnvironment(Map.of())), "no job identity", "JCCL_COMM_ID");
    }

    // -------------------------------------------------------------------------------- the secret stays secret

    @Test
    void toStringNeverShowsTheSecret() {
        byte[] secret = HexFormat.of().parseHex("8899aabbccddeeff0011223344556677");
        JcclId id = JcclId.of(new InetSocketAddress(InetAddress.getLoopbackAddress(), 4242), secret);
        assertNoSecret(id.toString(), secret);
        assertTrue(id.toString().contains("127.0.0.1:4242"), id.toString());
        assertTrue(id.encode().endsWith("/" + id.secretHex()), "encode() carries the secret, as documented");
        Config cfg = Config.defaults().with("JCCL_AUTH_TOKEN", id.secretHex());
        assertNoSecret(cfg.toString(), secret);
        // A malformed token is reported by name and length, never by value.
        String badToken = "8899aabbccddeeff001122334455667"; // 31 digits
        Map<String, String> env = Map.of("JCCL_COMM_ID", "127.0.0.1:9", "JCCL_RANK", "0", "JCCL_WORLD_SIZE", "1",
                "JCCL_AUTH_TOKEN", badToken);
        ConfigException e = assertThrowsNaming(ConfigException.class, () -> Config.fromEnvironment(env).launch(), "JCCL_AUTH_TOKEN");
        assertFalse(e.getMessage().contains(badToken), e.getMessage());
        // A wrong JcclId text is reported without echoing its secret part.
        IllegalArgumentException pe = assertThrows(IllegalArgumentException.class, () -> JcclId.parse("8899aabbccddeeff0011223344556677"));
        assertFalse(pe.getMessage().contains("8899aabbccddeeff0011223344556677"), pe.getMessage());
    }

    /**
     * {@link JcclId#parse} documents "@throws IllegalArgumentException naming what is wrong". A
     * secret of the wrong length or with non-hex digits, and a bad port, are thrown today as
     * ConfigException (a JcclException, not an IllegalArgumentException): a caller catching what the
     * Javadoc names misses them.
     */
    @Test
    void parseReportsEveryMalformedIdAsIllegalArgument() {
        String good = "0123456789abcdef0123456789abcdef";
        for (String text : List.of("127.0.0.1:29500/" + good.substring(1), "127.0.0.1:29500/" + good.replace('a', 'x'),
                "127.0.0.1:70000/" + good, "127.0.0.1/" + good)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JcclId.parse(text), text);
            assertNotNull(e.getMessage());
            assertFalse(e.getMessage().contains(good.substring(4)), "the secret is echoed: " + e.getMessage());
        }
    }

    // -------------------------------------------------------------------------------- helpers

    /** The first of two futures to complete (the one the root refused), waiting at most 30 s. */
    private static <T> Future<T> firstDone(Future<T> a, Future<T> b) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (a.isDone()) {
                return a;
            }
            if (b.isDone()) {
                return b;
            }
            Thread.sleep(5);
        }
        throw new TimeoutException("neither init finished: the root refused neither");
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
