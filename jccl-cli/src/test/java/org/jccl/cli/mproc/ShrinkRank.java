package org.jccl.cli.mproc;

import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.PeerFailedException;
import org.jccl.ReduceOp;

/**
 * A rank program for the shrink test: joins the job, runs a warm-up all-reduce, prints
 * {@code READY rank <r> pid <p>}, then all-reduces in a loop (checking every sum) until one fails,
 * which it must once the test kills a rank (or several). On the failure it prints
 * {@code FAILED peer <peerRank> <exception>} (peer -1 when the exception is no
 * PeerFailedException), calls {@code shrink} with the ranks in {@code args[0]} (comma-separated:
 * the ranks the test kills), all-reduces on the new communicator and
 * prints {@code SHRUNK old rank <r> new rank <r'> size <n> x0 <first element> wrong <mismatches>},
 * closes the new communicator and exits 0. A wrong sum in the loop exits {@value #WRONG_EXIT}; a
 * loop that never fails exits {@value #NO_FAILURE_EXIT}.
 */
public final class ShrinkRank {
    static final int WRONG_EXIT = 3;
    static final int NO_FAILURE_EXIT = 4;

    /** Elements of the looped all-reduce: large enough that a rank is inside one most of the time. */
    private static final int LOOP_COUNT = 256 * 1024;
    private static final int CHILD_COUNT = 1000;

    private ShrinkRank() {
    }

    /** The value old rank {@code r} contributes at element {@code i} of the all-reduce on the shrunk communicator. */
    static double childValue(int r, int i) {
        return (r + 1) * 1000.0 + i;
    }

    public static void main(String[] args) throws Exception {
        int[] dead = java.util.Arrays.stream(args[0].split(",")).mapToInt(Integer::parseInt).toArray();
        Communicator comm = Jccl.init(Config.fromEnvironment());
        int rank = comm.rank();
        int size = comm.size();
        long[] warm = {rank};
        comm.allReduce(Buffer.of(warm), ReduceOp.SUM);
        if (warm[0] != (long) size * (size - 1) / 2) {
            System.out.println("WRONG warm-up sum " + warm[0]);
            System.exit(WRONG_EXIT);
        }
        System.out.println("READY rank " + rank + " pid " + ProcessHandle.current().pid());
        System.out.flush();
        float want = size * (size + 1) / 2f;
        float[] x = new float[LOOP_COUNT];
        JcclException failure = null;
        long end = System.currentTimeMillis() + 120_000;
        for (long it = 0; System.currentTimeMillis() < end; it++) {
            java.util.Arrays.fill(x, rank + 1);
            try {
                comm.allReduce(x, ReduceOp.SUM);
            } catch (JcclException e) {
                failure = e;
                break;
            }
            if (x[0] != want || x[LOOP_COUNT - 1] != want) {
                System.out.println("WRONG loop sum at iteration " + it + ": " + x[0] + ", " + x[LOOP_COUNT - 1]);
                System.exit(WRONG_EXIT);
            }
            if (it == 3) {
                System.out.println("LOOPING rank " + rank);
                System.out.flush();
            }
        }
        if (failure == null) {
            System.out.println("NO FAILURE");
            System.exit(NO_FAILURE_EXIT);
        }
        int peer = failure instanceof PeerFailedException p ? p.peerRank() : -1;
        System.out.println("FAILED peer " + peer + " " + failure);
        System.out.flush();

        Communicator child = comm.shrink(dead);
        double[] y = new double[CHILD_COUNT];
        for (int i = 0; i < y.length; i++) {
            y[i] = childValue(rank, i);
        }
        child.allReduce(Buffer.of(y), ReduceOp.SUM);
        int wrong = 0;
        for (int i = 0; i < y.length; i++) {
            double w = 0;
            for (int q = 0; q < size; q++) {
                final int rq = q;
                if (java.util.Arrays.stream(dead).noneMatch(d -> d == rq)) {
                    w += childValue(q, i);
                }
            }
            if (y[i] != w) {
                wrong++;
            }
        }
        System.out.println("SHRUNK old rank " + rank + " new rank " + child.rank() + " size " + child.size() + " x0 " + y[0]
                + " wrong " + wrong);
        System.out.flush();
        child.close();
        System.exit(0);
    }
}
