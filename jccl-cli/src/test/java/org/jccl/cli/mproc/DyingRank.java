package org.jccl.cli.mproc;

import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;

/**
 * A rank program for the failure tests: joins the job, prints its pid, then rank {@code args[0]}
 * exits with code {@code args[1]} at once while every other rank waits in a barrier that can never
 * complete. A survivor whose barrier fails (as it must once the peer is gone) prints
 * {@code SURVIVOR FAILED <exception>} and exits {@value #SURVIVOR_EXIT}; one whose barrier
 * completes, which would be a bug, prints {@code BARRIER COMPLETED} and exits 0.
 */
public final class DyingRank {

    /** Exit code of a rank whose barrier failed with a jccl error. */
    static final int SURVIVOR_EXIT = 42;

    private DyingRank() {
    }

    public static void main(String[] args) {
        int failRank = Integer.parseInt(args[0]);
        int exitCode = Integer.parseInt(args[1]);
        try {
            Communicator comm = Jccl.init(Config.fromEnvironment());
            System.out.println("PID=" + ProcessHandle.current().pid() + " rank " + comm.rank() + " joined");
            System.out.flush();
            if (comm.rank() == failRank) {
                // No close(): the process vanishes as a crashed rank would, connections and all.
                Runtime.getRuntime().halt(exitCode);
            }
            comm.barrier();
            System.out.println("BARRIER COMPLETED");
            System.out.flush();
            System.exit(0);
        } catch (JcclException e) {
            // The dying rank may leave before a survivor's init has finished: failing there is as good.
            System.out.println("SURVIVOR FAILED " + e);
            System.out.flush();
            System.exit(SURVIVOR_EXIT);
        }
    }
}
