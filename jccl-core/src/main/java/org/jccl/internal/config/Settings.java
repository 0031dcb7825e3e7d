package org.jccl.internal.config;

import static org.jccl.internal.config.Setting.Kind.BOOL;
import static org.jccl.internal.config.Setting.Kind.BYTES;
import static org.jccl.internal.config.Setting.Kind.DURATION_SECONDS;
import static org.jccl.internal.config.Setting.Kind.INT;
import static org.jccl.internal.config.Setting.Kind.STRING;

/**
 * Every setting jccl reads, in one place (Aeron's Configuration pattern: the name, the default and
 * the check live together). {@code jccl env} prints this list with the effective values.
 */
public final class Settings {
    private Settings() {
    }

    // ---- where settings come from (read by ConfigFile; precedence: code > environment > file > default)
    public static final Setting CONF_FILE = Setting.define("JCCL_CONF_FILE", null, STRING, null, 0, 0,
            "config file of KEY=VALUE lines (# comments) read instead of ~/.jccl.conf and /etc/jccl.conf; the environment beats it");

    // ---- job identity (normally set by a launcher)
    public static final Setting COMM_ID = Setting.define("JCCL_COMM_ID", "NCCL_COMM_ID", STRING, null, 0, 0,
            "host:port of the bootstrap root (rank 0 listens there)");
    public static final Setting RANK = Setting.define("JCCL_RANK", null, INT, null, 0, Integer.MAX_VALUE,
            "this process's rank");
    public static final Setting WORLD_SIZE = Setting.define("JCCL_WORLD_SIZE", null, INT, null, 1, Integer.MAX_VALUE,
            "number of ranks in the job");
    public static final Setting LOCAL_RANK = Setting.define("JCCL_LOCAL_RANK", null, INT, null, 0, Integer.MAX_VALUE,
            "rank among the processes of this host");
    public static final Setting LOCAL_SIZE = Setting.define("JCCL_LOCAL_SIZE", null, INT, null, 1, Integer.MAX_VALUE,
            "number of ranks on this host (set by jccl run)");
    public static final Setting AUTH_TOKEN = Setting.define("JCCL_AUTH_TOKEN", null, STRING, null, 0, 0,
            "shared secret of the job, 32 hex digits (jccl run makes a fresh one); unset: the per-user secret file (JCCL_SECRET_FILE)");
    public static final Setting SECRET_FILE = Setting.define("JCCL_SECRET_FILE", null, STRING, null, 0, 0,
            "per-user job secret file used when JCCL_AUTH_TOKEN is unset and no launcher hands out a secret: made on first use"
                    + " (32 hex digits, mode 0600, directory 0700); every rank of a job must see the same file (default ~/.jccl/secret)");

    // ---- bootstrap and sockets
    public static final Setting INIT_TIMEOUT = Setting.define("JCCL_INIT_TIMEOUT", null, DURATION_SECONDS, "120", 1, 86_400,
            "seconds every rank waits for all ranks to arrive at initialisation");
    public static final Setting CONNECT_TIMEOUT = Setting.define("JCCL_CONNECT_TIMEOUT", null, DURATION_SECONDS, "30", 1, 86_400,
            "seconds to establish one connection to a peer, retries included");
    public static final Setting SOCKET_IFNAME = Setting.define("JCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", STRING, null, 0, 0,
            "interfaces for bootstrap and TCP: exact names, a trailing * for a prefix, ^ to exclude (e.g. eth0,ib0 or eth* or ^docker*,lo);"
                    + " unlike NCCL, eth1 never means eth10");
    public static final Setting SOCKET_FAMILY = Setting.define("JCCL_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", STRING, null, 0, 0,
            "AF_INET or AF_INET6 to force the address family");
    public static final Setting SOCKET_NTHREADS = Setting.define("JCCL_SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS", INT, "1", 1, 16,
            "stream threads per peer connection (with JCCL_SOCKET_OFFLOAD on; socket i belongs to thread i mod this)");
    public static final Setting SOCKET_OFFLOAD = Setting.define("JCCL_SOCKET_OFFLOAD", null, INT, "-1", -1, 1,
            "1: JCCL_SOCKET_NTHREADS threads of their own drive each TCP connection's sockets while the operation thread"
                    + " reduces; 0: the operation thread drives them; -1 (auto): on when JCCL_SOCKET_NTHREADS > 1 and the process may use"
                    + " (JCCL_SOCKET_NTHREADS + 1) CPUs per rank of its host");
    public static final Setting SOCKET_SPLIT = Setting.define("JCCL_SOCKET_SPLIT", null, BOOL, "1", 0, 0,
            "1: large TCP messages (from 64 KiB) have sockets of their own per direction (JCCL_SOCKET_NTHREADS x"
                    + " JCCL_NSOCKS_PERTHREAD each way, at most 32; twice the sockets per peer), so one side's sending never holds up"
                    + " the other's; 0: every socket carries both directions (the lower rank of each pair decides for the pair)");
    public static final Setting NSOCKS_PERTHREAD = Setting.define("JCCL_NSOCKS_PERTHREAD", "NCCL_NSOCKS_PERTHREAD", INT, "1", 1, 16,
            "sockets per thread per peer connection; sockets per peer = threads x this (at most 64)");
    public static final Setting SOCKET_BUFFER = Setting.define("JCCL_SOCKET_BUFFER", null, BYTES, "4M", 0, 1L << 30,
            "SO_SNDBUF/SO_RCVBUF of data sockets (0 keeps the OS default)");
    public static final Setting CHECKSUM = Setting.define("JCCL_CHECKSUM", null, BOOL, "0", 0, 0,
            "1 adds a CRC32C to every TCP stripe and checks it on receipt: a corrupted stripe fails the operation naming the peer"
                    + " instead of returning a wrong result (the lower rank of each pair decides for the pair)");
    public static final Setting TLS = Setting.define("JCCL_TLS", null, BOOL, "0", 0, 0,
            "1 runs mutual TLS 1.3 (JDK javax.net.ssl) on every bootstrap, control-channel and TCP data connection; needs"
                    + " JCCL_TLS_KEYSTORE and JCCL_TLS_TRUSTSTORE; set alike on every rank");
    public static final Setting TLS_KEYSTORE = Setting.define("JCCL_TLS_KEYSTORE", null, STRING, null, 0, 0,
            "PKCS12 or JKS file with this rank's private key and certificate chain (for JCCL_TLS=1)");
    public static final Setting TLS_KEYSTORE_PASSWORD = Setting.define("JCCL_TLS_KEYSTORE_PASSWORD", null, STRING, null, 0, 0,
            "password of JCCL_TLS_KEYSTORE and of the key in it");
    public static final Setting TLS_TRUSTSTORE = Setting.define("JCCL_TLS_TRUSTSTORE", null, STRING, null, 0, 0,
            "PKCS12 or JKS file with the CA certificate(s) every peer's certificate must chain to (for JCCL_TLS=1)");
    public static final Setting TLS_TRUSTSTORE_PASSWORD = Setting.define("JCCL_TLS_TRUSTSTORE_PASSWORD", null, STRING, null, 0, 0,
            "password of JCCL_TLS_TRUSTSTORE (default: JCCL_TLS_KEYSTORE_PASSWORD)");

    // ---- transports and algorithms
    public static final Setting LOCAL_DISABLE = Setting.define("JCCL_LOCAL_DISABLE", null, BOOL, "0", 0, 0,
            "1 disables the in-JVM transport between ranks of one JVM (they then use TCP over loopback)");
    public static final Setting SHM_DISABLE = Setting.define("JCCL_SHM_DISABLE", "NCCL_SHM_DISABLE", BOOL, "0", 0, 0,
            "1 disables the shared-memory transport between ranks of one host (they then use TCP over loopback)");
    public static final Setting HOSTID = Setting.define("JCCL_HOSTID", "NCCL_HOSTID", STRING, null, 0, 0,
            "replaces the host identity (boot id + host name) that decides which ranks share a host (SHM, hierarchical"
                    + " collectives): one id for every rank of this process, or a comma list indexed by rank (a,a,b,b: ranks 0,1"
                    + " on host a, 2,3 on host b; a*2,b*2 says the same) so one machine can stand in for several; ranks with different ids use TCP");
    public static final Setting SHM_DIR = Setting.define("JCCL_SHM_DIR", null, STRING, "/dev/shm", 0, 0,
            "directory (a tmpfs) for the shared-memory transport's ring files; reserved in full at communicator creation");
    public static final Setting SHM_CHUNK = Setting.define("JCCL_SHM_CHUNK", null, BYTES, "512K", 4096, 1L << 30,
            "slot size of a shared-memory ring (one per direction per same-host peer pair): messages move in chunks of this size");
    public static final Setting SHM_SLOTS = Setting.define("JCCL_SHM_SLOTS", null, INT, "8", 1, 1024,
            "slots per shared-memory ring (chunks in flight); each rank reserves slots x chunk per same-host peer");
    public static final Setting SHM_COLL_BUFFER = Setting.define("JCCL_SHM_COLL_BUFFER", null, BYTES, "16M", 0, 1L << 30,
            "bytes per rank of the communicator's shared collective segment (all-reduce, all-gather, reduce-scatter and"
            + " barrier straight through shared memory when every rank is on this host over SHM; rank 0 reserves ranks x this,"
            + " less when the directory has less room, down to 256K); larger rounds go through it as a ring, so that a line is"
            + " rewritten only after this many bytes; 0: no segment, collectives use the rings");
    public static final Setting SHM_COLL_SLOT = Setting.define("JCCL_SHM_COLL_SLOT", null, BYTES, "6M", 64, 1L << 30,
            "largest round of the shared collective segment's far mode (bytes each rank publishes per synchronisation when rounds"
            + " go around the whole ring; at most half of it): from 2.5M per rank's slice HotSpot copies with non-temporal stores");
    public static final Setting SHM_COLL_RING = Setting.define("JCCL_SHM_COLL_RING", null, INT, "-1", -1, 1,
            "rounds of the shared collective segment larger than 64K: -1: rank 0 measures its copies and goes around the whole"
            + " ring (far mode) while they show the CPUs far apart, else stays in its first 4M (near mode); 0: always near; 1: always"
            + " far (rank 0's value counts)");
    public static final Setting ALGO = Setting.define("JCCL_ALGO", "NCCL_ALGO", STRING, null, 0, 0,
            "algorithms allowed, NCCL grammar: ring,rd  |  ^rd (exclude)  |  allreduce:ring;broadcast:tree (per collective);"
                    + " names: ring, rd (recursive doubling), tree, pairwise, direct, rabenseifner, bruck, scatter_allgather, shared"
                    + " (the shared collective segment of same-host ranks), hier (hierarchical: same-host stage, then one cross-host"
                    + " stage; all_reduce, broadcast, reduce, all_gather, reduce_scatter of ranks on several hosts);"
                    + " unset: the tuner picks the cheapest by its cost model");
    public static final Setting SMALL_MSG_BYTES = Setting.define("JCCL_RD_THRESHOLD", null, BYTES, null, 0, 1L << 40,
            "if set: all-reduce messages up to this size use recursive doubling, larger ones ring or rabenseifner (the tuner picks);"
                    + " unset: the tuner picks among all three");
    public static final Setting IDLE_SPIN_US = Setting.define("JCCL_IDLE_SPIN_US", null, INT, "200", 0, 100_000_000,
            "while waiting for a peer: microseconds of busy polling before yielding the CPU");
    public static final Setting IDLE_SPIN_YIELD_US = Setting.define("JCCL_IDLE_SPIN_YIELD_US", null, INT, "0", 0, 100_000_000,
            "while busy polling: yield the CPU once every this many microseconds, so a peer sharing the core can run (0: never;"
                    + " every poll where this host has more ranks of the communicator than CPUs)");
    public static final Setting IDLE_YIELD_US = Setting.define("JCCL_IDLE_YIELD_US", null, INT, "2000", 0, 100_000_000,
            "while waiting for a peer: microseconds of polling with Thread.yield() before blocking in the selector (no CPU)");
    public static final Setting MAX_INFLIGHT = Setting.define("JCCL_MAX_INFLIGHT", null, INT, "128", 1, 1 << 20,
            "operations a communicator may have issued and not finished; an asynchronous call beyond it waits (running the oldest"
                    + " queued operations itself) until one finishes, so a caller that issues faster than operations complete is"
                    + " held back instead of filling the heap");
    public static final Setting OP_THREAD_DELAY_US = Setting.define("JCCL_OP_THREAD_DELAY_US", null, INT, "1000", 0, 100_000_000,
            "microseconds a queued asynchronous operation waits for its caller to run it (in Work.join(), or at JCCL_MAX_INFLIGHT)"
                    + " before the communicator's operation thread starts it (between this and about twice this); the operation thread"
                    + " looks at the queue this often for 100 ms after each asynchronous call (below 200 us: it is woken per burst of"
                    + " calls instead); 0: the operation thread starts every asynchronous operation at once (a thread hand-off per burst,"
                    + " costly where ranks share cores)");
    public static final Setting CHECK = Setting.define("JCCL_CHECK", null, STRING, "0", 0, 0,
            "0: the always-on mismatch guard: every message, shared-segment arrive and GPU record carries a compact signature of its"
            + " call (collective, count, data type, op, root), so ranks whose calls differ fail on every rank, naming who called"
            + " what, instead of returning wrong data; 1: in addition, ranks exchange a full signature of every collective (with its"
            + " sequence number, so calls of different collectives or in a different order are named too; costs 2-5x at 8 B);"
            + " none: no guard (measurements only: mismatched calls may then return wrong results); must be alike on every rank");
    public static final Setting CHUNK_SIZE = Setting.define("JCCL_CHUNK_SIZE", null, BYTES, "512K", 4096, 1L << 30,
            "pipelining chunk of ring algorithms, in bytes");

    public static final Setting REDUCE_VECTOR = Setting.define("JCCL_REDUCE_VECTOR", null, STRING, "auto", 0, 0,
            "reduction kernels: auto (Vector API when the JVM runs with --add-modules jdk.incubator.vector, else scalar;"
                    + " float16/bfloat16 stay scalar), 1 (Vector API for every type; a warning and scalar if the module is absent)"
                    + " or 0 (scalar)");

    // ---- GPUs (jccl-cuda)
    public static final Setting CUDA_DEVICE = Setting.define("JCCL_CUDA_DEVICE", null, STRING, null, 0, 0,
            "the GPU this process drives (beats the rule: the only GPU it sees, else GPU number local rank of those it sees):"
                    + " an index into the GPUs CUDA_VISIBLE_DEVICES leaves visible, or a UUID or unique prefix (GPU-..., MIG-...,"
                    + " nvidia-smi -L)");
    public static final Setting CUDA_WAIT_TIMEOUT = Setting.define("JCCL_CUDA_WAIT_TIMEOUT", null, DURATION_SECONDS, "300", 1, 86_400,
            "a GPU kernel waiting for a peer GPU gives up after this many seconds and the communicator fails (never a GPU spinning forever)");
    public static final Setting CUDA_P2P_DISABLE = Setting.define("JCCL_CUDA_P2P_DISABLE", "NCCL_P2P_DISABLE", BOOL, "0", 0, 0,
            "1: never map peer GPU memory; stage GPU collectives through pinned host memory and the CPU transports");
    public static final Setting CUDA_NBLOCKS = Setting.define("JCCL_CUDA_NBLOCKS", null, INT, "0", 0, 1024,
            "thread blocks per GPU collective kernel; 0 picks by message size");
    public static final Setting CUDA_ONESHOT_MAX = Setting.define("JCCL_CUDA_ONESHOT_MAX", null, BYTES, "256K", 0, 1L << 40,
            "largest all-reduce (bytes) that uses the one-shot kernel (every GPU pushes into every peer's inbox); above it, push");
    public static final Setting CUDA_ALLREDUCE = Setting.define("JCCL_CUDA_ALLREDUCE", null, STRING, "auto", 0, 0,
            "GPU all-reduce algorithm: auto (oneshot, then push, then ring: from 64 MB on 3+ GPUs, 512 MB on 2), oneshot (pushes into every peer's inbox; at most JCCL_CUDA_ONESHOT_MAX), twoshot"
                    + " (loads from peers, stores to peers), push (stores only, through scratch) or push-serial (push, the reduced"
                    + " slice stored to one peer after another) or ce (copy engines: every GPU's copy engines write each peer's"
                    + " slice into that peer's scratch, the owner reduces it and its copy engines write the result to every peer,"
                    + " pipelined in JCCL_CUDA_CE_CHUNK pieces; measured slower than push on 4x H200, level on 2, so auto never"
                    + " picks it) or ring (reduce-scatter then all-gather around the ring: every GPU stores to its successor only,"
                    + " JCCL_CUDA_RING_SLICE per block and step)");
    public static final Setting CUDA_REDUCE_SCATTER = Setting.define("JCCL_CUDA_REDUCE_SCATTER", null, STRING, "auto", 0, 0,
            "GPU reduce-scatter: auto, load (one kernel loads every peer's block and reduces it) or ce (copy engines write"
                    + " each block into its owner's scratch, a kernel reduces them, pipelined; measured slower than load on 4x H200, so"
                    + " auto never picks it)");
    public static final Setting CUDA_CE_CHUNK = Setting.define("JCCL_CUDA_CE_CHUNK", null, BYTES, "16M", 64 << 10, 1L << 32,
            "piece of the copy-engine all-reduce / reduce-scatter: each GPU's copy engines write this many bytes to every peer"
                    + " per step, into 4 rotating slots of the push scratch (so at most JCCL_CUDA_PUSH_SLOT / 4)");
    public static final Setting CUDA_CE_LANES = Setting.define("JCCL_CUDA_CE_LANES", null, INT, "2", 1, 4,
            "streams per peer and direction of the copy-engine all-reduce / reduce-scatter: consecutive pieces alternate"
                    + " between them, so one piece's copy overlaps the flag kernel between the next two");
    public static final Setting CUDA_RING_SLICE = Setting.define("JCCL_CUDA_RING_SLICE", null, BYTES, "512K", 256, 1L << 30,
            "bytes each thread block of the ring all-reduce sends to the successor per step (4 slots of it per block in the"
                    + " push scratch: capped at JCCL_CUDA_PUSH_SLOT x ranks / (4 x blocks))");
    public static final Setting CUDA_PUSH_SLOT = Setting.define("JCCL_CUDA_PUSH_SLOT", null, BYTES, "64M", 1 << 20, 1L << 34,
            "per-peer scratch slot of the push all-reduce (each GPU holds one slot per rank); larger messages go in chunks");
    public static final Setting CUDA_BROADCAST = Setting.define("JCCL_CUDA_BROADCAST", null, STRING, "auto", 0, 0,
            "GPU broadcast algorithm: auto, chain (pipelined chain root -> root+1 -> ...: every GPU stores to one peer),"
                    + " warp-chain (the chain with a pipeline per warp instead of per thread block),"
                    + " chain-async (the block chain with the per-round flags in two signalling warps, off the copying warps' path;"
                    + " parts of JCCL_CUDA_BCAST_PART; auto from 64 MB to 512 MB),"
                    + " pipe (the root stores slice j into rank j, which forwards it to the others, pipelined),"
                    + " pull (rank j loads slice j from the root and stores it to the others) or spread (every rank loads a slice"
                    + " of the root's buffer and stores it to every rank) or ce (a chain whose copy engines forward pieces of"
                    + " JCCL_CUDA_CE_CHUNK; measured slower than chain on 4x H200, so auto never picks it)");
    public static final Setting CUDA_IPC_MAILBOX = Setting.define("JCCL_CUDA_IPC_MAILBOX", null, BOOL, "1", 0, 0,
            "GPU collectives between the processes of one host read each other's buffer handles from a shared-memory mailbox"
                    + " in JCCL_SHM_DIR (0: one all-gather over the host communicator per operation, the slower path)");
    public static final Setting CUDA_BCAST_PART = Setting.define("JCCL_CUDA_BCAST_PART", null, BYTES, "0", 0, 1L << 30,
            "bytes each thread block of the chain-async broadcast forwards per round (0: 64 KiB)");
    public static final Setting CUDA_ALLTOALL = Setting.define("JCCL_CUDA_ALLTOALL", null, STRING, "auto", 0, 0,
            "GPU all-to-all: auto, split (the blocks split over the peers: every link busy at once) or serial (one peer after"
                    + " another, in an order rotated by rank)");
    public static final Setting CUDA_HIER = Setting.define("JCCL_CUDA_HIER", null, BOOL, "1", 0, 0,
            "GPU communicators spanning hosts (host identity as JCCL_HOSTID sets it): 1 runs hierarchical collectives (jccl's"
                    + " kernels inside each host, the host transports between hosts, pipelined in JCCL_CUDA_HIER_CHUNK steps);"
                    + " 0 stages every collective whole through pinned host memory");
    public static final Setting CUDA_HIER_CHUNK = Setting.define("JCCL_CUDA_HIER_CHUNK", null, BYTES, "8M", 4096, 1L << 32,
            "hierarchical GPU collectives: the largest part of the vector one pipeline step moves (smaller messages are cut into"
                    + " JCCL_CUDA_HIER_SLOTS steps of at least 256 KiB)");
    public static final Setting CUDA_HIER_SLOTS = Setting.define("JCCL_CUDA_HIER_SLOTS", null, INT, "4", 1, 16,
            "hierarchical GPU collectives: pipeline steps in flight (pinned host slots): copies, network and kernels of"
                    + " different steps overlap");
    public static final Setting CUDA_HIER_WHOLE_MAX = Setting.define("JCCL_CUDA_HIER_WHOLE_MAX", null, BYTES, "128K", 0, 1L << 30,
            "hierarchical GPU all-reduce: up to this size each host all-reduces the whole vector and every GPU all-reduces it"
                    + " across hosts (fewest steps); above it, each GPU carries 1/L of it across hosts (reduce-scatter, all-reduce,"
                    + " all-gather)");
    public static final Setting NCCL_LIBRARY = Setting.define("JCCL_NCCL_LIBRARY", null, STRING, null, 0, 0,
            "path of libnccl.so.2 for --backend nccl; default: the loader path, then the nvidia-nccl Python wheels");

    // ---- diagnostics
    public static final Setting DEBUG = Setting.define("JCCL_DEBUG", "NCCL_DEBUG", STRING, "WARN", 0, 0,
            "log level: NONE, VERSION, WARN, INFO, TRACE");
    public static final Setting DEBUG_SUBSYS = Setting.define("JCCL_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", STRING, "INIT,ENV", 0, 0,
            "subsystems logged at INFO/TRACE: INIT,COLL,P2P,SHM,NET,GRAPH,TUNING,ENV,ALLOC,BOOTSTRAP,PROXY or ALL; ^ excludes (^COLL,P2P)");
    public static final Setting DEBUG_FILE = Setting.define("JCCL_DEBUG_FILE", "NCCL_DEBUG_FILE", STRING, null, 0, 0,
            "log file instead of stderr; %h host, %p pid, %r rank (lines logged before the rank is known go to the first rank's file)");

    // ---- faults and hang attribution (org.jccl.internal.control)
    public static final Setting PEER_TIMEOUT = Setting.define("JCCL_PEER_TIMEOUT", null, DURATION_SECONDS, "10", 1, 86_400,
            "seconds without a heartbeat on the control channel after which a peer that has not closed (stopped, hung,"
                    + " cut off) fails every rank's pending and later operations with a timeout naming it; heartbeats go every"
                    + " quarter of this");
    public static final Setting FLIGHT_RECORDER_SIZE = Setting.define("JCCL_FLIGHT_RECORDER_SIZE", null, INT, "1024", 16, 1 << 20,
            "operations each communicator remembers (sequence number, collective, bytes, type, root/peer, algorithm,"
                    + " transport, state, times) for stall reports, dumps and jccl status");
    public static final Setting STALL_WARN = Setting.define("JCCL_STALL_WARN", null, DURATION_SECONDS, "30", 1, 86_400,
            "seconds an operation may wait before the ranks compare sequence numbers, each logs one line naming the ranks"
                    + " that are behind (or that called a different collective) and the flight recorder is dumped");
    public static final Setting CONTROL_LINGER = Setting.define("JCCL_CONTROL_LINGER", null, DURATION_SECONDS, "300", 0, 86_400,
            "seconds rank 0 (the control hub) keeps supervising a communicator it closed while other ranks still have it open"
                    + " (heartbeats, failure notices, stall reports go on; close() does not wait); when every rank closed it stops"
                    + " at once; 0: it stops at its close() and the others log that supervision is off");
    public static final Setting DUMP_DIR = Setting.define("JCCL_DUMP_DIR", null, STRING, null, 0, 0,
            "directory for flight-recorder dumps (jccl-flight-<comm>-r<rank>-<pid>.json) and status endpoints;"
                    + " unset: /tmp/jccl-<user>");

    // ---- topology and RDMA device choice (org.jccl.internal.topo; jccl topo, jccl doctor)
    public static final Setting TOPO_FILE = Setting.define("JCCL_TOPO_FILE", null, STRING, null, 0, 0,
            "read the host's topology from this JSON file (written by jccl topo --json or JCCL_TOPO_DUMP_FILE) instead of sysfs");
    public static final Setting TOPO_DUMP_FILE = Setting.define("JCCL_TOPO_DUMP_FILE", null, STRING, null, 0, 0,
            "write the detected topology to this JSON file (%h host, %p pid)");
    public static final Setting IB_HCA = Setting.define("JCCL_IB_HCA", "NCCL_IB_HCA", STRING, null, 0, 0,
            "RDMA devices to use: mlx5_0,mlx5_1:1 (exact names, :port), ^ to exclude, a trailing * for a prefix (mlx5_*);"
                    + " unset: every device with an active port");
    public static final Setting IB_GID_INDEX = Setting.define("JCCL_IB_GID_INDEX", "NCCL_IB_GID_INDEX", INT, null, 0, 1023,
            "RoCE: GID table index to use; unset: the first RoCE v2 GID with an IPv4 address");
    public static final Setting IB_TIMEOUT = Setting.define("JCCL_IB_TIMEOUT", "NCCL_IB_TIMEOUT", INT, null, 1, 31,
            "RDMA (UCX): the InfiniBand transport timeout exponent, 4.096 us x 2^value as NCCL reads it; passed to UCX as UCX_RC_TIMEOUT;"
                    + " unset: UCX's default");
    public static final Setting IB_RETRY_CNT = Setting.define("JCCL_IB_RETRY_CNT", "NCCL_IB_RETRY_CNT", INT, null, 0, 7,
            "RDMA (UCX): InfiniBand retransmissions before a link counts as failed; passed to UCX as UCX_RC_RETRY_COUNT; unset: UCX's default");
    public static final Setting IB_TC = Setting.define("JCCL_IB_TC", "NCCL_IB_TC", INT, null, 0, 255,
            "RDMA (UCX): InfiniBand/RoCE traffic class; passed to UCX as UCX_IB_TRAFFIC_CLASS; unset: UCX's default");
    public static final Setting NET = Setting.define("JCCL_NET", "NCCL_NET", STRING, "auto", 0, 0,
            "network between hosts: UCX (RDMA through the jccl-ucx module; IB is a synonym), Socket (jccl's TCP) or auto (UCX when UCX"
                    + " is installed and the host has an active RDMA port, else Socket)");
    public static final Setting UCX_TLS = Setting.define("JCCL_UCX_TLS", null, STRING, null, 0, 0,
            "UCX transports to use, passed through as UCX_TLS (rc,ud,sm,self; tcp; posix,cma,self); unset: UCX's choice");
    public static final Setting UCX_SAME_HOST = Setting.define("JCCL_UCX_SAME_HOST", null, BOOL, "0", 0, 0,
            "1: UCX also carries pairs of ranks on one host (when SHM is off or between JVMs); for tests, normally SHM does");
    public static final Setting UCX_HOME = Setting.define("JCCL_UCX_HOME", null, STRING, null, 0, 0,
            "directory of the UCX to load (its lib/libucp.so.0; HPC-X's $HPCX_UCX_DIR); unset: the system loader's libucp.so.0");

    /** Forces the class to load so every constant above is registered. */
    static void init() {
    }

    /** {@link #CHECK} off: {@code none}. */
    public static final int CHECK_NONE = -1;
    /** {@link #CHECK} default: the mismatch guard only. */
    public static final int CHECK_GUARD = 0;
    /** {@link #CHECK} {@code 1}: the guard and the full signature exchange. */
    public static final int CHECK_FULL = 1;

    /** The level {@link #CHECK} asks for: {@link #CHECK_NONE}, {@link #CHECK_GUARD} or {@link #CHECK_FULL}. */
    public static int checkLevel(org.jccl.Config config) {
        String v = CHECK.getString(config).trim().toLowerCase(java.util.Locale.ROOT);
        return switch (v) {
            case "none" -> CHECK_NONE;
            case "1", "true", "yes", "on" -> CHECK_FULL;
            default -> CHECK_GUARD; // "0"; other words are refused by SettingChecks
        };
    }
}
