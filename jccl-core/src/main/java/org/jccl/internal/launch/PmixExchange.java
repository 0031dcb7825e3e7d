package org.jccl.internal.launch;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicInteger;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclId;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.bootstrap.RootExchange;
import org.jccl.internal.net.Interfaces;

/**
 * Rank 0's bootstrap root published through the launcher's PMIx server (mpirun, {@code srun
 * --mpi=pmix}): rank 0 binds an ephemeral port on the interface jccl selects, puts its addresses, its host identity and a fresh job secret under a
 * key of this job, commits; every rank joins a fence that collects the job's data; the others read
 * rank 0's value. The PMIx server serves a job's data only to that job's processes, so the channel
 * may carry the secret ({@link #carriesSecret()}).
 *
 * <p>The key is {@code jccl.root.<n>}, {@code n} counting this process's PMIx exchanges, so a second
 * {@code Jccl.init} in the same processes (every rank makes the same calls) uses a fresh key. The
 * value is one line: {@code v1;<host id>;<secret hex>;<addr>,<addr>...}.
 *
 * <p>Failures name the channel: a fence that does not complete by the init deadline (a rank never
 * called {@code Jccl.init}, or died) is a {@link JcclTimeoutException}; a rank 0 that published
 * nothing (not a jccl program of this version) or a PMIx job whose size or rank disagree with the
 * launcher's variables is an error saying so.
 */
public final class PmixExchange implements RootExchange {

    private static final AtomicInteger EXCHANGES = new AtomicInteger();
    private static final String FORMAT = "v1";

    private final Map<String, String> env;
    private final String convention;
    private final int rank;
    private final int size;
    private final String namespace;
    private String key;
    private Pmix pmix;

    /**
     * @param env the process's environment (names the PMIx server)
     * @param convention the launcher convention that gave rank and size, for messages ("Open MPI")
     */
    public PmixExchange(Map<String, String> env, String convention, int rank, int size) {
        this.env = Map.copyOf(env);
        this.convention = convention;
        this.rank = rank;
        this.size = size;
        this.namespace = env.getOrDefault("PMIX_NAMESPACE", "?");
    }

    @Override
    public String describe() {
        return "the PMIx server of " + convention + " (namespace " + namespace + (key == null ? "" : ", key " + key) + ")";
    }

    @Override
    public boolean carriesSecret() {
        return true;
    }

    /**
     * An ephemeral port on the interface jccl selects ({@code JCCL_SOCKET_IFNAME} rules), which the
     * ranks of rank 0's own host reach as well. Not also on loopback: a rank given two addresses
     * tries both at once and drops the slower connection, which the root logs as a warning.
     */
    @Override
    public List<InetSocketAddress> bindAddresses(Config config) {
        return List.of(new InetSocketAddress(Interfaces.selectAddress(config), 0));
    }

    @Override
    public Published publish(List<InetSocketAddress> listening, byte[] secret, String hostId, Config config, long deadlineNanos) {
        Pmix p = connect();
        StringBuilder v = new StringBuilder(FORMAT).append(';').append(hostId == null ? "" : hostId).append(';')
                .append(secret == null ? "" : HexFormat.of().formatHex(secret)).append(';');
        for (int i = 0; i < listening.size(); i++) {
            v.append(i == 0 ? "" : ",").append(hostPort(listening.get(i)));
        }
        try {
            p.putString(key, v.toString());
            p.commit();
            p.fence(left(deadlineNanos));
        } catch (PmixException e) {
            throw failure(e);
        }
        return new Published(listening, secret, hostId, jobKey());
    }

    @Override
    public Published lookup(Config config, long deadlineNanos) {
        Pmix p = connect();
        String value;
        try {
            p.fence(left(deadlineNanos));
            value = p.getString(0, key, left(deadlineNanos)).orElse(null);
        } catch (PmixException e) {
            throw failure(e);
        }
        if (value == null) {
            throw new JcclException(ErrorCode.MISMATCH, "rank 0 published nothing under " + key + " through " + describe()
                    + ": is rank 0 a jccl program of the same version, calling Jccl.init as often as this one?");
        }
        return parse(value);
    }

    private Published parse(String value) {
        String[] f = value.split(";", -1);
        if (f.length != 4 || !f[0].equals(FORMAT)) {
            throw new JcclException(ErrorCode.PROTOCOL, "rank 0's value under " + key + " through " + describe() + " is not in jccl's "
                    + FORMAT + " format (another jccl version?)");
        }
        byte[] secret = null;
        if (!f[2].isEmpty()) {
            secret = JcclId.parseSecret(f[2], "the secret rank 0 published through PMIx");
        }
        List<InetSocketAddress> addresses = new ArrayList<>();
        for (String a : f[3].split(",")) {
            addresses.add(JcclId.parseHostPort(a, "the address rank 0 published through PMIx"));
        }
        return new Published(addresses, secret, f[1].isEmpty() ? null : f[1], jobKey());
    }

    /** {@code 10.0.0.1:4000} or {@code [fe80::1]:4000}, numeric (what every rank parses alike). */
    static String hostPort(InetSocketAddress a) {
        String h = a.getAddress() != null ? a.getAddress().getHostAddress() : a.getHostString();
        int pct = h.indexOf('%');
        if (pct >= 0 && h.indexOf(':') >= 0) {
            h = h.substring(0, pct); // a scope id means nothing on another host
        }
        return (h.indexOf(':') >= 0 ? "[" + h + "]" : h) + ":" + a.getPort();
    }

    private String jobKey() {
        return "pmix:" + namespace + ":" + key;
    }

    /** The process's PMIx client, checked against the launcher's rank and size; takes this exchange's key. */
    private Pmix connect() {
        if (pmix != null) {
            return pmix;
        }
        Pmix p;
        try {
            p = Pmix.client(env);
        } catch (PmixException e) {
            throw new ConfigException("cannot use " + describe() + " to find rank 0's address: " + e.getMessage()
                    + "; set JCCL_COMM_ID=<rank 0's host>:<port> for every rank instead", e);
        }
        if (p.rank() != rank) {
            throw new ConfigException("the PMIx server says this process is rank " + p.rank() + " of namespace " + p.namespace() + " but "
                    + convention + "'s variables say rank " + rank + ": they describe different jobs; set JCCL_COMM_ID instead");
        }
        OptionalLong jobSize;
        try {
            jobSize = p.getNumber(-1, Pmix.KEY_JOB_SIZE, Duration.ofSeconds(30));
        } catch (PmixException e) {
            throw failure(e);
        }
        if (jobSize.isPresent() && jobSize.getAsLong() != size) {
            throw new ConfigException("the PMIx job " + p.namespace() + " has " + jobSize.getAsLong() + " processes but " + convention
                    + "'s variables say " + size + ": they describe different jobs; set JCCL_COMM_ID instead");
        }
        key = "jccl.root." + EXCHANGES.getAndIncrement();
        pmix = p;
        return p;
    }

    private static Duration left(long deadlineNanos) {
        return Duration.ofNanos(Math.max(1_000_000_000L, deadlineNanos - System.nanoTime()));
    }

    private JcclException failure(PmixException e) {
        String msg = "rank " + rank + " of " + size + ": exchanging rank 0's address through " + describe() + " failed: " + e.getMessage();
        if (e.getMessage().contains("did not return within") || e.status() == -24) {
            return new JcclTimeoutException(msg + " (every rank must call Jccl.init within JCCL_INIT_TIMEOUT; a rank that never"
                    + " arrived, or died, keeps the others waiting in the fence)", e);
        }
        return new JcclException(ErrorCode.PEER_FAILED, msg, e);
    }

    @Override
    public String toString() {
        return "PmixExchange[" + describe() + "]";
    }
}
