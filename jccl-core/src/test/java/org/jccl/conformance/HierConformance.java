package org.jccl.conformance;

import org.jccl.Config;

/**
 * The conformance suite on ranks that stand for several hosts: {@code JCCL_HOSTID} gives each rank
 * of this JVM a host id ({@link #layout()}), so ranks with different ids talk over TCP and ranks with
 * the same id over SHM (the in-JVM transport off), and {@code JCCL_ALGO} forces the hierarchical
 * form of every collective that has one (all-reduce, broadcast, reduce, all-gather, reduce-scatter); the others run
 * flat over the mixed transports. One subclass per layout, each with the one rank count its layout
 * has. A small chunk size makes 100_003 elements several pipelined slices in every stage.
 */
abstract class HierConformance extends CollectiveConformance {
    /** Every hierarchical collective forced. */
    static final String HIER = "allreduce:hier;broadcast:hier;reduce:hier;allgather:hier;reducescatter:hier";

    private static final long[] COUNTS = {0, 1, 7, 1000, 100_003};

    /** Host id of each rank, e.g. {@code a,a,b,b}. */
    protected abstract String layout();

    /** The same-host transport: SHM (the in-JVM transport off) unless a subclass says otherwise. */
    protected Config sameHost() {
        return Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_CHUNK", "64K").with("JCCL_SHM_SLOTS", "4");
    }

    @Override
    protected Config config() {
        return sameHost().with("JCCL_CHUNK_SIZE", "64K").with("JCCL_HOSTID", layout()).with("JCCL_ALGO", HIER);
    }

    @Override
    protected String transport() {
        return "SHM+TCP " + layout();
    }

    @Override
    protected int[] ranks() {
        return new int[] {org.jccl.internal.config.HostId.parse(layout()).size()};
    }

    @Override
    protected long[] counts() {
        return COUNTS;
    }
}
