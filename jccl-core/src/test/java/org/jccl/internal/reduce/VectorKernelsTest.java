package org.jccl.internal.reduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.internal.log.Log;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The Vector API kernels against the scalar ones, for every type and operator, every length from
 * 0 to 300 (so every tail length of every vector width), odd byte offsets, heap and native
 * segments, and data full of the awkward values: extreme integers, NaN, infinities, -0.0,
 * subnormals, and for float16/bfloat16 random bit patterns (every class of value). Integers must
 * match bit for bit; floats bit for bit too, except that where both results are NaN their sign and
 * payload may differ (see {@link VectorKernels}).
 */
class VectorKernelsTest {

    static Stream<Arguments> typesAndOps() {
        List<Arguments> all = new ArrayList<>();
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                all.add(Arguments.of(t, op));
            }
        }
        return all.stream();
    }

    @Test
    void vectorKernelsAreInUseWithTheModule() {
        // Surefire runs with --add-modules jdk.incubator.vector (jccl.test.argLine) and no setting.
        assertTrue(ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent());
        if (System.getenv("JCCL_REDUCE_VECTOR") == null) {
            assertTrue(Reductions.vectorized(), Reductions.implementation());
            assertTrue(Reductions.implementation().startsWith("Vector API"), Reductions.implementation());
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("typesAndOps")
    void vectorMatchesScalar(DataType type, ReduceOp op) {
        Random rnd = new Random(type.ordinal() * 31L + op.ordinal());
        int size = type.size();
        int maxCount = 300;
        try (Arena arena = Arena.ofConfined()) {
            for (int count = 0; count <= maxCount; count += (count < 70 ? 1 : 7)) {
                int offset = rnd.nextInt(8); // misaligned for every type at times
                long bytes = (long) count * size;
                for (int placement = 0; placement < 3; placement++) {
                    MemorySegment a = segment(arena, placement, offset, bytes);
                    MemorySegment b = segment(arena, (placement + 1) % 3, offset + 1, bytes);
                    fill(a, type, rnd);
                    fill(b, type, rnd);
                    MemorySegment expected = arena.allocate(Math.max(bytes, 1)).asSlice(0, bytes);
                    MemorySegment actual = segment(arena, (placement + 2) % 3, offset + 3, bytes);
                    if (count > 0) {
                        Reductions.reduceScalar(expected, a, b, count, type, op);
                        Reductions.reduceVector(actual, a, b, count, type, op);
                    }
                    compare(expected, actual, count, type, op, placement);
                    // The accumulate form, in place: acc = acc op in.
                    MemorySegment acc = segment(arena, placement, offset, bytes);
                    acc.copyFrom(a);
                    if (count > 0) {
                        Reductions.reduceVector(acc, acc, b, count, type, op);
                    }
                    compare(expected, acc, count, type, op, placement);
                }
            }
        }
    }

    /** Every float16 / bfloat16 bit pattern through the widening and narrowing (x + -0.0 == x). */
    @ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(names = {"FLOAT16", "BFLOAT16"})
    void every16BitPatternRoundTrips(DataType type) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(65536 * 2L);
            MemorySegment b = arena.allocate(65536 * 2L);
            for (int i = 0; i < 65536; i++) {
                a.setAtIndex(ValueLayout.JAVA_SHORT, i, (short) i);
                b.setAtIndex(ValueLayout.JAVA_SHORT, i, (short) 0x8000); // -0.0 in both formats
            }
            for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.MAX, ReduceOp.PROD}) {
                MemorySegment expected = arena.allocate(65536 * 2L);
                MemorySegment actual = arena.allocate(65536 * 2L);
                Reductions.reduceScalar(expected, a, b, 65536, type, op);
                Reductions.reduceVector(actual, a, b, 65536, type, op);
                compare(expected, actual, 65536, type, op, -1);
            }
        }
    }

    @Test
    void choiceFollowsTheSettingAndTheModule() {
        assertTrue(Reductions.choose("auto", true).vector());
        assertTrue(Reductions.choose(null, true).vector());
        assertTrue(Reductions.choose("1", true).vector());
        assertFalse(Reductions.choose("0", true).vector());
        assertFalse(Reductions.choose("false", true).vector());
        for (String s : new String[] {"auto", "1", "0"}) {
            assertFalse(Reductions.choose(s, false).vector(), s);
        }
        Reductions.Choice absent = Reductions.choose("auto", false);
        assertEquals(Log.Level.INFO, absent.level());
        assertTrue(absent.message().contains("--add-modules jdk.incubator.vector"), absent.message());
        assertEquals(Log.Level.WARN, Reductions.choose("1", false).level());
        Reductions.Choice bad = Reductions.choose("sometimes", true);
        assertTrue(bad.vector());
        assertEquals(Log.Level.WARN, bad.level());
    }

    /** A JVM without the module, and one with the module but JCCL_REDUCE_VECTOR=0, both run scalar. */
    @Test
    void fallbackWithoutTheModuleOrWhenDisabled() throws Exception {
        String absent = runProbe(false, null);
        assertTrue(absent.contains("impl=scalar"), absent);
        assertTrue(absent.contains("jdk.incubator.vector is absent"), absent);
        String disabled = runProbe(true, "0");
        assertTrue(disabled.contains("impl=scalar"), disabled);
        String enabled = runProbe(true, "1");
        assertTrue(enabled.contains("impl=Vector API"), enabled);
    }

    private static String runProbe(boolean module, String setting) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        if (module) {
            cmd.add("--add-modules");
            cmd.add("jdk.incubator.vector");
        }
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Probe.class.getName());
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().remove("JCCL_REDUCE_VECTOR");
        if (setting != null) {
            pb.environment().put("JCCL_REDUCE_VECTOR", setting);
        }
        pb.environment().put("JCCL_DEBUG", "INFO");
        pb.environment().put("JCCL_DEBUG_SUBSYS", "INIT");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        return out;
    }

    /** Runs in the child JVMs of {@link #fallbackWithoutTheModuleOrWhenDisabled}. */
    public static final class Probe {
        public static void main(String[] args) {
            float[] x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
            MemorySegment s = MemorySegment.ofArray(x);
            Reductions.reduce(s, s, x.length, DataType.FLOAT32, ReduceOp.SUM);
            if (x[19] != 40f) {
                throw new AssertionError("wrong sum " + x[19]);
            }
            System.out.println("impl=" + Reductions.implementation());
        }
    }

    // ---------------------------------------------------------------------------------------------

    /** placement 0: native; 1: heap byte[]; 2: heap long[]; each at the given byte offset. */
    private static MemorySegment segment(Arena arena, int placement, int offset, long bytes) {
        long total = bytes + offset + 8;
        MemorySegment whole = switch (placement) {
            case 0 -> arena.allocate(total, 64);
            case 1 -> MemorySegment.ofArray(new byte[(int) total]);
            default -> MemorySegment.ofArray(new long[(int) (total / 8 + 1)]);
        };
        return whole.asSlice(offset, bytes);
    }

    private static void fill(MemorySegment s, DataType type, Random rnd) {
        long n = s.byteSize() / type.size();
        for (long i = 0; i < n; i++) {
            long off = i * type.size();
            switch (type) {
                case INT8, UINT8 -> s.set(ValueLayout.JAVA_BYTE, off, (byte) pickLong(rnd));
                case INT32, UINT32 -> s.set(ValueLayout.JAVA_INT_UNALIGNED, off, (int) pickLong(rnd));
                case INT64, UINT64 -> s.set(ValueLayout.JAVA_LONG_UNALIGNED, off, pickLong(rnd));
                case FLOAT16, BFLOAT16 -> s.set(ValueLayout.JAVA_SHORT_UNALIGNED, off, (short) rnd.nextInt());
                case FLOAT32 -> s.set(ValueLayout.JAVA_FLOAT_UNALIGNED, off, (float) pickDouble(rnd));
                case FLOAT64 -> s.set(ValueLayout.JAVA_DOUBLE_UNALIGNED, off, pickDouble(rnd));
            }
        }
    }

    private static final long[] EXTREME = {0, 1, -1, Long.MIN_VALUE, Long.MAX_VALUE, Integer.MIN_VALUE, Integer.MAX_VALUE,
        0xFFFF_FFFFL, 0x80, 0x7F, 0xFF, -128, 127, 0x8000_0000L};

    private static long pickLong(Random rnd) {
        return rnd.nextInt(4) == 0 ? EXTREME[rnd.nextInt(EXTREME.length)] : rnd.nextLong();
    }

    private static final double[] SPECIAL = {0.0, -0.0, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY,
        Float.MIN_VALUE, -Float.MIN_VALUE, Double.MIN_VALUE, Float.MAX_VALUE, -Double.MAX_VALUE, 1.0, -1.0, 1e-40};

    private static double pickDouble(Random rnd) {
        return switch (rnd.nextInt(6)) {
            case 0 -> SPECIAL[rnd.nextInt(SPECIAL.length)];
            case 1 -> Double.longBitsToDouble(rnd.nextLong());
            case 2 -> Float.intBitsToFloat(rnd.nextInt());
            default -> (rnd.nextDouble() - 0.5) * Math.pow(10, rnd.nextInt(20) - 10);
        };
    }

    private static void compare(MemorySegment expected, MemorySegment actual, long count, DataType type, ReduceOp op,
                                int placement) {
        for (long i = 0; i < count; i++) {
            long off = i * type.size();
            long e;
            long a;
            boolean eNan;
            boolean aNan;
            switch (type) {
                case INT8, UINT8 -> {
                    e = expected.get(ValueLayout.JAVA_BYTE, off);
                    a = actual.get(ValueLayout.JAVA_BYTE, off);
                    eNan = aNan = false;
                }
                case INT32, UINT32 -> {
                    e = expected.get(ValueLayout.JAVA_INT_UNALIGNED, off);
                    a = actual.get(ValueLayout.JAVA_INT_UNALIGNED, off);
                    eNan = aNan = false;
                }
                case INT64, UINT64 -> {
                    e = expected.get(ValueLayout.JAVA_LONG_UNALIGNED, off);
                    a = actual.get(ValueLayout.JAVA_LONG_UNALIGNED, off);
                    eNan = aNan = false;
                }
                case FLOAT16 -> {
                    e = expected.get(ValueLayout.JAVA_SHORT_UNALIGNED, off) & 0xFFFF;
                    a = actual.get(ValueLayout.JAVA_SHORT_UNALIGNED, off) & 0xFFFF;
                    eNan = (e & 0x7FFF) > 0x7C00;
                    aNan = (a & 0x7FFF) > 0x7C00;
                }
                case BFLOAT16 -> {
                    e = expected.get(ValueLayout.JAVA_SHORT_UNALIGNED, off) & 0xFFFF;
                    a = actual.get(ValueLayout.JAVA_SHORT_UNALIGNED, off) & 0xFFFF;
                    eNan = (e & 0x7FFF) > 0x7F80;
                    aNan = (a & 0x7FFF) > 0x7F80;
                }
                case FLOAT32 -> {
                    e = expected.get(ValueLayout.JAVA_INT_UNALIGNED, off);
                    a = actual.get(ValueLayout.JAVA_INT_UNALIGNED, off);
                    eNan = Float.isNaN(Float.intBitsToFloat((int) e));
                    aNan = Float.isNaN(Float.intBitsToFloat((int) a));
                }
                case FLOAT64 -> {
                    e = expected.get(ValueLayout.JAVA_LONG_UNALIGNED, off);
                    a = actual.get(ValueLayout.JAVA_LONG_UNALIGNED, off);
                    eNan = Double.isNaN(Double.longBitsToDouble(e));
                    aNan = Double.isNaN(Double.longBitsToDouble(a));
                }
                default -> throw new AssertionError(type);
            }
            if (eNan && aNan) {
                continue; // documented: NaN sign/payload may differ
            }
            if (e != a || eNan != aNan) {
                fail(type + " " + op + " count " + count + " placement " + placement + " element " + i
                        + ": scalar 0x" + Long.toHexString(e) + ", vector 0x" + Long.toHexString(a));
            }
        }
        assertNotNull(actual);
    }
}
