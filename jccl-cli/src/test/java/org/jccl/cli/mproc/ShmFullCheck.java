package org.jccl.cli.mproc;

import java.util.List;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;

/**
 * A child JVM for the small-/dev/shm tests: N ranks of this JVM (argument 1, default 2) with the
 * in-JVM transport off (so they must use SHM) try to create a communicator, and when it comes up
 * run all-reduces of 3 MiB (786432 floats) and of 100 floats and check the sums. Prints {@code INIT
 * OK} and exits 0, or prints {@code INIT FAILED <exception>} and exits {@value #EXIT_FAILED} (a
 * wrong or unfinished all-reduce: {@code ALLREDUCE FAILED ...}, exit 8). A SIGBUS would kill
 * the JVM instead (exit 135 and an hs_err file), which is exactly what the tests rule out.
 */
public final class ShmFullCheck {
    static final int EXIT_FAILED = 7;

    private ShmFullCheck() {
    }

    public static void main(String[] args) {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        List<Communicator> cs;
        try {
            cs = Jccl.initLocal(n, Config.fromEnvironment().with("JCCL_LOCAL_DISABLE", "1"));
        } catch (JcclException e) {
            System.out.println("INIT FAILED " + e);
            System.out.flush();
            System.exit(EXIT_FAILED);
            return;
        }
        Thread[] ts = new Thread[n];
        Throwable[] failed = new Throwable[n];
        for (int r = 0; r < n; r++) {
            Communicator c = cs.get(r);
            int rank = r;
            ts[r] = new Thread(() -> {
                try {
                    for (int count : new int[] {3 << 18, 100}) {
                        float[] v = new float[count];
                        java.util.Arrays.fill(v, c.rank() + 1);
                        c.allReduce(Buffer.of(v), ReduceOp.SUM);
                        for (int i = 0; i < count; i++) {
                            if (v[i] != n * (n + 1) / 2f) {
                                throw new AssertionError("rank " + c.rank() + ": element " + i + " of " + count + " is " + v[i]);
                            }
                        }
                    }
                } catch (Throwable t) {
                    failed[rank] = t;
                }
            });
            ts[r].start();
        }
        for (Thread t : ts) {
            try {
                t.join(60_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        for (int r = 0; r < n; r++) {
            if (ts[r].isAlive() || failed[r] != null) {
                System.out.println("ALLREDUCE FAILED rank " + r + ": " + (failed[r] != null ? failed[r] : "still running after 60 s"));
                System.out.flush();
                System.exit(EXIT_FAILED + 1);
            }
        }
        cs.forEach(Communicator::close);
        System.out.println("INIT OK");
        System.exit(0);
    }
}
