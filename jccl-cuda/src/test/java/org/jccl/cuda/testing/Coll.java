package org.jccl.cuda.testing;

/** The collectives under test, with the buffer-count rules of {@link org.jccl.cuda.DeviceCommunicator}. */
public enum Coll {
    ALL_REDUCE("allReduce", true, false),
    BROADCAST("broadcast", false, true),
    REDUCE("reduce", true, true),
    ALL_GATHER("allGather", false, false),
    REDUCE_SCATTER("reduceScatter", true, false),
    ALL_TO_ALL("allToAll", false, false),
    /** send/recv in a group: every rank sends to rank + shift and receives from rank - shift. */
    SEND_RECV("sendRecv", false, false);

    private final String apiName;
    private final boolean reduces;
    private final boolean rooted;

    Coll(String apiName, boolean reduces, boolean rooted) {
        this.apiName = apiName;
        this.reduces = reduces;
        this.rooted = rooted;
    }

    /** The DeviceCommunicator method's name. */
    public String apiName() {
        return apiName;
    }

    /** Whether it takes a ReduceOp. */
    public boolean reduces() {
        return reduces;
    }

    /** Whether it takes a root. */
    public boolean rooted() {
        return rooted;
    }

    /** Whether NCCL defines an in-place form (same address, or this rank's slot); allToAll and send/recv have none. */
    public boolean hasInPlace() {
        return this != ALL_TO_ALL && this != SEND_RECV;
    }

    /** Elements of each rank's send buffer for a case of {@code count} (a per-rank block for the gather/scatter/all-to-all family). */
    public long sendCount(long count, int n) {
        return switch (this) {
            case ALL_REDUCE, BROADCAST, REDUCE, SEND_RECV, ALL_GATHER -> count;
            case REDUCE_SCATTER, ALL_TO_ALL -> count * n;
        };
    }

    /** Elements of each rank's receive buffer. */
    public long recvCount(long count, int n) {
        return switch (this) {
            case ALL_REDUCE, BROADCAST, REDUCE, SEND_RECV, REDUCE_SCATTER -> count;
            case ALL_GATHER, ALL_TO_ALL -> count * n;
        };
    }

    @Override
    public String toString() {
        return apiName;
    }
}
