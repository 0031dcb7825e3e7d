package org.jccl.internal.control;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.util.Json;

/**
 * A rank's local {@code jccl status} endpoint: a loopback listener on the control thread's selector,
 * authenticated by a random token in a status file only this user can read
 * ({@link FlightDumps#writeStatusFile}). A client sends {@code STATUS <token>\n}; the rank asks the
 * hub for every rank's state and answers with the report as JSON ({@code format} "jccl-status",
 * {@code stalled}, {@code summary}, ranks, counters), or with its own view when the hub does not
 * answer in time or cannot be asked. A wrong token, a line that is no request, an overlong line or
 * a client that sends nothing within 2 s is dropped with one WARN line naming it; at most 16
 * clients wait at a time. A client's trouble never stops the control channel.
 *
 * <p>Threading: the control thread, except the constructor.
 */
final class StatusEndpoint {

    /** What the endpoint needs of its control plane (control thread). */
    interface Source {
        /** Whether to answer from this rank's own view at once: the hub left, a verdict stands, or the link to the hub is not open. */
        boolean answerAlone();

        /** Asks the hub for every rank's state; the report comes back through {@link #answerWaiting}. */
        void requestReport();

        /** The message of the fault this communicator was aborted with, or null. */
        String failure();

        /** Whether the hub has left (closed or aborted). */
        boolean hubGone();

        /** The last stall line this rank logged, or null. */
        String lastStallLine();
    }

    /** A local {@code jccl status} client waiting for its report. */
    private static final class Client {
        final SocketChannel ch;
        final ByteBuffer in = ByteBuffer.allocate(256);
        /** host:port of the client, for the one line logged when its connection is dropped. */
        final String from;
        long deadline;
        boolean authenticated;

        Client(SocketChannel ch) {
            this.ch = ch;
            String f;
            try {
                java.net.SocketAddress a = ch.getRemoteAddress();
                f = a instanceof InetSocketAddress ia ? ia.getAddress().getHostAddress() + ":" + ia.getPort() : String.valueOf(a);
            } catch (IOException e) {
                f = "?";
            }
            this.from = f;
        }
    }

    private final String comm;
    private final int rank;
    private final int size;
    private final Peers peers;
    private final ControlChannel channel;
    private final FlightDumps dumps;
    private final long collectNs;
    private final long stallWarnNs;
    private final Source source;
    private final ServerSocketChannel server;
    private final String token;
    private final Path file;
    private final List<Client> clients = new ArrayList<>();

    /** Listens on loopback (registered on {@code channel}'s selector) and writes the status file. */
    StatusEndpoint(ControlPlane.Params p, Peers peers, ControlChannel channel, FlightDumps dumps, long collectNs, long stallWarnNs,
                   Source source) throws IOException {
        this.comm = p.idShort();
        this.rank = p.rank();
        this.size = p.size();
        this.peers = peers;
        this.channel = channel;
        this.dumps = dumps;
        this.collectNs = collectNs;
        this.stallWarnNs = stallWarnNs;
        this.source = source;
        ServerSocketChannel ss = ServerSocketChannel.open();
        boolean ok = false;
        try {
            ss.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
            ss.configureBlocking(false);
            channel.register(ss, SelectionKey.OP_ACCEPT, k -> guarded(this::accept));
            byte[] tok = new byte[16];
            new java.security.SecureRandom().nextBytes(tok);
            this.token = HexFormat.of().formatHex(tok);
            this.server = ss;
            this.file = dumps.writeStatusFile(((InetSocketAddress) ss.getLocalAddress()).getPort(), token);
            ok = true;
        } finally {
            if (!ok) {
                ControlChannel.closeQuietly(ss);
            }
        }
    }

    /** The status file (port and token). */
    Path file() {
        return file;
    }

    @FunctionalInterface
    private interface Step {
        void run() throws IOException;
    }

    private void guarded(Step s) {
        try {
            s.run();
        } catch (IOException | RuntimeException e) {
            // A status client's trouble never stops the control channel.
            Log.warn(Log.Subsys.NET, rank, "comm " + comm + ": status request failed: " + e);
        }
    }

    /** Drops an unauthenticated client with one WARN line naming it and what was wrong. */
    private void drop(Client sc, String why) {
        clients.remove(sc);
        ControlChannel.closeQuietly(sc.ch);
        Log.warn(Log.Subsys.NET, rank, "comm " + comm + ": status connection from " + sc.from + " dropped: " + why);
    }

    private void accept() throws IOException {
        SocketChannel ch;
        while ((ch = server.accept()) != null) {
            if (clients.size() >= 16) {
                Log.warn(Log.Subsys.NET, rank, "comm " + comm + ": status connection from " + ch.socket().getRemoteSocketAddress()
                        + " dropped: 16 status requests are open already");
                ControlChannel.closeQuietly(ch);
                continue;
            }
            ch.configureBlocking(false);
            Client sc = new Client(ch);
            sc.deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            clients.add(sc);
            channel.register(ch, SelectionKey.OP_READ, k -> guarded(() -> read(sc)));
        }
    }

    /** Reads "STATUS &lt;token&gt;\n"; a wrong token or an overlong line closes the connection. */
    private void read(Client sc) {
        try {
            int got = sc.ch.read(sc.in);
            if (got < 0) {
                if (sc.authenticated) {
                    clients.remove(sc);
                    ControlChannel.closeQuietly(sc.ch);
                } else {
                    drop(sc, "closed before a request (a port scan?)");
                }
                return;
            }
            if (!sc.in.hasRemaining() && indexOfNewline(sc.in) < 0) {
                drop(sc, "no request line in " + sc.in.capacity() + " bytes (not a jccl status client)");
                return;
            }
            int nl = indexOfNewline(sc.in);
            if (nl < 0 || sc.authenticated) {
                return;
            }
            String line = new String(sc.in.array(), 0, nl, StandardCharsets.US_ASCII).trim();
            if (!java.security.MessageDigest.isEqual(line.getBytes(StandardCharsets.US_ASCII),
                    ("STATUS " + token).getBytes(StandardCharsets.US_ASCII))) {
                drop(sc, line.startsWith("STATUS ") ? "wrong token" : "not a status request (not a jccl status client)");
                return;
            }
            sc.authenticated = true;
            sc.deadline = System.nanoTime() + collectNs + TimeUnit.SECONDS.toNanos(1);
            if (source.answerAlone()) {
                clients.remove(sc);
                answer(sc, null, null);
            } else {
                source.requestReport();
            }
        } catch (IOException e) {
            if (sc.authenticated) {
                clients.remove(sc);
                ControlChannel.closeQuietly(sc.ch);
            } else {
                drop(sc, e.toString());
            }
        }
    }

    private static int indexOfNewline(ByteBuffer b) {
        for (int i = 0; i < b.position(); i++) {
            if (b.get(i) == '\n') {
                return i;
            }
        }
        return -1;
    }

    /** The tick: a client past its deadline gets this rank's own view (authenticated) or is dropped (not). */
    void expire(long now) {
        for (Iterator<Client> it = clients.iterator(); it.hasNext(); ) {
            Client sc = it.next();
            if (now - sc.deadline >= 0) {
                it.remove();
                if (sc.authenticated) {
                    answer(sc, null, null);
                } else {
                    ControlChannel.closeQuietly(sc.ch);
                    Log.warn(Log.Subsys.NET, rank, "comm " + comm + ": status connection from " + sc.from
                            + " dropped: no request within 2 s");
                }
            }
        }
    }

    /** A report came: every authenticated client waiting gets it. */
    void answerWaiting(RankState[] states, int[] how) {
        for (Client sc : new ArrayList<>(clients)) {
            if (sc.authenticated) {
                clients.remove(sc);
                answer(sc, states, how);
            }
        }
    }

    /** Answers a client with the report (or this rank's own view when no report came) and closes it. */
    private void answer(Client sc, RankState[] states, int[] how) {
        Map<String, Object> m = dumps.report(states, how);
        m.put("format", "jccl-status");
        boolean stalled = false;
        RankState worst = null;
        List<?> ranks = (List<?>) m.get("ranks");
        for (int r = 0; r < size; r++) {
            RankState s = states != null ? states[r] : (r == rank ? dumps.self() : null);
            if (s != null && s.busy() && (worst == null || s.curWaitMs() > worst.curWaitMs())) {
                worst = s;
            }
            Object a = ((Map<?, ?>) ranks.get(r)).get("answer");
            if ("no answer".equals(a) && states != null) {
                stalled = true;
            }
        }
        String failure = source.failure();
        String line;
        if (failure != null) {
            stalled = true;
            line = "failed: " + failure;
        } else if (worst != null && worst.curWaitMs() * 1_000_000L >= stallWarnNs) {
            stalled = true;
            line = StallReport.line(worst.curName(), worst.curSeq(), worst.curWaitMs(),
                    states != null ? states : onlySelf(), how != null ? how : selfHow(), peers.table());
        } else if (states == null) {
            stalled = true;
            line = "no report: rank 0 did not answer (" + (source.hubGone() ? "it left the communicator" : "it may be stopped") + ")";
        } else {
            line = stalled ? "some ranks did not answer" : "no operation has waited " + Settings.STALL_WARN.name() + " ("
                    + TimeUnit.NANOSECONDS.toMillis(stallWarnNs) / 1000.0 + " s)";
        }
        m.put("stalled", stalled);
        m.put("summary", line);
        m.put("last_stall_line", source.lastStallLine());
        byte[] text = (Json.write(m) + "\n").getBytes(StandardCharsets.UTF_8);
        try {
            // The channel stays registered (non-blocking): a few tries on loopback, bounded, then give up.
            ByteBuffer b = ByteBuffer.wrap(text);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (b.hasRemaining() && System.nanoTime() < deadline) {
                if (sc.ch.write(b) == 0) {
                    Thread.sleep(1);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException | RuntimeException e) {
            Log.trace(Log.Subsys.NET, rank, "status client went away: " + e);
        } finally {
            ControlChannel.closeQuietly(sc.ch);
        }
    }

    private RankState[] onlySelf() {
        RankState[] s = new RankState[size];
        s[rank] = dumps.self();
        return s;
    }

    private int[] selfHow() {
        int[] h = new int[size];
        Arrays.fill(h, ControlWire.HOW_SILENT);
        h[rank] = ControlWire.HOW_ANSWERED;
        return h;
    }

    /** Closes every client and the listener and deletes the status file (shutdown). */
    void close() {
        for (Client sc : clients) {
            ControlChannel.closeQuietly(sc.ch);
        }
        clients.clear();
        ControlChannel.closeQuietly(server);
        try {
            Files.deleteIfExists(file);
        } catch (IOException ignored) {
            // a stale status file names a dead pid; jccl status skips it
        }
    }
}
