package org.jccl.examples;

import java.util.Arrays;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;

/**
 * The README's example: every rank contributes a vector filled with its rank number, and after an
 * in-place all-reduce (sum) every rank holds 0 + 1 + ... + (size-1) in every element.
 *
 * <p>Run 4 ranks on this host: {@code bin/jccl run -np 4 --cp examples/target/classes
 * org.jccl.examples.AllReduceExample}. Under torchrun, mpirun or srun it joins their job the same
 * way ({@link Config#fromEnvironment()} reads their variables; export {@code JCCL_AUTH_TOKEN}).
 */
public final class AllReduceExample {
    private AllReduceExample() {
    }

    public static void main(String[] args) {
        try (Communicator comm = Jccl.init(Config.fromEnvironment())) {
            float[] grads = new float[1 << 20];
            Arrays.fill(grads, comm.rank());                     // this rank's contribution
            comm.allReduce(grads, ReduceOp.SUM);                 // in place, blocking, on every rank
            System.out.println("rank " + comm.rank() + " of " + comm.size() + ": sum " + grads[0]);
        }
    }
}
