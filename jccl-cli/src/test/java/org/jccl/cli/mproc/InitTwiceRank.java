package org.jccl.cli.mproc;

import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;

/**
 * A rank program for the launcher tests: {@code InitTwiceRank twice} joins the job with
 * {@code Jccl.init(Config.fromEnvironment())}, all-reduces and checks, closes, and does it all a
 * second time (each init runs its own root exchange); prints {@code TWICE OK rank <r>}.
 * {@code InitTwiceRank late <rank> <seconds>}: that rank sleeps before its init, so the others wait
 * for it in the exchange; a rank whose init fails prints {@code INIT FAILED <exception>} and exits
 * {@value #FAILED_EXIT}.
 */
public final class InitTwiceRank {
    static final int FAILED_EXIT = 42;
    static final int WRONG_EXIT = 43;

    private InitTwiceRank() {
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("late")) {
            int late = Integer.parseInt(args[1]);
            String me = System.getenv().getOrDefault("OMPI_COMM_WORLD_RANK", System.getenv("SLURM_PROCID"));
            if (Integer.parseInt(me) == late) {
                Thread.sleep(Long.parseLong(args[2]) * 1000);
            }
            long t0 = System.nanoTime();
            try (Communicator comm = Jccl.init(Config.fromEnvironment())) {
                System.out.println("JOINED rank " + comm.rank());
            } catch (JcclException e) {
                System.out.println("INIT FAILED after " + (System.nanoTime() - t0) / 1_000_000_000 + " s: " + e);
                System.out.flush();
                System.exit(FAILED_EXIT);
            }
            return;
        }
        for (int round = 0; round < 2; round++) {
            try (Communicator comm = Jccl.init(Config.fromEnvironment())) {
                int n = comm.size();
                int[] x = new int[1000];
                for (int k = 0; k < x.length; k++) {
                    x[k] = (comm.rank() + 1) * (round + 1) + k;
                }
                comm.allReduce(x, ReduceOp.SUM);
                for (int k = 0; k < x.length; k++) {
                    int want = n * (n + 1) / 2 * (round + 1) + n * k;
                    if (x[k] != want) {
                        System.out.println("WRONG round " + round + " element " + k + ": " + x[k] + ", expected " + want);
                        System.out.flush();
                        System.exit(WRONG_EXIT);
                    }
                }
            }
        }
        System.out.println("TWICE OK rank " + System.getenv().getOrDefault("OMPI_COMM_WORLD_RANK", System.getenv("SLURM_PROCID")));
        System.out.flush();
    }
}
