package org.jccl.cli.mproc;

import java.nio.file.Files;
import java.nio.file.Path;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;

/**
 * A rank program for the network fault tests: all-reduces in a loop, every result checked, until
 * rank 0 sees {@code stopFile} or an operation fails. Usage: {@code LoopRank <floats> <stopFile>}.
 *
 * <p>Iteration {@code i} all-reduces {@code floats} floats, element {@code k} being
 * {@code (rank + 1) * (i + 1) + k % 7} on every rank, so the sum is {@code n(n+1)/2 * (i + 1) + n * (k % 7)}
 * (exact in float for the sizes used). Element 0 is instead the stop vote: rank 0 contributes 1
 * once {@code stopFile} exists, the others 0, so every rank sees the vote in the same iteration and
 * they all stop after the same number of all-reduces.
 *
 * <p>Output: {@code READY rank <r> pid <p>} after the first all-reduce, {@code OK <iterations> <epoch ms>
 * <slowest ms>} about once a second ({@code slowest}: the longest all-reduce since the previous OK line), then either {@code DONE <iterations>} (exit 0, after {@code close()}),
 * {@code WRONG ...} (exit {@value #WRONG_EXIT}) or {@code FAILED_AT_MS=<epoch ms> <exception>}
 * followed by {@code LATER <exception>} for a later barrier (exit {@value #FAILED_EXIT}).
 */
public final class LoopRank {
    static final int FAILED_EXIT = 42;
    static final int WRONG_EXIT = 43;

    private LoopRank() {
    }

    public static void main(String[] args) throws Exception {
        int floats = Integer.parseInt(args[0]);
        Path stop = Path.of(args[1]);
        Communicator comm = Jccl.init(Config.fromEnvironment());
        int rank = comm.rank();
        int n = comm.size();
        float[] x = new float[floats];
        long lastOk = System.nanoTime();
        long slowestNs = 0;
        long i = 0;
        try {
            while (true) {
                x[0] = rank == 0 && Files.exists(stop) ? 1 : 0;
                for (int k = 1; k < floats; k++) {
                    x[k] = (rank + 1) * (float) (i + 1) + k % 7;
                }
                long t0 = System.nanoTime();
                comm.allReduce(x, ReduceOp.SUM);
                slowestNs = Math.max(slowestNs, System.nanoTime() - t0);
                for (int k = 1; k < floats; k++) {
                    float want = n * (n + 1) / 2 * (float) (i + 1) + n * (k % 7);
                    if (x[k] != want) {
                        System.out.println("WRONG iteration " + i + " element " + k + ": " + x[k] + ", expected " + want);
                        System.out.flush();
                        System.exit(WRONG_EXIT);
                    }
                }
                i++;
                if (i == 1) {
                    System.out.println("READY rank " + rank + " pid " + ProcessHandle.current().pid());
                    System.out.flush();
                }
                if (System.nanoTime() - lastOk > 1_000_000_000L) {
                    lastOk = System.nanoTime();
                    System.out.println("OK " + i + " " + System.currentTimeMillis() + " " + slowestNs / 1_000_000);
                    slowestNs = 0;
                    System.out.flush();
                }
                if (x[0] != 0) {
                    break;
                }
            }
        } catch (JcclException e) {
            System.out.println("FAILED_AT_MS=" + System.currentTimeMillis() + " " + e);
            System.out.flush();
            try {
                comm.barrier();
                System.out.println("LATER none");
            } catch (JcclException later) {
                System.out.println("LATER " + later);
            }
            System.out.flush();
            System.exit(FAILED_EXIT);
        }
        comm.close();
        System.out.println("DONE " + i);
        System.out.flush();
        System.exit(0);
    }
}
