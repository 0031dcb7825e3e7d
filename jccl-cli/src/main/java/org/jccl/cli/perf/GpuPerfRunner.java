package org.jccl.cli.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;
import org.jccl.cuda.Cuda;
import org.jccl.cuda.CudaDevice;
import org.jccl.cuda.CudaStream;
import org.jccl.cuda.DeviceCommunicator;

/**
 * {@code jccl perf --device cuda} / {@code -g N}: the benchmark on GPU memory, through jccl's
 * kernels or NCCL, measured the same way for both.
 *
 * <p>Two shapes of job:
 * <ul>
 * <li>no launcher environment: this process is the whole job, N ranks on GPUs 0..N-1 (-g N, or
 *     1 with --device cuda alone), communicators made together (ncclCommInitAll);</li>
 * <li>under a launcher ({@code jccl run}, {@code jccl perf -np P}, torchrun, mpirun, srun): one
 *     GPU per process, chosen by jccl's rule ({@link Cuda#deviceFor(Communicator)}: JCCL_CUDA_DEVICE,
 *     else the only visible GPU, else the one numbered by the process's local rank); the host {@link
 *     Communicator} ({@link Jccl#init(Config)}) sets up the device communicator and carries the
 *     combined times and error counts.</li>
 * </ul>
 * Either way each rank is driven by its own platform thread ({@link GpuBenchmark}); the threads
 * and processes meet through a {@link RankSync}. The process holding global rank 0 prints the
 * report.
 */
final class GpuPerfRunner {
    private GpuPerfRunner() {
    }

    /**
     * Runs the GPU benchmark as this process's part of the job described by {@code config}.
     *
     * @return {@link PerfRunner#OK}, {@link PerfRunner#FAILED} or {@link PerfRunner#USAGE}
     */
    static int run(Config config, PerfOptions o, DeviceOptions d, PrintWriter out, PrintWriter err,
            Map<String, String> env) {
        return config.launch().isEmpty() ? runSingleProcess(o, d, out, err, env) : runInJob(config, o, d, out, err, env);
    }

    /**
     * What stops a GPU run on this machine before it starts: no CUDA, or no NCCL for --backend
     * nccl; null when nothing does. One line, ready to print after "jccl perf: ".
     */
    static String environmentProblem(DeviceOptions d) {
        if (!Cuda.isAvailable()) {
            String flag = d.ngpus() > 0 ? "-g/--ngpus " + d.ngpus() : d.backend() == DeviceOptions.Backend.NCCL
                    ? "--backend nccl" : "--device cuda";
            return flag + " needs a GPU: " + Cuda.unavailableReason();
        }
        return d.backend().unavailableReason();
    }

    /** Why this process cannot have {@code n} GPUs, or null. */
    static String tooFewGpus(int n, String what) {
        int visible = Cuda.deviceCount();
        if (visible >= n) {
            return null;
        }
        String cvd = System.getenv("CUDA_VISIBLE_DEVICES");
        return what + " needs " + n + " GPU" + (n == 1 ? "" : "s") + ", but " + visible + " " + (visible == 1 ? "is" : "are")
                + " visible (CUDA_VISIBLE_DEVICES=" + (cvd == null ? "<unset>" : cvd) + ")";
    }

    /** One process, every rank a thread on its own GPU. */
    private static int runSingleProcess(PerfOptions o, DeviceOptions d, PrintWriter out, PrintWriter err,
            Map<String, String> env) {
        String problem = environmentProblem(d);
        int n = d.gpusPerProcess();
        if (problem == null) {
            problem = tooFewGpus(n, d.ngpus() > 0 ? "-g " + n : "--device cuda");
        }
        if (problem != null) {
            return fail(err, problem);
        }
        List<CudaDevice> devices = Cuda.devicesList().subList(0, n);
        List<? extends DeviceCommunicator> comms;
        try {
            comms = d.backend().createAll(devices);
        } catch (RuntimeException e) {
            return fail(err, "cannot create the " + d.backend().flag() + " communicator on " + n + " GPU"
                    + (n == 1 ? "" : "s") + ": " + message(e));
        }
        try {
            return runLocal(null, comms, o, out, err, env);
        } catch (RuntimeException e) {
            return fail(err, message(e));
        } finally {
            closeAll(comms);
        }
    }

    /** One rank of a launched job: the GPU of jccl's rule, the host communicator around it. */
    private static int runInJob(Config config, PerfOptions o, DeviceOptions d, PrintWriter out, PrintWriter err,
            Map<String, String> env) {
        Config.Launch launch = config.launch().get();
        int rank = launch.rank();
        if (d.ngpus() > 1) {
            // The same answer on every rank, so no rank waits for another.
            if (rank == 0) {
                err.println("jccl perf: -g/--ngpus " + d.ngpus() + " with several processes (-np, jccl run, torchrun, mpirun,"
                        + " srun) is not supported yet: run one GPU per process (-np P, no -g), or -g N in a single process");
                err.flush();
            }
            return PerfRunner.USAGE;
        }
        try (Communicator host = Jccl.init(config)) {
            // Every rank must agree on whether to go on: one that stopped alone would leave the
            // others waiting for it in the device communicator's setup.
            String problem = environmentProblem(d);
            org.jccl.internal.topo.GpuMapping.Result gpu = null;
            if (problem == null) {
                // jccl's rule (GpuMapping): JCCL_CUDA_DEVICE, else the only visible GPU, else GPU number local rank.
                gpu = Cuda.select(host, config);
                if (!gpu.ok()) {
                    problem = gpu.error();
                }
            }
            int[] verdict = {problem == null ? 0 : 1};
            host.allReduce(verdict, ReduceOp.MAX);
            if (verdict[0] != 0) {
                if (problem != null) {
                    return fail(err, "rank " + rank + ": " + problem);
                }
                return PerfRunner.FAILED;
            }
            CudaDevice device = Cuda.deviceFor(host, config);
            err.println("jccl perf: rank " + rank + " of " + host.size() + (launch.localRank() >= 0 ? " (local rank " + launch.localRank()
                    + ")" : "") + " on GPU "
                    + device.ordinal() + " [" + device.pciBusId() + "] " + device.name() + " " + device.uuid() + ": "
                    + gpu.choice().why() + " (" + org.jccl.internal.topo.GpuMapping.cvdText(System.getenv("CUDA_VISIBLE_DEVICES")) + ")");
            err.flush();
            DeviceCommunicator comm = d.backend().create(host, device);
            try {
                return runLocal(host, List.of(comm), o, out, err, env);
            } finally {
                comm.close();
            }
        } catch (RuntimeException e) {
            return fail(err, "rank " + rank + ": " + message(e));
        }
    }

    /**
     * Runs the benchmark on this process's ranks, one thread each; every process of the job calls
     * this with the same options.
     *
     * @param host the communicator between the job's processes, or null when this process is the whole job
     * @param comms this process's ranks (any order)
     * @return {@link PerfRunner#OK}, {@link PerfRunner#FAILED} or {@link PerfRunner#USAGE}; the same on every process
     *     unless a rank failed
     */
    static int runLocal(Communicator host, List<? extends DeviceCommunicator> comms, PerfOptions o, PrintWriter out,
            PrintWriter err, Map<String, String> env) {
        List<DeviceCommunicator> ranks = new ArrayList<>(comms);
        ranks.sort(Comparator.comparingInt(DeviceCommunicator::rank));
        int localN = ranks.size();
        int total = ranks.getFirst().size();
        int processes = host == null ? 1 : host.size();
        if (total != processes * localN) {
            throw new IllegalStateException("the device communicator has " + total + " ranks, but " + processes
                    + " process(es) drive " + localN + " GPU(s) each");
        }
        int rank0Local = ranks.getFirst().rank() == 0 ? 0 : -1;
        boolean printer = rank0Local == 0;
        Collective c = o.collective();

        // Problems every process sees the same way, or that only the printer can see: agreed first.
        String problem = null;
        if (c.hasRoot() && o.root() >= total) {
            problem = "-r/--root " + o.root() + " is not a rank of this " + total + "-rank job";
        }
        Path json = null;
        if (printer && problem == null && o.jsonFile() != null) {
            try {
                json = JsonReport.create(o.jsonFile());
            } catch (IOException | RuntimeException e) {
                problem = "cannot write the JSON report to " + o.jsonFile() + ": " + e;
            }
        }
        int[] verdict = {problem == null ? 0 : 1};
        if (host != null) {
            host.allReduce(verdict, ReduceOp.MAX);
        }
        if (verdict[0] != 0) {
            if (problem != null && printer) {
                err.println("jccl perf: " + problem);
                err.flush();
            }
            return PerfRunner.USAGE;
        }

        List<RankInfo> infos = gatherRankInfo(host, ranks);
        String backend = printer ? backendDescription(ranks.getFirst()) : null;
        if (printer) {
            if (json != null) {
                out.println("# Writing JSON output to " + json);
            }
            if (o.plotFile() != null) {
                out.println("# Drawing busbw against size to " + o.plotFile());
            }
            Table.deviceReport(o, infos, localN, backend).forEach(out::println);
            Table.resultHeader().forEach(out::println);
            out.flush();
        }

        // The plot is drawn from the report, exactly what -J writes.
        JsonReport report = json != null || (printer && o.plotFile() != null) ? new JsonReport() : null;
        RankSync sync = new RankSync(localN, host, total, rank0Local);
        Worker[] workers = new Worker[localN];
        Thread[] threads = new Thread[localN];
        AtomicReference<String> firstFailure = new AtomicReference<>();
        for (int i = 0; i < localN; i++) {
            workers[i] = new Worker(i, ranks.get(i), o, sync, i == rank0Local ? out : null, report, err);
        }
        Runnable onFailure = () -> {
            sync.fail();
            for (DeviceCommunicator dc : ranks) {
                try {
                    dc.abort();
                } catch (RuntimeException ignored) {
                    // Stopping as much as can be stopped; the first failure is what gets reported.
                }
            }
            for (Thread t : threads) {
                if (t != Thread.currentThread()) {
                    t.interrupt();
                }
            }
        };
        for (int i = 0; i < localN; i++) {
            Worker w = workers[i];
            w.failures = firstFailure;
            w.onFailure = onFailure;
            threads[i] = Thread.ofPlatform().name("jccl-perf-rank-" + ranks.get(i).rank()).daemon(true).unstarted(w);
        }
        for (Thread t : threads) {
            t.start();
        }
        boolean interrupted = false;
        for (Thread t : threads) {
            while (true) {
                try {
                    t.join();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                    onFailure.run();
                }
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        if (firstFailure.get() != null || interrupted) {
            if (firstFailure.get() != null) {
                err.println("jccl perf: " + firstFailure.get());
                err.flush();
            }
            if (host != null) {
                // The other processes may be waiting for this one in a host collective.
                host.abort();
            }
            return PerfRunner.FAILED;
        }
        for (Worker w : workers) {
            if (w.code != PerfRunner.OK) {
                return w.code;
            }
        }
        long errors = workers[0].errors;
        double avgBusBw = workers[0].avgBusBw;
        if (printer) {
            Table.footer(errors, avgBusBw, o.minBusBw(), c).forEach(out::println);
            out.flush();
            if (report != null) {
                String document = report.document(o, infos, env, errors, avgBusBw, o.minBusBw(), List.of(), localN, backend);
                if (json != null) {
                    try {
                        JsonReport.write(json, document);
                    } catch (IOException e) {
                        err.println("jccl perf: could not write " + json + ": " + e);
                        err.flush();
                        return PerfRunner.FAILED;
                    }
                }
                if (o.plotFile() != null && !PerfPlot.draw(document, o.plotFile(), err)) {
                    return PerfRunner.FAILED;
                }
            }
        }
        boolean bwFailed = o.minBusBw() >= 0 && avgBusBw < o.minBusBw() * 0.9;
        return errors != 0 || bwFailed ? PerfRunner.FAILED : PerfRunner.OK;
    }

    /** One rank's thread: stream, buffers, measurements; the results are read after it ends. */
    private static final class Worker implements Runnable {
        private final int local;
        private final DeviceCommunicator comm;
        private final PerfOptions o;
        private final RankSync sync;
        private final PrintWriter out;
        private final JsonReport report;
        private final PrintWriter err;
        AtomicReference<String> failures;
        Runnable onFailure;
        int code = PerfRunner.OK;
        long errors;
        double avgBusBw;

        Worker(int local, DeviceCommunicator comm, PerfOptions o, RankSync sync, PrintWriter out, JsonReport report,
                PrintWriter err) {
            this.local = local;
            this.comm = comm;
            this.o = o;
            this.sync = sync;
            this.out = out;
            this.report = report;
            this.err = err;
        }

        @Override
        public void run() {
            CudaStream stream = null;
            GpuBenchmark bench = null;
            try {
                CudaDevice device = comm.device();
                device.makeCurrent();
                stream = device.createStream();
                // Buffers are allocated on every rank before the first collective; a rank short of
                // memory must stop all of them, not leave them waiting for it.
                String allocProblem = null;
                try {
                    bench = new GpuBenchmark(comm, stream, o, sync, local);
                } catch (IllegalStateException e) {
                    allocProblem = e.getMessage();
                }
                if (sync.reduce(local, allocProblem == null ? 0L : 1L, RankSync.Reduction.MAX) != 0) {
                    if (allocProblem != null) {
                        err.println("jccl perf: " + allocProblem);
                        err.flush();
                    }
                    code = PerfRunner.FAILED;
                    return;
                }
                bench.runAll(row -> {
                    if (out != null) {
                        out.println(Table.row(row));
                        out.flush();
                        if (report != null) {
                            report.add(row, o.iters());
                        }
                    }
                });
                errors = sync.reduce(local, bench.localErrors(), RankSync.Reduction.SUM);
                avgBusBw = bench.averageBusBw();
            } catch (Throwable t) {
                if (!(t instanceof RankSync.Aborted)) {
                    failures.compareAndSet(null, "rank " + comm.rank() + ": " + message(t));
                }
                onFailure.run();
            } finally {
                try {
                    if (bench != null) {
                        bench.close();
                    }
                } catch (RuntimeException e) {
                    failures.compareAndSet(null, "rank " + comm.rank() + ": freeing buffers: " + message(e));
                } finally {
                    if (stream != null) {
                        try {
                            stream.close();
                        } catch (RuntimeException e) {
                            failures.compareAndSet(null, "rank " + comm.rank() + ": destroying the stream: " + message(e));
                        }
                    }
                }
            }
        }
    }

    /** Every rank's device line, in rank order; across processes an all-gather of fixed-size records. */
    private static List<RankInfo> gatherRankInfo(Communicator host, List<DeviceCommunicator> ranks) {
        List<RankInfo> mine = new ArrayList<>();
        for (DeviceCommunicator dc : ranks) {
            mine.add(RankInfo.gpu(dc.rank(), dc.device()));
        }
        if (host == null) {
            return mine;
        }
        int per = ranks.size();
        byte[] local = new byte[RankInfo.RECORD_BYTES * per];
        for (int i = 0; i < per; i++) {
            System.arraycopy(mine.get(i).encode(), 0, local, i * RankInfo.RECORD_BYTES, RankInfo.RECORD_BYTES);
        }
        byte[] all = new byte[local.length * host.size()];
        host.allGather(Buffer.of(local), Buffer.of(all));
        List<RankInfo> infos = new ArrayList<>(per * host.size());
        for (int r = 0; r < per * host.size(); r++) {
            infos.add(RankInfo.decode(all, r * RankInfo.RECORD_BYTES));
        }
        infos.sort(Comparator.comparingInt(RankInfo::rank));
        return infos;
    }

    /**
     * The "# Backend:" text: "jccl", or for NCCL its version and the library file this process
     * loaded, e.g. "nccl 2.28.9 (/usr/lib/x86_64-linux-gnu/libnccl.so.2)".
     */
    static String backendDescription(DeviceCommunicator comm) {
        String name = comm.backend();
        if (!"nccl".equals(name)) {
            return name;
        }
        String path = loadedLibrary("libnccl.so");
        String version = path == null ? null : ncclVersion(path);
        return name + (version != null ? " " + version : "") + (path != null ? " (" + path + ")" : "");
    }

    /** The file of the first mapped library whose name starts with {@code prefix}, from /proc/self/maps; null if none. */
    static String loadedLibrary(String prefix) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
                int slash = line.indexOf('/');
                if (slash < 0) {
                    continue;
                }
                String file = line.substring(slash).trim();
                String base = file.substring(file.lastIndexOf('/') + 1);
                if (base.startsWith(prefix)) {
                    return file;
                }
            }
        } catch (IOException | RuntimeException e) {
            // Not Linux, or not readable: the version line goes without the path.
        }
        return null;
    }

    /** ncclGetVersion() of the library at {@code path} (already loaded: this only takes another reference), or null. */
    static String ncclVersion(String path) {
        try (Arena a = Arena.ofConfined()) {
            SymbolLookup lib = SymbolLookup.libraryLookup(Path.of(path), a);
            Optional<MemorySegment> f = lib.find("ncclGetVersion");
            if (f.isEmpty()) {
                return null;
            }
            MethodHandle h = Linker.nativeLinker().downcallHandle(f.get(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
            MemorySegment v = a.allocate(ValueLayout.JAVA_INT);
            int rc = (int) h.invokeExact(v);
            return rc == 0 ? ncclVersionString(v.get(ValueLayout.JAVA_INT, 0)) : null;
        } catch (Throwable t) {
            return null;
        }
    }

    /** NCCL's version code as text: 22809 is 2.28.9 (since 2.9: major*10000+minor*100+patch), 2804 is 2.8.4. */
    static String ncclVersionString(int code) {
        if (code >= 10000) {
            return code / 10000 + "." + code / 100 % 100 + "." + code % 100;
        }
        return code / 1000 + "." + code / 100 % 10 + "." + code % 100;
    }

    private static int fail(PrintWriter err, String line) {
        err.println("jccl perf: " + line);
        err.flush();
        return PerfRunner.FAILED;
    }

    private static String message(Throwable t) {
        return t.getMessage() != null ? t.getMessage() : t.toString();
    }

    private static void closeAll(List<? extends DeviceCommunicator> comms) {
        for (DeviceCommunicator dc : comms) {
            try {
                dc.close();
            } catch (RuntimeException ignored) {
                // Freeing what can be freed; the run's outcome is already decided.
            }
        }
    }
}
