package org.jccl.internal.bootstrap;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.SocketChannel;
import java.nio.channels.UnresolvedAddressException;
import java.time.Duration;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclId;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.config.UserSecret;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.Tls;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.PeerInfo;

/**
 * The rank side of the bootstrap: one call, {@link #rendezvous}, that registers this rank with the
 * job's {@link BootstrapRoot} and returns every rank's {@link PeerInfo}.
 *
 * <p>The root may not be listening yet (rank 0 is still starting), so refused connections are
 * retried with a backoff of 20 ms doubling to 1 s until the init deadline. Every connection is
 * authenticated with the job secret ({@link Handshake}) before anything about this rank is sent.
 * The frames are described in {@code BootstrapWire}.
 *
 * <p>Thread-safe: each call uses its own connection; many ranks may rendezvous from threads of one JVM.
 */
public final class Bootstrap {

    private static final long FIRST_BACKOFF_MS = 20;
    private static final long MAX_BACKOFF_MS = 1_000;
    /** How often a rank that keeps retrying says so at INFO level. */
    private static final long RETRY_LOG_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(10);

    private Bootstrap() {
    }

    /**
     * Registers {@code self} as {@code rank} of {@code size} with the root named by {@code id} and
     * waits for every other rank. Blocks at most {@code JCCL_INIT_TIMEOUT} plus a small grace (the
     * grace lets the root's own, more precise, timeout message arrive first).
     *
     * @return every rank's peer info, index = rank, {@code self} included
     * @throws JcclException MISMATCH when ranks disagree on the world size or two claim one rank;
     *         AUTHENTICATION when this rank and the root have different secrets; PEER_FAILED when the
     *         root closes the connection; INVALID_ARGUMENT for a rank outside [0, size) or a
     *         {@code self} of another rank
     * @throws JcclTimeoutException when ranks are missing at the deadline (the message lists them),
     *         or the root cannot be reached
     */
    public static PeerInfo[] rendezvous(JcclId id, int rank, int size, PeerInfo self, Config config) {
        Objects.requireNonNull(id, "id");
        return rendezvous(List.of(id.rootAddress()), id.secret(), "the JcclId", rank, size, self, config);
    }

    /**
     * {@link #rendezvous(JcclId, int, int, PeerInfo, Config)} with a root that listens on several
     * addresses: each attempt connects to all of them at once and keeps the first that answers.
     *
     * @param roots the root's addresses, in order of preference
     * @param secretSource where this rank's secret came from, for the message when the secrets differ
     */
    public static PeerInfo[] rendezvous(List<InetSocketAddress> roots, byte[] secret, String secretSource, int rank, int size,
            PeerInfo self, Config config) {
        Objects.requireNonNull(roots, "roots");
        Objects.requireNonNull(secret, "secret");
        Objects.requireNonNull(self, "self");
        Objects.requireNonNull(config, "config");
        if (roots.isEmpty()) {
            throw new IllegalArgumentException("no root address");
        }
        if (size < 1 || rank < 0 || rank >= size) {
            throw new JcclException(ErrorCode.INVALID_ARGUMENT, "rank " + rank + " of world size " + size
                    + " is not valid: the size must be at least 1 and the rank in [0, size)");
        }
        if (self.rank() != rank) {
            throw new JcclException(ErrorCode.INVALID_ARGUMENT, "rank " + rank + " was given the peer info of rank " + self.rank()
                    + "; a jccl bug, please report it");
        }
        Duration initTimeout = Settings.INIT_TIMEOUT.getDuration(config);
        Duration connectTimeout = Settings.CONNECT_TIMEOUT.getDuration(config);
        long deadline = System.nanoTime() + initTimeout.toNanos() + grace(initTimeout).toNanos();
        String where = String.join(" or ", roots.stream().map(BootstrapWire::hostPort).toList());
        // Encode before connecting: a peer info that cannot be encoded fails here, not at the root.
        byte[] registration = BootstrapWire.registerFrame(rank, size, PeerInfoCodec.encode(self));
        long t0 = System.nanoTime();
        Tls tls = Tls.fromConfig(config);
        try (WireChannel ch = connect(roots, secret, secretSource, rank, size, where, initTimeout, connectTimeout, deadline, tls)) {
            String at = remote(ch.socket());
            ByteBuffer reg = ByteBuffer.wrap(registration);
            while (reg.hasRemaining()) {
                ch.write(reg);
            }
            Log.trace(Log.Subsys.BOOTSTRAP, rank, "registered with the bootstrap root " + at + " as rank " + rank + " of " + size);
            PeerInfo[] table = awaitTable(ch, rank, size, self, at, initTimeout, deadline);
            Log.info(Log.Subsys.BOOTSTRAP, rank, "bootstrap: all " + size + " ranks known after "
                    + String.format("%.3f s", (System.nanoTime() - t0) / 1e9) + " (root " + at + ")");
            return table;
        } catch (ClosedByInterruptException e) {
            throw interrupted(rank, where, e);
        } catch (IOException e) {
            if (Thread.currentThread().isInterrupted()) {
                throw interrupted(rank, where, e);
            }
            throw new JcclException(ErrorCode.PEER_FAILED, "rank " + rank + " lost its connection to the bootstrap root at " + where
                    + " (" + e + "); rank 0's process (which runs the root) probably exited or crashed: see its log", e);
        }
    }

    /** 10% of the init timeout, between 1 s and 5 s. */
    static Duration grace(Duration initTimeout) {
        long ms = Math.max(1_000, Math.min(5_000, initTimeout.toMillis() / 10));
        return Duration.ofMillis(ms);
    }

    /** Connects and authenticates, retrying while the root is not reachable yet. */
    private static WireChannel connect(List<InetSocketAddress> roots, byte[] secret, String secretSource, int rank, int size,
            String where, Duration initTimeout, Duration connectTimeout, long deadline, Tls tls) {
        byte[] hello = BootstrapWire.hello(rank, size);
        long backoff = FIRST_BACKOFF_MS;
        int attempts = 0;
        long nextLog = System.nanoTime();
        Exception last = null;
        while (true) {
            long remaining = deadline - System.nanoTime();
            if (remaining <= 0) {
                throw new JcclTimeoutException("rank " + rank + " could not reach the bootstrap root at " + where + " within "
                        + BootstrapWire.seconds(initTimeout) + " (JCCL_INIT_TIMEOUT): is rank 0 running, and is JCCL_COMM_ID /"
                        + " MASTER_ADDR:MASTER_PORT an address of rank 0's host? (" + attempts + " attempts, last: "
                        + describe(last) + ")" + loopbackHint(roots), last);
            }
            Duration attemptTimeout = Duration.ofNanos(Math.min(remaining, connectTimeout.toNanos()));
            SocketChannel ch = null;
            String at = where;
            try {
                ch = connectAny(roots, attemptTimeout);
                at = remote(ch);
                ch.socket().setTcpNoDelay(true);
                WireChannel w = Tls.wrap(tls, ch, true, "the bootstrap root at " + at);
                Handshake.connect(w, secret, Handshake.Kind.BOOTSTRAP, hello, attemptTimeout);
                if (attempts > 0) {
                    Log.info(Log.Subsys.BOOTSTRAP, rank, "reached the bootstrap root " + at + " after " + (attempts + 1) + " attempts");
                }
                return w;
            } catch (Handshake.SecretMismatch e) {
                closeQuietly(ch);
                throw new JcclException(ErrorCode.AUTHENTICATION, "rank " + rank + " could not join the job at the bootstrap root " + at
                        + ": the secrets differ: " + e.getMessage() + ". This rank's secret comes from " + secretSource + " (fingerprint "
                        + UserSecret.fingerprint(secret) + "; rank 0 logs its own at INFO, JCCL_DEBUG=INFO). Every rank of a job needs"
                        + " the same secret: export the same JCCL_AUTH_TOKEN to every rank, or give every host the same secret file"
                        + " (a home directory shared by the hosts, or a copy of the file with mode 0600; JCCL_SECRET_FILE names"
                        + " another path)", e);
            } catch (JcclException e) {
                closeQuietly(ch);
                if (e.code() != ErrorCode.TIMEOUT) {
                    // A version mismatch or a port that is not a jccl root will not change by retrying.
                    throw new JcclException(e.code(), "rank " + rank + " could not join the job at the bootstrap root " + at + ": "
                            + e.getMessage(), e);
                }
                last = e;
            } catch (UnresolvedAddressException e) {
                closeQuietly(ch);
                throw new JcclException(ErrorCode.CONFIG, "rank " + rank + ": the bootstrap root address " + where
                        + " cannot be resolved; set JCCL_COMM_ID / MASTER_ADDR to a name or address of rank 0's host", e);
            } catch (IOException e) {
                closeQuietly(ch);
                if (e instanceof ClosedByInterruptException || Thread.currentThread().isInterrupted()) {
                    throw interrupted(rank, where, e);
                }
                // Refused (root not started yet), unreachable (host still booting), reset: all may pass before the deadline.
                last = e;
            }
            attempts++;
            long now = System.nanoTime();
            if (now >= nextLog) {
                Log.info(Log.Subsys.BOOTSTRAP, rank, "bootstrap root " + where + " not reachable yet (attempt " + attempts + ": "
                        + describe(last) + "); retrying for up to " + BootstrapWire.seconds(initTimeout) + " (JCCL_INIT_TIMEOUT)");
                nextLog = now + RETRY_LOG_INTERVAL_NANOS;
            }
            long sleepMs = Math.min(backoff, TimeUnit.NANOSECONDS.toMillis(deadline - now));
            if (sleepMs > 0) {
                try {
                    Thread.sleep(sleepMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw interrupted(rank, where, e);
                }
            }
            backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
        }
    }

    /**
     * Connects to every address at once and returns the first connection made (blocking mode), closing
     * the others; an unroutable address cannot hold up a reachable one.
     *
     * @throws IOException the last failure when none connects within {@code timeout}
     */
    static SocketChannel connectAny(List<InetSocketAddress> roots, Duration timeout) throws IOException {
        if (roots.size() == 1) {
            SocketChannel ch = SocketChannel.open();
            try {
                ch.socket().connect(roots.getFirst(), (int) Math.max(1, Math.min(Integer.MAX_VALUE, timeout.toMillis())));
                return ch;
            } catch (IOException | RuntimeException e) {
                closeQuietly(ch);
                throw e;
            }
        }
        List<SocketChannel> pending = new ArrayList<>();
        IOException last = null;
        try (Selector selector = Selector.open()) {
            for (InetSocketAddress a : roots) {
                SocketChannel ch = SocketChannel.open();
                try {
                    ch.configureBlocking(false);
                    if (ch.connect(a)) {
                        return won(ch, pending);
                    }
                    ch.register(selector, SelectionKey.OP_CONNECT);
                    pending.add(ch);
                } catch (IOException e) {
                    closeQuietly(ch);
                    last = e;
                }
            }
            long end = System.nanoTime() + timeout.toNanos();
            while (!pending.isEmpty()) {
                long left = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime());
                if (left <= 0) {
                    throw last != null ? last : new SocketTimeoutException("connect timed out after " + timeout.toMillis() + " ms");
                }
                selector.select(left);
                Iterator<SelectionKey> it = selector.selectedKeys().iterator();
                while (it.hasNext()) {
                    SelectionKey k = it.next();
                    it.remove();
                    SocketChannel ch = (SocketChannel) k.channel();
                    try {
                        if (ch.finishConnect()) {
                            k.cancel();
                            pending.remove(ch);
                            return won(ch, pending);
                        }
                    } catch (IOException e) {
                        k.cancel();
                        pending.remove(ch);
                        closeQuietly(ch);
                        last = e;
                    }
                }
            }
            throw last != null ? last : new IOException("no root address could be connected");
        } finally {
            for (SocketChannel ch : pending) {
                closeQuietly(ch);
            }
        }
    }

    private static SocketChannel won(SocketChannel ch, List<SocketChannel> others) throws IOException {
        for (SocketChannel o : others) {
            closeQuietly(o);
        }
        others.clear();
        ch.configureBlocking(true);
        return ch;
    }

    /** For a timeout: a loopback root address reaches rank 0 from its own host only; say so, naming name resolution. */
    static String loopbackHint(List<InetSocketAddress> roots) {
        for (InetSocketAddress a : roots) {
            if (a.getAddress() != null && a.getAddress().isLoopbackAddress()) {
                return "; " + BootstrapWire.hostPort(a) + " is a loopback address, which reaches rank 0 only from rank 0's own host:"
                        + " if rank 0 runs on another host, JCCL_COMM_ID / MASTER_ADDR must name an address of that host that this"
                        + " host can reach; check this host's name resolution (`getent hosts <name>`: /etc/hosts often maps a host's"
                        + " own name to 127.0.1.1), or give the address itself";
            }
        }
        return "";
    }

    private static String remote(SocketChannel ch) {
        try {
            return BootstrapWire.hostPort((InetSocketAddress) ch.getRemoteAddress());
        } catch (IOException | RuntimeException e) {
            return "?";
        }
    }

    private static PeerInfo[] awaitTable(WireChannel w, int rank, int size, PeerInfo self, String where, Duration initTimeout,
            long deadline) throws IOException {
        long remainingMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        w.socket().socket().setSoTimeout((int) Math.max(1, Math.min(Integer.MAX_VALUE, remainingMs)));
        DataInputStream in = new DataInputStream(w.blockingInput());
        BootstrapWire.Frame frame;
        try {
            frame = BootstrapWire.readFrame(in, BootstrapWire.MAX_REPLY_FRAME, "the bootstrap root at " + where);
        } catch (SocketTimeoutException e) {
            throw new JcclTimeoutException("rank " + rank + " registered with the bootstrap root at " + where
                    + " but got neither the peer table nor an error within " + BootstrapWire.seconds(initTimeout)
                    + " (JCCL_INIT_TIMEOUT) plus " + BootstrapWire.seconds(grace(initTimeout)) + " of grace: the root process is"
                    + " stalled (or was started well after this rank); see rank 0's log", e);
        } catch (EOFException e) {
            throw new JcclException(ErrorCode.PEER_FAILED, "the bootstrap root at " + where + " closed the connection while rank "
                    + rank + " waited for the other ranks: rank 0's process (which runs the root) probably exited or crashed;"
                    + " see its log", e);
        }
        switch (frame.type()) {
            case BootstrapWire.ERROR -> throw BootstrapWire.parseError(frame.body(), where);
            case BootstrapWire.TABLE -> {
                PeerInfo[] table;
                try {
                    table = PeerInfoCodec.decodeAll(frame.body());
                } catch (JcclException e) {
                    throw new JcclException(ErrorCode.PROTOCOL, "rank " + rank + ": the peer table from the bootstrap root at " + where
                            + " is corrupt: " + e.getMessage(), e);
                }
                checkTable(table, rank, size, self, where);
                return table;
            }
            default -> throw new JcclException(ErrorCode.PROTOCOL, "rank " + rank + ": the bootstrap root at " + where
                    + " sent frame type " + frame.type() + " instead of the peer table (another jccl version?)");
        }
    }

    private static void checkTable(PeerInfo[] table, int rank, int size, PeerInfo self, String where) {
        String problem = null;
        if (table.length != size) {
            problem = "it has " + table.length + " entries for a world of " + size;
        } else {
            for (int i = 0; i < table.length && problem == null; i++) {
                if (table[i].rank() != i) {
                    problem = "entry " + i + " is rank " + table[i].rank();
                }
            }
            PeerInfo mine = table.length > rank ? table[rank] : null;
            if (problem == null && (mine == null || mine.pid() != self.pid() || !mine.processId().equals(self.processId())
                    || !mine.host().equals(self.host()) || !sameAddresses(mine, self))) {
                problem = "its entry for this rank is not what this rank registered";
            }
        }
        if (problem != null) {
            throw new JcclException(ErrorCode.PROTOCOL, "rank " + rank + ": the peer table from the bootstrap root at " + where
                    + " is inconsistent (" + problem + "); a jccl bug or a corrupted connection, please report it");
        }
    }

    private static boolean sameAddresses(PeerInfo a, PeerInfo b) {
        if (!a.addresses().keySet().equals(b.addresses().keySet())) {
            return false;
        }
        for (var e : a.addresses().entrySet()) {
            if (!Arrays.equals(e.getValue(), b.addresses().get(e.getKey()))) {
                return false;
            }
        }
        return true;
    }

    private static JcclException interrupted(int rank, String where, Exception cause) {
        Thread.currentThread().interrupt();
        return new JcclException(ErrorCode.ABORTED, "rank " + rank + " was interrupted while joining the job at the bootstrap root "
                + where + "; initialisation abandoned", cause);
    }

    private static String describe(Exception e) {
        if (e == null) {
            return "none";
        }
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m != null ? ": " + m : "");
    }

    private static void closeQuietly(SocketChannel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException e) {
                // Best effort: the descriptor is released either way.
            }
        }
    }
}
