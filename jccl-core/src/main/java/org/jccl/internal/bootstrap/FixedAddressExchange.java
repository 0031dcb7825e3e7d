package org.jccl.internal.bootstrap;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.jccl.Config;
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

    /**
     * @param root the resolved address
     * @param given how the user or launcher wrote it ("MASTER_ADDR:MASTER_PORT=node0:29500"), alike on every rank
     * @param alsoSelectedInterface whether rank 0 also listens on the interface jccl selects
     */
    public FixedAddressExchange(InetSocketAddress root, String given, boolean alsoSelectedInterface) {
        this.root = Objects.requireNonNull(root, "root");
        this.given = Objects.requireNonNull(given, "given");
        this.alsoSelectedInterface = alsoSelectedInterface;
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

    @Override
    public Published lookup(Config config, long deadlineNanos) {
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
