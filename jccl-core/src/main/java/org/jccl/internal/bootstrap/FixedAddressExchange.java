package org.jccl.internal.bootstrap;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import java.util.concurrent.TimeUnit;
import org.jccl.internal.net.Interfaces;

/**
 * The root address every rank already knows ({@code JCCL_COMM_ID}, {@code MASTER_ADDR}:{@code
 * MASTER_PORT}, a {@code JcclId}): nothing is published. Rank 0 binds that port on the address the
 * name resolves to, and also on the interface jccl selects ({@code JCCL_SOCKET_IFNAME} rules), so
 * ranks on other hosts reach it even where rank 0's host resolves its own name to a loopback
 * address (Debian's /etc/hosts maps the host name to 127.0.1.1).
 */
public final class FixedAddressExchange implements RootExchange {

    /** Possibly unresolved (a name that did not resolve yet when the environment was read); see {@link #resolved}. */
    private volatile InetSocketAddress root;
    /** How the address was given, e.g. "JCCL_COMM_ID=node0:29500"; also the job key. */
    private final String given;
    private final boolean alsoSelectedInterface;
    /** The host as written (a name or a literal address), or null when unknown. */
    private final String hostText;

    /**
     * @param root the address, resolved or not yet (then resolved when needed, until the init deadline)
     * @param given how the user or launcher wrote it ("MASTER_ADDR:MASTER_PORT=node0:29500"), alike on every rank
     * @param alsoSelectedInterface whether rank 0 also listens on the interface jccl selects
     */
    public FixedAddressExchange(InetSocketAddress root, String given, boolean alsoSelectedInterface) {
        this(root, given, alsoSelectedInterface, null);
    }

    /**
     * @param hostText the host as written ("node0", "10.0.0.1"), for the check that a rank does not
     *        resolve another host's name to a loopback address; null skips it
     */
    public FixedAddressExchange(InetSocketAddress root, String given, boolean alsoSelectedInterface, String hostText) {
        this.root = Objects.requireNonNull(root, "root");
        this.given = Objects.requireNonNull(given, "given");
        this.alsoSelectedInterface = alsoSelectedInterface;
        this.hostText = hostText;
    }

    /** The address every rank connects to (unresolved while its name does not resolve yet). */
    public InetSocketAddress root() {
        return root;
    }

    /**
     * The root address, resolving its name again (backing off up to 1 s) until {@code deadlineNanos}
     * when it did not resolve before.
     *
     * @throws JcclTimeoutException when the name still does not resolve at the deadline
     */
    private InetSocketAddress resolved(Config config, long deadlineNanos) {
        InetSocketAddress r = root;
        if (!r.isUnresolved()) {
            return r;
        }
        long backoff = 50;
        long nextLog = System.nanoTime();
        while (true) {
            try {
                r = new InetSocketAddress(InetAddress.getByName(r.getHostString()), r.getPort());
                root = r;
                return r;
            } catch (java.net.UnknownHostException e) {
                long now = System.nanoTime();
                if (now - deadlineNanos >= 0) {
                    throw new JcclTimeoutException("the name '" + r.getHostString() + "' of rank 0's host (" + given + ") did not resolve"
                            + " within " + Settings.INIT_TIMEOUT.getDuration(config).toSeconds() + " s (JCCL_INIT_TIMEOUT): " + e.getMessage()
                            + "; check the name (`getent hosts " + r.getHostString() + "`); on Kubernetes a headless Service publishes a"
                            + " pod's name only while it runs, and only once it is ready unless the Service sets"
                            + " publishNotReadyAddresses: true (docs/DEPLOY.md, \"Kubernetes\")");
                }
                if (now >= nextLog) {
                    Log.info(Log.Subsys.BOOTSTRAP, -1, "'" + r.getHostString() + "' (" + given + ") does not resolve yet; retrying until the"
                            + " init deadline (JCCL_INIT_TIMEOUT)");
                    nextLog = now + TimeUnit.SECONDS.toNanos(10);
                }
                try {
                    Thread.sleep(Math.max(1, Math.min(backoff, TimeUnit.NANOSECONDS.toMillis(deadlineNanos - now))));
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new JcclException(ErrorCode.ABORTED, "interrupted while resolving " + r.getHostString(), ie);
                }
                backoff = Math.min(1_000, backoff * 2);
            }
        }
    }

    @Override
    public String describe() {
        return given;
    }

    @Override
    public List<InetSocketAddress> bindAddresses(Config config) {
        List<InetSocketAddress> out = new ArrayList<>();
        InetSocketAddress root = this.root;
        if (root.isUnresolved()) {
            // Rank 0's own name: it resolves from /etc/hosts on its own host, or never (BootstrapRoot says so).
            try {
                root = resolved(config, System.nanoTime() + TimeUnit.SECONDS.toNanos(2));
            } catch (JcclTimeoutException e) {
                return List.of(root);
            }
        }
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
     * @throws ConfigException when the root is given by the name of another host that this host
     *         resolves to a loopback address ({@link #otherHostOnLoopback}): this rank could never
     *         reach rank 0 there; the message names the host's name resolution and the fix
     */
    @Override
    public Published lookup(Config config, long deadlineNanos) {
        InetSocketAddress root = resolved(config, deadlineNanos);
        if (hostText != null && root.getAddress().isLoopbackAddress()) {
            String me = thisHostName();
            if (otherHostOnLoopback(hostText, root.getAddress(), me, resolve(me), resolve("localhost"))) {
                throw new ConfigException(given + ": this host (" + me + ") resolves '" + hostText + "', the name of another host, to "
                        + root.getAddress().getHostAddress() + ", a loopback address, so this rank could never reach rank 0 there."
                        + " Fix this host's name resolution (see `getent hosts " + hostText + "`: an /etc/hosts copied from " + hostText
                        + " maps its name to 127.0.1.1), or give an address of rank 0's host that the other hosts reach"
                        + " (torchrun --master_addr / --rdzv_endpoint, MASTER_ADDR, JCCL_COMM_ID)");
            }
        }
        return published();
    }

    /**
     * Whether {@code name}, which this host resolves to the loopback address {@code resolved}, names
     * another host: not a literal address, not one of {@code localhost}'s addresses (127.0.0.1, ::1:
     * "this host", whatever the name), not this host's own name (first labels compared) nor an alias
     * of an address this host's name resolves to. Debian maps a host's own name to 127.0.1.1, so on
     * rank 0's host the name is fine; elsewhere it is a broken (e.g. copied) /etc/hosts.
     */
    public static boolean otherHostOnLoopback(String name, InetAddress resolved, String thisHost, List<InetAddress> thisHostAddrs,
            List<InetAddress> localhostAddrs) {
        if (name == null || thisHost == null || !resolved.isLoopbackAddress() || isLiteral(name) || localhostAddrs.contains(resolved)) {
            return false;
        }
        if (firstLabel(name).equalsIgnoreCase(firstLabel(thisHost))) {
            return false;
        }
        return !thisHostAddrs.contains(resolved);
    }

    private static boolean isLiteral(String h) {
        return h.indexOf(':') >= 0 || h.matches("[0-9.]+");
    }

    private static String firstLabel(String h) {
        int dot = h.indexOf('.');
        return dot > 0 ? h.substring(0, dot) : h;
    }

    /** This host's name (its UTS name on Linux), or null when unknown. */
    static String thisHostName() {
        try {
            String h = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/sys/kernel/hostname")).strip();
            if (!h.isEmpty()) {
                return h;
            }
        } catch (java.io.IOException | RuntimeException e) {
            // not Linux: fall through
        }
        String env = System.getenv("HOSTNAME");
        return env == null || env.isBlank() ? null : env.strip();
    }

    private static List<InetAddress> resolve(String name) {
        if (name == null) {
            return List.of();
        }
        try {
            return List.of(InetAddress.getAllByName(name));
        } catch (java.net.UnknownHostException e) {
            return List.of();
        }
    }

    private Published published() {
        return new Published(List.of(root), null, null, given);
    }

    @Override
    public String toString() {
        return "FixedAddressExchange[" + given + " -> " + BootstrapWire.hostPort(root) + "]";
    }
}
