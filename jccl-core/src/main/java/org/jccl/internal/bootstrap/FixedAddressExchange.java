package org.jccl.internal.bootstrap;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Interfaces;

/**
 * The root address every rank already knows ({@code JCCL_COMM_ID}, {@code MASTER_ADDR}:{@code
 * MASTER_PORT}, a {@code JcclId}): nothing is published. Rank 0 binds that port on the address the
 * name resolves to, and also on the interface jccl selects ({@code JCCL_SOCKET_IFNAME} rules), so
 * ranks on other hosts reach it even where rank 0's host resolves its own name to a loopback
 * address (Debian's /etc/hosts maps the host name to 127.0.1.1).
 */
public final class FixedAddressExchange implements RootExchange {

    private final InetSocketAddress root;
    /** How the address was given, e.g. "JCCL_COMM_ID=node0:29500"; also the job key. */
    private final String given;
    private final boolean alsoSelectedInterface;
    /** Why this rank knows it is not on rank 0's host (e.g. torchrun's GROUP_RANK), or null when it cannot tell. */
    private final String elsewhere;

    /**
     * @param root the resolved address
     * @param given how the user or launcher wrote it ("MASTER_ADDR:MASTER_PORT=node0:29500"), alike on every rank
     * @param alsoSelectedInterface whether rank 0 also listens on the interface jccl selects
     */
    public FixedAddressExchange(InetSocketAddress root, String given, boolean alsoSelectedInterface) {
        this(root, given, alsoSelectedInterface, null);
    }

    /**
     * @param elsewhere why this rank knows that rank 0 runs on another host ("this is torchrun node GROUP_RANK=1, rank 0 runs
     *        on node 0"), or null when it cannot tell; with a loopback root address that is an error at once
     */
    public FixedAddressExchange(InetSocketAddress root, String given, boolean alsoSelectedInterface, String elsewhere) {
        this.root = Objects.requireNonNull(root, "root");
        this.given = Objects.requireNonNull(given, "given");
        this.alsoSelectedInterface = alsoSelectedInterface;
        this.elsewhere = elsewhere;
    }

    /** The address every rank connects to. */
    public InetSocketAddress root() {
        return root;
    }

    @Override
    public String describe() {
        return given;
    }

    @Override
    public List<InetSocketAddress> bindAddresses(Config config) {
        List<InetSocketAddress> out = new ArrayList<>();
        out.add(root);
        if (alsoSelectedInterface && !root.getAddress().isAnyLocalAddress()) {
            InetAddress selected = Interfaces.selectAddress(config);
            if (!selected.equals(root.getAddress())) {
                out.add(new InetSocketAddress(selected, root.getPort()));
            }
        }
        return out;
    }

    @Override
    public Published publish(List<InetSocketAddress> listening, byte[] secret, String hostId, Config config, long deadlineNanos) {
        return published();
    }

    /**
     * @throws ConfigException when the address is a loopback address and this rank knows that rank 0
     *         runs on another host: it could never reach the root; the message names the host's name resolution
     */
    @Override
    public Published lookup(Config config, long deadlineNanos) {
        if (elsewhere != null && root.getAddress().isLoopbackAddress()) {
            String name = given.substring(given.indexOf('=') + 1);
            int colon = name.lastIndexOf(':');
            String host = colon > 0 ? name.substring(0, colon) : name;
            throw new ConfigException(given + " resolves to " + root.getAddress().getHostAddress() + " on this host (" + Log.host()
                    + "), a loopback address, but rank 0 runs on another host (" + elsewhere + "), so this rank could never reach it."
                    + (root.getAddress().getHostAddress().equals(host) ? " Give the address of rank 0's host that the other hosts reach"
                    : " This host's name resolution maps '" + host + "' to a loopback address (see `getent hosts " + host
                    + "`; /etc/hosts often maps a host's own name to 127.0.1.1): fix it, or give the address of rank 0's host that the"
                    + " other hosts reach") + " (torchrun --master_addr or --rdzv_endpoint, MASTER_ADDR, JCCL_COMM_ID)");
        }
        return published();
    }

    private Published published() {
        return new Published(List.of(root), null, null, given);
    }

    @Override
    public String toString() {
        return "FixedAddressExchange[" + given + " -> " + BootstrapWire.hostPort(root) + "]";
    }
}
