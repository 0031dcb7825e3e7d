package org.jccl;

import java.util.Locale;

/**
 * Element types jccl reduces and moves. The names printed by {@link #ncclName()} are those of
 * nccl-tests' "type" column, so perf tables line up with NCCL's.
 *
 * <p>Unsigned types are stored in the same bits as their signed Java counterparts; jccl
 * interprets them as unsigned when it compares (min/max), divides (avg) or widens them.
 * {@link #FLOAT16} is IEEE 754 binary16 and {@link #BFLOAT16} the upper half of a float32; both are
 * widened to float32 for arithmetic and rounded to nearest-even on the way back.
 */
public enum DataType {
    INT8(1, "int8", false, true),
    UINT8(1, "uint8", false, false),
    INT32(4, "int32", false, true),
    UINT32(4, "uint32", false, false),
    INT64(8, "int64", false, true),
    UINT64(8, "uint64", false, false),
    FLOAT16(2, "half", true, true),
    BFLOAT16(2, "bfloat16", true, true),
    FLOAT32(4, "float", true, true),
    FLOAT64(8, "double", true, true);

    private final int size;
    private final String ncclName;
    private final boolean floatingPoint;
    private final boolean signed;

    DataType(int size, String ncclName, boolean floatingPoint, boolean signed) {
        this.size = size;
        this.ncclName = ncclName;
        this.floatingPoint = floatingPoint;
        this.signed = signed;
    }

    /** Bytes per element. */
    public int size() {
        return size;
    }

    /** The name nccl-tests prints in its "type" column ("float", "half", "bfloat16", "int32", ...). */
    public String ncclName() {
        return ncclName;
    }

    public boolean isFloatingPoint() {
        return floatingPoint;
    }

    public boolean isSigned() {
        return signed;
    }

    /** Bytes taken by {@code count} elements; throws when that does not fit a long. */
    public long bytes(long count) {
        return Math.multiplyExact(count, (long) size);
    }

    /**
     * Parses a type name as users write it: the enum name ({@code FLOAT32}), the nccl-tests name
     * ({@code float}, {@code half}) or common aliases ({@code f32}, {@code fp16}, {@code bf16}, {@code i8}...).
     *
     * @throws IllegalArgumentException naming the value and the accepted names
     */
    public static DataType parse(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        return switch (n) {
            case "int8", "i8", "char", "ncclint8" -> INT8;
            case "uint8", "u8", "ncccluint8", "nccluint8" -> UINT8;
            case "int32", "i32", "int", "ncclint32" -> INT32;
            case "uint32", "u32", "nccluint32" -> UINT32;
            case "int64", "i64", "long", "ncclint64" -> INT64;
            case "uint64", "u64", "nccluint64" -> UINT64;
            case "float16", "half", "fp16", "f16", "ncclfloat16", "ncclhalf" -> FLOAT16;
            case "bfloat16", "bf16", "ncclbfloat16" -> BFLOAT16;
            case "float32", "float", "fp32", "f32", "ncclfloat32", "ncclfloat" -> FLOAT32;
            case "float64", "double", "fp64", "f64", "ncclfloat64", "nccldouble" -> FLOAT64;
            default -> throw new IllegalArgumentException("unknown data type '" + name
                    + "'; use one of int8 uint8 int32 uint32 int64 uint64 float16(half) bfloat16 float32(float) float64(double)");
        };
    }
}
