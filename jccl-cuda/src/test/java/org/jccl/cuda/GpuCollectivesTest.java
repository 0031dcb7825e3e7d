package org.jccl.cuda;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.cuda.testing.Backend;
import org.jccl.cuda.testing.Case;
import org.jccl.cuda.testing.CaseRunner;
import org.jccl.cuda.testing.ChainCheck;
import org.jccl.cuda.testing.Coll;
import org.jccl.cuda.testing.GpuEnv;
import org.jccl.cuda.testing.RankSet;
import org.jccl.cuda.testing.Style;
import org.jccl.cuda.testing.Sweep;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Named;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Correctness of the GPU collectives, for jccl's kernels ({@link CudaCommunicator}) and, as a check
 * of the test itself, NCCL ({@link NcclCommunicator}, where libnccl.so.2 loads): every collective x
 * every type x every operator x odd and large counts x in place and out of place, over every
 * visible GPU and over the first two, issued both with one thread per rank and with one thread
 * inside groupStart/groupEnd. Results are compared element by element with an independent reference
 * ({@link org.jccl.cuda.testing.Elements}); receive areas are poisoned first and guarded on both
 * sides. The sweep's size and everything else are set with system properties: see {@link GpuEnv}
 * and {@link Sweep} (default: a few minutes on 4 GPUs; {@code -Djccl.gpu.full=true}: everything).
 *
 * <p>Skipped, with the driver's reason, where no GPU is visible (CI). On the GPU machine it runs
 * through the JUnit console launcher: see scripts/gpu-check.sh.
 *
 * <p>Tests tagged {@code errors} make calls that must fail (and one aborts a communicator while a
 * kernel waits); compute-sanitizer runs exclude them.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class GpuCollectivesTest {

    private static final Duration HOST_CALL_TIMEOUT = Duration.ofSeconds(20);

    /** Every test is skipped with this reason where no GPU is visible (each test, so that reports list them). */
    private static String noGpu() {
        return "skipped: no GPU here: " + Cuda.unavailableReason();
    }

    @BeforeAll
    static void describeTheMachine() {
        if (!Cuda.isAvailable()) {
            System.out.println("GpuCollectivesTest: " + noGpu());
            return;
        }
        StringBuilder sb = new StringBuilder("GPU collectives: CUDA driver ").append(Cuda.driverVersion())
                .append(", ").append(Cuda.deviceCount()).append(" GPU(s):");
        for (CudaDevice d : Cuda.devicesList()) {
            sb.append("\n  ").append(d).append(", sm_").append(d.computeCapability().replace(".", ""))
                    .append(", ").append(d.totalMemory() >> 30).append(" GiB");
        }
        sb.append("\n  sweep ").append(Sweep.mode().name().toLowerCase(Locale.ROOT))
                .append(", rank counts ").append(GpuEnv.rankCounts())
                .append(", base seed 0x").append(Long.toHexString(GpuEnv.SEED))
                .append(", case timeout ").append(CaseRunner.caseTimeout().toSeconds()).append(" s");
        for (Backend b : GpuEnv.backends()) {
            sb.append("\n  backend ").append(b).append(": ").append(b.available() ? "available" : "not available: " + b.unavailableReason());
        }
        System.out.println(sb);
    }

    @BeforeEach
    void requireGpu() {
        Assumptions.assumeTrue(Cuda.isAvailable(), GpuCollectivesTest::noGpu);
    }

    @AfterAll
    static void closeSets() {
        if (Cuda.isAvailable()) {
            GpuEnv.closeAll();
        }
    }

    // Argument sources: without a GPU, one placeholder each (then skipped by requireGpu with the reason).

    /**
     * What one invocation of {@link #collectives} runs on a communicator set: the sweep of one
     * collective in one style, the chain, or the misaligned buffers.
     */
    record Part(String label, Style style, Coll coll) {
        @Override
        public String toString() {
            return label;
        }
    }

    /** Every part for every backend and rank count, grouped by set so that each set is created once. */
    static Stream<Arguments> parts() {
        if (!Cuda.isAvailable()) {
            return Stream.of(Arguments.of(Named.of("(no GPU)", Backend.JCCL), 0, new Part("-", Style.THREADS, Coll.ALL_REDUCE)));
        }
        List<Arguments> out = new ArrayList<>();
        for (Backend b : GpuEnv.backends()) {
            for (int n : GpuEnv.rankCounts()) {
                for (Style style : Style.values()) {
                    for (Coll coll : Coll.values()) {
                        out.add(Arguments.of(b, n, new Part(style + " " + coll, style, coll)));
                    }
                }
                out.add(Arguments.of(b, n, new Part("chained", null, null)));
                out.add(Arguments.of(b, n, new Part("misaligned", null, null)));
            }
        }
        return out.stream();
    }

    static Stream<Arguments> backends() {
        if (!Cuda.isAvailable()) {
            return Stream.of(Arguments.of(Named.of("(no GPU)", Backend.JCCL)));
        }
        return GpuEnv.backends().stream().map(Arguments::of);
    }

    private static void skipUnless(Backend b) {
        String why = GpuEnv.skipReason(b);
        Assumptions.assumeTrue(why == null, why);
    }

    /**
     * Skips a jccl test of what exists only on the peer-to-peer path (one-shot kernels, chain-async
     * broadcast, one thread driving several GPUs' send/recv in a group) when JCCL_CUDA_P2P_DISABLE
     * (or NCCL_P2P_DISABLE) sends every communicator down the path staged through host memory. That
     * path has its own tests here (the staged parts run with or without the setting).
     */
    private static void skipUnlessPeerToPeer(Backend b, String what) {
        boolean disabled = b == Backend.JCCL && org.jccl.internal.config.Settings.CUDA_P2P_DISABLE.getBool(org.jccl.Config.fromEnvironment());
        Assumptions.assumeFalse(disabled, () -> "skipped: " + what + " runs only on the peer-to-peer path, and"
                + " JCCL_CUDA_P2P_DISABLE=1 (or NCCL_P2P_DISABLE=1) stages every communicator through host memory");
    }

    /** Prints a one-line summary and fails with every failing case when there is any. */
    private static void report(RankSet set, String label, CaseRunner.Outcome o) {
        System.out.printf(Locale.ROOT, "%s %s: %d case(s), %d failed%s, %.1f s%n", set.describe(), label, o.ran(),
                o.failures().size(), o.broken() ? ", communicators broken" : o.stopped() ? ", stopped at the failure limit" : "",
                o.seconds());
        if (o.broken()) {
            GpuEnv.noteIfBroken(set);
        }
        if (!o.failures().isEmpty()) {
            String how = o.broken() ? " (then the communicators were unusable and the sweep stopped)"
                    : o.stopped() ? " (the sweep stopped there: -Djccl.gpu.maxFailures=N raises the limit)" : "";
            fail(set.describe() + " " + label + ": " + o.failures().size() + " failing case(s) of " + o.ran() + " run" + how
                    + "; reproduce one with -Djccl.gpu.seed=0x" + Long.toHexString(GpuEnv.SEED)
                    + " -Djccl.gpu.filter='<its name, without the seed>'\n" + String.join("\n", o.failures()));
        }
    }

    // ------------------------------------------------------------------ the sweep

    /**
     * The sweep of one collective in one style (see {@link Sweep}); "chained": 24 dependent
     * collectives back to back on each stream with no host synchronization ({@link ChainCheck});
     * "misaligned": buffers aligned only to their element size (send 1, recv 3 elements past a
     * 256-byte boundary), like tensor views.
     */
    @Order(1)
    @ParameterizedTest(name = "{0} x{1} {2}")
    @MethodSource("parts")
    @Timeout(value = 900, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void collectives(Backend backend, int ranks, Part part) {
        skipUnless(backend);
        if (part.style() == Style.GROUP && part.coll() == Coll.SEND_RECV) {
            skipUnlessPeerToPeer(backend, "send/recv of several GPUs grouped on one thread");
        }
        RankSet set = GpuEnv.set(backend, ranks);
        switch (part.label()) {
            case "chained" -> chained(set);
            case "misaligned" -> report(set, "misaligned",
                    CaseRunner.sweep(set, Sweep.misaligned(Sweep.mode(), ranks, GpuEnv.SEED), GpuEnv.filter(), GpuEnv.maxFailures()));
            default -> report(set, part.label(), CaseRunner.sweep(set,
                    Sweep.cases(Sweep.mode(), part.coll(), ranks, part.style(), GpuEnv.SEED), GpuEnv.filter(), GpuEnv.maxFailures()));
        }
    }

    private static void chained(RankSet set) {
        long[] counts = Sweep.mode() == Sweep.Mode.TINY ? new long[] {4099} : new long[] {4099, Sweep.MEG + 5};
        long t0 = System.nanoTime();
        List<String> failures = new ArrayList<>();
        for (long count : counts) {
            try {
                String f = ChainCheck.run(set, count, GpuEnv.SEED);
                if (f != null) {
                    failures.add(f);
                }
            } catch (RankSet.Broken e) {
                failures.add("chain count=" + count + ": " + e.getMessage());
                break;
            }
        }
        report(set, "chained", new CaseRunner.Outcome(counts.length, failures, !set.usable(), false, (System.nanoTime() - t0) / 1e9));
    }

    /** Every selectable kernel variant of jccl, each forced through its setting (the default sweep runs only what auto picks). */
    static Stream<Arguments> variants() {
        if (!Cuda.isAvailable()) {
            return Stream.of(Arguments.of("(no GPU)", "-", Coll.ALL_REDUCE));
        }
        return allVariants();
    }

    /** {@link #variants()} on any machine (GpuVariantsCoverageTest checks, without a GPU, that it names every tuner variant). */
    static Stream<Arguments> allVariants() {
        return Stream.of(
                Arguments.of("JCCL_CUDA_ALLREDUCE", "oneshot", Coll.ALL_REDUCE),
                Arguments.of("JCCL_CUDA_ALLREDUCE", "twoshot", Coll.ALL_REDUCE),
                Arguments.of("JCCL_CUDA_ALLREDUCE", "push", Coll.ALL_REDUCE),
                Arguments.of("JCCL_CUDA_ALLREDUCE", "push-serial", Coll.ALL_REDUCE),
                Arguments.of("JCCL_CUDA_ALLREDUCE", "ring", Coll.ALL_REDUCE),
                // 256-byte slices: many rounds per operation, so the four slots of every block rotate
                Arguments.of("JCCL_CUDA_ALLREDUCE", "ring;JCCL_CUDA_RING_SLICE=256", Coll.ALL_REDUCE),
                Arguments.of("JCCL_CUDA_BROADCAST", "chain", Coll.BROADCAST),
                Arguments.of("JCCL_CUDA_BROADCAST", "warp-chain", Coll.BROADCAST),
                Arguments.of("JCCL_CUDA_BROADCAST", "chain-async", Coll.BROADCAST),
                // 16-byte parts: many rounds per operation, every flag and barrier of the roles exercised
                Arguments.of("JCCL_CUDA_BROADCAST", "chain-async;JCCL_CUDA_BCAST_PART=16", Coll.BROADCAST),
                Arguments.of("JCCL_CUDA_BROADCAST", "pipe", Coll.BROADCAST),
                Arguments.of("JCCL_CUDA_BROADCAST", "pull", Coll.BROADCAST),
                Arguments.of("JCCL_CUDA_BROADCAST", "spread", Coll.BROADCAST),
                Arguments.of("JCCL_CUDA_BROADCAST", "ce", Coll.BROADCAST),
                // 64 KiB pieces: many pieces per lane
                Arguments.of("JCCL_CUDA_BROADCAST", "ce;JCCL_CUDA_CE_CHUNK=64K;JCCL_CUDA_CE_LANES=3", Coll.BROADCAST),
                Arguments.of("JCCL_CUDA_ALLTOALL", "split", Coll.ALL_TO_ALL),
                Arguments.of("JCCL_CUDA_ALLTOALL", "serial", Coll.ALL_TO_ALL),
                Arguments.of("JCCL_CUDA_ALLREDUCE", "ce", Coll.ALL_REDUCE),
                // 64 KiB pieces: many pieces per operation, so the four scratch slots rotate
                Arguments.of("JCCL_CUDA_ALLREDUCE", "ce;JCCL_CUDA_CE_CHUNK=64K", Coll.ALL_REDUCE),
                // 1 MiB push slots: pieces capped at a quarter of the slot (256 KiB)
                Arguments.of("JCCL_CUDA_ALLREDUCE", "ce;JCCL_CUDA_PUSH_SLOT=1M", Coll.ALL_REDUCE),
                Arguments.of("JCCL_CUDA_REDUCE_SCATTER", "load", Coll.REDUCE_SCATTER),
                Arguments.of("JCCL_CUDA_REDUCE_SCATTER", "ce", Coll.REDUCE_SCATTER),
                Arguments.of("JCCL_CUDA_REDUCE_SCATTER", "ce;JCCL_CUDA_CE_CHUNK=64K", Coll.REDUCE_SCATTER));
    }

    /**
     * The sweep of one collective with one algorithm forced, on the largest rank count of the run
     * (and on 3 GPUs when that is 4 or more, so that slices of the pipelined broadcast are uneven).
     */
    @Order(1)
    @ParameterizedTest(name = "{0}={1}")
    @MethodSource("variants")
    @Timeout(value = 900, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void forcedVariants(String setting, String value, Coll coll) {
        skipUnless(Backend.JCCL);
        GpuEnv.closeAll();
        // The largest configured rank count, and 3 (uneven broadcast slices) when it is 4 or more.
        int most = GpuEnv.rankCounts().stream().mapToInt(Integer::intValue).max().orElse(1);
        List<Integer> counts = most >= 4 ? List.of(most, 3) : List.of(most);
        for (int n : counts) {
            List<CudaDevice> devices = GpuEnv.devices(n);
            // value "v;K=V;...": the setting's value, then further settings for the same variant
            String[] parts = value.split(";");
            org.jccl.Config built = org.jccl.Config.fromEnvironment().with(setting, parts[0]);
            for (int i = 1; i < parts.length; i++) {
                String[] kv = parts[i].split("=", 2);
                built = built.with(kv[0], kv[1]);
            }
            org.jccl.Config config = built;
            List<DeviceCommunicator> comms = RankSet.withDeadline("createAll with " + setting + "=" + value, GpuEnv.CREATE_TIMEOUT,
                    () -> List.copyOf(CudaCommunicator.createAll(devices, config)));
            try (RankSet set = RankSet.of(Backend.JCCL, devices, comms)) {
                report(set, setting + "=" + value + " THREADS " + coll,
                        CaseRunner.sweep(set, Sweep.cases(Sweep.mode(), coll, n, Style.THREADS, GpuEnv.SEED), GpuEnv.filter(),
                                GpuEnv.maxFailures()));
                report(set, setting + "=" + value + " misaligned", CaseRunner.sweep(set, Sweep.misaligned(Sweep.mode(), n, GpuEnv.SEED)
                        .stream().filter(c -> c.coll() == coll).toList(), GpuEnv.filter(), GpuEnv.maxFailures()));
            }
        }
    }

    /**
     * The host-staged communicator (JCCL_CUDA_P2P_DISABLE=1: what GPUs without a peer path get):
     * every collective and send/recv, one thread per rank, through pinned host memory and the CPU
     * transports; every rank says why it is staged.
     */
    @Order(1)
    @Test
    @Timeout(value = 900, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void stagedThroughHostMemory() {
        skipUnless(Backend.JCCL);
        GpuEnv.closeAll();
        int n = GpuEnv.rankCounts().stream().mapToInt(Integer::intValue).max().orElse(1);
        List<CudaDevice> devices = GpuEnv.devices(n);
        org.jccl.Config config = org.jccl.Config.fromEnvironment().with("JCCL_CUDA_P2P_DISABLE", "1");
        List<DeviceCommunicator> comms = RankSet.withDeadline("createAll with JCCL_CUDA_P2P_DISABLE=1", GpuEnv.CREATE_TIMEOUT,
                () -> List.copyOf(CudaCommunicator.createAll(devices, config)));
        try (RankSet set = RankSet.of(Backend.JCCL, devices, comms)) {
            for (DeviceCommunicator c : comms) {
                String why = ((CudaCommunicator) c).stagedBecause();
                assertTrue(why != null && why.contains("JCCL_CUDA_P2P_DISABLE=1"), c + " is not staged: " + why);
                assertNull(((CudaCommunicator) c).asyncError(), c + ": a staged communicator has no asynchronous failure");
            }
            for (Coll coll : Coll.values()) {
                report(set, "staged THREADS " + coll, CaseRunner.sweep(set, Sweep.cases(Sweep.mode(), coll, n, Style.THREADS,
                        GpuEnv.SEED), GpuEnv.filter(), GpuEnv.maxFailures()));
            }
        }
    }

    /**
     * The one-rank-per-process path, with the ranks as threads of this process: one host
     * communicator per rank (jccl's in-process transport), then create(host, device) on each.
     */
    @Order(2)
    @ParameterizedTest(name = "{0}")
    @MethodSource("backends")
    @Timeout(value = 300, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void createOverHostCommunicators(Backend backend) {
        skipUnless(backend);
        GpuEnv.closeAll();
        int n = Cuda.deviceCount();
        List<CudaDevice> devices = GpuEnv.devices(n);
        List<Communicator> hosts = Jccl.initLocal(n);
        boolean healthy = false;
        try {
            List<DeviceCommunicator> comms = createPerRank(backend, hosts, devices);
            try (RankSet set = RankSet.of(backend, devices, comms)) {
                long seed = GpuEnv.SEED;
                int last = n - 1;
                int shift = n == 1 ? 0 : 1;
                long big = Sweep.mode() == Sweep.Mode.TINY ? 4099 : Sweep.MEG + 5;
                List<Case> cases = List.of(
                        Case.of(Coll.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, 17, -1, false, Style.THREADS, 0, seed),
                        Case.of(Coll.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, 65537, -1, true, Style.THREADS, 0, seed),
                        Case.of(Coll.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, big, -1, false, Style.THREADS, 0, seed),
                        Case.of(Coll.ALL_REDUCE, DataType.BFLOAT16, ReduceOp.SUM, 4099, -1, false, Style.GROUP, 0, seed),
                        Case.of(Coll.BROADCAST, DataType.INT32, null, 4099, last, false, Style.THREADS, 0, seed),
                        Case.of(Coll.REDUCE, DataType.FLOAT64, ReduceOp.MAX, 4099, 0, true, Style.THREADS, 0, seed),
                        Case.of(Coll.ALL_GATHER, DataType.INT8, null, 4099, -1, true, Style.THREADS, 0, seed),
                        Case.of(Coll.REDUCE_SCATTER, DataType.FLOAT32, ReduceOp.SUM, 4099, -1, false, Style.THREADS, 0, seed),
                        Case.of(Coll.ALL_TO_ALL, DataType.UINT8, null, 1000, -1, false, Style.THREADS, 0, seed),
                        Case.of(Coll.SEND_RECV, DataType.FLOAT32, null, 4099, shift, false, Style.THREADS, 0, seed));
                CaseRunner.Outcome o = CaseRunner.sweep(set, cases, GpuEnv.filter(), GpuEnv.maxFailures());
                healthy = set.usable();
                report(set, "create(host, device)", o);
            }
        } finally {
            for (Communicator h : hosts) {
                if (!healthy) {
                    h.abort();
                }
                h.close();
            }
        }
    }

    /** Every rank calls create(hosts[r], devices[r]) on its own thread; all must succeed within the deadline. */
    private static List<DeviceCommunicator> createPerRank(Backend backend, List<Communicator> hosts, List<CudaDevice> devices) {
        int n = hosts.size();
        ExecutorService pool = Executors.newFixedThreadPool(n, r -> {
            Thread t = new Thread(r, "gpu-create");
            t.setDaemon(true);
            return t;
        });
        try {
            List<Future<DeviceCommunicator>> fs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                fs.add(pool.submit(() -> backend.create(hosts.get(rank), devices.get(rank))));
            }
            List<DeviceCommunicator> out = new ArrayList<>();
            List<String> problems = new ArrayList<>();
            long deadline = System.nanoTime() + GpuEnv.CREATE_TIMEOUT.toNanos();
            for (int r = 0; r < n; r++) {
                try {
                    out.add(fs.get(r).get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
                } catch (ExecutionException e) {
                    problems.add("rank " + r + ": " + e.getCause());
                } catch (TimeoutException e) {
                    hosts.forEach(Communicator::abort);
                    problems.add("rank " + r + ": create did not return within " + GpuEnv.CREATE_TIMEOUT.toSeconds() + " s; stacks:\n"
                            + RankSet.stacks());
                    break;
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError(e);
                }
            }
            if (!problems.isEmpty()) {
                out.forEach(DeviceCommunicator::abort);
                fail(backend + " create(host, device) over " + n + " in-process ranks failed:\n  " + String.join("\n  ", problems));
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    // ------------------------------------------------------------------ errors

    /** "GPU 0", "device 0", "cuda:0", its PCI bus id or UUID: how a message may name the GPU. */
    private static boolean namesDevice(String msg, CudaDevice d) {
        String m = msg.toLowerCase(Locale.ROOT);
        return Pattern.compile("(gpu|device|cuda)[ :#]*" + d.ordinal() + "\\b").matcher(m).find()
                || m.contains(d.pciBusId().toLowerCase(Locale.ROOT))
                || m.contains(d.uuid().toLowerCase(Locale.ROOT));
    }

    private static final Pattern DUPLICATE_WORDING = Pattern.compile("(?i)duplicate|same|already|twice|more than one|both|used by");

    /** A rank bound to a GPU that another rank of the same communicator already uses is an error, named as such. */
    @Order(3)
    @Test
    @Tag("errors")
    @Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void duplicateDeviceIsRejected() {
        skipUnless(Backend.JCCL);
        CudaDevice d0 = Cuda.device(0);
        List<DeviceCommunicator> made = null;
        RuntimeException thrown = null;
        try {
            made = RankSet.withDeadline("createAll([GPU 0, GPU 0])", Duration.ofSeconds(60),
                    () -> Backend.JCCL.createAll(List.of(d0, d0)));
        } catch (RuntimeException e) {
            thrown = e;
        }
        if (made != null) {
            made.forEach(DeviceCommunicator::abort);
            made.forEach(DeviceCommunicator::close);
            fail("CudaCommunicator.createAll(List.of(GPU 0, GPU 0)) succeeded: two ranks on one GPU must be rejected");
        }
        checkDuplicateError("createAll([GPU 0, GPU 0])", thrown, d0);
    }

    private static void checkDuplicateError(String what, Throwable thrown, CudaDevice d) {
        assertTrue(thrown instanceof IllegalArgumentException || thrown instanceof JcclException,
                () -> what + " must throw IllegalArgumentException or a JcclException; threw " + thrown);
        String msg = String.valueOf(thrown.getMessage());
        assertTrue(namesDevice(msg, d) && DUPLICATE_WORDING.matcher(msg).find(),
                () -> what + ": the message must name the GPU (" + d + ") and say it is used twice; it was: " + msg);
    }

    /** The same rule when the ranks meet through host communicators (one process per rank in real jobs). */
    @Order(4)
    @Test
    @Tag("errors")
    @Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void duplicateDeviceAcrossHostRanksIsRejected() {
        skipUnless(Backend.JCCL);
        CudaDevice d0 = Cuda.device(0);
        List<Communicator> hosts = Jccl.initLocal(2);
        ExecutorService pool = Executors.newFixedThreadPool(2, r -> {
            Thread t = new Thread(r, "gpu-create");
            t.setDaemon(true);
            return t;
        });
        boolean clean = true;
        try {
            List<Future<DeviceCommunicator>> fs = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                int rank = r;
                fs.add(pool.submit(() -> CudaCommunicator.create(hosts.get(rank), d0)));
            }
            List<String> problems = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            for (int r = 0; r < 2; r++) {
                String what = "rank " + r + ": create(host, GPU 0) while the other rank also binds GPU 0";
                try {
                    DeviceCommunicator c = fs.get(r).get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                    c.abort();
                    c.close();
                    problems.add(what + " succeeded; it must fail");
                } catch (ExecutionException e) {
                    try {
                        checkDuplicateError(what, e.getCause(), d0);
                    } catch (AssertionError ae) {
                        problems.add(ae.getMessage());
                    }
                } catch (TimeoutException e) {
                    clean = false;
                    problems.add(what + " neither failed nor returned within 60 s (every rank must fail, none may hang); stacks:\n"
                            + RankSet.stacks());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError(e);
                }
            }
            if (!problems.isEmpty()) {
                fail(String.join("\n", problems));
            }
        } finally {
            pool.shutdownNow();
            for (Communicator h : hosts) {
                if (!clean) {
                    h.abort();
                }
                h.close();
            }
        }
    }

    /** One rejected call: what it is, and the call (made on rank 0 only). */
    private record Bad(String what, boolean nullArgument, Runnable call) {
    }

    /**
     * Bad arguments are rejected when the call is made (IllegalArgumentException, or jccl's
     * InvalidUsageException), before anything is enqueued: the receive buffer stays untouched, the
     * stream idle, and the communicator usable for a correct call afterwards.
     */
    @Order(5)
    @ParameterizedTest(name = "{0}")
    @MethodSource("backends")
    @Tag("errors")
    @Timeout(value = 300, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void badArgumentsAreRejectedBeforeAnythingRuns(Backend backend) {
        skipUnless(backend);
        int n = Cuda.deviceCount();
        RankSet set = GpuEnv.set(backend, n);
        DeviceCommunicator c0 = set.comm(0);
        CudaStream s0 = set.stream(0);
        CudaDevice d0 = set.devices().get(0);
        long len = 64L * n + 64;
        List<String> problems = new ArrayList<>();
        try (DeviceBuffer a = d0.allocate(len, DataType.FLOAT32);
             DeviceBuffer b = d0.allocate(len, DataType.FLOAT32);
             DeviceBuffer i = d0.allocate(len, DataType.INT32);
             DeviceBuffer other = n > 1 ? set.devices().get(1).allocate(len, DataType.FLOAT32) : null) {
            List<Bad> bad = new ArrayList<>();
            bad.add(new Bad("allReduce with recv (16) smaller than send (17)", false,
                    () -> c0.allReduce(a.slice(0, 17), b.slice(0, 16), ReduceOp.SUM, s0)));
            bad.add(new Bad("allReduce with send float32 and recv int32", false,
                    () -> c0.allReduce(a.slice(0, 17), i.slice(0, 17), ReduceOp.SUM, s0)));
            bad.add(new Bad("allGather with recv of " + (17L * n - 1) + " for send 17 x " + n + " ranks", false,
                    () -> c0.allGather(a.slice(0, 17), b.slice(0, 17L * n - 1), s0)));
            bad.add(new Bad("reduceScatter with send of " + (17L * n - 1) + " for recv 17 x " + n + " ranks", false,
                    () -> c0.reduceScatter(a.slice(0, 17L * n - 1), b.slice(0, 17), ReduceOp.SUM, s0)));
            if (n > 1) {
                bad.add(new Bad("allToAll of " + (5L * n + 1) + " elements, not a multiple of " + n + " ranks", false,
                        () -> c0.allToAll(a.slice(0, 5L * n + 1), b.slice(0, 5L * n + 1), s0)));
            }
            bad.add(new Bad("broadcast with root " + n + " of " + n + " ranks", false,
                    () -> c0.broadcast(a.slice(0, 17), b.slice(0, 17), n, s0)));
            bad.add(new Bad("reduce with root -1", false,
                    () -> c0.reduce(a.slice(0, 17), b.slice(0, 17), ReduceOp.SUM, -1, s0)));
            bad.add(new Bad("send to peer " + n + " of " + n + " ranks", false,
                    () -> c0.send(a.slice(0, 17), n, s0)));
            bad.add(new Bad("recv from peer -1", false,
                    () -> c0.recv(b.slice(0, 17), -1, s0)));
            bad.add(new Bad("allReduce with a null send buffer", true,
                    () -> c0.allReduce(null, b.slice(0, 17), ReduceOp.SUM, s0)));
            if (other != null) {
                bad.add(new Bad("allReduce on rank 0 (GPU 0) with send on GPU 1", false,
                        () -> c0.allReduce(other.slice(0, 17), b.slice(0, 17), ReduceOp.SUM, s0)));
                bad.add(new Bad("allReduce on rank 0 (GPU 0) with recv on GPU 1", false,
                        () -> c0.allReduce(a.slice(0, 17), other.slice(0, 17), ReduceOp.SUM, s0)));
                bad.add(new Bad("allReduce on rank 0 (GPU 0) with a stream of GPU 1", false,
                        () -> c0.allReduce(a.slice(0, 17), b.slice(0, 17), ReduceOp.SUM, set.stream(1))));
            }
            MemorySegment host = Arena.ofAuto().allocate(b.byteSize());
            for (Bad x : bad) {
                b.fill(CaseRunner.POISON, s0);
                s0.synchronize();
                Throwable thrown = null;
                try {
                    RankSet.withDeadline(x.what(), HOST_CALL_TIMEOUT, () -> {
                        x.call().run();
                        return null;
                    });
                } catch (AssertionError e) {
                    set.abort("a rejected call hung: " + x.what());
                    GpuEnv.noteIfBroken(set);
                    problems.add(x.what() + ": the call blocked instead of failing: " + e.getMessage());
                    break;
                } catch (RuntimeException e) {
                    thrown = e;
                }
                if (thrown == null) {
                    problems.add(x.what() + ": accepted (no exception)");
                } else if (!acceptable(backend, thrown, x.nullArgument())) {
                    problems.add(x.what() + ": threw " + thrown + "; expected IllegalArgumentException or InvalidUsageException"
                            + (x.nullArgument() ? " (or NullPointerException)" : ""));
                } else if (thrown.getMessage() == null || thrown.getMessage().isBlank()) {
                    problems.add(x.what() + ": " + thrown.getClass().getName() + " without a message");
                }
                try {
                    set.awaitIdle(Duration.ofSeconds(10));
                } catch (RankSet.Broken e) {
                    GpuEnv.noteIfBroken(set);
                    problems.add(x.what() + ": something was enqueued and never finished: " + e.getMessage());
                    break;
                }
                b.copyTo(host);
                for (long k = 0; k < host.byteSize(); k++) {
                    if (host.get(ValueLayout.JAVA_BYTE, k) != CaseRunner.POISON) {
                        problems.add(x.what() + ": rank 0's receive buffer was written (byte " + k + ") although the call was rejected");
                        break;
                    }
                }
            }
        }
        if (set.usable()) {
            Case ok = Case.of(Coll.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, 4099, -1, false, Style.THREADS, 0, GpuEnv.SEED);
            try {
                String f = CaseRunner.run(set, ok);
                if (f != null) {
                    problems.add("a correct allReduce after the rejected calls gave wrong results: " + f);
                }
            } catch (RankSet.Broken e) {
                GpuEnv.noteIfBroken(set);
                problems.add("a correct allReduce after the rejected calls failed: " + e.getMessage());
            }
        }
        if (!problems.isEmpty()) {
            fail(backend + ": " + problems.size() + " bad-argument problem(s):\n  " + String.join("\n  ", problems));
        }
    }

    private static boolean acceptable(Backend backend, Throwable t, boolean nullArgument) {
        if (t instanceof IllegalArgumentException) {
            return true;
        }
        if (nullArgument && t instanceof NullPointerException) {
            return true;
        }
        if (t instanceof JcclException je) {
            // NCCL's own ncclInvalidArgument/ncclInvalidUsage may surface as another code through the wrapper.
            return je.code() == ErrorCode.INVALID_USAGE || backend == Backend.NCCL;
        }
        return false;
    }

    /**
     * The chain-async broadcast's give-up path: rank 2 of a 3-GPU chain (root 0) starts its kernel
     * seconds late (its stream is busy with memsets), so rank 1's poller waits past
     * JCCL_CUDA_WAIT_TIMEOUT for rank 2's start word, and rank 2 then waits in vain for rank 1's
     * flags. Both kernels must end (every warp of every block leaves, no named barrier left
     * waiting), every stream must go idle, and the next call of ranks 1 and 2 must name the rank
     * waited for and the setting.
     */
    @Order(6)
    @Test
    @Tag("errors")
    @Timeout(value = 180, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void chainAsyncBroadcastGivesUpOnALateRank() throws Exception {
        skipUnless(Backend.JCCL);
        skipUnlessPeerToPeer(Backend.JCCL, "the chain-async broadcast");
        Assumptions.assumeTrue(Cuda.deviceCount() >= 3, "skipped: needs 3 GPUs");
        GpuEnv.closeAll();
        List<CudaDevice> devices = GpuEnv.devices(3);
        org.jccl.Config config = org.jccl.Config.fromEnvironment().with("JCCL_CUDA_BROADCAST", "chain-async")
                .with("JCCL_CUDA_WAIT_TIMEOUT", "1");
        List<DeviceCommunicator> comms = RankSet.withDeadline("createAll with chain-async", GpuEnv.CREATE_TIMEOUT,
                () -> List.copyOf(CudaCommunicator.createAll(devices, config)));
        List<String> problems = new ArrayList<>();
        try (RankSet set = RankSet.of(Backend.JCCL, devices, comms)) {
            long count = 16L << 20; // 64 MiB of floats: 16 rounds of 64 blocks x 64 KiB
            List<DeviceBuffer> sends = new ArrayList<>();
            List<DeviceBuffer> recvs = new ArrayList<>();
            for (int r = 0; r < 3; r++) {
                sends.add(devices.get(r).allocate(count, DataType.FLOAT32));
                recvs.add(devices.get(r).allocate(count, DataType.FLOAT32));
            }
            // ~13 TB of memsets: 2.5-5 s on an H200, well past the 1 s deadline, and 400 operations (under
            // the launch queue's depth, so the host call does not block while they run)
            DeviceBuffer filler = devices.get(2).allocate(32L << 30, DataType.INT8);
            long t0 = System.nanoTime();
            Map<String, Throwable> errors = set.run(Style.THREADS, (rank, comm, stream) -> {
                if (rank == 2) {
                    for (int i = 0; i < 400; i++) {
                        filler.fill((byte) i, stream);
                    }
                }
                comm.broadcast(sends.get(rank), recvs.get(rank), 0, stream);
            }, Duration.ofSeconds(60));
            double seconds = (System.nanoTime() - t0) / 1e9;
            System.out.printf(Locale.ROOT, "chain-async with a late rank: every stream idle after %.1f s%n", seconds);
            if (!errors.isEmpty()) {
                problems.add("the broadcast calls themselves threw (the failure must show on the next call): " + errors);
            }
            if (seconds < 1.5) {
                problems.add("every stream went idle after " + seconds + " s: rank 2 was not late enough for the test to mean anything");
            }
            for (int r = 1; r < 3; r++) {
                int rank = r;
                int waitedFor = r == 1 ? 2 : 1;
                try {
                    RankSet.withDeadline("rank " + rank + "'s next call", HOST_CALL_TIMEOUT, () -> {
                        set.comm(rank).broadcast(sends.get(rank), recvs.get(rank), 0, set.stream(rank));
                        return null;
                    });
                    problems.add("rank " + rank + "'s next call was accepted; its kernel gave up, so the call must fail");
                } catch (CudaException e) {
                    String m = e.getMessage();
                    if (!m.contains("for rank " + waitedFor) || !m.contains("JCCL_CUDA_WAIT_TIMEOUT") || !m.contains("gave up")) {
                        problems.add("rank " + rank + "'s error does not name rank " + waitedFor + " and the deadline setting: " + m);
                    }
                }
            }
            set.abort("the test's late rank");
            for (int r = 0; r < 3; r++) {
                sends.get(r).close();
                recvs.get(r).close();
            }
            filler.close();
        }
        if (!problems.isEmpty()) {
            fail(String.join("\n", problems));
        }
    }

    /** One mismatched GPU call: rank 1 calls {@code deviant}, the others {@code agreed}, both named in every rank's error. */
    private record Mismatch(String what, String agreed, String deviant, RankSet.RankCall call) {
    }

    private static String described(String name, long count, DataType t, ReduceOp op, int root) {
        return org.jccl.internal.guard.OpGuard.describe(org.jccl.internal.guard.OpGuard.collective(name, count, t, op, root));
    }

    static Stream<Arguments> mismatchPaths() {
        return Stream.of(Arguments.of("createAll"), Arguments.of("create(host)"));
    }

    /**
     * The mismatch guard on GPUs: rank 1 of 2 calls the same collective as rank 0 with another count
     * (by one element), data type of the same size, reduction op or root. Every rank's call must fail
     * with a MISMATCH naming both calls (the guard word travels in the per-operation records: the
     * in-process exchange of createAll, the shared-memory mailbox of create(host, device)), before any
     * kernel runs: the receive buffers keep their poison and the streams stay idle. The one-shot
     * all-reduce (up to JCCL_CUDA_ONESHOT_MAX) exchanges no record: its kernels compare the words,
     * {@link #oneShotMismatchFailsOnEveryRankWithoutWriting}.
     */
    @Order(6)
    @ParameterizedTest(name = "{0}")
    @MethodSource("mismatchPaths")
    @Tag("errors")
    @Timeout(value = 600, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void mismatchedCallsFailOnEveryRankBeforeAnyKernel(String path) {
        skipUnless(Backend.JCCL);
        Assumptions.assumeTrue(Cuda.deviceCount() >= 2, "skipped: needs 2 GPUs");
        GpuEnv.closeAll();
        List<CudaDevice> devices = GpuEnv.devices(2);
        long big = 100_000; // 400 KB of floats: above the one-shot size, so the push all-reduce exchanges records
        long small = 4099;
        List<Mismatch> cases = new ArrayList<>();
        cases.add(new Mismatch("allReduce count by one", described("allReduce", big, DataType.FLOAT32, ReduceOp.SUM, -1),
                described("allReduce", big + 1, DataType.FLOAT32, ReduceOp.SUM, -1), (rank, c, s) -> {
                    long n = rank == 1 ? big + 1 : big;
                    c.allReduce(buf(rank, 0).slice(0, n), buf(rank, 1).slice(0, n), ReduceOp.SUM, s);
                }));
        cases.add(new Mismatch("allReduce float32 vs int32", described("allReduce", big, DataType.FLOAT32, ReduceOp.SUM, -1),
                described("allReduce", big, DataType.INT32, ReduceOp.SUM, -1), (rank, c, s) -> {
                    DataType t = rank == 1 ? DataType.INT32 : DataType.FLOAT32;
                    c.allReduce(buf(rank, 0).as(t, big), buf(rank, 1).as(t, big), ReduceOp.SUM, s);
                }));
        cases.add(new Mismatch("allReduce sum vs max", described("allReduce", big, DataType.FLOAT32, ReduceOp.SUM, -1),
                described("allReduce", big, DataType.FLOAT32, ReduceOp.MAX, -1),
                (rank, c, s) -> c.allReduce(buf(rank, 0).slice(0, big), buf(rank, 1).slice(0, big), rank == 1 ? ReduceOp.MAX : ReduceOp.SUM, s)));
        cases.add(new Mismatch("broadcast root 0 vs 1", described("broadcast", small, DataType.FLOAT32, null, 0),
                described("broadcast", small, DataType.FLOAT32, null, 1),
                (rank, c, s) -> c.broadcast(buf(rank, 0).slice(0, small), buf(rank, 1).slice(0, small), rank == 1 ? 1 : 0, s)));
        cases.add(new Mismatch("reduce root 0 vs 1", described("reduce", small, DataType.FLOAT32, ReduceOp.SUM, 0),
                described("reduce", small, DataType.FLOAT32, ReduceOp.SUM, 1),
                (rank, c, s) -> c.reduce(buf(rank, 0).slice(0, small), buf(rank, 1).slice(0, small), ReduceOp.SUM, rank == 1 ? 1 : 0, s)));
        cases.add(new Mismatch("allGather count by one", described("allGather", 2 * small, DataType.FLOAT32, null, -1),
                described("allGather", 2 * (small + 1), DataType.FLOAT32, null, -1), (rank, c, s) -> {
                    long n = rank == 1 ? small + 1 : small;
                    c.allGather(buf(rank, 0).slice(0, n), buf(rank, 1).slice(0, 2 * n), s);
                }));
        cases.add(new Mismatch("reduceScatter sum vs min", described("reduceScatter", 2 * small, DataType.FLOAT32, ReduceOp.SUM, -1),
                described("reduceScatter", 2 * small, DataType.FLOAT32, ReduceOp.MIN, -1),
                (rank, c, s) -> c.reduceScatter(buf(rank, 0).slice(0, 2 * small), buf(rank, 1).slice(0, small),
                        rank == 1 ? ReduceOp.MIN : ReduceOp.SUM, s)));
        cases.add(new Mismatch("allToAll float32 vs int32", described("allToAll", 2 * small, DataType.FLOAT32, null, -1),
                described("allToAll", 2 * small, DataType.INT32, null, -1), (rank, c, s) -> {
                    DataType t = rank == 1 ? DataType.INT32 : DataType.FLOAT32;
                    c.allToAll(buf(rank, 0).as(t, 2 * small), buf(rank, 1).as(t, 2 * small), s);
                }));
        List<String> problems = new ArrayList<>();
        for (Mismatch m : cases) {
            List<Communicator> hosts = path.equals("createAll") ? List.of() : Jccl.initLocal(2);
            List<DeviceCommunicator> comms = path.equals("createAll")
                    ? RankSet.withDeadline("createAll", GpuEnv.CREATE_TIMEOUT, () -> List.copyOf(CudaCommunicator.createAll(devices)))
                    : createPerRank(Backend.JCCL, hosts, devices);
            try (RankSet set = RankSet.of(Backend.JCCL, devices, comms)) {
                for (int r = 0; r < 2; r++) {
                    BUFS[r][0] = devices.get(r).allocate(2 * (big + 1), DataType.FLOAT32);
                    BUFS[r][1] = devices.get(r).allocate(2 * (big + 1), DataType.FLOAT32);
                    BUFS[r][1].fill(CaseRunner.POISON, set.stream(r));
                    set.stream(r).synchronize();
                }
                Map<String, Throwable> errors = set.run(Style.THREADS, m.call(), Duration.ofSeconds(60));
                for (int r = 0; r < 2; r++) {
                    Throwable t = errors.get("rank " + r);
                    String msg = t == null ? "" : String.valueOf(t.getMessage());
                    if (!(t instanceof JcclException je) || je.code() != ErrorCode.MISMATCH || !msg.contains("mismatched collective calls")
                            || !msg.contains(m.agreed()) || !msg.contains(m.deviant())) {
                        problems.add(path + " " + m.what() + ": rank " + r + " did not fail with a MISMATCH naming \"" + m.agreed()
                                + "\" and \"" + m.deviant() + "\": " + t);
                    }
                }
                try {
                    set.awaitIdle(Duration.ofSeconds(20));
                } catch (RankSet.Broken e) {
                    problems.add(path + " " + m.what() + ": a stream did not go idle: " + e.getMessage());
                }
                MemorySegment host = Arena.ofAuto().allocate(BUFS[0][1].byteSize());
                for (int r = 0; r < 2; r++) {
                    BUFS[r][1].copyTo(host);
                    for (long k = 0; k < host.byteSize(); k += 4093) {
                        if (host.get(ValueLayout.JAVA_BYTE, k) != CaseRunner.POISON) {
                            problems.add(path + " " + m.what() + ": rank " + r + "'s receive buffer was written (byte " + k
                                    + "): a kernel ran although the calls differ");
                            break;
                        }
                    }
                }
                set.abort("mismatch test");
            } finally {
                for (DeviceBuffer[] b : BUFS) {
                    for (int i = 0; i < 2; i++) {
                        if (b[i] != null) {
                            b[i].close();
                            b[i] = null;
                        }
                    }
                }
                for (Communicator h : hosts) {
                    h.abort();
                    h.close();
                }
            }
        }
        if (!problems.isEmpty()) {
            fail(problems.size() + " mismatch problem(s):\n  " + String.join("\n  ", problems));
        }
    }

    /**
     * One mismatched call of the one-shot test: the last rank calls {@code deviant}, the others {@code
     * agreed}; {@code settings}: the same call, run by different algorithms (the last rank's
     * JCCL_CUDA_ONESHOT_MAX is below its size); {@code style}: one thread per rank, or one thread
     * issuing every rank's call inside one group.
     */
    private record OneShotCase(String what, String agreed, String deviant, boolean settings, Style style, RankSet.RankCall call) {
    }

    static Stream<Arguments> oneShotMismatchPaths() {
        return Stream.of(Arguments.of("createAll"), Arguments.of("create(host)"));
    }

    /**
     * The mismatch guard of the one-shot all-reduce (sizes up to JCCL_CUDA_ONESHOT_MAX, 256 KiB), which
     * exchanges no record on the host: its kernels compare the guard words stored beside their flags.
     * On up to 4 GPUs the last rank calls something else: counts by one element, counts that give
     * another grid (either way), float32 vs int32, sum vs max; a count above the one-shot size
     * (push all-reduce, which exchanges records), a broadcast, and (create(host)) the same call with a
     * lower JCCL_CUDA_ONESHOT_MAX on that rank only; createAll also with every rank's call issued by one
     * thread in one group (there rank 0 calls the push all-reduce, so its launch meets the others' notes
     * before their one-shot kernels are launched). Every rank must get a MISMATCH naming both calls: a rank whose call exchanges
     * records from that call itself, the others from asyncError() once their streams are idle and from
     * their next call (then every later call names it too); no stream may stay busy (no kernel waits
     * for a peer that never comes), no receive buffer may be written, close() must work. Control:
     * with JCCL_CHECK=none the same sum vs max pair completes without any error (createAll).
     */
    @Order(6)
    @ParameterizedTest(name = "{0}")
    @MethodSource("oneShotMismatchPaths")
    @Tag("errors")
    @Timeout(value = 600, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void oneShotMismatchFailsOnEveryRankWithoutWriting(String path) throws Exception {
        skipUnless(Backend.JCCL);
        skipUnlessPeerToPeer(Backend.JCCL, "the one-shot kernels' mismatch check");
        Assumptions.assumeTrue(Cuda.deviceCount() >= 2, "skipped: needs 2 GPUs");
        GpuEnv.closeAll();
        int n = Math.min(4, Cuda.deviceCount());
        int last = n - 1;
        List<CudaDevice> devices = GpuEnv.devices(n);
        long small = 4099; // 16 KiB of floats: 2 blocks
        long tiny = 1000; // 1 block
        long within = 60_000; // 240 KB of floats: within the one-shot size, 15 blocks
        long above = 70_000; // 280 KB: the push all-reduce
        DataType f = DataType.FLOAT32;
        List<OneShotCase> cases = new ArrayList<>();
        cases.add(new OneShotCase("count by one", described("allReduce", small, f, ReduceOp.SUM, -1),
                described("allReduce", small + 1, f, ReduceOp.SUM, -1), false, Style.THREADS, (rank, c, s) -> {
                    long k = rank == last ? small + 1 : small;
                    c.allReduce(oneShotBuf(rank, 0).slice(0, k), oneShotBuf(rank, 1).slice(0, k), ReduceOp.SUM, s);
                }));
        cases.add(new OneShotCase("count with a larger grid on the last rank", described("allReduce", tiny, f, ReduceOp.SUM, -1),
                described("allReduce", within, f, ReduceOp.SUM, -1), false, Style.THREADS, (rank, c, s) -> {
                    long k = rank == last ? within : tiny;
                    c.allReduce(oneShotBuf(rank, 0).slice(0, k), oneShotBuf(rank, 1).slice(0, k), ReduceOp.SUM, s);
                }));
        cases.add(new OneShotCase("count with a smaller grid on the last rank", described("allReduce", within, f, ReduceOp.SUM, -1),
                described("allReduce", tiny, f, ReduceOp.SUM, -1), false, Style.THREADS, (rank, c, s) -> {
                    long k = rank == last ? tiny : within;
                    c.allReduce(oneShotBuf(rank, 0).slice(0, k), oneShotBuf(rank, 1).slice(0, k), ReduceOp.SUM, s);
                }));
        cases.add(new OneShotCase("float32 vs int32", described("allReduce", small, f, ReduceOp.SUM, -1),
                described("allReduce", small, DataType.INT32, ReduceOp.SUM, -1), false, Style.THREADS, (rank, c, s) -> {
                    DataType t = rank == last ? DataType.INT32 : f;
                    c.allReduce(oneShotBuf(rank, 0).as(t, small), oneShotBuf(rank, 1).as(t, small), ReduceOp.SUM, s);
                }));
        cases.add(new OneShotCase("sum vs max", described("allReduce", small, f, ReduceOp.SUM, -1),
                described("allReduce", small, f, ReduceOp.MAX, -1), false, Style.THREADS, (rank, c, s) -> c.allReduce(
                        oneShotBuf(rank, 0).slice(0, small), oneShotBuf(rank, 1).slice(0, small), rank == last ? ReduceOp.MAX : ReduceOp.SUM, s)));
        RankSet.RankCall straddle = (rank, c, s) -> {
            long k = rank == last ? above : within;
            c.allReduce(oneShotBuf(rank, 0).slice(0, k), oneShotBuf(rank, 1).slice(0, k), ReduceOp.SUM, s);
        };
        cases.add(new OneShotCase("one-shot vs push (count above the one-shot size)", described("allReduce", within, f, ReduceOp.SUM, -1),
                described("allReduce", above, f, ReduceOp.SUM, -1), false, Style.THREADS, straddle));
        cases.add(new OneShotCase("one-shot all-reduce vs broadcast", described("allReduce", small, f, ReduceOp.SUM, -1),
                described("broadcast", small, f, null, 0), false, Style.THREADS, (rank, c, s) -> {
                    if (rank == last) {
                        c.broadcast(oneShotBuf(rank, 0).slice(0, small), oneShotBuf(rank, 1).slice(0, small), 0, s);
                    } else {
                        c.allReduce(oneShotBuf(rank, 0).slice(0, small), oneShotBuf(rank, 1).slice(0, small), ReduceOp.SUM, s);
                    }
                }));
        if (path.equals("createAll")) {
            RankSet.RankCall byOne = cases.get(0).call();
            cases.add(new OneShotCase("count by one, one thread, one group", cases.get(0).agreed(), cases.get(0).deviant(), false,
                    Style.GROUP, byOne));
            // rank 0 deviates here: its launch (which finds the others' notes) comes before theirs
            cases.add(new OneShotCase("one-shot vs push on rank 0, one thread, one group", cases.get(5).agreed(), cases.get(5).deviant(),
                    false, Style.GROUP, (rank, c, s) -> {
                        long k = rank == 0 ? above : within;
                        c.allReduce(oneShotBuf(rank, 0).slice(0, k), oneShotBuf(rank, 1).slice(0, k), ReduceOp.SUM, s);
                    }));
        } else {
            String call = described("allReduce", within, f, ReduceOp.SUM, -1);
            cases.add(new OneShotCase("the same call, JCCL_CUDA_ONESHOT_MAX=64K on the last rank only", call, call, true, Style.THREADS,
                    (rank, c, s) -> c.allReduce(oneShotBuf(rank, 0).slice(0, within), oneShotBuf(rank, 1).slice(0, within), ReduceOp.SUM, s)));
        }
        List<String> problems = new ArrayList<>();
        for (OneShotCase m : cases) {
            String label = path + " x" + n + " " + m.what();
            org.jccl.Config base = org.jccl.Config.fromEnvironment();
            List<org.jccl.Config> configs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                configs.add(m.settings() && r == last ? base.with("JCCL_CUDA_ONESHOT_MAX", "65536") : base);
            }
            long t0 = System.nanoTime();
            List<String> found = oneShotMismatchCase(path, devices, configs, m, label, above + 16);
            problems.addAll(found);
            System.out.printf(Locale.ROOT, "one-shot mismatch %s: %s, %.1f s%n", label, found.isEmpty() ? "ok" : found.size() + " problem(s)",
                    (System.nanoTime() - t0) / 1e9);
        }
        if (path.equals("createAll")) {
            // Control: with the guard off the kernels compare nothing, so the same pair completes without an error.
            org.jccl.Config none = org.jccl.Config.fromEnvironment().with("JCCL_CHECK", "none");
            List<DeviceCommunicator> comms = RankSet.withDeadline("createAll", GpuEnv.CREATE_TIMEOUT,
                    () -> List.copyOf(CudaCommunicator.createAll(devices, none)));
            try (RankSet set = RankSet.of(Backend.JCCL, devices, comms)) {
                allocateOneShotBuffers(set, devices, above + 16);
                Map<String, Throwable> errors = set.run(Style.THREADS, cases.get(4).call(), Duration.ofSeconds(60));
                for (int r = 0; r < n; r++) {
                    CudaCommunicator c = (CudaCommunicator) set.comm(r);
                    if (errors.containsKey("rank " + r) || c.asyncError() != null) {
                        problems.add("JCCL_CHECK=none sum vs max: rank " + r + " reported an error although the guard is off: "
                                + errors.get("rank " + r) + " / " + c.asyncError());
                    }
                }
                Map<String, Throwable> next = set.run(Style.THREADS, (rank, c, s) -> c.allReduce(oneShotBuf(rank, 0).slice(0, 8),
                        oneShotBuf(rank, 1).slice(0, 8), ReduceOp.SUM, s), Duration.ofSeconds(60));
                if (!next.isEmpty()) {
                    problems.add("JCCL_CHECK=none: the next all-reduce failed: " + next);
                }
            } finally {
                freeOneShotBuffers();
            }
        }
        if (!problems.isEmpty()) {
            fail(problems.size() + " one-shot mismatch problem(s):\n  " + String.join("\n  ", problems));
        }
    }

    /** Runs one case of {@link #oneShotMismatchFailsOnEveryRankWithoutWriting} on fresh communicators; returns its problems. */
    private static List<String> oneShotMismatchCase(String path, List<CudaDevice> devices, List<org.jccl.Config> configs, OneShotCase m,
                                                    String label, long elements) throws Exception {
        int n = devices.size();
        List<String> problems = new ArrayList<>();
        List<Communicator> hosts = path.equals("createAll") ? List.of() : Jccl.initLocal(n);
        List<DeviceCommunicator> comms = path.equals("createAll")
                ? RankSet.withDeadline("createAll", GpuEnv.CREATE_TIMEOUT, () -> List.copyOf(CudaCommunicator.createAll(devices, configs.get(0))))
                : createWithConfigs(hosts, devices, configs);
        try (RankSet set = RankSet.of(Backend.JCCL, devices, comms)) {
            allocateOneShotBuffers(set, devices, elements);
            Map<String, Throwable> atCall;
            try {
                atCall = set.run(m.style(), m.call(), Duration.ofSeconds(60));
            } catch (RankSet.Broken e) {
                problems.add(label + ": the calls or the kernels did not end within 60 s: " + e.getMessage());
                return problems;
            }
            for (int r = 0; r < n; r++) {
                Throwable t = atCall.get("rank " + r);
                CudaCommunicator c = (CudaCommunicator) set.comm(r);
                Throwable async = c.asyncError();
                String how = t != null ? "its call" : "asyncError() after the stream went idle";
                Throwable shown = t != null ? t : async;
                if (!isMismatchNaming(shown, m)) {
                    problems.add(label + ": rank " + r + " got no MISMATCH naming both calls from " + how + ": " + shown
                            + (atCall.containsKey("groupEnd") ? " (groupEnd threw " + atCall.get("groupEnd") + ")" : ""));
                }
                if (t != null && async != t && !isMismatchNaming(async, m)) {
                    problems.add(label + ": rank " + r + "'s asyncError() does not name the mismatch its call threw: " + async);
                }
            }
            for (int round = 1; round <= 2; round++) {
                for (int r = 0; r < n; r++) {
                    int rank = r;
                    CudaCommunicator c = (CudaCommunicator) set.comm(r);
                    try {
                        RankSet.withDeadline("rank " + r + "'s next call", HOST_CALL_TIMEOUT, () -> {
                            c.allReduce(oneShotBuf(rank, 0).slice(0, 8), oneShotBuf(rank, 1).slice(0, 8), ReduceOp.SUM, set.stream(rank));
                            return null;
                        });
                        problems.add(label + ": rank " + r + "'s call #" + round + " after the mismatch was accepted");
                    } catch (JcclException e) {
                        if (!isMismatchNaming(e, m)) {
                            problems.add(label + ": rank " + r + "'s call #" + round + " after the mismatch did not name it: " + e);
                        }
                    } catch (AssertionError e) {
                        problems.add(label + ": rank " + r + "'s call #" + round + " after the mismatch blocked: " + e.getMessage());
                    }
                }
            }
            try {
                set.awaitIdle(Duration.ofSeconds(20));
            } catch (RankSet.Broken e) {
                problems.add(label + ": a stream did not go idle: " + e.getMessage());
                return problems;
            }
            MemorySegment host = Arena.ofAuto().allocate(ONESHOT_BUFS[0][1].byteSize());
            for (int r = 0; r < n; r++) {
                ONESHOT_BUFS[r][1].copyTo(host);
                for (long k = 0; k < host.byteSize(); k++) {
                    if (host.get(ValueLayout.JAVA_BYTE, k) != CaseRunner.POISON) {
                        problems.add(label + ": rank " + r + "'s receive buffer was written (byte " + k + ")");
                        break;
                    }
                }
            }
            for (int r = 0; r < n; r++) {
                DeviceCommunicator c = set.comm(r);
                try {
                    RankSet.withDeadline("rank " + r + "'s close", HOST_CALL_TIMEOUT, () -> {
                        c.close();
                        return null;
                    });
                } catch (RuntimeException | AssertionError e) {
                    problems.add(label + ": rank " + r + "'s close() failed (the mismatch was reported already): " + e);
                }
            }
        } finally {
            freeOneShotBuffers();
            for (Communicator h : hosts) {
                h.abort();
                h.close();
            }
        }
        return problems;
    }

    private static boolean isMismatchNaming(Throwable t, OneShotCase m) {
        if (!(t instanceof JcclException je) || je.code() != ErrorCode.MISMATCH) {
            return false;
        }
        String msg = String.valueOf(t.getMessage());
        if (m.settings()) {
            return msg.contains("both called " + m.agreed()) && msg.contains("JCCL_CUDA_ONESHOT_MAX");
        }
        return msg.contains("mismatched collective calls") && msg.contains(m.agreed()) && msg.contains(m.deviant());
    }

    /** Every rank calls create(hosts[r], devices[r], configs[r]) on its own thread. */
    private static List<DeviceCommunicator> createWithConfigs(List<Communicator> hosts, List<CudaDevice> devices,
                                                              List<org.jccl.Config> configs) throws Exception {
        int n = hosts.size();
        ExecutorService pool = Executors.newFixedThreadPool(n, r -> {
            Thread t = new Thread(r, "gpu-create");
            t.setDaemon(true);
            return t;
        });
        try {
            List<Future<DeviceCommunicator>> fs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                fs.add(pool.submit(() -> CudaCommunicator.create(hosts.get(rank), devices.get(rank), configs.get(rank))));
            }
            List<DeviceCommunicator> out = new ArrayList<>();
            for (Future<DeviceCommunicator> f : fs) {
                out.add(f.get(GpuEnv.CREATE_TIMEOUT.toSeconds(), TimeUnit.SECONDS));
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    /** Send (0) and receive (1) buffers of {@code elements} floats per rank, the receive buffers poisoned. */
    private static void allocateOneShotBuffers(RankSet set, List<CudaDevice> devices, long elements) {
        for (int r = 0; r < devices.size(); r++) {
            ONESHOT_BUFS[r][0] = devices.get(r).allocate(elements, DataType.FLOAT32);
            ONESHOT_BUFS[r][1] = devices.get(r).allocate(elements, DataType.FLOAT32);
            ONESHOT_BUFS[r][0].fill((byte) (r + 1), set.stream(r));
            ONESHOT_BUFS[r][1].fill(CaseRunner.POISON, set.stream(r));
            set.stream(r).synchronize();
        }
    }

    private static void freeOneShotBuffers() {
        for (DeviceBuffer[] b : ONESHOT_BUFS) {
            for (int i = 0; i < 2; i++) {
                if (b[i] != null) {
                    b[i].close();
                    b[i] = null;
                }
            }
        }
    }

    private static final DeviceBuffer[][] ONESHOT_BUFS = new DeviceBuffer[4][2];

    private static DeviceBuffer oneShotBuf(int rank, int which) {
        return ONESHOT_BUFS[rank][which];
    }

    /** Send (index 0) and receive (1) buffers of the mismatch test, per rank. */
    private static final DeviceBuffer[][] BUFS = new DeviceBuffer[2][2];

    private static DeviceBuffer buf(int rank, int which) {
        return BUFS[rank][which];
    }

    /**
     * abort() from another thread releases a kernel waiting for peers that never come (here rank 0
     * alone calls allReduce): its stream becomes idle, later calls fail, and the GPU context stays
     * usable (the application shares it). Runs last: it leaves that communicator set aborted.
     */
    @Order(6)
    @Test
    @Tag("errors")
    @Timeout(value = 180, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void abortReleasesAKernelWaitingForPeers() throws Exception {
        skipUnless(Backend.JCCL);
        Assumptions.assumeTrue(Cuda.deviceCount() >= 2, "skipped: needs 2 GPUs");
        GpuEnv.closeAll();
        List<String> problems = new ArrayList<>();
        try (RankSet set = RankSet.create(Backend.JCCL, GpuEnv.devices(2), GpuEnv.CREATE_TIMEOUT)) {
            CudaDevice d0 = set.devices().get(0);
            CudaStream s0 = set.stream(0);
            DeviceCommunicator c0 = set.comm(0);
            // Freed only once the stream is idle: cuMemFree would wait for a kernel that never ends.
            DeviceBuffer a = d0.allocate(4099, DataType.FLOAT32);
            DeviceBuffer b = d0.allocate(4099, DataType.FLOAT32);
            a.fill((byte) 0, s0);
            s0.synchronize();
            Throwable[] callError = new Throwable[1];
            Thread lone = new Thread(() -> {
                try {
                    c0.allReduce(a, b, ReduceOp.SUM, s0);
                } catch (Throwable t) {
                    callError[0] = t;
                }
            }, "gpu-lone-rank");
            lone.setDaemon(true);
            lone.start();
            Thread.sleep(1000);
            if (!lone.isAlive() && callError[0] != null) {
                fail("rank 0's allReduce (its peer never calls) threw before any abort: " + callError[0]);
            }
            if (!lone.isAlive() && s0.isIdle()) {
                fail("rank 0's allReduce completed although rank 1 never called it");
            }
            long t0 = System.nanoTime();
            c0.abort();
            set.comm(1).abort();
            lone.join(20_000);
            if (lone.isAlive()) {
                problems.add("rank 0's call was still blocked 20 s after abort(); stacks:\n" + RankSet.stacks());
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            boolean idle = false;
            try {
                while (!(idle = s0.isIdle()) && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
                if (!idle) {
                    problems.add("rank 0's stream was still busy 20 s after abort(): the waiting kernel was not released");
                } else {
                    System.out.printf(Locale.ROOT, "abort released the waiting kernel in %.0f ms%n", (System.nanoTime() - t0) / 1e6);
                }
            } catch (CudaException e) {
                problems.add("after abort() rank 0's stream reports a CUDA error; the GPU context must stay usable: " + e.getMessage());
            }
            if (idle) {
                try {
                    RankSet.withDeadline("allReduce after abort", HOST_CALL_TIMEOUT, () -> {
                        c0.allReduce(a, b, ReduceOp.SUM, s0);
                        return null;
                    });
                    problems.add("allReduce on an aborted communicator was accepted; later calls must fail");
                } catch (JcclException | IllegalStateException e) {
                    // expected
                } catch (AssertionError e) {
                    problems.add("allReduce on an aborted communicator blocked: " + e.getMessage());
                }
                try (DeviceBuffer probe = d0.allocate(1024, DataType.INT8)) {
                    probe.fill((byte) 1, s0);
                    s0.synchronize();
                    a.close();
                    b.close();
                } catch (CudaException e) {
                    problems.add("GPU 0's context is unusable after abort(): " + e.getMessage());
                }
            }
            set.abort("aborted by the test");
        }
        if (!problems.isEmpty()) {
            fail(String.join("\n", problems));
        }
    }
}
