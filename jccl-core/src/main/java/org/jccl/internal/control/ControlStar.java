package org.jccl.internal.control;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.control.ControlChannel.Conn;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.net.Tls;
import org.jccl.internal.net.WireChannel;

/**
 * Sets up the control channel's star: the hub (rank 0) listens where the data transports bind and
 * accepts one authenticated connection from every other rank; each other rank connects to the
 * address the hub published ({@link ControlPlane#ADDRESS_KEY}). Blocking, bounded by
 * {@code JCCL_CONNECT_TIMEOUT}; runs once, on the thread that creates the communicator.
 */
final class ControlStar {
    private final ControlPlane.Params p;
    private final Peers peers;
    private final Tls tls;
    /** Filled as connections are made: index = peer rank at the hub, 0 elsewhere. */
    private final Conn[] conns;
    /** Why the hub dropped the last connection it could not admit, for the message when a rank never arrives. */
    private String lastDrop;

    ControlStar(ControlPlane.Params p, Peers peers, Tls tls, Conn[] conns) {
        this.p = p;
        this.peers = peers;
        this.tls = tls;
        this.conns = conns;
    }

    /** The hub's listening socket, bound where the data transports bind ({@code JCCL_SOCKET_IFNAME}); rank 0 only. */
    static ServerSocketChannel listen(Config config) throws IOException {
        InetAddress bind = Interfaces.selectAddress(config);
        ServerSocketChannel s = ServerSocketChannel.open();
        try {
            s.bind(new InetSocketAddress(bind, 0), 1024);
            return s;
        } catch (IOException e) {
            s.close();
            throw new IOException("cannot listen for control connections on " + bind.getHostAddress() + ": " + e.getMessage(), e);
        }
    }

    /** The address published for a hub listener: ip bytes then a 16-bit port. */
    static byte[] address(ServerSocketChannel s) throws IOException {
        InetSocketAddress a = (InetSocketAddress) s.getLocalAddress();
        byte[] ip = a.getAddress().getAddress();
        return ByteBuffer.allocate(ip.length + 2).put(ip).putShort((short) a.getPort()).array();
    }

    static InetSocketAddress decode(byte[] b) throws IOException {
        if (b == null || (b.length != 6 && b.length != 18)) {
            throw new IOException("control address of " + (b == null ? 0 : b.length) + " bytes (expected 6 or 18)");
        }
        byte[] ip = Arrays.copyOf(b, b.length - 2);
        int port = ((b[b.length - 2] & 0xFF) << 8) | (b[b.length - 1] & 0xFF);
        return new InetSocketAddress(InetAddress.getByAddress(ip), port);
    }

    /** Connects this rank's part of the star: the hub accepts on {@code listener}, the others connect. */
    void connect(ServerSocketChannel listener, Duration timeout) throws IOException {
        if (p.rank() == 0) {
            acceptAll(listener, timeout);
        } else {
            connectHub(timeout);
        }
    }

    /** ", over TLS (TLSv1.3 TLS_AES_...)" once the connections run TLS, else "". */
    String security() {
        for (Conn c : conns) {
            if (c != null && c.w instanceof org.jccl.internal.net.TlsChannel t) {
                return ", over TLS (" + t.describeSession() + ")";
            }
        }
        return "";
    }

    private byte[] hello(int r) {
        return ByteBuffer.allocate(p.commId().length + 4).put(p.commId()).putInt(r).array();
    }

    private void acceptAll(ServerSocketChannel listener, Duration timeout) throws IOException {
        int size = p.size();
        long deadline = System.nanoTime() + timeout.toNanos();
        listener.configureBlocking(false);
        try (Selector sel = Selector.open()) {
            listener.register(sel, SelectionKey.OP_ACCEPT);
            int missing = size - 1;
            while (missing > 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    List<Integer> absent = new ArrayList<>();
                    for (int r = 1; r < size; r++) {
                        if (conns[r] == null) {
                            absent.add(r);
                        }
                    }
                    throw new JcclTimeoutException("rank 0: ranks " + absent + " did not open their control connection to communicator "
                            + p.idShort() + " within " + timeout.toSeconds() + " s (" + Settings.CONNECT_TIMEOUT.name() + ")"
                            + (lastDrop != null ? "; the last connection dropped: " + lastDrop : ""));
                }
                sel.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                sel.selectedKeys().clear();
                SocketChannel ch;
                while ((ch = listener.accept()) != null) {
                    int r = admit(ch);
                    if (r > 0) {
                        missing--;
                    }
                }
            }
        }
    }

    /** Runs the handshake on an accepted socket; returns the rank it belongs to, or -1 (dropped, logged). */
    private int admit(SocketChannel ch) {
        try {
            WireChannel w = Tls.wrap(tls, ch, false, null);
            byte[] hello = Handshake.accept(w, p.secret(), Handshake.Kind.CONTROL, Duration.ofSeconds(5));
            ByteBuffer h = ByteBuffer.wrap(hello);
            byte[] id = new byte[p.commId().length];
            if (hello.length != id.length + 4) {
                throw new JcclException(ErrorCode.PROTOCOL, "control hello of " + hello.length + " bytes");
            }
            h.get(id);
            int r = h.getInt();
            if (!Arrays.equals(id, p.commId())) {
                throw new JcclException(ErrorCode.PROTOCOL, "control connection for another communicator");
            }
            if (r < 1 || r >= p.size() || conns[r] != null) {
                throw new JcclException(ErrorCode.PROTOCOL, "control connection claims rank " + r + " (taken or outside [1, " + p.size() + "))");
            }
            conns[r] = new Conn(r, peers.describe(r), w);
            return r;
        } catch (IOException | JcclException e) {
            lastDrop = e.getMessage();
            Log.warn(Log.Subsys.NET, p.rank(), "comm " + p.idShort() + ": control connection dropped: " + e.getMessage());
            ControlChannel.closeQuietly(ch);
            return -1;
        }
    }

    private void connectHub(Duration timeout) throws IOException {
        InetSocketAddress hub = decode(peers.get(0).addresses().get(ControlPlane.ADDRESS_KEY));
        long deadline = System.nanoTime() + timeout.toNanos();
        IOException last = null;
        while (System.nanoTime() < deadline) {
            SocketChannel ch = SocketChannel.open();
            try {
                ch.socket().connect(hub, (int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
                // A TLS failure (untrusted certificate, a hub without TLS) is a JcclException naming TLS and the hub: not retried.
                WireChannel w = Tls.wrap(tls, ch, true, "the control channel of " + peers.describe(0) + " at "
                        + hub.getAddress().getHostAddress() + ":" + hub.getPort());
                Handshake.connect(w, p.secret(), Handshake.Kind.CONTROL, hello(p.rank()), Duration.ofSeconds(10));
                conns[0] = new Conn(0, peers.describe(0), w);
                return;
            } catch (IOException e) {
                ControlChannel.closeQuietly(ch);
                last = e;
                try {
                    Thread.sleep(50);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while connecting to rank 0", ie);
                }
            } catch (RuntimeException e) {
                ControlChannel.closeQuietly(ch);
                throw e;
            }
        }
        throw new IOException("cannot reach " + peers.describe(0) + " at " + hub + " within " + timeout.toSeconds() + " s ("
                + Settings.CONNECT_TIMEOUT.name() + ")" + (last != null ? ": " + last.getMessage() : ""), last);
    }
}
