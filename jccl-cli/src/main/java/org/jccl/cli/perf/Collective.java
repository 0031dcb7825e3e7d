package org.jccl.cli.perf;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The operations {@code jccl perf} measures, with nccl-tests' rules for each: how a message size
 * becomes element counts, the bus-bandwidth factor, and whether the redop and root columns mean
 * anything.
 *
 * <p>Sizes follow nccl-tests' {@code *GetCollByteCount}: {@code count = size / typeSize}; for
 * all_gather, reduce_scatter and alltoall the per-rank count is {@code count / n} rounded down so
 * that a rank's block is a multiple of 16 bytes, and the "size" column shows the larger of the
 * send and receive buffers (the gathered total for all_gather).
 */
enum Collective {
    ALL_REDUCE("all_reduce", true, false, false),
    ALL_GATHER("all_gather", false, false, false),
    BROADCAST("broadcast", false, true, false),
    REDUCE("reduce", true, true, false),
    REDUCE_SCATTER("reduce_scatter", true, false, false),
    ALLTOALL("alltoall", false, false, true),
    // sendrecv has no reduction, yet nccl-tests prints (and loops over) the -o op for it.
    SENDRECV("sendrecv", true, false, true);

    private final String ncclName;
    private final boolean hasOp;
    private final boolean hasRoot;
    private final boolean inPlaceUnchecked;

    Collective(String ncclName, boolean hasOp, boolean hasRoot, boolean inPlaceUnchecked) {
        this.ncclName = ncclName;
        this.hasOp = hasOp;
        this.hasRoot = hasRoot;
        this.inPlaceUnchecked = inPlaceUnchecked;
    }

    /** nccl-tests' name, e.g. "all_reduce". */
    String ncclName() {
        return ncclName;
    }

    /** The nccl-tests binary that measures this collective, e.g. "all_reduce_perf". */
    String programName() {
        return ncclName + "_perf";
    }

    /** True when the redop column shows the -o op (else "none"). */
    boolean hasOp() {
        return hasOp;
    }

    /** True when the result combines ranks' data with the op (sendrecv only labels its rows with it). */
    boolean reduces() {
        return this == ALL_REDUCE || this == REDUCE || this == REDUCE_SCATTER;
    }

    /** True when -r selects a root (else the root column shows -1). */
    boolean hasRoot() {
        return hasRoot;
    }

    /**
     * True when the in-place variant is timed but its data not checked, as in nccl-tests, whose
     * #wrong column says N/A there: alltoall and sendrecv read and write the same buffer at once,
     * so their in-place result is not defined.
     */
    boolean inPlaceUnchecked() {
        return inPlaceUnchecked;
    }

    /**
     * Element counts for a message of {@code bytes} bytes, as nccl-tests computes them.
     *
     * @param bytes the size from the sweep
     * @param typeSize bytes per element
     * @param nranks ranks in the job
     */
    Counts counts(long bytes, int typeSize, int nranks) {
        long count = bytes / typeSize;
        // One block per rank, rounded down to a whole number of 16-byte units (nccl-tests' mask).
        long base = (count / nranks) & ~(16L / typeSize - 1);
        return switch (this) {
            case ALL_REDUCE, BROADCAST, REDUCE, SENDRECV -> new Counts(count, count, count, 0, 0);
            case ALL_GATHER -> new Counts(base, base * nranks, base, base, 0);
            case REDUCE_SCATTER -> new Counts(base * nranks, base, base, 0, base);
            case ALLTOALL -> new Counts(base * nranks, base * nranks, base, 0, 0);
        };
    }

    /** busbw / algbw: the share of the data each rank's link must carry, nccl-tests' definitions. */
    double busBwFactor(int nranks) {
        return switch (this) {
            case ALL_REDUCE -> 2.0 * (nranks - 1) / nranks;
            case ALL_GATHER, REDUCE_SCATTER, ALLTOALL -> (double) (nranks - 1) / nranks;
            case BROADCAST, REDUCE, SENDRECV -> 1.0;
        };
    }

    /**
     * algbw in GB/s (10^9 bytes) for an operation of {@code paramCount} elements that took
     * {@code seconds}: the per-rank count times n for the three collectives whose count is a block.
     */
    double algBw(long paramCount, int typeSize, double seconds, int nranks) {
        double bytes = (double) paramCount * typeSize;
        if (this == ALL_GATHER || this == REDUCE_SCATTER || this == ALLTOALL) {
            bytes *= nranks;
        }
        return bytes / 1.0E9 / seconds;
    }

    /**
     * Parses a collective as users name it: "all_reduce", the nccl-tests binary "all_reduce_perf",
     * or without separators ("allreduce", "all-reduce").
     *
     * @throws IllegalArgumentException listing the accepted names
     */
    static Collective parse(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        if (n.endsWith("_perf")) {
            n = n.substring(0, n.length() - "_perf".length());
        }
        String key = n.replace("_", "").replace("-", "");
        for (Collective c : values()) {
            if (c.ncclName.replace("_", "").equals(key)) {
                return c;
            }
        }
        throw new IllegalArgumentException("unknown collective '" + name + "'; use one of "
                + Arrays.stream(values()).map(Collective::ncclName).collect(Collectors.joining(" "))
                + " (or the nccl-tests binary name, e.g. all_reduce_perf)");
    }

    /**
     * Element counts of one measured operation (nccl-tests' getCollByteCount outputs).
     *
     * @param sendCount elements in a rank's send buffer
     * @param recvCount elements in a rank's receive buffer
     * @param paramCount the count passed to the collective (the "count" column)
     * @param sendInPlaceOffset in place, the send buffer starts this many elements times the rank into the receive buffer
     * @param recvInPlaceOffset in place, the receive buffer starts this many elements times the rank into the receive buffer
     */
    record Counts(long sendCount, long recvCount, long paramCount, long sendInPlaceOffset, long recvInPlaceOffset) {
        /** The "size" column: the larger buffer, in bytes. */
        long sizeBytes(int typeSize) {
            return Math.max(sendCount, recvCount) * typeSize;
        }
    }
}
