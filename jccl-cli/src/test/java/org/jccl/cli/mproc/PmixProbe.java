package org.jccl.cli.mproc;

import java.time.Duration;
import java.util.Map;
import java.util.OptionalLong;
import org.jccl.internal.launch.Pmix;

/**
 * A rank program for the PMIx tests, started by mpirun or srun --mpi=pmix: every rank puts a value
 * naming itself, commits, joins a fence with data collection, and reads every rank's value back;
 * then a second round with another key (a process may exchange more than once, e.g. two
 * communicators). Checks the job size the server reports against {@code expectedSize}.
 *
 * <p>Output: {@code PMIX OK rank <r> of <n> ns <namespace> version <v>} (exit 0), or {@code WRONG ...}
 * (exit {@value #WRONG_EXIT}).
 */
public final class PmixProbe {
    static final int WRONG_EXIT = 43;

    private PmixProbe() {
    }

    public static void main(String[] args) {
        int expectedSize = Integer.parseInt(args[0]);
        Map<String, String> env = System.getenv();
        Duration limit = Duration.ofSeconds(60);
        Pmix p = Pmix.client(env);
        int rank = p.rank();
        OptionalLong size = p.getNumber(-1, Pmix.KEY_JOB_SIZE, limit);
        if (size.isEmpty() || size.getAsLong() != expectedSize) {
            wrong("job size " + size + ", expected " + expectedSize);
        }
        for (int round = 0; round < 2; round++) {
            String key = "jccl.probe." + round;
            p.putString(key, "rank " + rank + " round " + round + " pid " + ProcessHandle.current().pid());
            p.commit();
            p.fence(limit);
            for (int r = 0; r < expectedSize; r++) {
                String v = p.getString(r, key, limit).orElse(null);
                if (v == null || !v.startsWith("rank " + r + " round " + round + " pid ")) {
                    wrong("round " + round + ": rank " + r + "'s value is " + v);
                }
            }
            if (p.getString(0, "jccl.never.put", limit).isPresent()) {
                wrong("a key nobody put was found");
            }
        }
        System.out.println("PMIX OK rank " + rank + " of " + expectedSize + " ns " + p.namespace() + " version " + p.version());
        System.out.flush();
    }

    private static void wrong(String what) {
        System.out.println("WRONG " + what);
        System.out.flush();
        System.exit(WRONG_EXIT);
    }
}
