package org.jccl.cuda;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.Nccl;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * NcclCommunicator on real GPUs, over every visible device: skipped (with the reason) where there
 * is no GPU or no NCCL, as on CI. Results are checked exactly, on data whose sums are exact in the
 * element type.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NcclCommunicatorTest {

    private List<CudaDevice> devices;
    private List<NcclCommunicator> comms;
    private int n;

    /** Creates the shared communicators where NCCL and a GPU exist; elsewhere every test is skipped by {@link #requireGpu}. */
    @BeforeAll
    void setUp() {
        if (!NcclCommunicator.isAvailable()) {
            return;
        }
        devices = Cuda.devicesList();
        n = devices.size();
        comms = NcclCommunicator.createAll(devices);
        System.out.println("NCCL " + NcclCommunicator.version() + " from " + NcclCommunicator.libraryPath() + ", " + n
                + " GPU(s): " + devices);
    }

    /** Per test, so that CI lists each test as skipped, with the reason. */
    @BeforeEach
    void requireGpu() {
        assumeTrue(comms != null, () -> "skipped: no GPU/NCCL here: " + NcclCommunicator.unavailableReason());
    }

    @AfterAll
    void tearDown() {
        if (comms != null) {
            inParallel(n, r -> comms.get(r).close());
        }
    }

    /** A task of one rank. */
    @FunctionalInterface
    interface RankTask {
        void run(int rank) throws Exception;
    }

    /** Runs {@code task} for every rank, one thread each; rethrows the first failure. */
    private static void inParallel(int ranks, RankTask task) {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
            int rank = r;
            Thread t = new Thread(() -> {
                try {
                    task.run(rank);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "nccl-test-rank-" + r);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            try {
                t.join(100_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted", e);
            }
            if (t.isAlive()) {
                fail(t.getName() + " did not finish within 100 s");
            }
        }
        Throwable f = failure.get();
        if (f instanceof RuntimeException re) {
            throw re;
        }
        if (f instanceof Error e) {
            throw e;
        }
        if (f != null) {
            throw new AssertionError(f);
        }
    }

    private static DeviceBuffer upload(CudaDevice d, int[] values) {
        DeviceBuffer b = d.allocate(values.length, DataType.INT32);
        try (Arena a = Arena.ofConfined()) {
            b.copyFrom(a.allocateFrom(JAVA_INT, values));
        }
        return b;
    }

    private static DeviceBuffer upload(CudaDevice d, float[] values) {
        DeviceBuffer b = d.allocate(values.length, DataType.FLOAT32);
        try (Arena a = Arena.ofConfined()) {
            b.copyFrom(a.allocateFrom(JAVA_FLOAT, values));
        }
        return b;
    }

    private static int[] downloadInts(DeviceBuffer b) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment m = a.allocate(Math.max(b.byteSize(), 1));
            b.copyTo(m);
            return m.asSlice(0, b.byteSize()).toArray(JAVA_INT);
        }
    }

    private static float[] downloadFloats(DeviceBuffer b) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment m = a.allocate(Math.max(b.byteSize(), 1));
            b.copyTo(m);
            return m.asSlice(0, b.byteSize()).toArray(JAVA_FLOAT);
        }
    }

    /** Rank r's element i: small integers, so sums over ranks are exact in float32 and int32. */
    private static int value(int rank, int i) {
        return (rank + 1) * 3 + i % 11 - 5;
    }

    // ------------------------------------------------------------------ the task's test

    /** All-reduce of float32 over createAll(every GPU), one thread per GPU, sum checked exactly. */
    @Test
    void allReduceFloat32SumOneThreadPerDevice() {
        int count = (1 << 20) + 3;
        inParallel(n, r -> {
            CudaDevice d = devices.get(r);
            float[] x = new float[count];
            for (int i = 0; i < count; i++) {
                x[i] = value(r, i);
            }
            try (DeviceBuffer send = upload(d, x); DeviceBuffer recv = d.allocate(count, DataType.FLOAT32);
                    CudaStream s = d.createStream()) {
                d.synchronize();
                comms.get(r).allReduce(send, recv, ReduceOp.SUM, s);
                s.synchronize();
                float[] got = downloadFloats(recv);
                for (int i = 0; i < count; i++) {
                    float want = 0;
                    for (int k = 0; k < n; k++) {
                        want += value(k, i);
                    }
                    if (got[i] != want) {
                        fail("rank " + r + ": element " + i + " is " + got[i] + ", expected " + want);
                    }
                }
            }
        });
    }

    // ------------------------------------------------------------------ the other calls

    @Test
    void inPlaceAllReduceMaxAndAvgOfInt32() {
        int count = 4099;
        inParallel(n, r -> {
            CudaDevice d = devices.get(r);
            int[] x = new int[count];
            for (int i = 0; i < count; i++) {
                x[i] = value(r, i);
            }
            try (DeviceBuffer buf = upload(d, x); DeviceBuffer b2 = upload(d, x); CudaStream s = d.createStream()) {
                d.synchronize();
                comms.get(r).allReduce(buf, buf, ReduceOp.MAX, s);
                comms.get(r).allReduce(b2, b2, ReduceOp.MIN, s);
                s.synchronize();
                int[] max = downloadInts(buf);
                int[] min = downloadInts(b2);
                for (int i = 0; i < count; i++) {
                    assertEquals(value(n - 1, i), max[i], "max at " + i);
                    assertEquals(value(0, i), min[i], "min at " + i);
                }
            }
        });
    }

    @Test
    void broadcastReduceAllGatherReduceScatter() {
        int count = 1000;
        int root = n - 1;
        inParallel(n, r -> {
            CudaDevice d = devices.get(r);
            NcclCommunicator c = comms.get(r);
            int[] x = new int[count * n];
            for (int i = 0; i < x.length; i++) {
                x[i] = value(r, i);
            }
            try (DeviceBuffer big = upload(d, x); DeviceBuffer small = d.allocate(count, DataType.INT32);
                    DeviceBuffer gathered = d.allocate((long) count * n, DataType.INT32);
                    DeviceBuffer bcast = d.allocate(count, DataType.INT32);
                    DeviceBuffer reduced = d.allocate(count, DataType.INT32); CudaStream s = d.createStream()) {
                d.synchronize();
                DeviceBuffer mine = big.slice(0, count);
                c.broadcast(r == root ? mine : null, bcast, root, s);
                c.reduce(mine, r == 0 ? reduced : null, ReduceOp.SUM, 0, s);
                c.allGather(mine, gathered, s);
                c.reduceScatter(big, small, ReduceOp.SUM, s);
                s.synchronize();
                int[] b = downloadInts(bcast);
                int[] g = downloadInts(gathered);
                int[] rs = downloadInts(small);
                int[] red = r == 0 ? downloadInts(reduced) : null;
                for (int i = 0; i < count; i++) {
                    assertEquals(value(root, i), b[i], "broadcast at " + i);
                    int sumSlot = 0;
                    int sum0 = 0;
                    for (int k = 0; k < n; k++) {
                        sumSlot += value(k, r * count + i);
                        sum0 += value(k, i);
                        assertEquals(value(k, i), g[k * count + i], "allGather block " + k + " at " + i);
                    }
                    assertEquals(sumSlot, rs[i], "reduceScatter at " + i);
                    if (red != null) {
                        assertEquals(sum0, red[i], "reduce at " + i);
                    }
                }
            }
        });
    }

    @Test
    void allToAllBothForms() {
        int block = 257;
        inParallel(n, r -> {
            CudaDevice d = devices.get(r);
            NcclCommunicator c = comms.get(r);
            int[] x = new int[block * n];
            for (int j = 0; j < n; j++) {
                for (int i = 0; i < block; i++) {
                    x[j * block + i] = r * 1_000_000 + j * 1000 + i; // from r to j
                }
            }
            try (DeviceBuffer send = upload(d, x); DeviceBuffer recv1 = d.allocate((long) block * n, DataType.INT32);
                    DeviceBuffer recv2 = d.allocate((long) block * n, DataType.INT32); CudaStream s = d.createStream()) {
                d.synchronize();
                c.allToAll(send, recv1, s);
                c.allToAllSendRecv(send, recv2, s);
                s.synchronize();
                int[] a = downloadInts(recv1);
                int[] b = downloadInts(recv2);
                for (int k = 0; k < n; k++) {
                    for (int i = 0; i < block; i++) {
                        int want = k * 1_000_000 + r * 1000 + i;
                        assertEquals(want, a[k * block + i], "allToAll block from " + k + " at " + i);
                        assertEquals(want, b[k * block + i], "allToAllSendRecv block from " + k + " at " + i);
                    }
                }
            }
        });
    }

    /** A ring: every rank sends to the next and receives from the previous, paired in a group. */
    @Test
    void sendRecvRingInAGroup() {
        int count = 12345;
        inParallel(n, r -> {
            CudaDevice d = devices.get(r);
            NcclCommunicator c = comms.get(r);
            int[] x = new int[count];
            for (int i = 0; i < count; i++) {
                x[i] = value(r, i);
            }
            try (DeviceBuffer out = upload(d, x); DeviceBuffer in = d.allocate(count, DataType.INT32); CudaStream s = d.createStream()) {
                d.synchronize();
                c.groupStart();
                c.send(out, (r + 1) % n, s);
                c.recv(in, (r + n - 1) % n, s);
                c.groupEnd();
                s.synchronize();
                int[] got = downloadInts(in);
                for (int i = 0; i < count; i++) {
                    assertEquals(value((r + n - 1) % n, i), got[i], "element " + i);
                }
            }
        });
    }

    /** One thread drives every GPU: the calls must be grouped (NCCL's single-thread model). */
    @Test
    void oneThreadDrivesEveryGpuInsideAGroup() {
        int count = 777;
        List<DeviceBuffer> bufs = new ArrayList<>();
        List<CudaStream> streams = new ArrayList<>();
        try {
            for (int r = 0; r < n; r++) {
                int[] x = new int[count];
                for (int i = 0; i < count; i++) {
                    x[i] = value(r, i);
                }
                bufs.add(upload(devices.get(r), x));
                streams.add(devices.get(r).createStream());
                devices.get(r).synchronize();
            }
            comms.get(0).groupStart();
            for (int r = 0; r < n; r++) {
                comms.get(r).allReduce(bufs.get(r), bufs.get(r), ReduceOp.SUM, streams.get(r));
            }
            comms.get(0).groupEnd();
            for (int r = 0; r < n; r++) {
                streams.get(r).synchronize();
                int[] got = downloadInts(bufs.get(r));
                for (int i = 0; i < count; i++) {
                    int want = 0;
                    for (int k = 0; k < n; k++) {
                        want += value(k, i);
                    }
                    assertEquals(want, got[i], "rank " + r + " element " + i);
                }
            }
        } finally {
            bufs.forEach(DeviceBuffer::close);
            streams.forEach(CudaStream::close);
        }
    }

    /** create(host, device): the ncclUniqueId travels over a jccl host communicator (ranks as threads). */
    @Test
    void createOverAHostCommunicator() {
        List<Communicator> hosts = Jccl.initLocal(n);
        try {
            inParallel(n, r -> {
                CudaDevice d = devices.get(r);
                try (NcclCommunicator c = NcclCommunicator.create(hosts.get(r), d);
                        DeviceBuffer b = upload(d, new float[] {r + 1f, 2f * r}); CudaStream s = d.createStream()) {
                    assertEquals(r, c.rank());
                    assertEquals(n, c.size());
                    assertSame(d, c.device());
                    assertEquals("nccl", c.backend());
                    d.synchronize();
                    c.allReduce(b, b, ReduceOp.SUM, s);
                    s.synchronize();
                    float[] got = downloadFloats(b);
                    assertEquals(n * (n + 1) / 2f, got[0]);
                    assertEquals(n * (n - 1) * 1f, got[1]);
                    assertEquals(0, c.asyncError());
                }
            });
        } finally {
            hosts.forEach(Communicator::close);
        }
    }

    // ------------------------------------------------------------------ argument checks

    private static void rejects(String expected, Runnable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call::run);
        assertTrue(e.getMessage().contains(expected), "message '" + e.getMessage() + "' should contain '" + expected + "'");
    }

    @Test
    void badArgumentsAreRejectedBeforeNcclIsCalled() {
        NcclCommunicator c = comms.get(0);
        CudaDevice d = devices.get(0);
        try (DeviceBuffer f = d.allocate(64, DataType.FLOAT32); DeviceBuffer f2 = d.allocate(64, DataType.FLOAT32);
                DeviceBuffer i = d.allocate(64, DataType.INT32); DeviceBuffer small = d.allocate(8, DataType.FLOAT32);
                DeviceBuffer big = d.allocate(64L * n, DataType.FLOAT32); CudaStream s = d.createStream()) {
            rejects("allReduce: send is null", () -> c.allReduce(null, f, ReduceOp.SUM, s));
            rejects("allReduce: op is null", () -> c.allReduce(f, f, null, s));
            rejects("allReduce: stream is null", () -> c.allReduce(f, f, ReduceOp.SUM, null));
            rejects("send holds FLOAT32 but recv holds INT32", () -> c.allReduce(f, i, ReduceOp.SUM, s));
            rejects("recv holds 8 elements but 64 are needed", () -> c.allReduce(f, small, ReduceOp.SUM, s));
            rejects("overlap without being in place", () -> c.allReduce(f.slice(0, 32), f.slice(1, 40), ReduceOp.SUM, s));
            rejects("root " + (5 + n) + " is outside", () -> c.broadcast(f, f, 5 + n, s));
            rejects("root -1 is outside", () -> c.reduce(f, f, ReduceOp.SUM, -1, s));
            rejects("send (required on the root) is null", () -> c.broadcast(null, f, 0, s));
            rejects("recv (required on the root) is null", () -> c.reduce(f, null, ReduceOp.SUM, 0, s));
            if (n > 1) {
                rejects("recv holds 64 elements but " + 64 * n + " are needed", () -> c.allGather(f, f2, s));
                rejects("send holds 64 elements but " + 64 * n + " are needed", () -> c.reduceScatter(f, f2, ReduceOp.SUM, s));
            }
            rejects("peer " + n + " is outside", () -> c.send(f, n, s));
            rejects("peer -1 is outside", () -> c.recv(f, -1, s));
            rejects("recv: buf is null", () -> c.recv(null, 0, s));
            rejects("allToAll: send and recv are the same memory", () -> c.allToAll(big, big, s));
            if (n > 1) {
                rejects("not a multiple of the " + n + " ranks", () -> c.allToAll(big.slice(0, 64L * n - 1), f, s));
            }
            // In place is accepted (checked without calling NCCL: a collective on one rank alone would wait for the others).
            assertEquals(64, DeviceArgs.checkAllGather(c, big.slice(0, 64), big, s));
            assertEquals(64, DeviceArgs.checkReduceScatter(c, big, big.slice(0, 64), ReduceOp.SUM, s));
            assertEquals(64, DeviceArgs.checkAllReduce(c, f, f, ReduceOp.SUM, s));
            // Nothing was enqueued by the rejected calls: the stream is still usable.
            s.synchronize();
        }
        if (n > 1) {
            CudaDevice other = devices.get(1);
            try (DeviceBuffer f = d.allocate(64, DataType.FLOAT32); DeviceBuffer g = other.allocate(64, DataType.FLOAT32);
                    CudaStream s = d.createStream(); CudaStream t = other.createStream()) {
                rejects("is on GPU 1 but this rank (0) runs on GPU 0", () -> c.allReduce(f, g, ReduceOp.SUM, s));
                rejects("the stream belongs to GPU 1", () -> c.allReduce(f, f, ReduceOp.SUM, t));
            }
        }
    }

    @Test
    void createAllRejectsDuplicateAndEmptyDeviceLists() {
        rejects("no devices", () -> NcclCommunicator.createAll(List.of()));
        rejects("GPU 0 is listed twice", () -> NcclCommunicator.createAll(List.of(devices.get(0), devices.get(0))));
    }

    /** An error NCCL reports names the call, its arguments, NCCL's code and text, and NCCL's own last message. */
    @Test
    void ncclErrorsNameTheCallTheCodeAndNcclsMessage() {
        devices.get(0).makeCurrent();
        CudaException e = assertThrows(CudaException.class, () -> Nccl.commInitRank(2, Nccl.getUniqueId(), 7));
        System.out.println("NCCL error as reported: " + e.getMessage());
        assertEquals(Nccl.INVALID_ARGUMENT, e.result());
        assertEquals(ErrorCode.DEVICE, e.code());
        assertTrue(e.getMessage().startsWith("ncclCommInitRank(nranks=2, rank=7) failed: ncclInvalidArgument ("), e.getMessage());
        assertTrue(e.getMessage().contains("NCCL says: Invalid rank requested : 7/2"), e.getMessage());
    }

    // ------------------------------------------------------------------ lifecycle

    @Test
    void abortThenCallsFailAsAbortedAndCloseIsSafe() {
        List<NcclCommunicator> mine = NcclCommunicator.createAll(devices);
        CudaDevice d = devices.get(0);
        inParallel(n, r -> mine.get(r).abort());
        mine.get(0).abort(); // idempotent
        try (DeviceBuffer f = d.allocate(16, DataType.FLOAT32); CudaStream s = d.createStream()) {
            JcclException e = assertThrows(JcclException.class, () -> mine.get(0).allReduce(f, f, ReduceOp.SUM, s));
            assertEquals(ErrorCode.ABORTED, e.code());
            assertTrue(e.getMessage().contains("allReduce") && e.getMessage().contains("aborted"), e.getMessage());
            assertThrows(JcclException.class, () -> mine.get(0).asyncError());
        }
        mine.forEach(NcclCommunicator::close); // safe after abort
        assertTrue(mine.get(0).toString().contains("aborted"), mine.get(0).toString());
    }

    @Test
    void closeIsIdempotentAndLaterCallsAreInvalidUsage() {
        List<NcclCommunicator> mine = NcclCommunicator.createAll(devices);
        inParallel(n, r -> mine.get(r).close());
        mine.forEach(NcclCommunicator::close);
        mine.forEach(NcclCommunicator::abort); // nothing after close
        CudaDevice d = devices.get(0);
        try (DeviceBuffer f = d.allocate(16, DataType.FLOAT32); CudaStream s = d.createStream()) {
            InvalidUsageException e = assertThrows(InvalidUsageException.class, () -> mine.get(0).allReduce(f, f, ReduceOp.SUM, s));
            assertTrue(e.getMessage().contains("closed"), e.getMessage());
            assertThrows(InvalidUsageException.class, () -> mine.get(0).groupStart());
        }
    }

    /** ncclCommGetAsyncError is cheap enough to poll; printed for the record, not asserted beyond a loose bound. */
    @Test
    void asyncErrorIsSuccessAndCheap() {
        NcclCommunicator c = comms.get(0);
        assertEquals(0, c.asyncError());
        int reps = 100_000;
        for (int i = 0; i < reps; i++) {
            c.asyncError();
        }
        long t0 = System.nanoTime();
        for (int i = 0; i < reps; i++) {
            c.asyncError();
        }
        double ns = (System.nanoTime() - t0) / (double) reps;
        System.out.printf("asyncError(): %.0f ns per call (makeCurrent + ncclCommGetAsyncError)%n", ns);
        assertTrue(ns < 100_000, ns + " ns");
    }
}
