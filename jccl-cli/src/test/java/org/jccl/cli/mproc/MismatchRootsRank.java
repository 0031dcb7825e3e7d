package org.jccl.cli.mproc;

import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;

/**
 * A rank program that ends right after a mismatched rooted call: every rank broadcasts 1000 floats as
 * the root (each only sends, so each call returns with its own data, which is its right result), prints
 * {@code RETURNED} with its first element, and closes its communicator (try-with-resources). close() must
 * find the mismatch in the guard's ring confirmation and throw it, so the JVM exits non-zero. With the
 * argument {@code noclose} it never closes the communicator and returns from main: the JVM's exit must then
 * find the mismatch and exit with status 1.
 */
public final class MismatchRootsRank {
    private MismatchRootsRank() {
    }

    public static void main(String[] args) {
        if (args.length > 0 && args[0].equals("noclose")) {
            Communicator comm = Jccl.init(Config.fromEnvironment());
            float[] x = new float[1000];
            java.util.Arrays.fill(x, comm.rank() + 1);
            comm.broadcast(Buffer.of(x), comm.rank());
            System.out.println("RETURNED " + comm.rank() + " " + x[0] + " " + x[999]);
            return;
        }
        try (Communicator comm = Jccl.init(Config.fromEnvironment())) {
            float[] x = new float[1000];
            java.util.Arrays.fill(x, comm.rank() + 1);
            comm.broadcast(Buffer.of(x), comm.rank());
            System.out.println("RETURNED " + comm.rank() + " " + x[0] + " " + x[999]);
        }
    }
}
