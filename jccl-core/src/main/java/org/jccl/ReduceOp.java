package org.jccl;

import java.util.Locale;

/**
 * Reduction operators. {@link #AVG} is the sum divided by the number of ranks, computed in the
 * element type (integer types truncate toward zero, unsigned types are divided as unsigned).
 */
public enum ReduceOp {
    SUM("sum"),
    PROD("prod"),
    MIN("min"),
    MAX("max"),
    AVG("avg");

    private final String ncclName;

    ReduceOp(String ncclName) {
        this.ncclName = ncclName;
    }

    /** The name nccl-tests prints in its "redop" column. */
    public String ncclName() {
        return ncclName;
    }

    /**
     * Parses an operator name ({@code sum}, {@code prod}, {@code min}, {@code max}, {@code avg}, any case).
     *
     * @throws IllegalArgumentException naming the value and the accepted names
     */
    public static ReduceOp parse(String name) {
        return switch (name.trim().toLowerCase(Locale.ROOT)) {
            case "sum", "ncclsum" -> SUM;
            case "prod", "product", "ncclprod" -> PROD;
            case "min", "ncclmin" -> MIN;
            case "max", "ncclmax" -> MAX;
            case "avg", "mean", "ncclavg" -> AVG;
            default -> throw new IllegalArgumentException("unknown reduce op '" + name + "'; use one of sum prod min max avg");
        };
    }
}
