package org.jccl.cli.mproc;

import java.util.List;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclException;

/**
 * A child JVM for the full-/dev/shm test: two ranks of this JVM with the in-JVM transport off (so
 * they must use SHM) try to create a communicator. Prints {@code INIT OK} and exits 0, or prints
 * {@code INIT FAILED <exception>} and exits {@value #EXIT_FAILED}. A SIGBUS would kill the JVM
 * instead (exit 135 and an hs_err file), which is exactly what the test rules out.
 */
public final class ShmFullCheck {
    static final int EXIT_FAILED = 7;

    private ShmFullCheck() {
    }

    public static void main(String[] args) {
        try {
            List<Communicator> cs = Jccl.initLocal(2, Config.fromEnvironment().with("JCCL_LOCAL_DISABLE", "1"));
            cs.forEach(Communicator::close);
            System.out.println("INIT OK");
            System.exit(0);
        } catch (JcclException e) {
            System.out.println("INIT FAILED " + e);
            System.out.flush();
            System.exit(EXIT_FAILED);
        }
    }
}
