package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.api.ApiSupport.Net;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every {@link Buffer} factory through allReduce (out of place and in place), broadcast and
 * allGather, over both transports, with results read back through the caller's own array or
 * buffer (not through {@link Buffer#segment()}): what a user sees is what is checked. Memory
 * around a buffer (the rest of an array behind a slice, the bytes before a ByteBuffer's position,
 * the tail of a segment given with a count) is guarded and must be left untouched.
 *
 * <p>Then the heap-array promise of {@link Buffer}: heap memory is copied when an asynchronous
 * operation is issued, so changing the array after {@code ...Async} returns does not change what
 * is sent, and the results are in the array once {@link Work#join()} returns.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ApiBuffersTest {

    static final int N = 3;
    static final Duration STEP = Duration.ofSeconds(20);
    /** A short buffer (latency algorithms) and one above the 64 KiB all-reduce switch to the pipelined ring for 4-byte types. */
    static final int[] COUNTS = {37, 20_011};
    /** Never a correct result below (inputs are at most 19, sums at most 57), exact in every type. */
    static final double POISON = 99;
    /** Guard bytes around a buffer: the memory next to it that a collective must not touch. */
    static final byte GUARD = (byte) 0x5A;

    private final ApiSupport.Shared comms = new ApiSupport.Shared(N);

    /** One buffer made by one factory, read and written the way its owner would (through the array or ByteBuffer). */
    abstract static class Arr {
        abstract Buffer buffer();

        abstract void set(int i, double v);

        abstract double get(int i);

        /** Fails when memory outside the buffer changed. */
        void checkGuards(String what) {
        }
    }

    record Kind(String name, DataType type, IntFunction<Arr> make) {
        @Override
        public String toString() {
            return name;
        }
    }

    static List<Kind> kinds() {
        List<Kind> k = new ArrayList<>();
        k.add(new Kind("byte[] (default int8)", DataType.INT8, n -> new Arr() {
            final byte[] a = new byte[n];
            final Buffer b = Buffer.of(a);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = (byte) v; }
            double get(int i) { return a[i]; }
        }));
        k.add(new Kind("byte[] uint8", DataType.UINT8, n -> new Arr() {
            final byte[] a = new byte[n];
            final Buffer b = Buffer.of(a, DataType.UINT8);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = (byte) v; }
            double get(int i) { return Byte.toUnsignedInt(a[i]); }
        }));
        k.add(new Kind("short[] float16", DataType.FLOAT16, n -> new Arr() {
            final short[] a = new short[n];
            final Buffer b = Buffer.of(a, DataType.FLOAT16);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = Float.floatToFloat16((float) v); }
            double get(int i) { return Float.float16ToFloat(a[i]); }
        }));
        k.add(new Kind("short[] bfloat16", DataType.BFLOAT16, n -> new Arr() {
            final short[] a = new short[n];
            final Buffer b = Buffer.of(a, DataType.BFLOAT16);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = (short) (Float.floatToRawIntBits((float) v) >>> 16); }
            double get(int i) { return Float.intBitsToFloat(a[i] << 16); }
        }));
        k.add(new Kind("int[] (default int32)", DataType.INT32, n -> new Arr() {
            final int[] a = new int[n];
            final Buffer b = Buffer.of(a);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = (int) v; }
            double get(int i) { return a[i]; }
        }));
        k.add(new Kind("int[] uint32", DataType.UINT32, n -> new Arr() {
            final int[] a = new int[n];
            final Buffer b = Buffer.of(a, DataType.UINT32);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = (int) v; }
            double get(int i) { return Integer.toUnsignedLong(a[i]); }
        }));
        k.add(new Kind("long[] (default int64)", DataType.INT64, n -> new Arr() {
            final long[] a = new long[n];
            final Buffer b = Buffer.of(a);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = (long) v; }
            double get(int i) { return a[i]; }
        }));
        k.add(new Kind("long[] uint64", DataType.UINT64, n -> new Arr() {
            final long[] a = new long[n];
            final Buffer b = Buffer.of(a, DataType.UINT64);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = (long) v; }
            double get(int i) { return a[i]; }
        }));
        k.add(new Kind("float[]", DataType.FLOAT32, n -> new Arr() {
            final float[] a = new float[n];
            final Buffer b = Buffer.of(a);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = (float) v; }
            double get(int i) { return a[i]; }
        }));
        k.add(new Kind("double[]", DataType.FLOAT64, n -> new Arr() {
            final double[] a = new double[n];
            final Buffer b = Buffer.of(a);
            Buffer buffer() { return b; }
            void set(int i, double v) { a[i] = v; }
            double get(int i) { return a[i]; }
        }));
        k.add(new Kind("native MemorySegment (whole, float64)", DataType.FLOAT64, n -> new Arr() {
            final MemorySegment s = Arena.ofAuto().allocate(8L * n, 64);
            final Buffer b = Buffer.of(s, DataType.FLOAT64);
            Buffer buffer() { return b; }
            void set(int i, double v) { s.setAtIndex(ValueLayout.JAVA_DOUBLE, i, v); }
            double get(int i) { return s.getAtIndex(ValueLayout.JAVA_DOUBLE, i); }
        }));
        k.add(new Kind("native MemorySegment with count (int32, longer segment)", DataType.INT32, n -> new Arr() {
            final MemorySegment s = guarded(Arena.ofAuto().allocate(4L * n + 64, 64));
            final Buffer b = Buffer.of(s, n, DataType.INT32);
            Buffer buffer() { return b; }
            void set(int i, double v) { s.setAtIndex(ValueLayout.JAVA_INT, i, (int) v); }
            double get(int i) { return s.getAtIndex(ValueLayout.JAVA_INT, i); }
            @Override void checkGuards(String what) { checkGuard(s.asSlice(4L * n), what + ": segment tail beyond count"); }
        }));
        k.add(new Kind("direct ByteBuffer (float32)", DataType.FLOAT32, n -> new Arr() {
            // Written in native order on purpose: jccl reads native order whatever order() says (big-endian here).
            final ByteBuffer bb = ByteBuffer.allocateDirect(4 * n);
            final Buffer b = Buffer.of(bb, DataType.FLOAT32);
            final ByteBuffer nat = bb.duplicate().order(ByteOrder.nativeOrder());
            Buffer buffer() { return b; }
            void set(int i, double v) { nat.putFloat(4 * i, (float) v); }
            double get(int i) { return nat.getFloat(4 * i); }
        }));
        k.add(new Kind("heap ByteBuffer between position and limit (float32)", DataType.FLOAT32, n -> new Arr() {
            final ByteBuffer bb = ByteBuffer.allocate(4 * n + 16);
            final ByteBuffer nat;
            final Buffer b;
            {
                for (int i = 0; i < bb.capacity(); i++) {
                    bb.put(i, GUARD);
                }
                bb.position(8).limit(8 + 4 * n);
                b = Buffer.of(bb, DataType.FLOAT32);
                nat = bb.duplicate().order(ByteOrder.nativeOrder()).clear();
            }
            Buffer buffer() { return b; }
            void set(int i, double v) { nat.putFloat(8 + 4 * i, (float) v); }
            double get(int i) { return nat.getFloat(8 + 4 * i); }
            @Override void checkGuards(String what) {
                for (int i : new int[] {0, 1, 2, 3, 4, 5, 6, 7, 8 + 4 * n, 9 + 4 * n, 15 + 4 * n}) {
                    assertEquals(GUARD, nat.get(i), what + ": byte " + i + " of the ByteBuffer, outside position..limit");
                }
            }
        }));
        k.add(new Kind("slice of an int[]", DataType.INT32, n -> new Arr() {
            final int[] a = new int[n + 6];
            final Buffer b;
            {
                java.util.Arrays.fill(a, 0x5A5A5A5A);
                b = Buffer.of(a).slice(3, n);
            }
            Buffer buffer() { return b; }
            void set(int i, double v) { a[3 + i] = (int) v; }
            double get(int i) { return a[3 + i]; }
            @Override void checkGuards(String what) {
                for (int i : new int[] {0, 1, 2, n + 3, n + 4, n + 5}) {
                    assertEquals(0x5A5A5A5A, a[i], what + ": element " + i + " of the array, outside the slice");
                }
            }
        }));
        k.add(new Kind("slice of a native segment (float64)", DataType.FLOAT64, n -> new Arr() {
            final MemorySegment s = guarded(Arena.ofAuto().allocate(8L * (n + 4), 64));
            final Buffer b = Buffer.of(s, DataType.FLOAT64).slice(2, n);
            Buffer buffer() { return b; }
            void set(int i, double v) { s.setAtIndex(ValueLayout.JAVA_DOUBLE, 2 + i, v); }
            double get(int i) { return s.getAtIndex(ValueLayout.JAVA_DOUBLE, 2 + i); }
            @Override void checkGuards(String what) {
                checkGuard(s.asSlice(0, 16), what + ": before the slice");
                checkGuard(s.asSlice(8L * (n + 2)), what + ": after the slice");
            }
        }));
        return k;
    }

    private static MemorySegment guarded(MemorySegment s) {
        s.fill(GUARD);
        return s;
    }

    private static void checkGuard(MemorySegment s, String what) {
        for (long i = 0; i < s.byteSize(); i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) != GUARD) {
                fail(what + ": byte " + i + " was overwritten");
            }
        }
    }

    /** Element i of rank r's input: small integers, exact in every type (float16 and bfloat16 included), sums fit int8. */
    static double value(int rank, int i) {
        return (rank + 1) * 3 + i % 11;
    }

    static Stream<Arguments> kindCases() {
        List<Arguments> a = new ArrayList<>();
        for (Net net : Net.values()) {
            for (Kind k : kinds()) {
                for (int count : COUNTS) {
                    a.add(Arguments.of(net, k, count));
                }
            }
        }
        return a.stream();
    }

    @ParameterizedTest(name = "{0}: {1} x {2}")
    @MethodSource("kindCases")
    void everyFactoryWorksThroughAllReduceBroadcastAndAllGather(Net net, Kind kind, int count) {
        comms.run(net, STEP, comm -> {
            int r = comm.rank();
            String where = kind + " on rank " + r;

            // allReduce, out of place.
            Arr send = kind.make().apply(count);
            Arr recv = kind.make().apply(count);
            for (int i = 0; i < count; i++) {
                send.set(i, value(r, i));
                recv.set(i, POISON);
            }
            comm.allReduce(send.buffer(), recv.buffer(), ReduceOp.SUM);
            for (int i = 0; i < count; i++) {
                expect(sum(i), recv.get(i), where + ": allReduce element " + i);
                expect(value(r, i), send.get(i), where + ": allReduce changed its send buffer at " + i);
            }
            send.checkGuards(where + " allReduce send");
            recv.checkGuards(where + " allReduce recv");

            // allReduce, in place.
            Arr inOut = kind.make().apply(count);
            for (int i = 0; i < count; i++) {
                inOut.set(i, value(r, i));
            }
            comm.allReduce(inOut.buffer(), ReduceOp.SUM);
            for (int i = 0; i < count; i++) {
                expect(sum(i), inOut.get(i), where + ": in-place allReduce element " + i);
            }
            inOut.checkGuards(where + " in-place allReduce");

            // broadcast from rank 1, out of place on the root.
            Arr bsend = kind.make().apply(count);
            Arr brecv = kind.make().apply(count);
            for (int i = 0; i < count; i++) {
                bsend.set(i, value(r, i));
                brecv.set(i, POISON);
            }
            comm.broadcast(bsend.buffer(), brecv.buffer(), 1);
            for (int i = 0; i < count; i++) {
                expect(value(1, i), brecv.get(i), where + ": broadcast element " + i);
            }
            brecv.checkGuards(where + " broadcast recv");

            // allGather.
            Arr gsend = kind.make().apply(count);
            Arr grecv = kind.make().apply(count * N);
            for (int i = 0; i < count; i++) {
                gsend.set(i, value(r, i));
            }
            for (int i = 0; i < count * N; i++) {
                grecv.set(i, POISON);
            }
            comm.allGather(gsend.buffer(), grecv.buffer());
            for (int from = 0; from < N; from++) {
                for (int i = 0; i < count; i++) {
                    expect(value(from, i), grecv.get(from * count + i), where + ": allGather block of rank " + from + " element " + i);
                }
            }
            grecv.checkGuards(where + " allGather recv");
        });
    }

    private static double sum(int i) {
        double s = 0;
        for (int r = 0; r < N; r++) {
            s += value(r, i);
        }
        return s;
    }

    /** assertEquals without building a message per element of a passing check. */
    private static void expect(double expected, double actual, String what) {
        if (Double.compare(expected, actual) != 0) {
            assertEquals(expected, actual, what);
        }
    }

    /**
     * The same bits mean different things in a signed and an unsigned type: MAX over 200 and 100
     * is 200 for uint8 but 100 for int8 (200 is -56 there), and likewise at 32 and 64 bits. This
     * shows the array factories pass the chosen type through rather than a default per array.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void arrayFactoriesKeepTheSignednessTheyWereGiven(Net net) {
        comms.run(net, STEP, comm -> {
            boolean big = comm.rank() == 0;
            byte[] b8s = {big ? (byte) 200 : 100};
            byte[] b8u = b8s.clone();
            int[] i32s = {big ? 0x8000_0001 : 5};
            int[] i32u = i32s.clone();
            long[] i64s = {big ? Long.MIN_VALUE + 1 : 5};
            long[] i64u = i64s.clone();
            comm.allReduce(Buffer.of(b8s, DataType.INT8), ReduceOp.MAX);
            comm.allReduce(Buffer.of(b8u, DataType.UINT8), ReduceOp.MAX);
            comm.allReduce(Buffer.of(i32s, DataType.INT32), ReduceOp.MAX);
            comm.allReduce(Buffer.of(i32u, DataType.UINT32), ReduceOp.MAX);
            comm.allReduce(Buffer.of(i64s, DataType.INT64), ReduceOp.MAX);
            comm.allReduce(Buffer.of(i64u, DataType.UINT64), ReduceOp.MAX);
            assertEquals(100, b8s[0], "int8 max");
            assertEquals((byte) 200, b8u[0], "uint8 max");
            assertEquals(5, i32s[0], "int32 max");
            assertEquals(0x8000_0001, i32u[0], "uint32 max");
            assertEquals(5, i64s[0], "int64 max");
            assertEquals(Long.MIN_VALUE + 1, i64u[0], "uint64 max");
        });
    }

    /** The buffers the Javadoc lets ranks other than the root leave out may really be null there. */
    @ParameterizedTest
    @EnumSource(Net.class)
    void buffersUnusedOffTheRootMayBeNull(Net net) {
        comms.run(net, STEP, comm -> {
            int r = comm.rank();
            int root = 2;
            boolean isRoot = r == root;
            int[] b = new int[4];
            if (isRoot) {
                b = new int[] {7, 8, 9, 10};
            }
            comm.broadcast(isRoot ? Buffer.of(b) : null, Buffer.of(b), root);
            assertArrayEquals(new int[] {7, 8, 9, 10}, b, "broadcast with a null send off the root");

            int[] red = new int[2];
            comm.reduce(Buffer.of(new int[] {r, 10 * r}), isRoot ? Buffer.of(red) : null, ReduceOp.SUM, root);
            if (isRoot) {
                assertArrayEquals(new int[] {3, 30}, red, "reduce with a null recv off the root");
            }

            int[] gathered = new int[N];
            comm.gather(Buffer.of(new int[] {100 + r}), isRoot ? Buffer.of(gathered) : null, root);
            if (isRoot) {
                assertArrayEquals(new int[] {100, 101, 102}, gathered, "gather with a null recv off the root");
            }

            int[] piece = new int[1];
            comm.scatter(isRoot ? Buffer.of(new int[] {40, 41, 42}) : null, Buffer.of(piece), root);
            assertEquals(40 + r, piece[0], "scatter with a null send off the root");
        });
    }

    /**
     * Issue-time snapshot: rank 0 issues an asynchronous all-reduce of heap arrays while the other
     * ranks are held back, so the operation cannot have run yet ({@code isDone()} is checked), then
     * scribbles over its input and only then lets the others in. The result must be the sum of the
     * values the array held when the call was issued, and it must be in the output array once
     * {@code join()} returns. Out of place and in place.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void asyncHeapInputIsTakenAtIssueAndOutputIsThereAfterJoin(Net net) {
        CountDownLatch issued = new CountDownLatch(1);
        CountDownLatch issuedInPlace = new CountDownLatch(1);
        int count = 5000;
        comms.run(net, STEP, comm -> {
            int r = comm.rank();
            float[] send = new float[count];
            float[] recv = new float[count];
            float[] inOut = new float[count];
            for (int i = 0; i < count; i++) {
                send[i] = (float) value(r, i);
                inOut[i] = (float) value(r, i);
                recv[i] = (float) POISON;
            }
            if (r == 0) {
                Work w = comm.allReduceAsync(Buffer.of(send), Buffer.of(recv), ReduceOp.SUM);
                assertFalse(w.isDone(), "the other ranks have not called allReduce yet");
                java.util.Arrays.fill(send, 1000f);
                issued.countDown();
                w.join();
                assertTrue(w.isDone());

                Work w2 = comm.allReduceAsync(Buffer.of(inOut), Buffer.of(inOut), ReduceOp.SUM);
                assertFalse(w2.isDone(), "the other ranks have not called the in-place allReduce yet");
                java.util.Arrays.fill(inOut, 1000f);
                issuedInPlace.countDown();
                w2.join();
            } else {
                assertTrue(issued.await(10, TimeUnit.SECONDS));
                comm.allReduce(Buffer.of(send), Buffer.of(recv), ReduceOp.SUM);
                assertTrue(issuedInPlace.await(10, TimeUnit.SECONDS));
                comm.allReduce(Buffer.of(inOut), ReduceOp.SUM);
            }
            for (int i = 0; i < count; i++) {
                expect(sum(i), recv[i], "rank " + r + ": out-of-place result element " + i);
                expect(sum(i), inOut[i], "rank " + r + ": in-place result element " + i);
            }
        });
    }

    /**
     * The pattern of gradient bucketing: one heap array reused for several asynchronous calls in
     * flight at once, refilled between them. Each call must reduce what the array held when that
     * call was issued, and each output must hold its own result after its join.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void oneHeapArrayRefilledBetweenAsyncCallsInFlight(Net net) {
        int calls = 6;
        int count = 2048;
        comms.run(net, STEP, comm -> {
            int r = comm.rank();
            long[] bucket = new long[count];
            long[][] out = new long[calls][count];
            List<Work> works = new ArrayList<>();
            for (int k = 0; k < calls; k++) {
                for (int i = 0; i < count; i++) {
                    bucket[i] = 1_000_000L * k + 1000L * r + i;
                }
                works.add(comm.allReduceAsync(Buffer.of(bucket), Buffer.of(out[k]), ReduceOp.SUM));
            }
            java.util.Arrays.fill(bucket, -1);
            for (int k = 0; k < calls; k++) {
                works.get(k).join();
                for (int i = 0; i < count; i++) {
                    long expected = 3 * (1_000_000L * k + i) + 1000L * (0 + 1 + 2);
                    if (out[k][i] != expected) {
                        assertEquals(expected, out[k][i], "rank " + r + ": call " + k + " element " + i);
                    }
                }
            }
        });
    }

    /**
     * Native memory that is not aligned to its element size: {@link Buffer#of(MemorySegment, DataType)}
     * accepts any segment whose size is a whole number of elements and says nothing of alignment,
     * and a ByteBuffer's position can be anywhere. The collective must either work or refuse the
     * buffer with an IllegalArgumentException before anything is sent; it works here.
     */
    @ParameterizedTest
    @EnumSource(Net.class)
    void unalignedNativeMemoryWorks(Net net) {
        int count = 1001;
        comms.run(net, STEP, comm -> {
            int r = comm.rank();
            MemorySegment raw = Arena.ofAuto().allocate(4L * count + 8, 64);
            MemorySegment send = raw.asSlice(1, 4L * count);
            MemorySegment recv = Arena.ofAuto().allocate(4L * count + 8, 64).asSlice(3, 4L * count);
            ByteBuffer direct = ByteBuffer.allocateDirect(8 * count + 5);
            direct.position(5);
            Buffer bb = Buffer.of(direct, DataType.FLOAT64);
            ByteBuffer nat = direct.duplicate().order(ByteOrder.nativeOrder()).clear();
            for (int i = 0; i < count; i++) {
                send.set(ValueLayout.JAVA_FLOAT_UNALIGNED, 4L * i, (float) value(r, i));
                nat.putDouble(5 + 8 * i, value(r, i));
            }
            comm.allReduce(Buffer.of(send, DataType.FLOAT32), Buffer.of(recv, DataType.FLOAT32), ReduceOp.SUM);
            comm.allReduce(bb, ReduceOp.SUM);
            for (int i = 0; i < count; i++) {
                expect(sum(i), recv.get(ValueLayout.JAVA_FLOAT_UNALIGNED, 4L * i), "rank " + r + ": unaligned float32 element " + i);
                expect(sum(i), nat.getDouble(5 + 8 * i), "rank " + r + ": float64 at ByteBuffer position 5, element " + i);
            }
        });
    }

    @AfterAll
    void closeAll() {
        comms.closeAll();
    }
}
