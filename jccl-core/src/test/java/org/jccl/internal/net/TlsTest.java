package org.jccl.internal.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.JcclId;
import org.jccl.ReduceOp;
import org.jccl.internal.log.Log;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code JCCL_TLS=1} end to end over loopback, with key and trust stores made at test time by the
 * JDK's keytool (two throw-away CAs, A and B, each signing one rank certificate; nothing is
 * committed). Trusted: 4 ranks bootstrap and all-reduce (small and 1 MiB, so many TLS records)
 * correctly over TLS, and their control channel (TLS too) carries heartbeats through an idle spell
 * longer than the peer timeout and a stall report. Untrusted: a rank whose certificate comes from a
 * CA the others do not trust is refused with an error that names TLS and the peer, quickly, at the
 * bootstrap root, on the control channel or on a data connection; a peer without TLS is refused by a
 * TLS port.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TlsTest {

    private static final String PW = "jccl-test-only";

    @TempDir
    static Path stores;

    @TempDir
    Path dir;

    @BeforeAll
    static void makeStores() throws Exception {
        for (String ca : new String[] {"A", "B"}) {
            keytool("-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=jccl test CA " + ca,
                    "-ext", "bc:c", "-validity", "2", "-keystore", p("ca" + ca + ".p12"), "-storepass", PW);
            keytool("-exportcert", "-alias", "ca", "-rfc", "-file", p("ca" + ca + ".crt"), "-keystore", p("ca" + ca + ".p12"),
                    "-storepass", PW);
            String ks = p("rank" + ca + ".p12");
            keytool("-genkeypair", "-alias", "rank", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=jccl rank " + ca,
                    "-validity", "2", "-keystore", ks, "-storepass", PW);
            keytool("-certreq", "-alias", "rank", "-file", p("rank" + ca + ".csr"), "-keystore", ks, "-storepass", PW);
            keytool("-gencert", "-alias", "ca", "-infile", p("rank" + ca + ".csr"), "-outfile", p("rank" + ca + ".crt"),
                    "-ext", "eku=serverAuth,clientAuth", "-validity", "2", "-keystore", p("ca" + ca + ".p12"), "-storepass", PW);
            keytool("-importcert", "-alias", "ca", "-file", p("ca" + ca + ".crt"), "-noprompt", "-keystore", ks, "-storepass", PW);
            keytool("-importcert", "-alias", "rank", "-file", p("rank" + ca + ".crt"), "-keystore", ks, "-storepass", PW);
            keytool("-importcert", "-alias", "ca" + ca, "-file", p("ca" + ca + ".crt"), "-noprompt", "-keystore", p("trust" + ca + ".p12"),
                    "-storepass", PW);
            keytool("-importcert", "-alias", "ca" + ca, "-file", p("ca" + ca + ".crt"), "-noprompt", "-keystore", p("trustAB.p12"),
                    "-storepass", PW);
        }
    }

    private static String p(String name) {
        return stores.resolve(name).toString();
    }

    private static void keytool(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
        cmd.addAll(List.of(args));
        Process proc = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(proc.getInputStream().readAllBytes());
        assertTrue(proc.waitFor(60, TimeUnit.SECONDS), "keytool hung: " + cmd);
        assertEquals(0, proc.exitValue(), "keytool " + String.join(" ", args) + ": " + out);
    }

    private static Config tls(String keystore, String truststore) {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo")
                .with("JCCL_TLS", "1").with("JCCL_TLS_KEYSTORE", p(keystore)).with("JCCL_TLS_KEYSTORE_PASSWORD", PW)
                .with("JCCL_TLS_TRUSTSTORE", p(truststore)).with("JCCL_INIT_TIMEOUT", "20").with("JCCL_CONNECT_TIMEOUT", "10");
    }

    @Test
    void trustedCaFourRanksAllReduceCorrectlyOverTls() throws Exception {
        Log.Options saved = Log.options();
        Path log = dir.resolve("net.log");
        List<Communicator> comms = List.of();
        try {
            Log.configure(new Log.Options(Log.Level.TRACE, EnumSet.of(Log.Subsys.NET, Log.Subsys.INIT), log.toString(), false));
            // Peer timeout 4 s: heartbeats must cross the (TLS) control channel during the idle spell below.
            comms = Jccl.initLocal(4, tls("rankA.p12", "trustA.p12").with("JCCL_PEER_TIMEOUT", "4").with("JCCL_STALL_WARN", "3")
                    .with("JCCL_DUMP_DIR", dir.resolve("dumps").toString()));
            Ranks.run(comms, Duration.ofSeconds(120), c -> {
                for (int size : new int[] {1, 1000, 262_147}) {
                    int[] a = new int[size];
                    for (int i = 0; i < size; i++) {
                        a[i] = c.rank() * 7 + i;
                    }
                    c.allReduce(Buffer.of(a), ReduceOp.SUM);
                    for (int i = 0; i < size; i++) {
                        if (a[i] != 42 + 4 * i) {
                            throw new AssertionError("rank " + c.rank() + " size " + size + " element " + i + " = " + a[i]);
                        }
                    }
                }
            });
            List<String> links = Files.readAllLines(log).stream().filter(l -> l.contains(" via TCP ")).toList();
            assertTrue(!links.isEmpty(), "no 'via TCP' lines");
            for (String l : links) {
                assertTrue(l.endsWith(", TLS)"), "a data connection without TLS: " + l);
            }
            // Every rank's control connection negotiated TLS 1.3 (the hub's line counts its 3 accepted connections).
            List<String> control = Files.readAllLines(log).stream().filter(l -> l.contains(" control channel up (")).toList();
            assertEquals(4, control.size(), control.toString());
            for (String l : control) {
                assertTrue(l.contains(" over TLS (TLSv1.3 TLS_"), "a control channel without TLS: " + l);
            }

            // Idle for 1.5 x the peer timeout: only heartbeats over the TLS control channel keep the ranks from timing out.
            Thread.sleep(6_000);
            List<Communicator> cs = comms;
            Ranks.run(cs, Duration.ofSeconds(60), c -> c.barrier());

            // A stall report: rank 3 holds back; ranks 0-2 learn (REQUEST, COLLECT, STATE, REPORT over TLS) who is behind.
            List<org.jccl.Work> works = new ArrayList<>();
            List<int[]> results = new ArrayList<>();
            for (int r = 0; r < 3; r++) {
                int[] a = {r + 1};
                results.add(a);
                works.add(cs.get(r).allReduceAsync(Buffer.of(a), Buffer.of(a), ReduceOp.SUM));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
            for (int r = 0; r < 3; r++) {
                // The last line this rank logged (a slow start on a loaded machine may have logged an earlier one).
                String line;
                while (!heldBack(line = ((org.jccl.internal.runtime.CommunicatorImpl) cs.get(r)).control().lastStallLine())
                        && System.nanoTime() < deadline) {
                    Thread.sleep(50);
                }
                assertTrue(heldBack(line), "rank " + r + ": " + line);
            }
            cs.get(3).allReduce(Buffer.of(new int[] {4}), ReduceOp.SUM);
            for (int r = 0; r < 3; r++) {
                assertTrue(works.get(r).join(Duration.ofSeconds(30)), "rank " + r + " did not finish after rank 3 arrived");
                assertEquals(10, results.get(r)[0], "rank " + r);
            }

            // A child communicator (dup) sets up its own control channel, over TLS too.
            java.util.concurrent.ConcurrentHashMap<Integer, Communicator> dups = new java.util.concurrent.ConcurrentHashMap<>();
            try {
                Ranks.run(cs, Duration.ofSeconds(60), c -> {
                    Communicator d = c.dup();
                    dups.put(c.rank(), d);
                    int[] a = {c.rank()};
                    d.allReduce(Buffer.of(a), ReduceOp.SUM);
                    assertEquals(6, a[0], "rank " + c.rank() + " on the dup");
                });
                List<String> all = Files.readAllLines(log).stream().filter(l -> l.contains(" control channel up (")).toList();
                assertEquals(8, all.size(), all.toString());
                assertTrue(all.stream().allMatch(l -> l.contains(" over TLS (TLSv1.3 TLS_")), all.toString());
            } finally {
                dups.values().forEach(Communicator::abort);
            }
        } finally {
            comms.forEach(Communicator::abort); // a failed assertion may leave operations waiting for rank 3
            comms.forEach(Communicator::close);
            Log.configure(saved);
        }
    }

    /** TCP's stream threads (JCCL_SOCKET_OFFLOAD) drive TLS sockets too: each socket's records stay on one thread. */
    @Test
    void streamThreadsCarryTlsStripes() throws Exception {
        Log.Options saved = Log.options();
        Path log = dir.resolve("offload.log");
        List<Communicator> comms = List.of();
        try {
            Log.configure(new Log.Options(Log.Level.INFO, EnumSet.of(Log.Subsys.NET), log.toString(), false));
            comms = Jccl.initLocal(2, tls("rankA.p12", "trustA.p12").with("JCCL_SOCKET_OFFLOAD", "1").with("JCCL_SOCKET_NTHREADS", "2")
                    .with("JCCL_NSOCKS_PERTHREAD", "2"));
            Ranks.run(comms, Duration.ofSeconds(120), c -> {
                for (int size : new int[] {1, 1000, (1 << 20) + 3}) {
                    int[] a = new int[size];
                    for (int i = 0; i < size; i++) {
                        a[i] = c.rank() * 7 + i;
                    }
                    c.allReduce(Buffer.of(a), ReduceOp.SUM);
                    for (int i = 0; i < size; i++) {
                        if (a[i] != 7 + 2 * i) {
                            throw new AssertionError("rank " + c.rank() + " size " + size + " element " + i + " = " + a[i]);
                        }
                    }
                }
            });
            List<String> links = Files.readAllLines(log).stream().filter(l -> l.contains(" via TCP ")).toList();
            assertEquals(2, links.size(), links.toString());
            for (String l : links) {
                assertTrue(l.endsWith("(4 + 4 sockets, TLS, 2 stream threads)"), l);
            }
        } finally {
            comms.forEach(Communicator::close);
            Log.configure(saved);
        }
    }

    private static boolean heldBack(String stallLine) {
        return stallLine != null && stallLine.startsWith("all_reduce #") && stallLine.contains(" stalled ")
                && stallLine.contains("ranks 0-2 wait; rank 3 (host ");
    }

    @Test
    void untrustedCaAtTheBootstrapRootFailsNamingTlsAndTheRoot() {
        long t0 = System.nanoTime();
        // Every rank's certificate is signed by CA B; every trust store holds CA A only.
        JcclException e = assertThrows(JcclException.class, () -> Jccl.initLocal(2, tls("rankB.p12", "trustA.p12")));
        long s = (System.nanoTime() - t0) / 1_000_000_000L;
        assertTrue(s < 15, "took " + s + " s: a TLS refusal must not wait out the init timeout");
        assertTrue(e.getMessage().contains("TLS with the bootstrap root at 127.0.0.1:"), e.getMessage());
        assertTrue(e.getMessage().contains("do not chain to a CA in the trust store"), e.getMessage());
    }

    @Test
    void untrustedCaOnADataConnectionFailsNamingTlsAndThePeer() throws Exception {
        // The root (cert A) and rank 0, the control hub (cert A), trust A and B; rank 1 (cert A) trusts A only; rank 2
        // (cert B) trusts A and B. Bootstrap and the control channel (every rank to rank 0) pass, but rank 1 refuses rank 2's
        // certificate when it opens their data connection (the lower rank connects).
        JcclId id = JcclId.create(tls("rankA.p12", "trustAB.p12"));
        Config[] cfg = {tls("rankA.p12", "trustAB.p12"), tls("rankA.p12", "trustA.p12"), tls("rankB.p12", "trustAB.p12")};
        ExecutorService pool = Executors.newFixedThreadPool(3);
        List<Communicator> comms = new ArrayList<>();
        try {
            List<Future<Communicator>> fs = new ArrayList<>();
            for (int r = 0; r < 3; r++) {
                int rank = r;
                fs.add(pool.submit(() -> Jccl.init(id, rank, 3, cfg[rank])));
            }
            for (Future<Communicator> f : fs) {
                comms.add(f.get(60, TimeUnit.SECONDS));
            }
            // Rank 1 sends to rank 2: the one pair whose TLS fails.
            Communicator c1 = comms.get(1);
            Communicator c2 = comms.get(2);
            Future<Throwable> sender = pool.submit(() -> {
                try {
                    c1.sendAsync(Buffer.of(new int[] {1}), 2).join();
                    return null;
                } catch (RuntimeException ex) {
                    c1.abort(); // the peer must not wait for a rank that gave up
                    return ex;
                }
            });
            Future<Throwable> receiver = pool.submit(() -> {
                try {
                    c2.recvAsync(Buffer.of(new int[1]), 1).join();
                    return null;
                } catch (RuntimeException ex) {
                    return ex;
                }
            });
            Throwable rank1 = sender.get(60, TimeUnit.SECONDS);
            Throwable rank2 = receiver.get(60, TimeUnit.SECONDS);
            assertTrue(rank1 instanceof JcclException, "rank 1 must fail: " + rank1);
            assertTrue(rank2 != null, "rank 2 cannot receive without rank 1");
            String m = rank1.getMessage();
            assertTrue(m.contains("TLS with rank 2 (") && m.contains(" at 127.0.0.1:"), m);
            assertTrue(m.contains("do not chain to a CA in the trust store"), m);
        } catch (ExecutionException e) {
            throw new AssertionError(e.getCause());
        } finally {
            comms.forEach(Communicator::abort);
            pool.shutdownNow();
        }
    }

    @Test
    void untrustedCaOnTheControlChannelFailsNamingTlsAndTheHub() throws Exception {
        // The root (cert A) trusts A and B, so both ranks bootstrap; rank 0, the control hub (cert A), trusts A only and
        // refuses the control connection of rank 1 (cert B, trusts A and B).
        JcclId id = JcclId.create(tls("rankA.p12", "trustAB.p12"));
        Config[] cfg = {tls("rankA.p12", "trustA.p12"), tls("rankB.p12", "trustAB.p12")};
        ExecutorService pool = Executors.newFixedThreadPool(2);
        Log.Options saved = Log.options();
        Path log = dir.resolve("warn.log");
        try {
            Log.configure(new Log.Options(Log.Level.WARN, EnumSet.noneOf(Log.Subsys.class), log.toString(), false));
            long t0 = System.nanoTime();
            List<Future<Long>> fs = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                int rank = r;
                fs.add(pool.submit(() -> {
                    try (Communicator c = Jccl.init(id, rank, 2, cfg[rank])) {
                        throw new AssertionError("rank " + rank + " must not get a communicator: " + c);
                    }
                }));
            }
            ExecutionException rank1 = assertThrows(ExecutionException.class, () -> fs.get(1).get(60, TimeUnit.SECONDS));
            long s1 = (System.nanoTime() - t0) / 1_000_000_000L;
            String m = rank1.getCause().getMessage();
            assertTrue(rank1.getCause() instanceof JcclException, rank1.getCause().toString());
            assertEquals(org.jccl.ErrorCode.AUTHENTICATION, ((JcclException) rank1.getCause()).code(), m);
            assertTrue(m.contains("TLS with the control channel of rank 0 (host ") && m.contains(" at 127.0.0.1:"), m);
            assertTrue(m.contains("do not chain to a CA in the trust store"), m);
            // Not retried: refused in seconds, not at the connect timeout (10 s here; the machine is shared, so a margin).
            assertTrue(s1 < 9, "rank 1 failed after " + s1 + " s");
            // The hub waits out JCCL_CONNECT_TIMEOUT for rank 1 and says why its connection was dropped.
            ExecutionException rank0 = assertThrows(ExecutionException.class, () -> fs.get(0).get(60, TimeUnit.SECONDS));
            String m0 = rank0.getCause().getMessage();
            assertTrue(m0.contains("ranks [1] did not open their control connection") && m0.contains("the last connection dropped: TLS"
                    + " with the connection from 127.0.0.1:") && m0.contains("do not chain to a CA in the trust store"), m0);
            List<String> warns = Files.readAllLines(log).stream().filter(l -> l.contains("control connection dropped: TLS with")).toList();
            assertEquals(1, warns.size(), warns.toString());
        } finally {
            Log.configure(saved);
            pool.shutdownNow();
        }
    }

    @Test
    void plainPeerAtATlsPortAndBrokenSettingsAreRefused() throws Exception {
        JcclId id = JcclId.create(tls("rankA.p12", "trustA.p12"));
        // The real client without TLS: the root answers with a TLS handshake, not a jccl challenge.
        try (var ch = java.nio.channels.SocketChannel.open(id.rootAddress())) {
            // It waits for a challenge the TLS root never sends in clear: refused when the root drops it at its handshake
            // deadline (EOF), or by its own timeout if that comes first.
            Exception e = assertThrows(Exception.class,
                    () -> Handshake.connect(ch, id.secret(), Handshake.Kind.BOOTSTRAP, new byte[8], Duration.ofSeconds(8)));
            assertTrue(e instanceof java.io.EOFException || e.getMessage().contains("did not answer the jccl handshake"), e.toString());
        }
        // Random bytes at a TLS port: dropped with one WARN line naming TLS and the sender.
        Log.Options saved = Log.options();
        Path log = dir.resolve("warn.log");
        try {
            Log.configure(new Log.Options(Log.Level.WARN, EnumSet.noneOf(Log.Subsys.class), log.toString(), false));
            String from;
            try (java.net.Socket s = new java.net.Socket()) {
                s.connect(id.rootAddress(), 5_000);
                s.setSoTimeout(20_000);
                from = "127.0.0.1:" + s.getLocalPort();
                byte[] junk = new byte[300];
                new java.util.Random(7).nextBytes(junk);
                s.getOutputStream().write(junk);
                try {
                    while (s.getInputStream().read() >= 0) {
                        // until the root closes
                    }
                } catch (IOException reset) {
                    // closed too
                }
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            List<String> lines = List.of();
            while (System.nanoTime() < deadline && lines.isEmpty()) {
                lines = Files.exists(log) ? Files.readAllLines(log).stream().filter(l -> l.contains(from)).toList() : List.of();
                Thread.sleep(20);
            }
            assertEquals(1, lines.size(), lines.toString());
            assertTrue(lines.getFirst().contains(" JCCL WARN ") && lines.getFirst().contains("TLS with the connection from " + from
                    + " failed"), lines.getFirst());
        } finally {
            Log.configure(saved);
        }
        ConfigException missing = assertThrows(ConfigException.class,
                () -> Tls.fromConfig(Config.defaults().with("JCCL_TLS", "1").with("JCCL_TLS_TRUSTSTORE", p("trustA.p12"))));
        assertTrue(missing.getMessage().startsWith("JCCL_TLS=1 needs JCCL_TLS_KEYSTORE"), missing.getMessage());
        ConfigException wrong = assertThrows(ConfigException.class, () -> Tls.fromConfig(tls("rankA.p12", "trustA.p12")
                .with("JCCL_TLS_KEYSTORE_PASSWORD", "wrong")));
        assertTrue(wrong.getMessage().contains("JCCL_TLS_KEYSTORE=") && wrong.getMessage().contains("password"), wrong.getMessage());
    }
}
