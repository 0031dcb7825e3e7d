package org.jccl.cli.run;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;

/** SKELETON - replaced by the launcher work package. */
public final class LocalLauncher {
    private LocalLauncher() {
    }

    /**
     * Starts {@code np} copies of {@code command} on this host with the jccl job environment (JCCL_COMM_ID,
     * JCCL_RANK, JCCL_WORLD_SIZE, JCCL_LOCAL_RANK, JCCL_AUTH_TOKEN) plus {@code extraEnv}, prefixes each output
     * line with its rank, stops the others when one fails, and returns the exit code (0 when all succeeded).
     */
    public static int launch(int np, List<String> command, Map<String, String> extraEnv, PrintStream out, PrintStream err) {
        throw new UnsupportedOperationException("launcher");
    }

    /** The command line that starts a JVM on jccl's own classpath (java binary, flags, -cp) running {@code mainClass}. */
    public static List<String> javaCommand(String mainClass) {
        throw new UnsupportedOperationException("launcher");
    }
}
