package org.jccl.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * A first look on a GPU machine, run by hand (not a JUnit test): every collective of float32 once
 * with a check, then all-reduce times at a few sizes, one thread per GPU.
 * {@code java -cp ... org.jccl.cuda.GpuSmoke [ngpus]}
 */
public final class GpuSmoke {
    public static void main(String[] a) throws Exception {
        System.out.println("CUDA available: " + Cuda.isAvailable() + " " + Cuda.unavailableReason());
        int n = a.length > 0 ? Integer.parseInt(a[0]) : Cuda.deviceCount();
        List<CudaDevice> devs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            devs.add(Cuda.device(i));
            System.out.println(Cuda.device(i) + " sms=" + Cuda.device(i).multiprocessorCount() + " cc=" + Cuda.device(i).computeCapability());
        }
        for (CudaDevice x : devs) {
            for (CudaDevice y : devs) {
                if (x != y) {
                    System.out.print(x.canAccessPeer(y) ? "P" : "-");
                }
            }
        }
        System.out.println();
        long t0 = System.nanoTime();
        List<CudaCommunicator> comms = CudaCommunicator.createAll(devs);
        System.out.printf("createAll: %.1f ms%n", (System.nanoTime() - t0) / 1e6);
        long max = 1L << 30;
        DeviceBuffer[] send = new DeviceBuffer[n];
        DeviceBuffer[] recv = new DeviceBuffer[n];
        CudaStream[] streams = new CudaStream[n];
        for (int r = 0; r < n; r++) {
            send[r] = devs.get(r).allocate(max / 4, DataType.FLOAT32);
            recv[r] = devs.get(r).allocate(max / 4, DataType.FLOAT32);
            streams[r] = devs.get(r).createStream();
        }
        // ---- checks: float32, count 1M + 3 (odd), each collective
        long count = (1 << 20) + 3;
        String[] colls = {"allReduce", "allReduceInPlace", "reduceScatter", "allGather", "broadcast", "reduce", "allToAll", "sendrecv",
                "allReduceSmall"};
        for (String coll : colls) {
            long c = coll.equals("allToAll") ? (1 << 20) * n : coll.equals("allReduceSmall") ? 1001 : count;
            long wrong = runCheck(coll, comms, send, recv, streams, c, n);
            System.out.println("check " + coll + " count=" + c + ": " + (wrong == 0 ? "OK" : wrong + " WRONG"));
        }
        if (Boolean.getBoolean("mix")) {
            for (int round = 0; round < 3; round++) {
                for (long c : new long[] {2, 131072 / 4, 524288 / 4, 2097152 / 4, 8388608 / 4}) {
                    double[] host = new double[1];
                    double us = timeHost(comms, send, recv, streams, c, n, host);
                    System.out.printf("mix round %d: %9d B  %8.2f us/op  host enqueue %8.2f us/op%n", round, c * 4, us, host[0]);
                }
            }
            return;
        }
        if (Boolean.getBoolean("ce")) {
            ceBench(devs, send, recv, n);
        }
        // ---- JIT warm-up: the host path (argument blocks, launches) compiled before timing
        long w0 = System.nanoTime();
        for (int k = 0; k < Integer.getInteger("warm", 3000) / 100; k++) {
            time(comms, send, recv, streams, 2, false, n);
        }
        System.out.printf("jit warm-up %.1f s%n", (System.nanoTime() - w0) / 1e9);
        if (Boolean.getBoolean("gather")) {
            System.out.println("all_gather float32, per-rank bytes -> total");
            for (long bytes = 1 << 20; bytes <= max / n; bytes *= 8) {
                final long per = bytes / 4;
                double g = timeOp(comms, streams, n, (comm, r) -> comm.allGather(send[r].slice(0, per), recv[r].slice(0, per * n), streams[r]));
                System.out.printf("allgather %11d %9.2f us busbw %.1f%n", bytes * n, g, bytes * n / g / 1e3 * (n - 1) / n);
            }
        }
        // ---- all-reduce timing
        System.out.println("all_reduce float32 sum, one thread per GPU, 20 iters after 5 warm-up");
        System.out.println("      bytes    oop_us  oop_busbw     ip_us   ip_busbw");
        for (long bytes = 8; bytes <= max; bytes *= 8) {
            long c = bytes / 4;
            double oop = time(comms, send, recv, streams, c, false, n);
            double ip = time(comms, send, recv, streams, c, true, n);
            double f = 2.0 * (n - 1) / n;
            System.out.printf("%11d %9.2f %10.2f %9.2f %10.2f%n", bytes, oop, bytes / oop / 1e3 * f, ip, bytes / ip / 1e3 * f);
        }
        for (CudaCommunicator c : comms) {
            c.close();
        }
        System.out.println("closed");
    }

    /** Copy-engine bandwidth: every GPU copies `per` bytes to every peer at once, one stream per (GPU, peer). */
    static void ceBench(List<CudaDevice> devs, DeviceBuffer[] send, DeviceBuffer[] recv, int n) {
        for (long per : new long[] {16L << 20, 64L << 20, 256L << 20}) {
            MemorySegment[][] st = new MemorySegment[n][n];
            for (int i = 0; i < n; i++) {
                devs.get(i).makeCurrent();
                for (int j = 0; j < n; j++) {
                    st[i][j] = org.jccl.cuda.internal.CudaDriver.streamCreate(1);
                }
            }
            for (int rep = 0; rep < 3; rep++) {
                long t0 = System.nanoTime();
                for (int k = 0; k < 5; k++) {
                    for (int i = 0; i < n; i++) {
                        devs.get(i).makeCurrent();
                        for (int j = 0; j < n; j++) {
                            if (j != i) {
                                org.jccl.cuda.internal.CudaDriver.memcpyDtoDAsync(recv[j].address() + i * per, send[i].address(), per, st[i][j]);
                            }
                        }
                    }
                }
                for (int i = 0; i < n; i++) {
                    devs.get(i).makeCurrent();
                    for (int j = 0; j < n; j++) {
                        org.jccl.cuda.internal.CudaDriver.streamSynchronize(st[i][j]);
                    }
                }
                double s = (System.nanoTime() - t0) / 1e9 / 5;
                System.out.printf("CE all-pairs: %d MB to each peer: %.1f GB/s out per GPU%n", per >> 20, per * (n - 1) / s / 1e9);
            }
            // one pair, one direction
            devs.get(0).makeCurrent();
            long t0 = System.nanoTime();
            for (int k = 0; k < 5; k++) {
                org.jccl.cuda.internal.CudaDriver.memcpyDtoDAsync(recv[1].address(), send[0].address(), per * 2, st[0][1]);
            }
            org.jccl.cuda.internal.CudaDriver.streamSynchronize(st[0][1]);
            double s = (System.nanoTime() - t0) / 1e9 / 5;
            System.out.printf("CE one pair 0->1: %d MB: %.1f GB/s%n", per * 2 >> 20, per * 2 / s / 1e9);
        }
    }

    interface Op {
        void run(CudaCommunicator c, int rank);
    }

    static double timeOp(List<CudaCommunicator> comms, CudaStream[] streams, int n, Op op) throws Exception {
        double[] us = new double[n];
        CyclicBarrier barrier = new CyclicBarrier(n);
        Thread[] ts = new Thread[n];
        for (int r = 0; r < n; r++) {
            final int rank = r;
            ts[r] = Thread.ofPlatform().start(() -> {
                try {
                    for (int i = 0; i < 5; i++) {
                        op.run(comms.get(rank), rank);
                    }
                    streams[rank].synchronize();
                    barrier.await();
                    long t0 = System.nanoTime();
                    for (int i = 0; i < 20; i++) {
                        op.run(comms.get(rank), rank);
                    }
                    streams[rank].synchronize();
                    us[rank] = (System.nanoTime() - t0) / 1e3 / 20;
                } catch (Exception e) {
                    e.printStackTrace();
                }
            });
        }
        for (Thread t : ts) {
            t.join();
        }
        double m = 0;
        for (double u : us) {
            m += u;
        }
        return m / n;
    }

    static double timeHost(List<CudaCommunicator> comms, DeviceBuffer[] send, DeviceBuffer[] recv, CudaStream[] streams, long c,
                           int n, double[] hostOut) throws Exception {
        double[] us = new double[n];
        double[] host = new double[n];
        CyclicBarrier barrier = new CyclicBarrier(n);
        Thread[] ts = new Thread[n];
        for (int r = 0; r < n; r++) {
            final int rank = r;
            ts[r] = Thread.ofPlatform().start(() -> {
                try {
                    CudaCommunicator comm = comms.get(rank);
                    DeviceBuffer s = send[rank].slice(0, c);
                    DeviceBuffer d = recv[rank].slice(0, c);
                    for (int i = 0; i < 200; i++) {
                        comm.allReduce(s, d, ReduceOp.SUM, streams[rank]);
                    }
                    streams[rank].synchronize();
                    barrier.await();
                    long t0 = System.nanoTime();
                    long h = 0;
                    for (int i = 0; i < 200; i++) {
                        long a = System.nanoTime();
                        comm.allReduce(s, d, ReduceOp.SUM, streams[rank]);
                        h += System.nanoTime() - a;
                    }
                    streams[rank].synchronize();
                    us[rank] = (System.nanoTime() - t0) / 1e3 / 200;
                    host[rank] = h / 1e3 / 200;
                } catch (Exception e) {
                    e.printStackTrace();
                }
            });
        }
        for (Thread t : ts) {
            t.join();
        }
        double m = 0;
        double hm = 0;
        for (int r = 0; r < n; r++) {
            m += us[r];
            hm = Math.max(hm, host[r]);
        }
        hostOut[0] = hm;
        return m / n;
    }

    static double time(List<CudaCommunicator> comms, DeviceBuffer[] send, DeviceBuffer[] recv, CudaStream[] streams, long c,
                       boolean inPlace, int n) throws Exception {
        double[] us = new double[n];
        CyclicBarrier barrier = new CyclicBarrier(n);
        Thread[] ts = new Thread[n];
        for (int r = 0; r < n; r++) {
            final int rank = r;
            ts[r] = Thread.ofPlatform().start(() -> {
                try {
                    CudaCommunicator comm = comms.get(rank);
                    DeviceBuffer s = send[rank].slice(0, c);
                    DeviceBuffer d = inPlace ? s : recv[rank].slice(0, c);
                    for (int i = 0; i < 5; i++) {
                        comm.allReduce(s, d, ReduceOp.SUM, streams[rank]);
                    }
                    streams[rank].synchronize();
                    barrier.await();
                    long t0 = System.nanoTime();
                    for (int i = 0; i < 100; i++) {
                        comm.allReduce(s, d, ReduceOp.SUM, streams[rank]);
                    }
                    streams[rank].synchronize();
                    us[rank] = (System.nanoTime() - t0) / 1e3 / 100;
                } catch (Exception e) {
                    e.printStackTrace();
                }
            });
        }
        for (Thread t : ts) {
            t.join();
        }
        double m = 0;
        for (double u : us) {
            m += u;
        }
        return m / n;
    }

    static float val(int rank, long i) {
        return (float) ((rank + 1) * 0.5 + (i % 97));
    }

    static long runCheck(String coll, List<CudaCommunicator> comms, DeviceBuffer[] send, DeviceBuffer[] recv, CudaStream[] streams,
                         long c, int n) throws Exception {
        try (Arena arena = Arena.ofShared()) {
            long total = coll.equals("allGather") ? c * n : c;
            for (int r = 0; r < n; r++) {
                MemorySegment h = arena.allocate(total * 4);
                for (long i = 0; i < total; i++) {
                    h.setAtIndex(ValueLayout.JAVA_FLOAT, i, val(r, i));
                }
                send[r].slice(0, total).copyFrom(h);
                MemorySegment p = arena.allocate(total * 4);
                p.fill((byte) 0xA5);
                recv[r].slice(0, total).copyFrom(p);
                if (coll.equals("allReduceInPlace")) {
                    recv[r].slice(0, total).copyFrom(h);
                }
            }
            Thread[] ts = new Thread[n];
            for (int r = 0; r < n; r++) {
                final int rank = r;
                ts[r] = Thread.ofPlatform().start(() -> {
                    CudaCommunicator comm = comms.get(rank);
                    CudaStream st = streams[rank];
                    switch (coll) {
                        case "allReduce", "allReduceSmall" -> comm.allReduce(send[rank].slice(0, c), recv[rank].slice(0, c), ReduceOp.SUM, st);
                        case "allReduceInPlace" -> comm.allReduce(recv[rank].slice(0, c), recv[rank].slice(0, c), ReduceOp.SUM, st);
                        case "reduceScatter" -> comm.reduceScatter(send[rank].slice(0, (c / n) * n), recv[rank].slice(0, c / n), ReduceOp.SUM, st);
                        case "allGather" -> comm.allGather(send[rank].slice(0, c), recv[rank].slice(0, c * n), st);
                        case "broadcast" -> comm.broadcast(send[rank].slice(0, c), recv[rank].slice(0, c), 1 % n, st);
                        case "reduce" -> comm.reduce(send[rank].slice(0, c), recv[rank].slice(0, c), ReduceOp.SUM, 0, st);
                        case "allToAll" -> comm.allToAll(send[rank].slice(0, c), recv[rank].slice(0, c), st);
                        case "sendrecv" -> {
                            comm.groupStart();
                            comm.send(send[rank].slice(0, c), (rank + 1) % n, st);
                            comm.recv(recv[rank].slice(0, c), (rank - 1 + n) % n, st);
                            comm.groupEnd();
                        }
                        default -> throw new IllegalArgumentException(coll);
                    }
                    st.synchronize();
                });
            }
            for (Thread t : ts) {
                t.join();
            }
            long wrong = 0;
            for (int r = 0; r < n; r++) {
                long outCount = switch (coll) {
                    case "reduceScatter" -> c / n;
                    case "allGather" -> c * n;
                    default -> c;
                };
                if (coll.equals("reduce") && r != 0) {
                    continue;
                }
                MemorySegment h = arena.allocate(outCount * 4);
                recv[r].slice(0, outCount).copyTo(h);
                for (long i = 0; i < outCount; i++) {
                    float got = h.getAtIndex(ValueLayout.JAVA_FLOAT, i);
                    float exp;
                    switch (coll) {
                        case "allReduce", "allReduceSmall", "allReduceInPlace", "reduce" -> {
                            float s = 0;
                            for (int q = 0; q < n; q++) {
                                s += val(q, i);
                            }
                            exp = s;
                        }
                        case "reduceScatter" -> {
                            float s = 0;
                            for (int q = 0; q < n; q++) {
                                s += val(q, r * (c / n) + i);
                            }
                            exp = s;
                        }
                        case "allGather" -> exp = val((int) (i / c), i % c);
                        case "broadcast" -> exp = val(1 % n, i);
                        case "allToAll" -> exp = val((int) (i / (c / n)), r * (c / n) + i % (c / n));
                        case "sendrecv" -> exp = val((r - 1 + n) % n, i);
                        default -> exp = Float.NaN;
                    }
                    if (Math.abs(got - exp) > 1e-3 * Math.abs(exp)) {
                        if (wrong < 3) {
                            System.out.println("  rank " + r + " [" + i + "] expected " + exp + " got " + got);
                        }
                        wrong++;
                    }
                }
            }
            return wrong;
        }
    }
}
