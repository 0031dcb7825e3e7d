package org.jccl.cli.run;

import org.jccl.internal.reduce.Reductions;

/** A rank program: prints which reduction kernels its JVM runs, and a line on stderr. */
public final class KernelProbe {
    private KernelProbe() {
    }

    public static void main(String[] args) {
        System.out.println("vectorized=" + Reductions.vectorized() + " kernels=" + Reductions.implementation());
        System.err.println("stderr of rank " + System.getenv("JCCL_RANK"));
    }
}
