package org.jccl.cuda.testing;

/** How the ranks' calls are issued. */
public enum Style {
    /** One thread per rank, each calling its own communicator on its own stream (NCCL's thread-per-GPU model). */
    THREADS("threads"),
    /** One thread issuing every rank's call between groupStart and groupEnd (ncclGroupStart/End around ncclCommInitAll ranks). */
    GROUP("group");

    private final String label;

    Style(String label) {
        this.label = label;
    }

    @Override
    public String toString() {
        return label;
    }
}
