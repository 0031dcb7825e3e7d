package org.jccl.cli.mproc;

import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;

/**
 * A rank program for the mismatch guard between processes: every rank joins and all-reduces
 * {@code args[rank]} floats (ranks pass different counts: a program bug), then prints {@code SUM} of
 * its first and last element and exits 0. The guard must make every rank fail instead: the exception
 * propagates out of main, so the JVM prints it and exits non-zero.
 */
public final class MismatchRank {
    private MismatchRank() {
    }

    public static void main(String[] args) {
        try (Communicator comm = Jccl.init(Config.fromEnvironment())) {
            int n = Integer.parseInt(args[comm.rank()]);
            float[] x = new float[n];
            java.util.Arrays.fill(x, comm.rank() + 1);
            comm.allReduce(Buffer.of(x), ReduceOp.SUM);
            System.out.println("SUM " + x[0] + " " + x[n - 1]);
        }
    }
}
