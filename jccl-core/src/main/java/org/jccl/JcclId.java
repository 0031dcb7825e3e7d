package org.jccl;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;
import org.jccl.internal.bootstrap.BootstrapRoot;
import org.jccl.internal.net.Interfaces;

/**
 * The identity of a job, like {@code ncclUniqueId}: the bootstrap root's address and a 128-bit
 * secret. One process makes it with {@link #create()}, which also starts the root in that
 * process, and passes {@link #encode()} to every rank out of band; every rank then calls
 * {@link Jccl#init(JcclId, int, int, Config)}.
 *
 * <p>The secret authenticates every connection of the job: a process that does not know it
 * cannot join, read or inject data. {@link #toString()} does not reveal it; {@link #encode()} does,
 * so treat that string like a password.
 */
public final class JcclId {
    /** Length of the secret in bytes. */
    public static final int SECRET_BYTES = 16;

    private static final SecureRandom RANDOM = new SecureRandom();

    private final InetSocketAddress root;
    private final byte[] secret;

    private JcclId(InetSocketAddress root, byte[] secret) {
        this.root = Objects.requireNonNull(root, "root");
        Objects.requireNonNull(secret, "secret");
        if (secret.length != SECRET_BYTES) {
            throw new IllegalArgumentException("secret must be " + SECRET_BYTES + " bytes (32 hex digits), got " + secret.length);
        }
        this.secret = secret.clone();
    }

    /** Makes a new id and starts its bootstrap root in this process, on the interface chosen by the environment's settings. */
    public static JcclId create() {
        return create(Config.fromEnvironment());
    }

    /**
     * Makes a new id with a fresh random secret and starts its bootstrap root in this process, on
     * the interface {@code JCCL_SOCKET_IFNAME} selects (else the first non-loopback interface that is
     * up, else loopback) and an ephemeral port. The root serves one rendezvous and then stops; it
     * also stops at the init deadline ({@code JCCL_INIT_TIMEOUT}).
     */
    public static JcclId create(Config config) {
        byte[] secret = new byte[SECRET_BYTES];
        RANDOM.nextBytes(secret);
        InetAddress address = Interfaces.selectAddress(config);
        BootstrapRoot root = BootstrapRoot.start(new InetSocketAddress(address, 0), secret, config);
        return new JcclId(root.address(), secret);
    }

    /** An id for a root that another process runs (or will run) at {@code root}. */
    public static JcclId of(InetSocketAddress root, byte[] secret) {
        return new JcclId(root, secret);
    }

    /**
     * Parses {@link #encode()}'s form, {@code host:port/secrethex} ({@code [v6addr]:port/secrethex} for IPv6).
     *
     * @throws IllegalArgumentException naming what is wrong
     */
    public static JcclId parse(String text) {
        Objects.requireNonNull(text, "text");
        int slash = text.lastIndexOf('/');
        if (slash < 0) {
            throw new IllegalArgumentException("JcclId '" + redact(text) + "' has no secret: expected host:port/<32 hex digits>");
        }
        try {
            return new JcclId(parseHostPort(text.substring(0, slash), "JcclId"), parseSecret(text.substring(slash + 1), "JcclId"));
        } catch (ConfigException e) {
            throw new IllegalArgumentException(e.getMessage(), e);
        }
    }

    /**
     * Parses {@code host:port} or {@code [v6addr]:port}; names the setting in errors.
     *
     * @throws ConfigException when the text is not an address
     */
    public static InetSocketAddress parseHostPort(String text, String what) {
        String t = text.trim();
        String host;
        String port;
        if (t.startsWith("[")) {
            int close = t.indexOf(']');
            if (close < 0 || close + 1 >= t.length() || t.charAt(close + 1) != ':') {
                throw new ConfigException(what + "='" + text + "' is not an address: expected [ipv6]:port");
            }
            host = t.substring(1, close);
            port = t.substring(close + 2);
        } else {
            int colon = t.lastIndexOf(':');
            if (colon <= 0 || t.indexOf(':') != colon) {
                throw new ConfigException(what + "='" + text + "' is not an address: expected host:port (or [ipv6]:port)");
            }
            host = t.substring(0, colon);
            port = t.substring(colon + 1);
        }
        int p;
        try {
            p = Integer.parseInt(port);
        } catch (NumberFormatException e) {
            throw new ConfigException(what + "='" + text + "' has a port that is not a number");
        }
        if (p < 1 || p > 65535) {
            throw new ConfigException(what + "='" + text + "' has port " + p + ", outside 1..65535");
        }
        try {
            return new InetSocketAddress(InetAddress.getByName(host), p);
        } catch (UnknownHostException e) {
            throw new ConfigException(what + "='" + text + "': host '" + host + "' cannot be resolved", e);
        }
    }

    /**
     * Parses a secret of 32 hex digits.
     *
     * @throws ConfigException naming the setting, never echoing the value
     */
    public static byte[] parseSecret(String hex, String what) {
        String t = hex.trim();
        if (t.length() != 2 * SECRET_BYTES) {
            throw new ConfigException(what + " must be " + 2 * SECRET_BYTES + " hex digits (128 bits), got " + t.length()
                    + " characters; make one with `openssl rand -hex 16`");
        }
        try {
            return HexFormat.of().parseHex(t);
        } catch (IllegalArgumentException e) {
            throw new ConfigException(what + " must be hex digits only (0-9, a-f); make one with `openssl rand -hex 16`");
        }
    }

    /** The bootstrap root's address. */
    public InetSocketAddress rootAddress() {
        return root;
    }

    /** A copy of the secret. */
    public byte[] secret() {
        return secret.clone();
    }

    /** The secret as 32 hex digits (the value of {@code JCCL_AUTH_TOKEN}). */
    public String secretHex() {
        return HexFormat.of().formatHex(secret);
    }

    /** {@code host:port} of the root ({@code [v6]:port} for IPv6), the value of {@code JCCL_COMM_ID}. */
    public String rootHostPort() {
        String host = root.getAddress().getHostAddress();
        return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + root.getPort();
    }

    /** The transportable form, secret included: {@code host:port/secrethex}. */
    public String encode() {
        return rootHostPort() + "/" + secretHex();
    }

    private static String redact(String text) {
        return text.length() > 8 ? text.substring(0, 8) + "..." : text;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof JcclId other && root.equals(other.root) && Arrays.equals(secret, other.secret);
    }

    @Override
    public int hashCode() {
        return root.hashCode() * 31 + Arrays.hashCode(secret);
    }

    /** Shows the root address only; the secret stays out of logs. */
    @Override
    public String toString() {
        return "JcclId[root=" + rootHostPort() + ", secret=****]";
    }
}
