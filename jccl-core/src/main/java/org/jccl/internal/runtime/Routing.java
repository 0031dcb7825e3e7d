package org.jccl.internal.runtime;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.stream.IntStream;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.PeerFailedException;
import org.jccl.ResourceException;
import org.jccl.internal.log.Log;
import org.jccl.internal.transport.tcp.TcpTransport;
import org.jccl.internal.util.ResourceLimits;
import org.jccl.spi.CollectiveProvider;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.LinkCosts;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;

/**
 * Which transport carries this rank's messages to each peer, decided once when the communicator is
 * made: for each peer the first enabled transport (in priority order) whose {@code canConnect}
 * accepts the pair. Also what follows from the whole peer table alone, the same on every rank: the
 * transports any pair uses (for the tuner), and the collective provider of the transport every pair
 * uses, when it offers one (SHM's shared collective segment). Opens connections on first use and
 * closes the provider and the endpoints.
 */
final class Routing {
    private final int rank;
    private final int size;
    private final String idShort;
    private final PeerInfo[] peers;
    private final Map<Transport, Endpoint> endpoints;
    private final Transport[] transportOf;
    private final String[] peerTransport;
    /** What collectives travel on ("TCP", "SHM+TCP"): for the flight recorder and JFR. */
    private final String collTransport;
    private final Map<String, LinkCosts> pairTransports;
    /** The collective provider of the transport every pair of ranks uses, when it offers one, else null. */
    private final CollectiveProvider provider;
    private boolean released;

    /**
     * Routes every peer, lets every endpoint reserve what its peers need and opens the collective
     * provider where there is one.
     *
     * @throws JcclException naming the peer when no enabled transport can reach it
     */
    Routing(int rank, PeerInfo[] peers, List<Transport> transports, Map<Transport, Endpoint> endpoints, String idShort) {
        this.rank = rank;
        this.size = peers.length;
        this.idShort = idShort;
        this.peers = peers;
        this.endpoints = endpoints;
        this.transportOf = new Transport[size];
        for (int p = 0; p < size; p++) {
            if (p == rank) {
                continue;
            }
            for (Transport t : transports) {
                if (endpoints.containsKey(t) && t.canConnect(peers[rank], peers[p])) {
                    transportOf[p] = t;
                    break;
                }
            }
            if (transportOf[p] == null) {
                throw new JcclException(ErrorCode.CONFIG, "rank " + rank + ": no transport can reach " + peers[p].describe()
                        + " (enabled here: " + endpoints.keySet().stream().map(Transport::name).toList() + ", the peer offers "
                        + peers[p].addresses().keySet() + ")");
            }
            if (Log.enabled(Log.Level.INFO, Log.Subsys.INIT)) {
                Log.info(Log.Subsys.INIT, rank, "comm " + idShort + " rank " + rank + " -> rank " + p + " via " + transportOf[p].name());
            }
        }
        this.peerTransport = new String[size];
        for (int p = 0; p < size; p++) {
            peerTransport[p] = transportOf[p] == null ? null : transportOf[p].name();
        }
        this.collTransport = String.join("+", new TreeSet<>(Arrays.stream(peerTransport).filter(Objects::nonNull).toList()));
        this.pairTransports = pairTransports(transports, peers, rank);
        prepareEndpoints();
        this.provider = openProvider();
    }

    /**
     * A transport that declares no costs (Transport#costs) is priced as loopback TCP: every transport
     * is at least that fast.
     */
    static final LinkCosts UNDECLARED_COSTS = TcpTransport.COSTS;

    /**
     * The transports any pair of ranks uses, by name (sorted), with what each declares a message costs,
     * derived from the peer table alone (what every address offers and every transport's canConnect),
     * so that every rank computes the same map and hence makes the same tuning choices.
     */
    static Map<String, LinkCosts> pairTransports(List<Transport> transports, PeerInfo[] peers, int rank) {
        Map<String, LinkCosts> costs = new TreeMap<>();
        for (int i = 0; i < peers.length; i++) {
            for (int j = i + 1; j < peers.length; j++) {
                for (Transport t : transports) {
                    String name = t.name();
                    if (peers[i].addresses().containsKey(name) && peers[j].addresses().containsKey(name)
                            && t.canConnect(peers[i], peers[j])) {
                        costs.computeIfAbsent(name, n -> declaredCosts(t, rank));
                        break;
                    }
                }
            }
        }
        return costs;
    }

    /** What {@code t} declares, or {@link #UNDECLARED_COSTS}, said once per transport at INFO. */
    private static LinkCosts declaredCosts(Transport t, int rank) {
        LinkCosts c = t.costs();
        if (c != null) {
            return c;
        }
        Log.infoOnce(Log.Subsys.TUNING, rank, "transport " + t.name() + " declares no costs (Transport.costs()): the tuner prices it as"
                + " loopback TCP (" + UNDECLARED_COSTS + ")");
        return UNDECLARED_COSTS;
    }

    /** Lets every endpoint reserve what its peers need, now rather than at first use (Endpoint#prepare). */
    private void prepareEndpoints() {
        for (Map.Entry<Transport, Endpoint> e : endpoints.entrySet()) {
            Transport t = e.getKey();
            int[] routed = IntStream.range(0, size).filter(p -> transportOf[p] == t).toArray();
            try {
                e.getValue().prepare(routed);
            } catch (IOException ex) {
                throw new ResourceException("rank " + rank + ": cannot set up the " + t.name() + " transport for ranks "
                        + Arrays.toString(routed) + " of communicator " + idShort + ": " + ex.getMessage(), ex);
            }
        }
    }

    /**
     * The collective provider (Transport#openCollectives) of transport T, when every pair of ranks uses
     * T: each rank derives that from the same peer table, so either every rank asks T or none does, and
     * T answers alike on every rank (a provider on all of them or on none; SHM's shared segment follows
     * rank 0's published JCCL_SHM_COLL_BUFFER): their algorithm choices, and hence their message
     * sequences, depend on it.
     */
    private CollectiveProvider openProvider() {
        if (size < 2 || pairTransports.size() != 1) {
            return null;
        }
        String only = pairTransports.keySet().iterator().next();
        for (Map.Entry<Transport, Endpoint> e : endpoints.entrySet()) {
            if (e.getKey().name().equals(only)) {
                try {
                    return e.getKey().openCollectives(e.getValue());
                } catch (IOException ex) {
                    throw new ResourceException("rank " + rank + ": cannot set up the collectives of the " + only + " transport ("
                            + "Transport.openCollectives) of communicator " + idShort + ": " + ex.getMessage(), ex);
                }
            }
        }
        return null;
    }

    /** Each peer's transport name, null for this rank itself (Counters). */
    String[] peerTransports() {
        return peerTransport.clone();
    }

    /** The transports any pair of ranks uses with their declared costs (the same map on every rank). */
    Map<String, LinkCosts> pairTransports() {
        return pairTransports;
    }

    /** The collective provider, or null (see {@link #openProvider}). */
    CollectiveProvider provider() {
        return provider;
    }

    /** The name of the transport chosen for {@code peer} ("SHM", "TCP", ...), null for this rank itself. */
    String transportName(int peer) {
        return peerTransport[peer];
    }

    /** What {@code op} travels on: its peer's transport for a send or receive, else every peer's ("SHM+TCP"). */
    String transportOf(Op op) {
        if (op instanceof P2pOp && op.rootOrPeer >= 0 && op.rootOrPeer != rank) {
            return peerTransport[op.rootOrPeer];
        }
        return collTransport;
    }

    /**
     * Opens the connection to {@code peer} (first use, by the thread running {@code op}).
     * {@code checkNotAborted} turns a failure caused by an abort into the abort's report.
     */
    Connection connect(int peer, Op op, Consumer<Op> checkNotAborted) {
        Transport t = transportOf[peer];
        if (t == null) {
            throw new IllegalStateException("no transport for peer " + peer);
        }
        try {
            Connection c = endpoints.get(t).connect(peer);
            Log.trace(Log.Subsys.NET, rank, "comm " + idShort + " connected to rank " + peer + ": " + c.describe());
            return c;
        } catch (IOException e) {
            checkNotAborted.accept(op);
            String what = "rank " + rank + ": " + (op != null ? op.describe() : "connect") + " on communicator " + idShort
                    + " could not connect to " + peers[peer].describe() + " via " + t.name() + ": " + e.getMessage();
            if (ResourceLimits.outOfFileDescriptors(e)) {
                throw new ResourceException(what + "; " + ResourceLimits.openFilesAdvice(), e);
            }
            if (e instanceof java.net.SocketTimeoutException) {
                throw new JcclTimeoutException(what, e);
            }
            throw new PeerFailedException(peer, what, e);
        } catch (JcclException e) {
            checkNotAborted.accept(op);
            throw e;
        }
    }

    /** Endpoints whose work is signalled through a file descriptor (Endpoint#wakeFd), and their watchers. */
    private final List<Endpoint> fdEndpoints = new ArrayList<>();
    private final List<FdWaker> fdWakers = new ArrayList<>();

    /**
     * Starts a watcher for every endpoint that signals its work through a file descriptor instead of a Java
     * channel (UCX's worker event fd), waking the running thread through {@code wake}. Called once, at creation.
     */
    void watchWakeFds(Runnable wake) {
        for (Map.Entry<Transport, Endpoint> e : endpoints.entrySet()) {
            int fd = e.getValue().wakeFd();
            if (fd >= 0) {
                fdWakers.add(new FdWaker(e.getKey().name(), idShort, rank, fd, wake));
                fdEndpoints.add(e.getValue());
            }
        }
    }

    /** How many times the watchers of wake descriptors woke the running thread (tests, TRACE). */
    long fdWakeups() {
        long n = 0;
        for (FdWaker w : fdWakers) {
            n += w.wakeups();
        }
        return n;
    }

    /**
     * Arms every wake descriptor before the running thread blocks (Endpoint#armWakeFd); false when an endpoint
     * already has work, which the thread then progresses instead of blocking. The running thread only.
     */
    boolean armWakeFds() {
        for (int i = 0, n = fdEndpoints.size(); i < n; i++) {
            if (!fdEndpoints.get(i).armWakeFd()) {
                return false;
            }
            fdWakers.get(i).armed();
        }
        return true;
    }

    /**
     * Closes the collective provider, then every endpoint, once (abort and close both call it), after stopping the watchers of
     * their descriptors; any thread.
     */
    void releaseEndpoints() {
        synchronized (this) {
            if (released) {
                return;
            }
            released = true;
        }
        if (provider != null) {
            try {
                provider.close();
            } catch (RuntimeException ex) {
                Log.warn(Log.Subsys.NET, rank, "closing the collective provider " + provider.describe() + " failed: " + ex);
            }
        }
        for (FdWaker w : fdWakers) {
            w.close();
        }
        for (Endpoint e : endpoints.values()) {
            try {
                e.close();
            } catch (RuntimeException ex) {
                Log.warn(Log.Subsys.NET, rank, "closing an endpoint failed: " + ex);
            }
        }
    }
}
