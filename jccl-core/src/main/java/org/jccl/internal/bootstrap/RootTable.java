package org.jccl.internal.bootstrap;

import java.net.InetSocketAddress;
import java.nio.channels.SelectionKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.internal.net.WireChannel;
import org.jccl.spi.PeerInfo;

/**
 * The rendezvous of one {@link BootstrapRoot}: which ranks registered, the world size they agree
 * on, why registrations were refused, the peer table, and the words the root sends when the job is
 * formed, when the deadline passes or when it is closed. Bookkeeping only: the root's thread owns
 * it (nothing here is synchronised), does every read and write, and asks this what to decide.
 */
final class RootTable {

    /** At most this many rejections are kept to explain a later timeout. */
    private static final int MAX_REJECTIONS_KEPT = 5;

    /** A registered rank, waiting for the table. */
    record Registrant(WireChannel channel, SelectionKey key, PeerInfo info, String from) {
    }

    /** Why a registration is refused: the error frame's code and message. */
    record Refusal(ErrorCode code, String message) {
    }

    private final String where;
    private final TreeMap<Integer, Registrant> registered = new TreeMap<>();
    private int size = -1;
    private final List<String> rejections = new ArrayList<>();

    /** {@code where}: the root's addresses, as messages name them. */
    RootTable(String where) {
        this.where = where;
    }

    /**
     * Why {@code reg} (arrived from {@code from}) cannot join: its world size differs from the
     * first rank's, its rank is outside the world, or another process holds that rank; null when it may.
     */
    Refusal refusal(BootstrapWire.Registration reg, String from) {
        PeerInfo info = reg.info();
        int rank = reg.rank();
        if (size > 0 && reg.size() != size) {
            Registrant ref = registered.firstEntry().getValue();
            return new Refusal(ErrorCode.MISMATCH, "world size mismatch: rank " + rank + " says " + reg.size() + " but rank "
                    + ref.info().rank() + " says " + size + " (bootstrap root " + where + "); every rank must be started with the same"
                    + " world size (JCCL_WORLD_SIZE / WORLD_SIZE / mpirun -np / srun -n), and ranks of two jobs must not share one root"
                    + " address");
        }
        if (rank < 0 || rank >= reg.size()) {
            return new Refusal(ErrorCode.INVALID_ARGUMENT, "rank " + rank + " is outside [0, " + reg.size() + ") (bootstrap root " + where
                    + "); give every process a rank below the world size");
        }
        Registrant first = registered.get(rank);
        if (first != null) {
            return new Refusal(ErrorCode.MISMATCH, "duplicate rank " + rank + ": " + describe(first.info(), first.from())
                    + " registered it first, and " + describe(info, from) + " claims it too (bootstrap root " + where + "); every"
                    + " process needs its own rank: check the launcher's rank variables (JCCL_RANK / RANK / OMPI_COMM_WORLD_RANK /"
                    + " SLURM_PROCID), and that two jobs do not share one root address");
        }
        return null;
    }

    private static String describe(PeerInfo info, String from) {
        return "host " + info.host() + " pid " + info.pid() + " (connected from " + from + ")";
    }

    /** Registers {@code r}, which {@link #refusal} let in, in a world of {@code worldSize} ranks. */
    void add(Registrant r, int worldSize) {
        registered.put(r.info().rank(), r);
        if (size < 0) {
            size = worldSize;
        }
    }

    /** Withdraws {@code rank}'s registration (its process went away); the rank is open again. */
    void remove(int rank) {
        registered.remove(rank);
        if (registered.isEmpty()) {
            size = -1;
        }
    }

    /** Keeps a refusal's message to explain a later timeout. */
    void rejected(String message) {
        if (rejections.size() < MAX_REJECTIONS_KEPT) {
            rejections.add(message);
        }
    }

    /** Every rank of the world has registered. */
    boolean formed() {
        return size > 0 && registered.size() == size;
    }

    /** Ranks registered now. */
    int arrived() {
        return registered.size();
    }

    /** The world size the registered ranks agree on, or -1 before the first. */
    int size() {
        return size;
    }

    Collection<Registrant> registrants() {
        return registered.values();
    }

    void clear() {
        registered.clear();
    }

    /** The peer table, indexed by rank; call once {@link #formed()}. */
    PeerInfo[] table() {
        PeerInfo[] table = new PeerInfo[size];
        for (Map.Entry<Integer, Registrant> e : registered.entrySet()) {
            table[e.getKey()] = e.getValue().info();
        }
        return table;
    }

    /** What a rank that registers after the job was formed is told. */
    String alreadyFormed() {
        return "the job at bootstrap root " + where + " was already formed by " + size
                + " ranks when this rank registered: it is an extra process, or a duplicate rank";
    }

    /**
     * Why the rendezvous gave up at its deadline: which ranks never arrived (or that none did), what
     * to check, and what the root saw meanwhile ({@code dropped} connections, the refusals kept).
     *
     * @param address the address ranks were told to connect to
     * @param addresses every address the root listens on
     */
    String timedOut(Duration initTimeout, InetSocketAddress address, List<InetSocketAddress> addresses, int dropped) {
        if (registered.isEmpty()) {
            return "no rank arrived at the bootstrap root " + where + " within " + BootstrapWire.seconds(initTimeout)
                    + " (JCCL_INIT_TIMEOUT)" + explanations(dropped);
        }
        long n = BootstrapWire.missingCount(registered.keySet(), size);
        return (n == 1 ? "rank " : "ranks ") + BootstrapWire.missing(registered.keySet(), size) + " of " + size
                + " never arrived at the bootstrap root " + where + " within " + BootstrapWire.seconds(initTimeout)
                + " (JCCL_INIT_TIMEOUT): check that " + (n == 1 ? "it was" : "they were") + " started and did not crash, that"
                + " every rank uses the same root address (JCCL_COMM_ID or MASTER_ADDR:MASTER_PORT) and JCCL_AUTH_TOKEN, and"
                + " raise JCCL_INIT_TIMEOUT if ranks start slowly" + loopbackHint(address, addresses) + explanations(dropped);
    }

    /** When the required address is a loopback one: ranks on other hosts need the others, and a name that resolves to them. */
    private static String loopbackHint(InetSocketAddress address, List<InetSocketAddress> addresses) {
        if (!address.getAddress().isLoopbackAddress()) {
            return "";
        }
        List<InetSocketAddress> others = addresses.stream().filter(a -> !a.getAddress().isLoopbackAddress()).toList();
        return "; " + BootstrapWire.hostPort(address) + " is a loopback address (what JCCL_COMM_ID / MASTER_ADDR resolves to on this"
                + " host), which ranks on other hosts cannot reach" + (others.isEmpty() ? " and this root listens on no other address"
                : "; they must reach " + String.join(" or ", others.stream().map(BootstrapWire::hostPort).toList())
                + ", so on their hosts the name must resolve to that address (check `getent hosts <name>` there: an /etc/hosts"
                + " that maps it to 127.0.1.1 breaks it)");
    }

    private String explanations(int dropped) {
        StringBuilder sb = new StringBuilder();
        if (dropped > 0) {
            sb.append("; ").append(dropped).append(dropped == 1 ? " connection was" : " connections were")
                    .append(" dropped before registering (wrong JCCL_AUTH_TOKEN or secret file, another jccl version, or not a jccl rank:"
                            + " see the root process's log)");
        }
        if (!rejections.isEmpty()) {
            sb.append("; rejected meanwhile: ").append(String.join(" | ", rejections));
        }
        return sb.toString();
    }

    /** What the waiting ranks are told when the root's process closes it before the job is formed. */
    String closed() {
        return "the bootstrap root at " + where + " was closed by its process before the job was formed"
                + (size > 0 ? " (" + registered.size() + " of " + size + " ranks had arrived; missing "
                + BootstrapWire.missing(registered.keySet(), size) + ")" : "")
                + "; the process that started the root (rank 0, or the caller of JcclId.create()) is shutting down: see its log";
    }

    /** The peer table would not fit the bootstrap's frame limit, or could not be encoded: the error every rank gets. */
    static String tableTooLarge(int size, int bytes) {
        return "the peer table of " + size + " ranks takes " + bytes + " bytes, more than the bootstrap's limit of "
                + BootstrapWire.MAX_REPLY_FRAME + "; publish fewer transport addresses";
    }

    /** The peer table could not be encoded. */
    String cannotEncode(JcclException e) {
        return "the bootstrap root at " + where + " cannot send the peer table: " + e.getMessage();
    }
}
