package org.jccl.internal.bootstrap;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.Interfaces;

/**
 * Rank 0's root addresses through the TCPStore that torchrun's agent serves at
 * {@code MASTER_ADDR:MASTER_PORT} ({@code TORCHELASTIC_USE_AGENT_STORE=True}: torch 1.13's static
 * rendezvous, and in newer torch the c10d rendezvous too): what ProcessGroupNCCL does with NCCL's unique
 * id. Rank 0 binds its root on a free port (on the interface jccl selects, and on MASTER_ADDR's
 * address when that is one of this host's), then sets one key; the other ranks wait for it. The
 * agent's store port itself is never bound, so nothing collides with it.
 *
 * <p>The key is unique to the job run, the restart and the initialisation:
 * {@code jccl/<TORCHELASTIC_RUN_ID>/<TORCHELASTIC_RESTART_COUNT>/<n>/root}, where n counts this
 * process's initialisations through the store (every rank initialises in the same order). The
 * value is text: {@code jccl1 host=<rank 0's host id> addrs=<host:port>,... nonce=<hex>}. The store
 * does NOT carry the job secret: anyone who can reach the store can read it (see docs/DEPLOY.md,
 * "Secrets and trust"); the secret comes from JCCL_AUTH_TOKEN or the per-user secret file.
 */
public final class TorchStoreExchange implements RootExchange {

    /**
     * Initialisations of this process through a torch store, per rank, for the key: a process is one
     * rank under torchrun; tests run several ranks as threads of one JVM, each counting its own.
     */
    private static final java.util.concurrent.ConcurrentHashMap<Integer, AtomicInteger> INITS = new java.util.concurrent.ConcurrentHashMap<>();
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final String VERSION = "jccl1";

    private final InetSocketAddress store;
    private final String storeGiven;
    private final String runId;
    private final String restart;
    private final int rank;
    private String key;
    private TcpStoreClient client;

    /**
     * @param store where the agent's store listens (MASTER_ADDR:MASTER_PORT, resolved)
     * @param storeGiven how it was given, for messages ("node0:29500")
     * @param runId TORCHELASTIC_RUN_ID
     * @param restart TORCHELASTIC_RESTART_COUNT
     * @param rank this process's rank (the key counts initialisations per rank)
     */
    public TorchStoreExchange(InetSocketAddress store, String storeGiven, String runId, String restart, int rank) {
        this.rank = rank;
        this.store = Objects.requireNonNull(store, "store");
        this.storeGiven = Objects.requireNonNull(storeGiven, "storeGiven");
        this.runId = runId == null || runId.isBlank() ? "none" : runId.trim();
        this.restart = restart == null || restart.isBlank() ? "0" : restart.trim();
    }

    @Override
    public String describe() {
        return "torchrun's TCPStore at MASTER_ADDR:MASTER_PORT=" + storeGiven + (key != null ? " (key " + key + ")" : "");
    }

    /** The store's address. */
    public InetSocketAddress store() {
        return store;
    }

    private String key(int rank) {
        if (key == null) {
            key = "jccl/" + runId + "/" + restart + "/" + INITS.computeIfAbsent(rank, r -> new AtomicInteger()).getAndIncrement() + "/root";
        }
        return key;
    }

    @Override
    public List<InetSocketAddress> bindAddresses(Config config) {
        List<InetSocketAddress> out = new ArrayList<>();
        InetAddress selected = Interfaces.selectAddress(config);
        out.add(new InetSocketAddress(selected, 0));
        InetAddress master = store.getAddress();
        if (master != null && !master.equals(selected) && isLocal(master)) {
            out.add(new InetSocketAddress(master, 0));
        }
        return out;
    }

    private static boolean isLocal(InetAddress a) {
        if (a.isLoopbackAddress()) {
            return true;
        }
        try {
            return NetworkInterface.getByInetAddress(a) != null;
        } catch (SocketException e) {
            return false;
        }
    }

    @Override
    public Published publish(List<InetSocketAddress> listening, byte[] secret, String hostId, Config config, long deadlineNanos) {
        if (secret != null) {
            throw new IllegalArgumentException("torchrun's TCPStore must not carry the job secret");
        }
        String k = key(0);
        byte[] nonce = new byte[8];
        RANDOM.nextBytes(nonce);
        String value = VERSION + " host=" + hostId + " addrs=" + String.join(",", listening.stream().map(BootstrapWire::hostPort).toList())
                + " nonce=" + HexFormat.of().formatHex(nonce);
        TcpStoreClient c = client(deadlineNanos);
        try {
            c.set(k, value.getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new JcclException(ErrorCode.PEER_FAILED, "rank 0 could not publish its bootstrap address in " + describe() + ": " + e
                    + "; torchrun's agent serves the store for as long as the job runs: is it still running?", e);
        }
        Log.info(Log.Subsys.BOOTSTRAP, 0, "published the bootstrap root " + listening + " in " + describe() + " (torch store dialect "
                + c.dialect() + ")");
        return parse(k, value, "rank 0's own value");
    }

    @Override
    public Published lookup(Config config, long deadlineNanos) {
        String k = key(rank);
        TcpStoreClient c = client(deadlineNanos);
        byte[] v;
        try {
            v = c.waitAndGet(k, deadlineNanos);
        } catch (IOException e) {
            throw new JcclException(ErrorCode.PEER_FAILED, "lost the connection to " + describe() + " while waiting for rank 0's bootstrap"
                    + " address: " + e + "; torchrun's agent serves the store for as long as the job runs: is it still running?", e);
        }
        if (v == null) {
            throw new JcclTimeoutException("waited " + Settings.INIT_TIMEOUT.getDuration(config).toSeconds()
                    + " s (JCCL_INIT_TIMEOUT) for rank 0 to publish its bootstrap address in " + describe() + ": is rank 0 running"
                    + " (see its log)? Every rank must initialise jccl in the same order, with the same TORCHELASTIC_RUN_ID and"
                    + " TORCHELASTIC_RESTART_COUNT");
        }
        return parse(k, new String(v, StandardCharsets.UTF_8), describe());
    }

    private TcpStoreClient client(long deadlineNanos) {
        if (client == null) {
            client = TcpStoreClient.connect(store, describe(), deadlineNanos);
        }
        return client;
    }

    /** Reads a published value; the job key is the store key with the value. */
    static Published parse(String key, String value, String from) {
        String host = null;
        List<InetSocketAddress> addrs = new ArrayList<>();
        String[] parts = value.trim().split(" ");
        if (parts.length == 0 || !parts[0].equals(VERSION)) {
            throw new JcclException(ErrorCode.PROTOCOL, "the value of " + key + " from " + from + " is not a jccl root address ('"
                    + shorten(value) + "'): is another jccl version, or another program, using the key?");
        }
        try {
            for (String p : parts) {
                if (p.startsWith("host=")) {
                    host = p.substring(5);
                } else if (p.startsWith("addrs=")) {
                    for (String a : p.substring(6).split(",")) {
                        addrs.add(hostPort(a));
                    }
                }
            }
        } catch (UnknownHostException | RuntimeException e) {
            throw new JcclException(ErrorCode.PROTOCOL, "the value of " + key + " from " + from + " has an address that cannot be read ('"
                    + shorten(value) + "'): " + e, e);
        }
        if (addrs.isEmpty()) {
            throw new JcclException(ErrorCode.PROTOCOL, "the value of " + key + " from " + from + " names no address ('"
                    + shorten(value) + "')");
        }
        return new Published(addrs, null, host, key + "=" + value.trim());
    }

    /** "10.0.0.1:4000", "[fe80::1]:4000": literal addresses only, never a name to resolve. */
    private static InetSocketAddress hostPort(String text) throws UnknownHostException {
        int colon = text.lastIndexOf(':');
        String h = text.substring(0, colon);
        if (h.startsWith("[") && h.endsWith("]")) {
            h = h.substring(1, h.length() - 1);
        }
        if (!h.isEmpty() && !Character.isDigit(h.charAt(0)) && h.indexOf(':') < 0) {
            throw new UnknownHostException("not a literal address: " + h);
        }
        return new InetSocketAddress(InetAddress.getByName(h), Integer.parseInt(text.substring(colon + 1)));
    }

    private static String shorten(String s) {
        return s.length() > 200 ? s.substring(0, 200) + "..." : s;
    }

    @Override
    public void close() {
        if (client != null) {
            client.close();
            client = null;
        }
    }

    @Override
    public String toString() {
        return "TorchStoreExchange[" + describe() + "]";
    }
}
