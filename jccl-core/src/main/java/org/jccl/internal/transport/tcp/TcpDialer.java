package org.jccl.internal.transport.tcp;

import static org.jccl.internal.transport.tcp.TcpEndpoint.remainingMillis;
import static org.jccl.internal.transport.tcp.TcpSockets.closeQuietly;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.ConnectException;
import java.net.Inet6Address;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Handshake;
import org.jccl.internal.net.Tls;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.TransportContext;

/**
 * The lower rank's side of a pair: opens the sockets of a connection to the peer's listener,
 * retrying refused or unanswered connects with a growing pause until {@code JCCL_CONNECT_TIMEOUT},
 * and proves the secret on each with the authenticated handshake, whose hello names the
 * communicator, this rank, the socket's index and the checksum flag. Runs on the thread that
 * called {@link TcpEndpoint#connect}.
 */
final class TcpDialer {

    /** First and largest pause between refused connection attempts. */
    private static final long BACKOFF_START_MS = 10;
    private static final long BACKOFF_MAX_MS = 1000;

    private final TcpEndpoint endpoint;
    private final TransportContext ctx;
    private final int rank;
    /** Sockets this rank opens to a higher rank: per direction x 2 when split. */
    private final int nsocks;
    /** This rank's JCCL_SOCKET_SPLIT, announced in the hello (the lower rank of a pair decides). */
    private final boolean split;
    /** This rank's JCCL_CHECKSUM: what it announces in the hello (the lower rank of a pair decides). */
    private final boolean checksum;
    /** TLS on every data socket (JCCL_TLS), or null. */
    private final Tls tls;
    private final int socketBuffer;
    private final Duration connectTimeout;

    TcpDialer(TcpEndpoint endpoint, TransportContext ctx, TcpSettings settings) {
        this.endpoint = endpoint;
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.split = settings.split();
        this.nsocks = settings.split() ? 2 * settings.sockets() : settings.sockets();
        this.checksum = settings.checksum();
        this.tls = settings.tls();
        this.socketBuffer = settings.socketBuffer();
        this.connectTimeout = settings.connectTimeout();
    }

    /** Opens, authenticates and returns the connection's {@code nsocks} sockets to {@code peer}; none stays open on failure. */
    WireChannel[] initiate(PeerInfo peer, InetSocketAddress remote) throws IOException {
        long deadline = System.nanoTime() + connectTimeout.toNanos();
        WireChannel[] sockets = new WireChannel[nsocks];
        boolean ok = false;
        try {
            for (int i = 0; i < nsocks; i++) {
                sockets[i] = openSocket(peer, remote, i, deadline);
            }
            ok = true;
            return sockets;
        } finally {
            if (!ok) {
                for (WireChannel ch : sockets) {
                    closeQuietly(ch);
                }
            }
        }
    }

    private WireChannel openSocket(PeerInfo peer, InetSocketAddress remote, int index, long deadline) throws IOException {
        String target = peer.describe() + " at " + TcpWire.format(remote);
        long backoff = BACKOFF_START_MS;
        int attempts = 0;
        SocketChannel ch;
        while (true) {
            endpoint.checkStopping(peer);
            attempts++;
            ch = SocketChannel.open(remote.getAddress() instanceof Inet6Address ? StandardProtocolFamily.INET6 : StandardProtocolFamily.INET);
            try {
                TcpSockets.configure(ch, socketBuffer);
                long left = remainingMillis(deadline);
                ch.socket().connect(remote, (int) Math.max(1, Math.min(Integer.MAX_VALUE, left)));
                break;
            } catch (ConnectException | NoRouteToHostException | SocketTimeoutException e) {
                // Refused or unanswered: the peer may be restarting its listener, or its SYN queue overflowed. Retry.
                closeQuietly(ch);
                long left = remainingMillis(deadline);
                if (left <= backoff) {
                    throw new JcclTimeoutException("rank " + rank + " could not connect to " + target + " over TCP within "
                            + connectTimeout.toSeconds() + " s (" + Settings.CONNECT_TIMEOUT.name() + "; " + attempts
                            + " attempts, last: " + e.getMessage() + "). The peer exited, or its address is not reachable from"
                            + " this host (firewall, or " + Settings.SOCKET_IFNAME.name() + " chose an interface other hosts"
                            + " cannot route to)", e);
                }
                Log.trace(Log.Subsys.NET, rank, "connect to " + target + " (socket " + index + "): " + e.getMessage()
                        + "; attempt " + attempts + ", retrying in " + backoff + " ms, " + left + " ms left");
                sleep(backoff, peer);
                backoff = Math.min(BACKOFF_MAX_MS, backoff * 2);
            } catch (IOException e) {
                closeQuietly(ch);
                throw new IOException("rank " + rank + " could not connect to " + target + " over TCP: " + e.getMessage(), e);
            }
        }
        try {
            long left = Math.max(1000, remainingMillis(deadline));
            WireChannel w = Tls.wrap(tls, ch, true, target);
            Handshake.connect(w, ctx.secret(), Handshake.Kind.DATA,
                    TcpWire.hello(ctx.commId(), rank, index, nsocks, (checksum ? TcpWire.FLAG_CHECKSUM : 0) | (split ? TcpWire.FLAG_SPLIT : 0)),
                    Duration.ofMillis(left));
            ch.configureBlocking(false);
            return w;
        } catch (JcclException e) {
            closeQuietly(ch);
            String msg = "TCP connection from rank " + rank + " to " + peer.describe() + ": " + e.getMessage();
            throw e.code() == ErrorCode.TIMEOUT ? new JcclTimeoutException(msg, e) : new JcclException(e.code(), msg, e);
        } catch (IOException e) {
            closeQuietly(ch);
            throw new IOException("TCP handshake from rank " + rank + " with " + target + " failed: " + e.getMessage()
                    + " (the peer exited or dropped the connection; its log says why)", e);
        }
    }

    private void sleep(long millis, PeerInfo peer) throws IOException {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("rank " + rank + " was interrupted while connecting to " + peer.describe() + " over TCP");
        }
    }
}
