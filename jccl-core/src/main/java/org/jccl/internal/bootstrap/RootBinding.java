package org.jccl.internal.bootstrap;

import java.io.IOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.StandardSocketOptions;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.UnresolvedAddressException;
import java.util.ArrayList;
import java.util.List;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ResourceException;
import org.jccl.internal.net.Interfaces;

/**
 * The listening sockets of a {@link BootstrapRoot}: binds the required address and, on the same
 * port, the extra ones, and turns a failed bind into the error that says why (a name that does not
 * resolve, an address of another host, a port someone holds, no descriptors left).
 */
final class RootBinding {

    /** Listen backlog: a whole job's ranks may connect within a millisecond. */
    static final int BACKLOG = 1024;

    private RootBinding() {
    }

    /**
     * The sockets bound.
     *
     * @param servers the listening sockets, the required address's first
     * @param local where the first is bound (may be a wildcard)
     * @param reported the addresses ranks connect to: a wildcard replaced by the address {@code JCCL_SOCKET_IFNAME} selects
     * @param skipped extra addresses that could not be bound, each with why
     */
    record Bound(List<ServerSocketChannel> servers, InetSocketAddress local, List<InetSocketAddress> reported, List<String> skipped) {
    }

    /** How {@code bind} is named in messages: as asked, even when it does not resolve. */
    static String asked(InetSocketAddress bind) {
        return bind.isUnresolved() ? bind.getHostString() + ":" + bind.getPort() : BootstrapWire.hostPort(bind);
    }

    /**
     * Binds the first of {@code binds} (its failure is the error) and each further one on the same
     * port where it can; see {@link BootstrapRoot#start(List, byte[], Config)}.
     *
     * @throws ConfigException when the address cannot be resolved or is not one of this host's
     * @throws ResourceException when the port is in use or sockets are exhausted
     */
    static Bound bind(List<InetSocketAddress> binds, Config config) {
        InetSocketAddress bind = binds.getFirst();
        String asked = asked(bind);
        List<ServerSocketChannel> servers = new ArrayList<>();
        try {
            ServerSocketChannel first = listen(bind);
            servers.add(first);
            InetSocketAddress local = (InetSocketAddress) first.getLocalAddress();
            InetSocketAddress reported = local.getAddress().isAnyLocalAddress()
                    ? new InetSocketAddress(Interfaces.selectAddress(config), local.getPort()) : local;
            List<InetSocketAddress> reportedAll = new ArrayList<>(List.of(reported));
            List<String> skipped = new ArrayList<>();
            if (!local.getAddress().isAnyLocalAddress()) {
                for (InetSocketAddress extra : binds.subList(1, binds.size())) {
                    InetSocketAddress at = new InetSocketAddress(extra.getAddress(), local.getPort());
                    if (extra.isUnresolved() || reportedAll.contains(at)) {
                        continue;
                    }
                    try {
                        ServerSocketChannel s = listen(at);
                        servers.add(s);
                        reportedAll.add((InetSocketAddress) s.getLocalAddress());
                    } catch (IOException | UnresolvedAddressException e) {
                        skipped.add(BootstrapWire.hostPort(at) + " (" + e.getMessage() + ")");
                    }
                }
            }
            return new Bound(servers, local, reportedAll, skipped);
        } catch (UnresolvedAddressException e) {
            closeAll(servers, null);
            throw new ConfigException("cannot start the bootstrap root on " + asked + ": the host name cannot be resolved;"
                    + " set JCCL_COMM_ID / MASTER_ADDR to a name or address of rank 0's host", e);
        } catch (BindException e) {
            closeAll(servers, null);
            if (!isLocal(bind.getAddress())) {
                throw new ConfigException("cannot start the bootstrap root on " + asked + ": " + bind.getAddress().getHostAddress()
                        + " is not an address of this host (" + e.getMessage() + "); rank 0 (the root) must run on the host that"
                        + " JCCL_COMM_ID / MASTER_ADDR names, or set it to one of this host's addresses", e);
            }
            throw new ResourceException("cannot start the bootstrap root on " + asked + ": " + e.getMessage()
                    + " (the port is held by another job, a previous run still exiting, or a launcher's own store such as"
                    + " torchrun's agent); choose another port in JCCL_COMM_ID / MASTER_PORT, or find the holder with"
                    + " `ss -ltnp 'sport = :" + bind.getPort() + "'`", e);
        } catch (IOException e) {
            closeAll(servers, null);
            throw failure(asked, e);
        }
    }

    /** The error of any other I/O failure while the root starts (a selector, a socket option). */
    static ResourceException failure(String asked, IOException e) {
        return new ResourceException("cannot start the bootstrap root on " + asked + ": " + e
                + "; check the open-file limit (ulimit -n) and that the address belongs to this host", e);
    }

    private static ServerSocketChannel listen(InetSocketAddress at) throws IOException {
        ServerSocketChannel server = ServerSocketChannel.open();
        try {
            // A fixed port (MASTER_PORT) must be reusable right after a previous job's sockets linger in TIME_WAIT.
            server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            server.bind(at, BACKLOG);
            server.configureBlocking(false);
            return server;
        } catch (IOException | RuntimeException e) {
            BootstrapRoot.closeQuietly(server, null);
            throw e;
        }
    }

    static void closeAll(List<ServerSocketChannel> servers, Selector selector) {
        for (ServerSocketChannel s : servers) {
            BootstrapRoot.closeQuietly(s, null);
        }
        BootstrapRoot.closeQuietly(null, selector);
    }

    private static boolean isLocal(InetAddress a) {
        if (a == null || a.isAnyLocalAddress() || a.isLoopbackAddress()) {
            return true;
        }
        try {
            return NetworkInterface.getByInetAddress(a) != null;
        } catch (SocketException e) {
            return true;
        }
    }
}
