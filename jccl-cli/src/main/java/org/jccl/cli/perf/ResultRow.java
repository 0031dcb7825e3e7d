package org.jccl.cli.perf;

/**
 * One line of the results table: a size measured out of place and in place.
 *
 * @param sizeBytes the "size" column: the larger of the send and receive buffers
 * @param count the "count" column: elements passed to the collective
 * @param type nccl-tests' type name ("float", "bfloat16", ...)
 * @param redop the op's name, or "none" for collectives without one
 * @param root the root, or -1 for collectives without one
 * @param outOfPlace separate send and receive buffers
 * @param inPlace the receive buffer is also the send buffer (or holds it, for all_gather/reduce_scatter)
 */
record ResultRow(long sizeBytes, long count, String type, String redop, int root, Measurement outOfPlace, Measurement inPlace) {

    /** Placeholder in the redop column for collectives without a reduction (nccl-tests' text). */
    static final String NO_OP = "none";

    /** Placeholder in the root column for collectives without a root. */
    static final int NO_ROOT = -1;

    /**
     * One variant's numbers, already combined across ranks.
     *
     * @param timeUs time per operation in microseconds
     * @param algBw size / time, GB/s (10^9)
     * @param busBw algBw times the collective's bus factor
     * @param wrong elements that differed from the expected result, summed over ranks; {@link #NOT_CHECKED} when not checked
     */
    record Measurement(double timeUs, double algBw, double busBw, long wrong) {
        /** {@link #wrong} when the data was not checked (-c 0, or in-place alltoall/sendrecv): the column says N/A. */
        static final long NOT_CHECKED = -1;

        boolean checked() {
            return wrong != NOT_CHECKED;
        }
    }
}
