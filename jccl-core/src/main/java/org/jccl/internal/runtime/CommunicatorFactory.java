package org.jccl.internal.runtime;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclId;
import org.jccl.internal.bootstrap.Bootstrap;
import org.jccl.internal.bootstrap.BootstrapRoot;
import org.jccl.internal.bootstrap.PeerInfoCodec;
import org.jccl.internal.bootstrap.RootExchange;
import org.jccl.internal.control.ControlPlane;
import org.jccl.internal.config.JobSecret;
import org.jccl.internal.log.Log;
import org.jccl.internal.topo.NetInitReport;
import org.jccl.internal.transport.local.LocalTransport;
import org.jccl.internal.transport.shm.ShmTransport;
import org.jccl.internal.transport.tcp.TcpTransport;
import org.jccl.internal.util.ResourceLimits;
import org.jccl.spi.Endpoint;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;

/**
 * Creates communicators: from a {@link JcclId} (bootstrap through the root), as threads of one
 * JVM, and by splitting an existing communicator (bootstrap through the parent's own connections).
 */
public final class CommunicatorFactory {
    /** Identifies this JVM among processes: ranks with equal ids can use the in-JVM transport. */
    static final String PROCESS_ID = UUID.randomUUID().toString();
    private static final String HOST_HASH = machineHostHash();
    private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();

    private CommunicatorFactory() {
    }

    /** Joins a job; rank 0 of an environment-launched job also starts the root ({@code startRoot}). */
    public static Communicator init(JcclId id, int rank, int size, Config config, boolean startRoot) {
        RuntimeSettings settings = RuntimeSettings.conclude(config); // a bad value fails before a port is held
        BootstrapRoot root = null;
        if (startRoot) {
            root = BootstrapRoot.start(id.rootAddress(), id.secret(), config);
        }
        try {
            byte[] commId = derive("jccl-world", id.secret(), id.rootHostPort().getBytes(StandardCharsets.UTF_8));
            return create(commId, id.secret(), rank, size, config, settings, hostHash(config, rank, size),
                    self -> Bootstrap.rendezvous(id, rank, size, self, config));
        } catch (RuntimeException e) {
            if (root != null) {
                root.close();
            }
            throw e;
        }
    }

    /**
     * Joins the job a launcher started ({@code Jccl.init(Config)}): resolves the job secret
     * (JCCL_AUTH_TOKEN, else a secret the launcher's channel carries, else the per-user secret
     * file), then runs the launch's {@link RootExchange}: rank 0 binds its bootstrap root first and
     * publishes where it listens; the others look that up (both within JCCL_INIT_TIMEOUT) and
     * connect to the first address that answers.
     */
    public static Communicator init(Config.Launch launch, Config config) {
        int rank = launch.rank();
        int size = launch.size();
        RootExchange exchange = launch.exchange();
        JobSecret js = launch.secret();
        RuntimeSettings settings = RuntimeSettings.conclude(config);
        long deadline = System.nanoTime() + settings.initTimeout().toNanos();
        String hostHash = hostHash(config, rank, size);
        boolean carried = exchange.carriesSecret() && !js.isExplicit();
        BootstrapRoot root = null;
        try (exchange) {
            RootExchange.Published published;
            JobSecret.Resolved secret;
            if (rank == 0) {
                if (carried) {
                    byte[] fresh = new byte[JcclId.SECRET_BYTES];
                    RANDOM.nextBytes(fresh);
                    secret = new JobSecret.Resolved(fresh, "a fresh secret that rank 0 handed out through " + exchange.describe());
                } else {
                    secret = js.resolve();
                }
                root = BootstrapRoot.start(exchange.bindAddresses(config), secret.secret(), config);
                published = exchange.publish(root.addresses(), carried ? secret.secret() : null, hostHash, config, deadline);
                Log.info(Log.Subsys.BOOTSTRAP, rank, "job secret from " + secret.describe() + "; root published through "
                        + exchange.describe());
            } else {
                // Read the secret file before waiting: a broken one fails at once, not after the exchange.
                JobSecret.Resolved own = carried ? null : js.resolve();
                published = exchange.lookup(config, deadline);
                if (own != null) {
                    secret = own;
                } else if (published.secret() != null) {
                    secret = new JobSecret.Resolved(published.secret(), "rank 0, through " + exchange.describe());
                } else {
                    secret = js.resolve();
                }
            }
            List<InetSocketAddress> roots = reachable(published, hostHash);
            byte[] key = secret.secret();
            String source = secret.source();
            byte[] commId = derive("jccl-world", key, published.jobKey().getBytes(StandardCharsets.UTF_8));
            return create(commId, key, rank, size, config, settings, hostHash,
                    self -> Bootstrap.rendezvous(roots, key, source, rank, size, self, config));
        } catch (RuntimeException e) {
            if (root != null) {
                root.close();
            }
            throw e;
        }
    }

    /**
     * The root addresses worth trying from this host: rank 0's loopback addresses only when this rank
     * is on rank 0's host (or the channel does not say where rank 0 is).
     */
    static List<InetSocketAddress> reachable(RootExchange.Published p, String hostHash) {
        if (p.hostId() == null || p.hostId().equals(hostHash)) {
            return p.addresses();
        }
        List<InetSocketAddress> out = new ArrayList<>();
        for (InetSocketAddress a : p.addresses()) {
            if (a.getAddress() == null || !a.getAddress().isLoopbackAddress()) {
                out.add(a);
            }
        }
        return out.isEmpty() ? p.addresses() : out;
    }

    /** {@code n} ranks as threads of this JVM, bootstrapped through a root on loopback. */
    public static List<Communicator> initLocal(int n, Config config) {
        byte[] secret = new byte[JcclId.SECRET_BYTES];
        new java.security.SecureRandom().nextBytes(secret);
        BootstrapRoot root = BootstrapRoot.start(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), secret, config);
        JcclId id = JcclId.of(root.address(), secret);
        ExecutorService pool = Executors.newThreadPerTaskExecutor(Thread.ofPlatform().daemon().name("jccl-init-", 0).factory());
        List<Future<Communicator>> futures = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            int rank = r;
            futures.add(pool.submit(() -> init(id, rank, n, config, false)));
        }
        List<Communicator> comms = new ArrayList<>();
        List<RuntimeException> failures = new ArrayList<>();
        for (Future<Communicator> f : futures) {
            try {
                comms.add(f.get());
            } catch (ExecutionException e) {
                failures.add(e.getCause() instanceof RuntimeException re ? re
                        : new JcclException(ErrorCode.INTERNAL, "initLocal failed: " + e.getCause(), e.getCause()));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                failures.add(new JcclException(ErrorCode.ABORTED, "interrupted during initLocal", e));
            }
        }
        pool.shutdown();
        RuntimeException failure = cause(failures);
        if (failure != null) {
            comms.forEach(Communicator::abort);
            root.close();
            throw failure;
        }
        return List.copyOf(comms);
    }

    /**
     * The failure to report when ranks of one JVM failed to initialise: the first (in rank order) that
     * is not a consequence of another rank's failure (a timeout waiting for it, its connection gone,
     * an abort), e.g. the rank that ran out of file descriptors rather than rank 0 that waited for it;
     * the first one when all are consequences. Null when nothing failed.
     */
    static RuntimeException cause(List<RuntimeException> failures) {
        for (RuntimeException f : failures) {
            if (!(f instanceof JcclException je) || (je.code() != ErrorCode.TIMEOUT && je.code() != ErrorCode.PEER_FAILED
                    && je.code() != ErrorCode.ABORTED)) {
                return f;
            }
        }
        return failures.isEmpty() ? null : failures.getFirst();
    }

    /** What the bootstrap step does once this rank's endpoints are open. */
    @FunctionalInterface
    private interface Rendezvous {
        PeerInfo[] exchange(PeerInfo self);
    }

    private static CommunicatorImpl create(byte[] commId, byte[] secret, int rank, int size, Config config, RuntimeSettings settings,
                                           String hostHash, Rendezvous rendezvous) {
        List<Transport> transports = transports(config);
        TransportContextImpl tctx = new TransportContextImpl(commId, rank, size, secret, config);
        Map<Transport, Endpoint> endpoints = new LinkedHashMap<>();
        ServerSocketChannel control = null;
        try {
            Map<String, byte[]> addresses = new LinkedHashMap<>();
            for (Transport t : transports) {
                Endpoint e = t.open(tctx);
                endpoints.put(t, e);
                addresses.put(t.name(), e.address());
            }
            control = controlListener(rank, config, addresses);
            PeerInfo self = new PeerInfo(rank, Log.host(), ProcessHandle.current().pid(), hostHash, PROCESS_ID, addresses);
            PeerInfo[] peers = rendezvous.exchange(self);
            tctx.setPeers(peers);
            NetInitReport.log(rank, localRank(peers, rank), localSize(peers, rank), config);
            return withControl(new CommunicatorImpl(rank, size, commId, secret, config, settings, peers, transports, endpoints, tctx),
                    control);
        } catch (IOException e) {
            closeQuietly(control);
            closeAll(endpoints);
            throw new JcclException(ErrorCode.RESOURCE, "rank " + rank + ": cannot open a transport endpoint: " + e.getMessage()
                    + (ResourceLimits.outOfFileDescriptors(e) ? "; " + ResourceLimits.openFilesAdvice() : ""), e);
        } catch (RuntimeException e) {
            closeQuietly(control);
            tctx.stop();
            closeAll(endpoints);
            throw e;
        }
    }

    /** Rank 0 listens for the control channel (org.jccl.internal.control) and publishes the address with its endpoints. */
    private static ServerSocketChannel controlListener(int rank, Config config, Map<String, byte[]> addresses) throws IOException {
        if (rank != 0) {
            return null;
        }
        ServerSocketChannel l = ControlPlane.listen(config);
        addresses.put(ControlPlane.ADDRESS_KEY, ControlPlane.address(l));
        return l;
    }

    /** Connects the new communicator's control channel; a failure there fails the creation. */
    private static CommunicatorImpl withControl(CommunicatorImpl c, ServerSocketChannel listener) {
        try {
            c.startControl(listener);
            return c;
        } catch (RuntimeException e) {
            c.abort();
            c.close();
            throw e;
        }
    }

    private static void closeQuietly(ServerSocketChannel s) {
        if (s != null) {
            try {
                s.close();
            } catch (IOException ignored) {
                // failing already
            }
        }
    }

    /** This rank's index among the ranks of its host (same host hash), in rank order. */
    static int localRank(PeerInfo[] peers, int rank) {
        int local = 0;
        for (int r = 0; r < rank; r++) {
            if (peers[r].hostHash().equals(peers[rank].hostHash())) {
                local++;
            }
        }
        return local;
    }

    /** How many ranks share {@code rank}'s host identity. */
    static int localSize(PeerInfo[] peers, int rank) {
        int n = 0;
        for (PeerInfo p : peers) {
            if (p.hostHash().equals(peers[rank].hostHash())) {
                n++;
            }
        }
        return n;
    }

    private static void closeAll(Map<Transport, Endpoint> endpoints) {
        for (Endpoint e : endpoints.values()) {
            try {
                e.close();
            } catch (RuntimeException ignored) {
                // best effort while failing already
            }
        }
    }

    /** Built-in transports plus any found by ServiceLoader, enabled ones only, by priority. */
    static List<Transport> transports(Config config) {
        List<Transport> all = new ArrayList<>();
        all.add(new LocalTransport());
        all.add(new ShmTransport());
        all.add(new TcpTransport());
        for (Transport t : ServiceLoader.load(Transport.class)) {
            if (all.stream().noneMatch(x -> x.name().equals(t.name()))) {
                all.add(t);
            }
        }
        all.removeIf(t -> !t.isEnabled(config));
        all.sort(Comparator.comparingInt(Transport::priority));
        return List.copyOf(all);
    }

    /**
     * Collective over {@code parent}: three all-gathers on the parent's own connections — (color,
     * key), then the sizes and bytes of every member's peer info with fresh endpoint addresses —
     * then the child of this rank's color is built without any root. NOCOLOR ranks take part in the
     * exchanges and get null.
     */
    static Communicator split(CommunicatorImpl parent, int splitIndex, int color, int key) {
        int n = parent.size();
        int rank = parent.rank();
        long[] mine = {color, key};
        long[] all = new long[2 * n];
        parent.allGather(Buffer.of(mine), Buffer.of(all));
        List<Integer> members = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            if (color != Communicator.SPLIT_NOCOLOR && all[2 * r] == color) {
                members.add(r);
            }
        }
        members.sort(Comparator.<Integer>comparingLong(r -> all[2 * r + 1]).thenComparingInt(r -> r));
        int childRank = members.indexOf(rank);
        int childSize = members.size();
        byte[] secret = parent.secret();
        byte[] childId = derive("jccl-split", parent.commId(), intBytes(splitIndex), intBytes(color));
        Config config = parent.config();
        List<Transport> transports = parent.transports();
        TransportContextImpl tctx = null;
        Map<Transport, Endpoint> endpoints = new LinkedHashMap<>();
        byte[] encoded = new byte[0];
        ServerSocketChannel control = null;
        try {
            if (childRank >= 0) {
                tctx = new TransportContextImpl(childId, childRank, childSize, secret, config);
                Map<String, byte[]> addresses = new LinkedHashMap<>();
                for (Transport t : transports) {
                    Endpoint e = t.open(tctx);
                    endpoints.put(t, e);
                    addresses.put(t.name(), e.address());
                }
                control = controlListener(childRank, config, addresses);
                PeerInfo self = parent.peerInfo(rank);
                encoded = PeerInfoCodec.encode(new PeerInfo(childRank, self.host(), self.pid(), self.hostHash(), self.processId(),
                        addresses));
            }
            int[] lengths = new int[n];
            parent.allGather(Buffer.of(new int[] {encoded.length}), Buffer.of(lengths));
            int max = Arrays.stream(lengths).max().orElse(0);
            byte[] padded = Arrays.copyOf(encoded, max);
            byte[] gathered = new byte[max * n];
            parent.allGather(Buffer.of(padded), Buffer.of(gathered));
            if (childRank < 0) {
                return null;
            }
            PeerInfo[] peers = new PeerInfo[childSize];
            for (int i = 0; i < childSize; i++) {
                int r = members.get(i);
                peers[i] = PeerInfoCodec.decode(Arrays.copyOfRange(gathered, r * max, r * max + lengths[r]));
            }
            tctx.setPeers(peers);
            Log.info(Log.Subsys.INIT, rank, "split: parent rank " + rank + " color " + color + " key " + key + " -> rank " + childRank
                    + " of " + childSize);
            return withControl(new CommunicatorImpl(childRank, childSize, childId, secret, config, parent.settings(), peers, transports,
                    endpoints, tctx), control);
        } catch (IOException e) {
            closeQuietly(control);
            closeAll(endpoints);
            throw new JcclException(ErrorCode.RESOURCE, "rank " + rank + ": split cannot open a transport endpoint: " + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly(control);
            if (tctx != null) {
                tctx.stop();
            }
            closeAll(endpoints);
            throw e;
        }
    }

    /**
     * Communicator#shrink: aborts {@code parent} (freeing its ports), then the survivors rendezvous at a
     * root the lowest survivor starts on the address of its former TCP endpoint, and build a fresh
     * communicator of {@code size - excluded} ranks with a derived id.
     */
    static Communicator shrink(CommunicatorImpl parent, int[] excludedRanks) {
        int n = parent.size();
        int rank = parent.rank();
        boolean[] excluded = new boolean[n];
        for (int x : excludedRanks) {
            if (x < 0 || x >= n) {
                throw new IllegalArgumentException("shrink: rank " + x + " is outside [0, " + n + ")");
            }
            if (x == rank) {
                throw new IllegalArgumentException("shrink: rank " + rank + " excludes itself; only surviving ranks call shrink");
            }
            if (excluded[x]) {
                throw new IllegalArgumentException("shrink: rank " + x + " is listed twice");
            }
            excluded[x] = true;
        }
        List<Integer> members = new ArrayList<>();
        RankList list = new RankList();
        for (int r = 0; r < n; r++) {
            if (excluded[r]) {
                list.add(r);
            } else {
                members.add(r);
            }
        }
        int childRank = members.indexOf(rank);
        int childSize = members.size();
        int lowest = members.get(0);
        byte[] tcp = parent.peerInfo(lowest).addresses().get(TcpTransport.NAME);
        if (tcp == null) {
            throw new JcclException(ErrorCode.CONFIG, "rank " + rank + ": shrink needs the TCP endpoint address of rank " + lowest
                    + " (the lowest surviving rank, whose port hosts the new bootstrap root), but it published none: its TCP transport is"
                    + " disabled or failed to open");
        }
        InetSocketAddress rootAddress = TcpTransport.socketAddress(tcp);
        byte[] secret = parent.secret();
        byte[] childId = derive("jccl-shrink", parent.commId(), list.bytes());
        Config config = parent.config();
        String why = "rank " + rank + ": communicator " + parent.idShort() + " was ended by shrink(" + list + ")";
        parent.abort(new JcclException(ErrorCode.ABORTED, why));
        Log.info(Log.Subsys.INIT, rank, "shrink: excluding ranks " + list + ": rank " + rank + " -> rank " + childRank + " of " + childSize
                + ", bootstrap at " + rootAddress);
        BootstrapRoot root = null;
        if (childRank == 0) {
            root = startShrinkRoot(rootAddress, secret, config);
        }
        JcclId id = JcclId.of(rootAddress, secret);
        try {
            // The survivors keep the host identity they had (a JCCL_HOSTID list is indexed by the original ranks).
            String hostHash = parent.peerInfo(rank).hostHash();
            return create(childId, secret, childRank, childSize, config, parent.settings(), hostHash,
                    self -> rendezvousRetrying(id, childRank, childSize, self, config, parent.settings().initTimeout()));
        } catch (RuntimeException e) {
            if (root != null) {
                root.close();
            }
            throw e;
        }
    }

    /**
     * Bootstrap.rendezvous, retried while the address still answers as something else: a survivor
     * may reach the lowest survivor's former TCP endpoint before that rank has closed it and opened
     * the root there (the handshake then names the wrong kind of port).
     */
    /**
     * The new bootstrap root on the port of this rank's old TCP endpoint: that endpoint's listener is
     * closed by the abort of the old communicator, which may finish a moment later on its operation
     * thread, so "address in use" is retried for up to 10 s before it is reported.
     */
    private static BootstrapRoot startShrinkRoot(InetSocketAddress rootAddress, byte[] secret, Config config) {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                return BootstrapRoot.start(rootAddress, secret, config);
            } catch (org.jccl.ResourceException e) {
                if (System.nanoTime() > deadline || e.getMessage() == null || !e.getMessage().contains("already in use")) {
                    throw e;
                }
                try {
                    Thread.sleep(20);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }

    private static PeerInfo[] rendezvousRetrying(JcclId id, int rank, int size, PeerInfo self, Config config, Duration initTimeout) {
        long deadline = System.nanoTime() + initTimeout.toNanos();
        long backoff = 20;
        while (true) {
            try {
                return Bootstrap.rendezvous(id, rank, size, self, config);
            } catch (JcclException e) {
                boolean wrongPort = e.code() == ErrorCode.PROTOCOL || e.code() == ErrorCode.AUTHENTICATION;
                if (!wrongPort || System.nanoTime() > deadline) {
                    throw e;
                }
                Log.info(Log.Subsys.BOOTSTRAP, rank, "shrink: the new root is not up yet (" + e.getMessage() + "); retrying");
                try {
                    Thread.sleep(backoff);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new JcclException(ErrorCode.ABORTED, "rank " + rank + ": interrupted during shrink", ie);
                }
                backoff = Math.min(500, backoff * 2);
            }
        }
    }

    /** The excluded ranks, as bytes for the child id and as text for messages. */
    private static final class RankList {
        private final List<Integer> ranks = new ArrayList<>();

        void add(int r) {
            ranks.add(r);
        }

        byte[] bytes() {
            byte[] b = new byte[4 * ranks.size()];
            for (int i = 0; i < ranks.size(); i++) {
                System.arraycopy(intBytes(ranks.get(i)), 0, b, 4 * i, 4);
            }
            return b;
        }

        @Override
        public String toString() {
            return ranks.toString().replace("[", "").replace("]", "");
        }
    }

    static byte[] intBytes(int v) {
        return new byte[] {(byte) (v >>> 24), (byte) (v >>> 16), (byte) (v >>> 8), (byte) v};
    }

    /** SHA-256 of the parts, cut to 16 bytes: communicator ids every member computes alike. */
    static byte[] derive(String label, byte[]... parts) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            md.update(label.getBytes(StandardCharsets.US_ASCII));
            for (byte[] p : parts) {
                md.update(intBytes(p.length));
                md.update(p);
            }
            return Arrays.copyOf(md.digest(), 16);
        } catch (NoSuchAlgorithmException e) {
            throw new JcclException(ErrorCode.INTERNAL, "SHA-256 unavailable", e);
        }
    }

    /**
     * The host identity of {@code rank}: {@code JCCL_HOSTID} when set (one id, or the rank's entry of
     * a per-rank list; see {@link org.jccl.internal.config.HostId}), else this machine's
     * {@link #machineHostHash()}. An id is prefixed so that it can never equal a machine's hash.
     */
    static String hostHash(Config config, int rank, int size) {
        String id = org.jccl.internal.config.HostId.resolve(config, rank, size);
        return id == null ? HOST_HASH : "id:" + id;
    }

    /** Boot id + host name: equal on the same machine (same kernel boot), different elsewhere. */
    private static String machineHostHash() {
        String boot = "";
        try {
            boot = Files.readString(Path.of("/proc/sys/kernel/random/boot_id")).trim();
        } catch (IOException | RuntimeException e) {
            // not Linux: the host name alone identifies the machine
        }
        return HexFormat.of().formatHex(derive("jccl-host", (Log.host() + "/" + boot).getBytes(StandardCharsets.UTF_8)), 0, 8);
    }
}
