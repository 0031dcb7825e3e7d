package org.jccl.examples;

import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.Group;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.Work;

/**
 * A multi-process correctness check of every collective, for launchers and CI: each rank runs the
 * same sequence of collectives over several counts, data types, reduce operators, roots, in-place
 * and out-of-place forms and native and heap memory, and compares every output element with an
 * exact, independently computed reference (see {@link CheckValues}: no tolerance is needed). Output
 * buffers start poisoned and carry a poisoned guard behind them, so skipped elements and writes past
 * the end are found too; inputs of out-of-place calls must come back unchanged.
 *
 * <p>Start it as every rank of a job, with the same arguments:
 * <pre>
 * bin/jccl run -np 3 --cp examples/target/classes org.jccl.examples.CollectiveCheck
 * mpirun -np 4 -x JCCL_AUTH_TOKEN -x JCCL_COMM_ID=node0:29500 java -cp ... org.jccl.examples.CollectiveCheck --counts 0,7
 * </pre>
 * On success rank 0 prints exactly one line, {@code CHECK OK <n> checks}, and every rank exits 0.
 * A rank that finds a wrong result prints {@code CHECK FAILED rank <r>: <the first mismatch>} and
 * exits {@value #EXIT_MISMATCH}; a jccl error (a peer died, a timeout, a bad configuration) prints
 * {@code CHECK ERROR rank <r>: <the exception>} to stderr and exits {@value #EXIT_ERROR}; bad
 * arguments exit {@value #EXIT_USAGE}.
 *
 * <p>Options select a subset (tests keep their runtime short with them); lists are comma-separated:
 * <pre>
 * --collectives LIST  allreduce,broadcast,reduce,allgather,reducescatter,alltoall,alltoallv,gather,
 *                     scatter,barrier,sendrecv,split,dup (default: all; nccl-tests' names such as
 *                     all_reduce work too)
 * --counts LIST       element counts (default 0,1,7,1000,1000003); per rank for allgather, gather,
 *                     scatter, reducescatter (each rank's block) and alltoall (each block)
 * --types LIST        data types (default: all ten; names as DataType.parse takes them: float, bf16, int8...)
 * --reduce-ops LIST   operators for allreduce, reduce, reducescatter (default sum,prod,min,max,avg)
 * --memory KIND       native, heap, or both (default: both, alternating from check to check)
 * --exhaustive        every selected type at every count (by default counts above 1000 run a
 *                     sample of the types, one per element size: see {@link #SAMPLE_ABOVE})
 * --verbose           to stderr: every rank says how it joined (its rank, the launcher convention it
 *                     was found by and the channel that gave rank 0's address), and rank 0 names
 *                     every check as it starts
 * </pre>
 *
 * <p>Why it stays one file of about 800 lines: it is an example that users read. Each collective's
 * check is one method (from {@code allReduce} to {@code dup}) that makes the call and then states
 * the exact expectations for its output, its untouched input and its guard; a reader looking up one
 * collective finds all of it in one place, in the order {@link Collective} lists them. The option
 * types ({@link Collective}, {@link Memory}, {@link Selection}) stay nested because they are the
 * program's API ({@code CollectiveCheck.Selection.parse}, {@link #run}), and the driver that walks
 * the selection is short. The buffers, their poison and guards and the element comparisons are
 * {@link CheckBuffers}.
 */
public final class CollectiveCheck {

    /** Exit code when every check passed. */
    public static final int EXIT_OK = 0;
    /** Exit code when a result was wrong. */
    public static final int EXIT_MISMATCH = 1;
    /** Exit code when jccl (or anything else) threw instead of producing a result. */
    public static final int EXIT_ERROR = 2;
    /** Exit code for invalid arguments (sysexits' EX_USAGE). */
    public static final int EXIT_USAGE = 64;

    /** The counts run when none are given: empty, single, odd, small, and large with a remainder. */
    public static final List<Long> DEFAULT_COUNTS = List.of(0L, 1L, 7L, 1000L, 1_000_003L);

    /**
     * Counts above this run one root instead of two, and (unless {@code --exhaustive}) a sample of the
     * types: per operator one type of each element size, rotating through the selected types of that
     * size from operator to operator and collective to collective. Chunking and pipelining depend on
     * the element size, not on the type, and every type's arithmetic is checked at the smaller counts;
     * the sample keeps the default run of three ranks well under a minute on two cores.
     */
    public static final long SAMPLE_ABOVE = 1000;

    /** The order types are sampled in within one element size: the most used first. */
    private static final List<DataType> PREFERENCE = List.of(DataType.FLOAT32, DataType.BFLOAT16, DataType.FLOAT64, DataType.UINT8,
            DataType.INT32, DataType.FLOAT16, DataType.INT64, DataType.INT8, DataType.UINT32, DataType.UINT64);

    /** How long rank 0 and the last rank hold back before a barrier in the barrier check. */
    private static final Duration BARRIER_HOLD = Duration.ofMillis(200);

    /** The collectives this program can check, in the order it runs them. */
    public enum Collective {
        ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, ALLTOALLV, GATHER, SCATTER, BARRIER, SENDRECV,
        SPLIT, DUP;

        /**
         * Parses a name in any case, with or without {@code _} or {@code -} (so nccl-tests' {@code all_reduce} works).
         *
         * @throws IllegalArgumentException naming the value and the accepted names
         */
        public static Collective parse(String name) {
            String n = name.trim().replace("_", "").replace("-", "").toUpperCase(Locale.ROOT);
            for (Collective c : values()) {
                if (c.name().equals(n)) {
                    return c;
                }
            }
            throw new IllegalArgumentException("unknown collective '" + name + "'; use one of "
                    + Arrays.stream(values()).map(c -> c.name().toLowerCase(Locale.ROOT)).toList());
        }
    }

    /** Which memory the buffers of a check live in. */
    public enum Memory {
        /** Native memory of a shared arena: jccl uses it in place (zero copy). */
        NATIVE,
        /** Heap arrays: jccl stages them through native memory. */
        HEAP,
        /** Native and heap, alternating from check to check. */
        BOTH
    }

    /**
     * What to check.
     *
     * @param collectives the collectives, run in {@link Collective} order
     * @param counts element counts, each {@code >= 0}
     * @param types data types
     * @param reduceOps operators of the reducing collectives
     * @param memory where buffers live
     * @param exhaustive every type at every count; otherwise counts above {@value #SAMPLE_ABOVE} run a sample of the types
     * @param verbose whether every rank reports how it joined, and rank 0 each check, to stderr
     */
    public record Selection(Set<Collective> collectives, List<Long> counts, List<DataType> types, List<ReduceOp> reduceOps,
                            Memory memory, boolean exhaustive, boolean verbose) {
        public Selection {
            collectives = Set.copyOf(collectives);
            counts = List.copyOf(counts);
            types = List.copyOf(types);
            reduceOps = List.copyOf(reduceOps);
            Objects.requireNonNull(memory, "memory");
            for (long c : counts) {
                if (c < 0) {
                    throw new IllegalArgumentException("counts must be >= 0, got " + c);
                }
            }
        }

        /** Everything: all collectives, {@link #DEFAULT_COUNTS}, all types and operators, both memories. */
        public static Selection all() {
            return new Selection(EnumSet.allOf(Collective.class), DEFAULT_COUNTS, List.of(DataType.values()),
                    List.of(ReduceOp.values()), Memory.BOTH, false, false);
        }

        /**
         * Parses the command line (see the class comment).
         *
         * @throws IllegalArgumentException naming the bad option or value
         */
        public static Selection parse(String... args) {
            Selection s = all();
            Set<Collective> collectives = s.collectives;
            List<Long> counts = s.counts;
            List<DataType> types = s.types;
            List<ReduceOp> ops = s.reduceOps;
            Memory memory = s.memory;
            boolean exhaustive = false;
            boolean verbose = false;
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                if (a.equals("--verbose")) {
                    verbose = true;
                    continue;
                }
                if (a.equals("--exhaustive")) {
                    exhaustive = true;
                    continue;
                }
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(a.startsWith("--") ? "option " + a + " needs a value" : "unexpected argument '" + a + "'");
                }
                String v = args[++i];
                switch (a) {
                    case "--collectives" -> collectives = EnumSet.copyOf(list(v).stream().map(Collective::parse).toList());
                    case "--counts" -> counts = list(v).stream().map(CollectiveCheck::count).toList();
                    case "--types" -> types = List.copyOf(new LinkedHashSet<>(list(v).stream().map(DataType::parse).toList()));
                    case "--reduce-ops" -> ops = List.copyOf(new LinkedHashSet<>(list(v).stream().map(ReduceOp::parse).toList()));
                    case "--memory" -> memory = switch (v.trim().toLowerCase(Locale.ROOT)) {
                        case "native" -> Memory.NATIVE;
                        case "heap" -> Memory.HEAP;
                        case "both" -> Memory.BOTH;
                        default -> throw new IllegalArgumentException("--memory takes native, heap or both, not '" + v + "'");
                    };
                    default -> throw new IllegalArgumentException("unknown option '" + a + "'; options: --collectives --counts --types"
                            + " --reduce-ops --memory --exhaustive --verbose");
                }
            }
            return new Selection(collectives, counts, types, ops, memory, exhaustive, verbose);
        }

        private static List<String> list(String v) {
            List<String> items = Arrays.stream(v.split(",")).map(String::trim).filter(x -> !x.isEmpty()).toList();
            if (items.isEmpty()) {
                throw new IllegalArgumentException("empty list '" + v + "'");
            }
            return items;
        }
    }

    /** A wrong result: the message names the check, the rank, the element, what came and what was expected. */
    public static final class MismatchException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        MismatchException(String message) {
            super(message);
        }
    }

    private final Communicator comm;
    private final Selection sel;
    private final PrintStream log;
    private final int rank;
    private final int n;
    /** Checks run so far; also the salt of the next check's data, so no two checks share inputs. */
    private long checks;

    private CollectiveCheck(Communicator comm, Selection sel, PrintStream log) {
        this.comm = comm;
        this.sel = sel;
        this.log = log;
        this.rank = comm.rank();
        this.n = comm.size();
    }

    /**
     * Runs the selected checks on {@code comm}; every rank must call it with the same selection.
     *
     * @param log where rank 0 reports each check when {@link Selection#verbose()} is set
     * @return the number of checks run (the same on every rank)
     * @throws MismatchException at the first wrong element, wrong rank order or touched guard on this rank
     * @throws IllegalArgumentException when the communicator has more than 64 ranks (the exact
     *         reference needs small sums; see {@link CheckValues})
     */
    public static long run(Communicator comm, Selection sel, PrintStream log) {
        if (comm.size() > CheckValues.MAX_RANKS) {
            throw new IllegalArgumentException("CollectiveCheck supports up to " + CheckValues.MAX_RANKS + " ranks (its reference is"
                    + " exact only for sums that small), this job has " + comm.size());
        }
        CollectiveCheck c = new CollectiveCheck(comm, sel, log);
        c.runAll();
        return c.checks;
    }

    public static void main(String[] args) {
        Selection sel;
        try {
            sel = Selection.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("CollectiveCheck: " + e.getMessage());
            System.err.println("usage: CollectiveCheck [--collectives LIST] [--counts LIST] [--types LIST] [--reduce-ops LIST]"
                    + " [--memory native|heap|both] [--exhaustive] [--verbose]");
            System.exit(EXIT_USAGE);
            return;
        }
        String who = "rank " + rankFromEnvironment();
        int code;
        try {
            Config config = Config.fromEnvironment();
            code = check(config, sel);
        } catch (MismatchException e) {
            System.out.println("CHECK FAILED " + who + ": " + e.getMessage());
            code = EXIT_MISMATCH;
        } catch (RuntimeException | Error e) {
            System.err.println("CHECK ERROR " + who + ": " + e);
            e.printStackTrace(System.err);
            code = EXIT_ERROR;
        }
        System.out.flush();
        System.err.flush();
        // Exit explicitly: after a failure the peers may still be connected, and the exit code is the verdict.
        System.exit(code);
    }

    /** Joins the job, runs the checks and reports; throws what fails. */
    private static int check(Config config, Selection sel) {
        try (Communicator comm = Jccl.init(config)) {
            if (sel.verbose()) {
                System.err.println("rank " + comm.rank() + " of " + comm.size() + ": joined through the "
                        + config.launch().map(Config.Launch::convention).orElse("?") + " launcher convention");
                System.err.println("rank " + comm.rank() + ": rank 0's address through "
                        + config.launch().map(Config.Launch::rootDescription).orElse("?"));
            }
            long count = run(comm, sel, System.err);
            // Every rank must have run the same checks: a rank that skipped one would have hung or failed
            // above, but the sum over ranks proves it on the way out.
            long[] total = {count};
            comm.allReduce(total, ReduceOp.SUM);
            if (total[0] != count * comm.size()) {
                throw new MismatchException("the ranks ran different numbers of checks (this rank " + count + ", sum over "
                        + comm.size() + " ranks " + total[0] + "): were they given the same arguments?");
            }
            if (comm.rank() == 0) {
                System.out.println("CHECK OK " + count + " checks");
            }
            return EXIT_OK;
        }
    }

    /** The rank the launcher gave this process, for messages about failures before init completes. */
    private static String rankFromEnvironment() {
        try {
            return Config.fromEnvironment().launch().map(l -> Integer.toString(l.rank())).orElse("?");
        } catch (RuntimeException e) {
            return "?";
        }
    }

    // ------------------------------------------------------------------------------------------ driver

    private void runAll() {
        for (Collective c : Collective.values()) {
            if (!sel.collectives().contains(c)) {
                continue;
            }
            switch (c) {
                case ALLREDUCE -> forEach(c, true, (t, op, count, inPlace) -> allReduce(t, op, count, inPlace));
                case BROADCAST -> forEach(c, false, (t, op, count, inPlace) -> {
                    for (int root : roots(count)) {
                        broadcast(t, count, root, inPlace);
                    }
                });
                case REDUCE -> forEach(c, true, (t, op, count, inPlace) -> {
                    for (int root : roots(count)) {
                        reduce(t, op, count, root, inPlace);
                    }
                });
                case ALLGATHER -> forEach(c, false, (t, op, count, inPlace) -> allGather(t, count, inPlace));
                case REDUCESCATTER -> forEach(c, true, (t, op, count, inPlace) -> reduceScatter(t, op, count, inPlace));
                case ALLTOALL -> forEach(c, false, (t, op, count, inPlace) -> allToAll(t, count, inPlace));
                case ALLTOALLV -> forEach(c, false, (t, op, count, inPlace) -> {
                    if (!inPlace) { // allToAllv has no in-place form
                        allToAllv(t, count);
                    }
                });
                case GATHER -> forEach(c, false, (t, op, count, inPlace) -> {
                    for (int root : roots(count)) {
                        gather(t, count, root, inPlace);
                    }
                });
                case SCATTER -> forEach(c, false, (t, op, count, inPlace) -> {
                    for (int root : roots(count)) {
                        scatter(t, count, root, inPlace);
                    }
                });
                case BARRIER -> barrier();
                case SENDRECV -> forEach(c, false, (t, op, count, viaAsync) -> sendRecvRing(t, count, viaAsync));
                case SPLIT -> split();
                case DUP -> dup();
            }
        }
    }

    @FunctionalInterface
    private interface Step {
        void run(DataType t, ReduceOp op, long count, boolean variant);
    }

    /**
     * Calls step for every count, operator (when reducing), type (a sample above {@link #SAMPLE_ABOVE})
     * and both variants (in place or not).
     */
    private void forEach(Collective c, boolean reducing, Step step) {
        List<ReduceOp> ops = reducing ? sel.reduceOps() : List.of(ReduceOp.SUM);
        for (long count : sel.counts()) {
            for (int k = 0; k < ops.size(); k++) {
                for (DataType t : types(c, k, count)) {
                    step.run(t, ops.get(k), count, false);
                    step.run(t, ops.get(k), count, true);
                }
            }
        }
    }

    /** The selected types, or above {@link #SAMPLE_ABOVE} one per element size, picked by rotation (see there). */
    private List<DataType> types(Collective c, int opIndex, long count) {
        if (count <= SAMPLE_ABOVE || sel.exhaustive()) {
            return sel.types();
        }
        List<DataType> sample = new ArrayList<>();
        for (int size : new int[] {4, 2, 8, 1}) {
            List<DataType> same = PREFERENCE.stream().filter(t -> t.size() == size && sel.types().contains(t)).toList();
            if (!same.isEmpty()) {
                sample.add(same.get((opIndex + c.ordinal()) % same.size()));
            }
        }
        return sample;
    }

    /** Roots to try: the first and last rank for small counts, a middle rank for large ones. */
    private int[] roots(long count) {
        if (count > SAMPLE_ABOVE) {
            return new int[] {n / 2};
        }
        return n == 1 ? new int[] {0} : new int[] {0, n - 1};
    }

    /** Starts a check: numbers it (its data's salt), reports it, and gives it memory. */
    private CheckBuffers begin(String what) {
        long id = checks++;
        if (sel.verbose() && rank == 0) {
            log.println("check " + id + ": " + what);
        }
        boolean heap = switch (sel.memory()) {
            case NATIVE -> false;
            case HEAP -> true;
            // A hash, not id % 2: consecutive checks differ only in the in-place flag, which must not pick the memory.
            case BOTH -> (CheckValues.mix(id) & 1) != 0;
        };
        return new CheckBuffers(heap, id, what + (heap ? " heap" : " native") + " (check " + id + ")", rank, n);
    }

    private static String placement(boolean inPlace) {
        return inPlace ? "in-place" : "out-of-place";
    }

    // ------------------------------------------------------------------------------------------ collectives

    private void allReduce(DataType t, ReduceOp op, long count, boolean inPlace) {
        try (CheckBuffers m = begin("allReduce " + t + " " + op + " count=" + count + " " + placement(inPlace))) {
            MemorySegment send = m.alloc(t, count);
            MemorySegment recv = inPlace ? send : m.alloc(t, count);
            m.fillInput(send, t, op, rank, 0, count);
            comm.allReduce(Buffer.of(send, count, t), Buffer.of(recv, count, t), op);
            m.expectReduced(recv, t, op, 0, count, "recv");
            m.expectGuard(recv, t, count, "recv");
            if (!inPlace) {
                m.expectInputUnchanged(send, t, op, rank, 0, count);
            }
        }
    }

    private void reduce(DataType t, ReduceOp op, long count, int root, boolean inPlace) {
        try (CheckBuffers m = begin("reduce " + t + " " + op + " count=" + count + " root=" + root + " " + placement(inPlace))) {
            MemorySegment send = m.alloc(t, count);
            m.fillInput(send, t, op, rank, 0, count);
            MemorySegment recv = inPlace ? send : rank == root ? m.alloc(t, count) : null;
            // Non-roots pass no recv at all out of place: the API says it may be null there.
            comm.reduce(Buffer.of(send, count, t), recv == null ? null : Buffer.of(recv, count, t), op, root);
            if (rank == root) {
                m.expectReduced(recv, t, op, 0, count, "recv");
                m.expectGuard(recv, t, count, "recv");
            }
            if (!inPlace || rank != root) {
                m.expectInputUnchanged(send, t, op, rank, 0, count);
            }
        }
    }

    private void reduceScatter(DataType t, ReduceOp op, long count, boolean inPlace) {
        try (CheckBuffers m = begin("reduceScatter " + t + " " + op + " count=" + count + " " + placement(inPlace))) {
            long total = count * n;
            MemorySegment send = m.alloc(t, total);
            m.fillInput(send, t, op, rank, 0, total);
            MemorySegment recv = inPlace ? send.asSlice(t.bytes(count * rank)) : m.alloc(t, count);
            comm.reduceScatter(Buffer.of(send, total, t), Buffer.of(recv, count, t), op);
            // This rank's block holds the reduction of everyone's elements [rank*count, (rank+1)*count).
            m.expectReduced(recv, t, op, count * rank, count, "recv");
            if (inPlace) {
                // The other blocks of send are inputs: NCCL leaves them alone, and so must jccl.
                m.expectInputUnchanged(send, t, op, rank, 0, count * rank);
                m.expectInputUnchanged(send.asSlice(t.bytes(count * (rank + 1))), t, op, rank, count * (rank + 1),
                        count * (n - rank - 1));
                m.expectGuard(send, t, total, "send");
            } else {
                m.expectGuard(recv, t, count, "recv");
                m.expectInputUnchanged(send, t, op, rank, 0, total);
            }
        }
    }

    private void broadcast(DataType t, long count, int root, boolean inPlace) {
        try (CheckBuffers m = begin("broadcast " + t + " count=" + count + " root=" + root + " " + placement(inPlace))) {
            int size = t.size();
            MemorySegment recv = m.alloc(t, count);
            MemorySegment send = null;
            if (rank == root) {
                send = inPlace ? recv : m.alloc(t, count);
                m.fillBits(send, size, root, 0, count);
            }
            comm.broadcast(send == null ? null : Buffer.of(send, count, t), Buffer.of(recv, count, t), root);
            m.expectBits(recv, size, count, i -> m.bits(root, i), "recv");
            m.expectGuard(recv, t, count, "recv");
            if (send != null && !inPlace) {
                m.expectBits(send, size, count, i -> m.bits(root, i), "send (input, must be unchanged)");
            }
        }
    }

    private void allGather(DataType t, long count, boolean inPlace) {
        try (CheckBuffers m = begin("allGather " + t + " count=" + count + " " + placement(inPlace))) {
            int size = t.size();
            MemorySegment recv = m.alloc(t, count * n);
            MemorySegment send = inPlace ? recv.asSlice(t.bytes(count * rank)) : m.alloc(t, count);
            m.fillBits(send, size, rank, 0, count);
            comm.allGather(Buffer.of(send, count, t), Buffer.of(recv, count * n, t));
            m.expectBits(recv, size, count * n, i -> m.bits((int) (i / count), i % count), "recv");
            m.expectGuard(recv, t, count * n, "recv");
            if (!inPlace) {
                m.expectBits(send, size, count, i -> m.bits(rank, i), "send (input, must be unchanged)");
            }
        }
    }

    private void allToAll(DataType t, long count, boolean inPlace) {
        try (CheckBuffers m = begin("allToAll " + t + " count=" + count + " " + placement(inPlace))) {
            int size = t.size();
            long total = count * n;
            MemorySegment send = m.alloc(t, total);
            // Block j of this rank's send goes to rank j: its elements are numbered j*count + k.
            m.fillBits(send, size, rank, 0, total);
            MemorySegment recv = inPlace ? send : m.alloc(t, total);
            comm.allToAll(Buffer.of(send, total, t), Buffer.of(recv, total, t));
            // Block i of recv is block `rank` of rank i's send.
            m.expectBits(recv, size, total, i -> m.bits((int) (i / count), rank * count + i % count), "recv");
            m.expectGuard(recv, t, total, "recv");
            if (!inPlace) {
                m.expectBits(send, size, total, i -> m.bits(rank, i), "send (input, must be unchanged)");
            }
        }
    }

    /** Elements rank src sends to rank dst in the allToAllv check: varied sizes, some blocks empty. */
    private static long vCount(long count, int src, int dst) {
        if ((src + 2 * dst) % 3 == 1) {
            return 0;
        }
        return count - (src * 7L + dst * 3L) % (count / 2 + 1);
    }

    private void allToAllv(DataType t, long count) {
        try (CheckBuffers m = begin("allToAllv " + t + " count=" + count)) {
            int size = t.size();
            long[] sc = new long[n];
            long[] sd = new long[n];
            long[] rc = new long[n];
            long[] rd = new long[n];
            // Send blocks in reverse rank order with one-element gaps; receive blocks in rank order with two-element gaps.
            long pos = 1;
            for (int d = n - 1; d >= 0; d--) {
                sc[d] = vCount(count, rank, d);
                sd[d] = pos;
                pos += sc[d] + 1;
            }
            long sendLen = pos;
            pos = 0;
            for (int s = 0; s < n; s++) {
                rc[s] = vCount(count, s, rank);
                rd[s] = pos;
                pos += rc[s] + 2;
            }
            long recvLen = pos;
            MemorySegment send = m.alloc(t, sendLen);
            for (int d = 0; d < n; d++) {
                m.fillBits(send.asSlice(t.bytes(sd[d])), size, rank, (long) d << 40, sc[d]);
            }
            MemorySegment recv = m.alloc(t, recvLen);
            comm.allToAllv(Buffer.of(send, sendLen, t), sc, sd, Buffer.of(recv, recvLen, t), rc, rd);
            for (int s = 0; s < n; s++) {
                int src = s;
                MemorySegment block = recv.asSlice(t.bytes(rd[s]));
                m.expectBits(block, size, rc[s], k -> m.bits(src, ((long) rank << 40) + k), "recv block from rank " + s);
                m.expectPoison(recv, t.bytes(rd[s] + rc[s]), t.bytes(rd[s] + rc[s] + 2), "the gap after recv block " + s);
            }
            m.expectGuard(recv, t, recvLen, "recv");
            for (int d = 0; d < n; d++) {
                int dst = d;
                m.expectBits(send.asSlice(t.bytes(sd[d])), size, sc[d], k -> m.bits(rank, ((long) dst << 40) + k),
                        "send block for rank " + d + " (input, must be unchanged)");
            }
        }
    }

    private void gather(DataType t, long count, int root, boolean inPlace) {
        try (CheckBuffers m = begin("gather " + t + " count=" + count + " root=" + root + " " + placement(inPlace))) {
            int size = t.size();
            long total = count * n;
            // Every rank passes a recv (the API uses it only on the root): a non-root's must stay untouched.
            MemorySegment recv = m.alloc(t, total);
            MemorySegment send = inPlace ? recv.asSlice(t.bytes(count * rank)) : m.alloc(t, count);
            m.fillBits(send, size, rank, 0, count);
            comm.gather(Buffer.of(send, count, t), Buffer.of(recv, total, t), root);
            if (rank == root) {
                m.expectBits(recv, size, total, i -> m.bits((int) (i / count), i % count), "recv");
            } else if (inPlace) {
                // send is this rank's slot of recv; the rest of recv must stay as it was.
                m.expectPoison(recv, 0, t.bytes(count * rank), "recv of a non-root (must be untouched)");
                m.expectPoison(recv, t.bytes(count * (rank + 1)), t.bytes(total), "recv of a non-root (must be untouched)");
            } else {
                m.expectPoison(recv, 0, t.bytes(total), "recv of a non-root (must be untouched)");
            }
            m.expectGuard(recv, t, total, "recv");
            m.expectBits(send, size, count, i -> m.bits(rank, i), "send (input, must be unchanged)");
        }
    }

    private void scatter(DataType t, long count, int root, boolean inPlace) {
        try (CheckBuffers m = begin("scatter " + t + " count=" + count + " root=" + root + " " + placement(inPlace))) {
            int size = t.size();
            long total = count * n;
            // Every rank passes a send (the API reads it only on the root); only the root's holds data.
            MemorySegment send = m.alloc(t, total);
            if (rank == root) {
                m.fillBits(send, size, root, 0, total);
            }
            MemorySegment recv = inPlace ? send.asSlice(t.bytes(count * rank)) : m.alloc(t, count);
            comm.scatter(Buffer.of(send, total, t), Buffer.of(recv, count, t), root);
            if (rank == root) {
                m.expectBits(send, size, total, i -> m.bits(root, i), "send (input, must be unchanged)");
            } else if (inPlace) {
                // recv is this rank's slot of send; the rest of send must stay as it was.
                m.expectPoison(send, 0, t.bytes(count * rank), "send of a non-root (must be untouched)");
                m.expectPoison(send, t.bytes(count * (rank + 1)), t.bytes(total), "send of a non-root (must be untouched)");
            } else {
                m.expectPoison(send, 0, t.bytes(total), "send of a non-root (must be untouched)");
            }
            m.expectBits(recv, size, count, i -> m.bits(root, rank * count + i), "recv");
            m.expectGuard(inPlace ? send : recv, t, inPlace ? total : count, inPlace ? "send" : "recv");
        }
    }

    /**
     * A barrier must not let any rank out before the last rank has entered. Rank {@code holder} waits
     * {@link #BARRIER_HOLD} between two barriers; every other rank measures from entering the first to
     * leaving the second, which a correct barrier makes at least that long whatever the ranks' skew
     * (the holder left the first barrier after this rank entered it, and entered the second one
     * {@code BARRIER_HOLD} later). The asynchronous form is used for the second barrier.
     */
    private void barrier() {
        for (int holder : n == 1 ? new int[] {0} : new int[] {0, n - 1}) {
            try (CheckBuffers m = begin("barrier, rank " + holder + " arrives " + BARRIER_HOLD.toMillis() + " ms late")) {
                long t0 = System.nanoTime();
                comm.barrier();
                if (rank == holder) {
                    sleep(BARRIER_HOLD);
                }
                Work w = comm.barrierAsync();
                w.join();
                long waited = System.nanoTime() - t0;
                if (!w.isDone()) {
                    throw m.fail("barrierAsync's Work says it is not done after join() returned");
                }
                if (rank != holder && waited < BARRIER_HOLD.toNanos()) {
                    throw m.fail("this rank left the barrier " + waited / 1_000_000 + " ms after entering the one before it, but rank "
                            + holder + " entered it only " + BARRIER_HOLD.toMillis() + " ms after leaving that one: the barrier"
                            + " did not wait for every rank");
                }
            }
        }
    }

    /**
     * A ring in both directions inside one group: each rank sends to both neighbours and receives from
     * both, which deadlocks unless the group posts everything together. With two ranks both
     * neighbours are the same peer (matched in issue order), with one rank the peer is itself.
     */
    @SuppressWarnings("try") // the group is used only through close(), which runs the batch: that is its API
    private void sendRecvRing(DataType t, long count, boolean viaAsync) {
        try (CheckBuffers m = begin("send/recv ring (group, " + (viaAsync ? "async" : "blocking") + " calls) " + t + " count=" + count)) {
            int size = t.size();
            int right = (rank + 1) % n;
            int left = (rank + n - 1) % n;
            MemorySegment toRight = m.alloc(t, count);
            MemorySegment toLeft = m.alloc(t, count);
            MemorySegment fromLeft = m.alloc(t, count);
            MemorySegment fromRight = m.alloc(t, count);
            m.fillBits(toRight, size, rank, 0, count);
            m.fillBits(toLeft, size, rank, 1L << 40, count);
            List<Work> works = new ArrayList<>();
            try (Group g = comm.group()) {
                if (viaAsync) {
                    works.add(comm.sendAsync(Buffer.of(toRight, count, t), right));
                    works.add(comm.sendAsync(Buffer.of(toLeft, count, t), left));
                    works.add(comm.recvAsync(Buffer.of(fromLeft, count, t), left));
                    works.add(comm.recvAsync(Buffer.of(fromRight, count, t), right));
                } else {
                    // Inside a group the blocking forms only record the call and return at once.
                    comm.send(Buffer.of(toRight, count, t), right);
                    comm.send(Buffer.of(toLeft, count, t), left);
                    comm.recv(Buffer.of(fromLeft, count, t), left);
                    comm.recv(Buffer.of(fromRight, count, t), right);
                }
            }
            for (Work w : works) {
                if (!w.isDone()) {
                    throw m.fail("a Work of the group is not done after the group's close() returned");
                }
            }
            m.expectBits(fromLeft, size, count, i -> m.bits(left, i), "recv from the left neighbour " + left);
            m.expectBits(fromRight, size, count, i -> m.bits(right, (1L << 40) + i), "recv from the right neighbour " + right);
            m.expectGuard(fromLeft, t, count, "recv from the left");
            m.expectGuard(fromRight, t, count, "recv from the right");
            m.expectBits(toRight, size, count, i -> m.bits(rank, i), "send to the right (input, must be unchanged)");
        }
    }

    /**
     * Splits into even and odd ranks, ordered by descending parent rank (key), checks each new
     * communicator's size, rank and membership (an all-gather of parent ranks), then all-reduces on
     * both halves at once. Then a split where rank 0 opts out ({@code SPLIT_NOCOLOR}).
     */
    private void split() {
        int color = rank % 2;
        long members = (n - color + 1) / 2; // ranks of this parity below n
        Communicator sub;
        try (CheckBuffers m = begin("split into even and odd ranks, key = -rank")) {
            sub = comm.split(color, n - rank);
            // Descending parent rank: this rank comes after every same-parity rank above it.
            int expectedRank = (n - 1 - rank) / 2;
            if (sub == null || sub.size() != members || sub.rank() != expectedRank) {
                throw m.fail("split(color " + color + ", key " + (n - rank) + ") gave " + (sub == null ? "null"
                        : "rank " + sub.rank() + " of " + sub.size()) + ", expected rank " + expectedRank + " of " + members);
            }
            int[] parents = new int[(int) members];
            sub.allGather(Buffer.of(new int[] {rank}), Buffer.of(parents));
            for (int i = 0; i < members; i++) {
                int want = (n - 1 - (n - 1 - color) % 2) - 2 * i; // same-parity ranks, descending
                if (parents[i] != want) {
                    throw m.fail("rank " + i + " of the split communicator is parent rank " + parents[i] + ", expected " + want
                            + " (all: " + Arrays.toString(parents) + ")");
                }
            }
        }
        try {
            CollectiveCheck onSub = new CollectiveCheck(sub, sel, log);
            onSub.checks = checks;
            for (long count : sel.counts()) {
                for (DataType t : types(Collective.SPLIT, 0, count)) {
                    onSub.allReduce(t, ReduceOp.SUM, count, false);
                }
            }
            checks = onSub.checks;
        } finally {
            sub.close();
        }
        if (n > 1) {
            try (CheckBuffers m = begin("split with rank 0 passing SPLIT_NOCOLOR")) {
                Communicator rest = comm.split(rank == 0 ? Communicator.SPLIT_NOCOLOR : 7, rank);
                try {
                    if (rank == 0 ? rest != null : rest == null || rest.size() != n - 1 || rest.rank() != rank - 1) {
                        throw m.fail("split(SPLIT_NOCOLOR on rank 0) gave " + (rest == null ? "null" : "rank " + rest.rank() + " of "
                                + rest.size()) + (rank == 0 ? ", expected null" : ", expected rank " + (rank - 1) + " of " + (n - 1)));
                    }
                    if (rest != null) {
                        rest.barrier();
                    }
                } finally {
                    if (rest != null) {
                        rest.close();
                    }
                }
            }
        }
    }

    /**
     * dup() gives a communicator over the same ranks with its own order of operations: collectives
     * issued asynchronously on both at once must each complete with their own, correct results.
     */
    private void dup() {
        Communicator d;
        try (CheckBuffers m = begin("dup")) {
            d = comm.dup();
            if (d.rank() != rank || d.size() != n) {
                throw m.fail("dup() gave rank " + d.rank() + " of " + d.size() + ", expected rank " + rank + " of " + n);
            }
        }
        try {
            for (long count : sel.counts()) {
                for (DataType t : types(Collective.DUP, 0, count)) {
                    try (CheckBuffers m = begin("allReduce on the parent and its dup at once " + t + " count=" + count)) {
                        MemorySegment a = m.alloc(t, count);
                        MemorySegment b = m.alloc(t, count);
                        // Different operators give the two communicators different data: swapped results would show.
                        m.fillInput(a, t, ReduceOp.SUM, rank, 0, count);
                        m.fillInput(b, t, ReduceOp.MAX, rank, 0, count);
                        Work wd = d.allReduceAsync(Buffer.of(b, count, t), Buffer.of(b, count, t), ReduceOp.MAX);
                        Work wc = comm.allReduceAsync(Buffer.of(a, count, t), Buffer.of(a, count, t), ReduceOp.SUM);
                        wc.join();
                        wd.join();
                        m.expectReduced(a, t, ReduceOp.SUM, 0, count, "the parent's buffer");
                        m.expectReduced(b, t, ReduceOp.MAX, 0, count, "the dup's buffer");
                    }
                }
            }
        } finally {
            d.close();
        }
    }

    private static void sleep(Duration d) {
        try {
            Thread.sleep(d);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while holding back before a barrier", e);
        }
    }

    private static long count(String s) {
        try {
            long c = Long.parseLong(s.replace("_", ""));
            if (c < 0) {
                throw new IllegalArgumentException("counts must be >= 0, got " + s);
            }
            return c;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("count '" + s + "' is not a number");
        }
    }
}
