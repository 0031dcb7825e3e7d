package org.jccl.cli.mproc;

import java.nio.file.Files;
import java.nio.file.Path;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;

/**
 * A rank program for the control-plane tests. Every rank joins, runs one collective (#0), prints
 * {@code READY rank <r> pid <p>}, then:
 * <ul>
 *   <li>{@code hold <victim> <goFile>}: the victim waits until {@code goFile} exists (it is held
 *       back), the others call all-reduce #1 at once; everyone then all-reduces, prints
 *       {@code DONE} and closes.</li>
 *   <li>{@code victim <victim>}: the victim sleeps (the test kills or stops it), the others call
 *       all-reduce #1; a failure prints {@code FAILED_AT_MS=<epoch ms> <exception>}, then a later
 *       call's failure {@code LATER <exception>}, and exits {@value #FAILED_EXIT}.</li>
 *   <li>{@code exit <victim>}: as {@code victim}, but the victim waits in a receive that nobody
 *       matches and calls {@code System.exit(}{@value #EXIT_CODE}{@code )} from another thread
 *       after {@value #EXIT_AFTER_MS} ms: a JVM that exits in the middle of an operation.</li>
 * </ul>
 */
public final class ControlRank {
    static final int FAILED_EXIT = 42;
    static final int EXIT_CODE = 7;
    static final long EXIT_AFTER_MS = 1000;

    private ControlRank() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        int victim = Integer.parseInt(args[1]);
        Communicator comm = Jccl.init(Config.fromEnvironment());
        int rank = comm.rank();
        if (mode.equals("hold")) {
            comm.broadcast(Buffer.of(new int[8]), 0);
        } else {
            comm.allReduce(new float[8], ReduceOp.SUM);
        }
        System.out.println("READY rank " + rank + " pid " + ProcessHandle.current().pid());
        System.out.flush();
        if (rank == victim) {
            if (mode.equals("hold")) {
                Path go = Path.of(args[2]);
                long end = System.currentTimeMillis() + 120_000;
                while (!Files.exists(go) && System.currentTimeMillis() < end) {
                    Thread.sleep(100);
                }
            } else if (mode.equals("exit")) {
                Thread exit = new Thread(() -> {
                    try {
                        Thread.sleep(EXIT_AFTER_MS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    System.out.println("EXITING_AT_MS=" + System.currentTimeMillis());
                    System.out.flush();
                    System.exit(EXIT_CODE);
                });
                exit.start();
                comm.recv(Buffer.of(new float[8]), (rank + 1) % comm.size()); // nobody sends: the JVM exits inside it
                Thread.sleep(600_000);
            } else {
                Thread.sleep(600_000);
            }
        }
        try {
            float[] x = new float[1024];
            java.util.Arrays.fill(x, 1);
            comm.allReduce(x, ReduceOp.SUM);
            System.out.println("DONE sum " + x[0]);
            System.out.flush();
            comm.close();
            System.exit(0);
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
    }
}
