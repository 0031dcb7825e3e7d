package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.math.BigInteger;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class PerfDataPatternTest {

    private static final ReduceOp[] OPS_AND_COPY = {null, ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG};

    @Test
    void valuesAreExactInEveryType() {
        for (DataType t : DataType.values()) {
            for (ReduceOp op : OPS_AND_COPY) {
                for (int n : new int[] {1, 2, 3, 8, 64}) {
                    DataPattern p = new DataPattern(t, op, n, 5);
                    for (int r = 0; r < n; r++) {
                        for (long i = 0; i < 300; i++) {
                            long v = p.value(r, i);
                            if (!t.isSigned()) {
                                assertTrue(v >= 0, t + " " + op + " " + v);
                            }
                            // the bits decode to exactly the integer
                            assertEquals((double) v, Elements.toDouble(t, p.bits(r, i)), t + " " + op + " " + v);
                        }
                    }
                }
            }
        }
    }

    /** The expected result, computed with unbounded integers and then mapped into the type, agrees with reducedBits. */
    @Test
    void reducedValuesMatchExactArithmetic() {
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                for (int n : new int[] {1, 3, 7, 64}) {
                    if (op == ReduceOp.PROD && t == DataType.FLOAT16 && n > 100) {
                        continue;
                    }
                    DataPattern p = new DataPattern(t, op, n, 11);
                    for (long i = 0; i < 200; i++) {
                        BigInteger acc = BigInteger.valueOf(p.value(0, i));
                        for (int r = 1; r < n; r++) {
                            BigInteger v = BigInteger.valueOf(p.value(r, i));
                            acc = switch (op) {
                                case SUM, AVG -> acc.add(v);
                                case PROD -> acc.multiply(v);
                                case MIN -> acc.min(v);
                                case MAX -> acc.max(v);
                            };
                        }
                        long expected;
                        if (t.isFloatingPoint()) {
                            double d = op == ReduceOp.AVG ? acc.doubleValue() / n : acc.doubleValue();
                            expected = Elements.fromDouble(t, d);
                            if (op != ReduceOp.AVG) {
                                // exact: the sum or product is representable, so no rounding happened
                                assertEquals(acc.doubleValue(), Elements.toDouble(t, expected), t + " " + op + " n=" + n);
                            }
                        } else {
                            long wrapped = acc.longValue(); // two's complement low 64 bits
                            if (op == ReduceOp.AVG) {
                                // sums stay inside the type's range: no wrap before the division
                                assertEquals(acc, BigInteger.valueOf(Elements.toLong(t, Elements.fromLong(t, wrapped))),
                                        t + " avg sum in range, n=" + n);
                                wrapped = acc.divide(BigInteger.valueOf(n)).longValue();
                            }
                            expected = Elements.fromLong(t, wrapped);
                        }
                        assertEquals(expected, p.reducedBits(i), t + " " + op + " n=" + n + " i=" + i);
                    }
                }
            }
        }
    }

    @Test
    void ranksAreDistinguishable() {
        DataPattern p = new DataPattern(DataType.INT8, null, 64, 0);
        for (long i = 0; i < 50; i++) {
            for (int a = 0; a < 64; a++) {
                for (int b = a + 1; b < 64; b++) {
                    assertNotEquals(p.value(a, i), p.value(b, i), "ranks " + a + " and " + b + " at " + i);
                }
            }
        }
        assertNotEquals(new DataPattern(DataType.FLOAT32, null, 4, 1).value(2, 10),
                new DataPattern(DataType.FLOAT32, null, 4, 2).value(2, 10), "the seed changes the data");
    }

    @Test
    void poisonNeverPassesAsAResult() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(64);
            DataPattern.poison(s, 64);
            for (DataType t : DataType.values()) {
                long poison = Elements.getBits(s, 0, t);
                for (ReduceOp op : OPS_AND_COPY) {
                    DataPattern p = new DataPattern(t, op, 4, 3);
                    for (long i = 0; i < 500; i++) {
                        assertFalse(p.bits(i % 4 == 0 ? 0 : 1, i) == poison, t + " " + op);
                        if (op != null) {
                            assertFalse(p.matches(p.reducedBits(i), poison), t + " " + op);
                        }
                    }
                }
            }
        }
    }

    @Test
    void averageToleranceOnlyForFloats() {
        DataPattern f = new DataPattern(DataType.FLOAT32, ReduceOp.AVG, 3, 0);
        long third = Elements.fromDouble(DataType.FLOAT32, 1.0 / 3);
        assertTrue(f.matches(third, third + 1), "one ulp off is accepted for avg");
        assertFalse(f.matches(third, Elements.fromDouble(DataType.FLOAT32, 0.34)));
        DataPattern i = new DataPattern(DataType.INT32, ReduceOp.AVG, 3, 0);
        assertFalse(i.matches(5, 6));
        DataPattern s = new DataPattern(DataType.FLOAT32, ReduceOp.SUM, 3, 0);
        assertFalse(s.matches(third, third + 1), "sums are exact");
    }

    @Test
    void elementCodecs() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(64);
            Elements.setBits(s, 3, DataType.INT8, Elements.fromLong(DataType.INT8, -5));
            assertEquals(-5, Elements.toLong(DataType.INT8, Elements.getBits(s, 3, DataType.INT8)));
            Elements.setBits(s, 1, DataType.UINT32, Elements.fromLong(DataType.UINT32, -1));
            assertEquals(4294967295L, Elements.toLong(DataType.UINT32, Elements.getBits(s, 1, DataType.UINT32)));
            assertEquals(0x3F80, Elements.fromDouble(DataType.BFLOAT16, 1.0));
            assertEquals(0x3C00, Elements.fromDouble(DataType.FLOAT16, 1.0));
            assertEquals(256.0, Elements.toDouble(DataType.BFLOAT16, Elements.fromDouble(DataType.BFLOAT16, 256.0)));
            assertEquals(256.0, Elements.toDouble(DataType.BFLOAT16, Elements.fromDouble(DataType.BFLOAT16, 257.0)),
                    "257 rounds to even in bfloat16");
            assertEquals(1.8446744073709552E19, Elements.toDouble(DataType.UINT64, -1L));
            assertEquals(-1.0, Elements.toDouble(DataType.INT64, -1L));
            assertEquals(130, Elements.fromLong(DataType.UINT8, 130));
            assertEquals(0x82, Elements.fromLong(DataType.INT8, -126));
        }
    }
}
