package org.jccl.internal.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.JcclId;
import org.jccl.ReduceOp;
import org.jccl.internal.log.Log;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The wire audit's end-to-end test: while a 4-rank job (ranks as threads of this JVM, TCP between
 * them over loopback) forms and then runs all-reduces in a loop, a hostile client connects to every
 * port the job listens on, found the way a port scanner finds them (procfs: the bootstrap root, and
 * each rank's TCP data listener), and sends: nothing; random bytes; a header announcing an oversized
 * length; a truncated frame; a handshake without the secret and one with a wrong secret; and, holding
 * the secret, an out-of-bounds (2^31) or truncated bootstrap frame and a data hello for a foreign
 * communicator. Every such connection must be dropped with exactly one WARN line naming the client's
 * address and what was wrong, the job's results must stay correct, and once the server has dropped
 * them the process holds no more sockets than before (nothing kept for a bad peer).
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class HostilePeersTest {

    private static final SecureRandom RANDOM = new SecureRandom();
    private static final int RANKS = 4;
    /** ints per all-reduce in the loop: one stop flag after the data. */
    private static final int COUNT = 4096;

    @TempDir
    Path dir;

    private Log.Options saved;
    private Path logFile;

    /** One hostile connection: where it came from and what the server's warning must say. */
    private record Attack(String name, String from, String expect) {
    }

    @BeforeEach
    void captureLog() {
        saved = Log.options();
        logFile = dir.resolve("jccl.log");
        Log.configure(new Log.Options(Log.Level.WARN, EnumSet.noneOf(Log.Subsys.class), logFile.toString(), false));
    }

    @AfterEach
    void restoreLog() {
        Log.configure(saved);
    }

    @Test
    void everyJcclPortDropsHostileConnectionsWithOneLineAndTheJobStaysCorrect() throws Exception {
        Config config = Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1")
                .with("JCCL_SOCKET_IFNAME", "lo").with("JCCL_INIT_TIMEOUT", "120").with("JCCL_CONNECT_TIMEOUT", "60")
                .with("JCCL_DUMP_DIR", dir.resolve("dumps").toString());
        Set<InetSocketAddress> before = ListeningSockets.tcpListeners();
        JcclId id = JcclId.create(config);
        InetSocketAddress root = id.rootAddress();
        assertTrue(ListeningSockets.tcpListeners().contains(root), "the scan finds the bootstrap root " + root);

        // The root is attacked before any rank arrives (it serves one rendezvous and then closes its port).
        List<Attack> attacks = new ArrayList<>(common(root, Handshake.Kind.BOOTSTRAP));
        attacks.add(rootFrame(root, id.secret(), 0x8000_0000, 0, "claims 2147483648 bytes (allowed 1..16777216)"));
        attacks.add(rootFrame(root, id.secret(), 100, 10, "failed during registration"));

        ExecutorService pool = Executors.newFixedThreadPool(RANKS);
        List<Future<Communicator>> inits = new ArrayList<>();
        for (int r = 0; r < RANKS; r++) {
            int rank = r;
            inits.add(pool.submit(() -> Jccl.init(id, rank, RANKS, config)));
        }
        List<Communicator> comms = new ArrayList<>();
        for (Future<Communicator> f : inits) {
            comms.add(f.get(120, TimeUnit.SECONDS));
        }
        pool.shutdown();
        try {
            // Warm up: every connection the loop uses is made now, so the socket count is the job's own.
            Ranks.run(comms, Duration.ofSeconds(60), c -> {
                for (int i = 0; i < 3; i++) {
                    checkedAllReduce(c, i, false);
                }
            });
            Set<InetSocketAddress> data = new HashSet<>(ListeningSockets.tcpListeners());
            data.removeAll(before);
            data.remove(root);
            // each rank's `jccl status` endpoint (loopback, port in its status file) is a jccl port too
            Set<InetSocketAddress> status = statusPorts(dir.resolve("dumps"));
            assertEquals(RANKS, status.size(), "one status endpoint per rank, found " + status);
            assertTrue(data.containsAll(status), "the scan finds the status endpoints " + status + " among " + data);
            data.removeAll(status);
            assertEquals(RANKS, data.size(), "one TCP data listener per rank, found " + data);
            int sockets = ListeningSockets.socketCount();

            AtomicBoolean done = new AtomicBoolean();
            Future<List<Attack>> attacker = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "hostile-client");
                t.setDaemon(true);
                return t;
            }).submit(() -> {
                try {
                    List<Attack> a = new ArrayList<>();
                    for (InetSocketAddress port : data) {
                        a.addAll(common(port, Handshake.Kind.DATA));
                        a.add(foreignCommunicator(port, id.secret()));
                    }
                    for (InetSocketAddress port : status) {
                        a.add(new Attack("silent status " + port, silentFrom(port), "closed before a request"));
                        a.add(statusLine(port, junkLine(), "not a status request"));
                        a.add(statusLine(port, "STATUS 0123456789abcdef\n", "wrong token"));
                    }
                    return a;
                } finally {
                    done.set(true);
                }
            });
            int[] iterations = new int[RANKS];
            Ranks.run(comms, Duration.ofSeconds(180), c -> {
                int i = 0;
                while (!checkedAllReduce(c, i, c.rank() == 0 && done.get())) {
                    i++;
                }
                iterations[c.rank()] = i;
            });
            attacks.addAll(attacker.get());
            assertTrue(iterations[0] > 0, "all-reduces ran while the ports were attacked");
            assertEquals(8 + RANKS * 7 + RANKS * 3, attacks.size(), "attacks made");

            for (Attack a : attacks) {
                awaitOneWarning(a);
            }
            // Nothing lingers for a dropped peer: the process is back to the job's own sockets.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (ListeningSockets.socketCount() > sockets && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            assertEquals(sockets, ListeningSockets.socketCount(), "sockets held after the hostile connections were dropped");
            // And the job still works after it all.
            Ranks.run(comms, Duration.ofSeconds(60), c -> checkedAllReduce(c, 7, false));
        } finally {
            comms.forEach(Communicator::close);
        }
    }

    /**
     * One all-reduce of COUNT + 1 ints: rank r contributes r * 1000 + i * 7 + k at index k, and the
     * last element carries rank 0's stop flag. Checks every element; returns the flag.
     */
    private static boolean checkedAllReduce(Communicator c, int i, boolean stop) {
        int[] a = new int[COUNT + 1];
        for (int k = 0; k < COUNT; k++) {
            a[k] = c.rank() * 1000 + i * 7 + k;
        }
        a[COUNT] = stop ? 1 : 0;
        c.allReduce(Buffer.of(a), ReduceOp.SUM);
        int ranksSum = RANKS * (RANKS - 1) / 2 * 1000;
        for (int k = 0; k < COUNT; k++) {
            int expect = ranksSum + RANKS * (i * 7 + k);
            if (a[k] != expect) {
                fail("rank " + c.rank() + " iteration " + i + ": element " + k + " is " + a[k] + ", expected " + expect);
            }
        }
        return a[COUNT] != 0;
    }

    // ------------------------------------------------------------------ the hostile clients

    /** The attacks any jccl port must survive, by a client that does not know the secret. */
    private static List<Attack> common(InetSocketAddress port, Handshake.Kind kind) throws IOException {
        List<Attack> a = new ArrayList<>();
        a.add(silent(port));
        a.add(randomBytes(port));
        a.add(oversizedHello(port));
        a.add(truncatedHandshake(port));
        a.add(withoutSecret(port));
        a.add(wrongSecret(port, kind));
        return a;
    }

    /** The status endpoints of this job's ranks, from the status files in the dump directory. */
    private static Set<InetSocketAddress> statusPorts(Path dumps) throws IOException {
        Set<InetSocketAddress> ports = new HashSet<>();
        try (java.util.stream.Stream<Path> files = Files.list(dumps)) {
            for (Path f : files.filter(x -> x.getFileName().toString().startsWith("jccl-status-")).toList()) {
                for (String l : Files.readAllLines(f)) {
                    if (l.startsWith("port=")) {
                        ports.add(new InetSocketAddress("127.0.0.1", Integer.parseInt(l.substring(5))));
                    }
                }
            }
        }
        return ports;
    }

    private static String silentFrom(InetSocketAddress port) throws IOException {
        try (Socket s = connect(port)) {
            return from(s);
        }
    }

    /** Printable junk ending in a newline (a request line that is not "STATUS token"). */
    private static String junkLine() {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 40; i++) {
            b.append((char) ('a' + RANDOM.nextInt(26)));
        }
        return b.append('\n').toString();
    }

    /** One line to a status endpoint, then waits for it to close the connection. */
    private static Attack statusLine(InetSocketAddress port, String line, String expect) throws IOException {
        try (Socket s = connect(port)) {
            s.getOutputStream().write(line.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            drainUntilClosed(s);
            return new Attack("status line " + port, from(s), expect);
        }
    }

    /** A port scan: connect, then close without a byte. */
    private static Attack silent(InetSocketAddress port) throws IOException {
        try (Socket s = connect(port)) {
            return new Attack("silent " + port, from(s), "handshake");
        }
    }

    /** Random bytes (never starting with the magic's 'J'). */
    private static Attack randomBytes(InetSocketAddress port) throws IOException {
        try (Socket s = connect(port)) {
            byte[] junk = new byte[256];
            RANDOM.nextBytes(junk);
            junk[0] = 0x17;
            s.getOutputStream().write(junk);
            drainUntilClosed(s);
            return new Attack("random bytes " + port, from(s), "is not a jccl peer (bad magic 0x");
        }
    }

    /** A well-formed answer header whose length field is the largest it can say (65535, the limit is 4096). */
    private static Attack oversizedHello(InetSocketAddress port) throws IOException {
        try (Socket s = connect(port)) {
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            out.writeInt(Handshake.MAGIC);
            out.writeShort(Handshake.VERSION);
            out.write(new byte[Handshake.NONCE]);
            out.writeShort(0xFFFF);
            out.flush();
            drainUntilClosed(s);
            return new Attack("oversized hello " + port, from(s), "sent a hello of 65535 bytes (at most 4096)");
        }
    }

    /** The first 11 bytes of an answer, then close. */
    private static Attack truncatedHandshake(InetSocketAddress port) throws IOException {
        try (Socket s = connect(port)) {
            DataInputStream in = new DataInputStream(s.getInputStream());
            in.readFully(new byte[4 + 2 + 1 + Handshake.NONCE]); // the challenge
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            out.writeInt(Handshake.MAGIC);
            out.writeShort(Handshake.VERSION);
            out.write(new byte[5]);
            out.flush();
            s.shutdownOutput();
            drainUntilClosed(s);
            return new Attack("truncated handshake " + port, from(s), "closed during the jccl handshake; dropped");
        }
    }

    /** A client that speaks the protocol but cannot prove the secret: its MAC is zeros. */
    private static Attack withoutSecret(InetSocketAddress port) throws IOException {
        try (Socket s = connect(port)) {
            DataInputStream in = new DataInputStream(s.getInputStream());
            in.readFully(new byte[4 + 2 + 1 + Handshake.NONCE]);
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            out.writeInt(Handshake.MAGIC);
            out.writeShort(Handshake.VERSION);
            out.write(new byte[Handshake.NONCE]);
            out.writeShort(8);
            out.write(new byte[8]);
            out.write(new byte[Handshake.MAC_LEN]);
            out.flush();
            assertEquals(1, in.readUnsignedByte(), "status 'bad MAC' for a client without the secret");
            drainUntilClosed(s);
            return new Attack("without secret " + port, from(s), "failed authentication (wrong secret");
        }
    }

    /** The real client with a wrong secret. */
    private static Attack wrongSecret(InetSocketAddress port, Handshake.Kind kind) throws IOException {
        try (SocketChannel ch = openChannel(port)) {
            String from = from(ch.socket());
            byte[] wrong = new byte[16];
            RANDOM.nextBytes(wrong);
            try {
                Handshake.connect(ch, wrong, kind, new byte[8], Duration.ofSeconds(10));
                fail("a wrong secret was accepted by " + port);
            } catch (JcclException e) {
                assertTrue(e.getMessage().contains("rejected this rank's proof of the job secret"), e.getMessage());
            }
            return new Attack("wrong secret " + port, from, "failed authentication (wrong secret");
        }
    }

    /** Knows the secret, then sends a registration frame header claiming {@code length} bytes and {@code send} body bytes. */
    private static Attack rootFrame(InetSocketAddress root, byte[] secret, int length, int send, String expect) throws IOException {
        try (SocketChannel ch = openChannel(root)) {
            String from = from(ch.socket());
            byte[] hello = java.nio.ByteBuffer.allocate(8).putInt(0).putInt(RANKS).array();
            Handshake.connect(ch, secret, Handshake.Kind.BOOTSTRAP, hello, Duration.ofSeconds(10));
            DataOutputStream out = new DataOutputStream(ch.socket().getOutputStream());
            out.writeInt(length);
            out.write(new byte[send]);
            out.flush();
            ch.socket().shutdownOutput();
            drainUntilClosed(ch.socket());
            return new Attack("bootstrap frame of " + Integer.toUnsignedString(length) + " " + root, from, expect);
        }
    }

    /** Knows the secret, but its data hello names a communicator that is not this job's. */
    private static Attack foreignCommunicator(InetSocketAddress port, byte[] secret) throws IOException {
        try (SocketChannel ch = openChannel(port)) {
            String from = from(ch.socket());
            byte[] hello = java.nio.ByteBuffer.allocate(32).put(new byte[16]).putInt(0).putInt(0).putInt(1).putInt(0).array();
            Handshake.connect(ch, secret, Handshake.Kind.DATA, hello, Duration.ofSeconds(10));
            drainUntilClosed(ch.socket());
            return new Attack("foreign communicator " + port, from, "belongs to another communicator");
        }
    }

    /**
     * A distinct loopback source address per hostile connection (127.0.0.2, .3, ...): the warnings are
     * matched by the client's address, and an ephemeral port may come back for a later connection.
     */
    private static final java.util.concurrent.atomic.AtomicInteger SOURCE = new java.util.concurrent.atomic.AtomicInteger(1);

    private static InetSocketAddress nextSource() throws IOException {
        int k = SOURCE.incrementAndGet();
        if (k > 254) {
            throw new IllegalStateException("more hostile connections than distinct loopback sources");
        }
        return new InetSocketAddress(java.net.InetAddress.getByAddress(new byte[] {127, 0, 0, (byte) k}), 0);
    }

    private static SocketChannel openChannel(InetSocketAddress port) throws IOException {
        SocketChannel ch = SocketChannel.open();
        ch.bind(nextSource());
        ch.connect(port);
        return ch;
    }

    private static Socket connect(InetSocketAddress port) throws IOException {
        Socket s = new Socket();
        s.bind(nextSource());
        s.connect(port, 10_000);
        s.setSoTimeout(30_000);
        return s;
    }

    /** Reads until the server closes; the server must close a bad connection well within its handshake timeout. */
    private static void drainUntilClosed(Socket s) throws IOException {
        s.setSoTimeout(30_000);
        InputStream in = s.getInputStream();
        byte[] buf = new byte[512];
        try {
            while (in.read(buf) >= 0) {
                // the challenge or a status byte: keep reading until the server closes
            }
        } catch (SocketTimeoutException e) {
            fail("the server kept a bad connection from " + from(s) + " open for 30 s");
        } catch (IOException e) {
            // reset by the server: closed too
        }
    }

    private static String from(Socket s) {
        return s.getLocalAddress().getHostAddress() + ":" + s.getLocalPort();
    }

    /** Exactly one WARN line names this client's address and says what was wrong. */
    private void awaitOneWarning(Attack a) throws Exception {
        Pattern addr = Pattern.compile(Pattern.quote(a.from()) + "(?![0-9])");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        List<String> hits;
        do {
            hits = Files.exists(logFile) ? Files.readAllLines(logFile).stream().filter(l -> addr.matcher(l).find()).toList() : List.of();
            if (!hits.isEmpty()) {
                break;
            }
            Thread.sleep(50);
        } while (System.nanoTime() < deadline);
        assertEquals(1, hits.size(), a.name() + ": expected one line naming " + a.from() + ", got " + hits);
        String line = hits.getFirst();
        assertTrue(line.contains(" JCCL WARN "), a.name() + ": not a WARN line: " + line);
        assertTrue(line.contains(a.expect()), a.name() + ": the line does not say '" + a.expect() + "': " + line);
        assertFalse(line.contains("jccl bug"), a.name() + ": a hostile peer is not a jccl bug: " + line);
    }
}
