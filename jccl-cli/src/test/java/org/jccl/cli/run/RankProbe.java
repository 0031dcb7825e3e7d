package org.jccl.cli.run;

/**
 * A rank program for the launcher tests: prints its job environment, then exits or sleeps as told.
 *
 * <p>Arguments: {@code failRank exitCode othersSleepSeconds [linesToPrint]}. The rank equal to
 * {@code failRank} exits with {@code exitCode}; the others sleep {@code othersSleepSeconds} and exit 0.
 * {@code linesToPrint} extra long lines test that output lines of different ranks never mix.
 */
public final class RankProbe {
    private RankProbe() {
    }

    public static void main(String[] args) throws InterruptedException {
        int failRank = args.length > 0 ? Integer.parseInt(args[0]) : -1;
        int exitCode = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        int sleepSeconds = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        int lines = args.length > 3 ? Integer.parseInt(args[3]) : 0;
        int rank = Integer.parseInt(System.getenv("JCCL_RANK"));
        for (String name : new String[] {"JCCL_COMM_ID", "JCCL_RANK", "JCCL_WORLD_SIZE", "JCCL_LOCAL_RANK",
                "JCCL_LOCAL_SIZE", "JCCL_AUTH_TOKEN", "RANK", "OMPI_COMM_WORLD_RANK", "JCCL_EXTRA"}) {
            System.out.println(name + "=" + System.getenv(name));
        }
        System.out.println("PID=" + ProcessHandle.current().pid());
        System.err.println("stderr of rank " + rank);
        String filler = "x".repeat(200);
        for (int i = 0; i < lines; i++) {
            System.out.println("line " + rank + " " + i + " " + filler);
        }
        System.out.flush();
        if (rank == failRank) {
            System.exit(exitCode);
        }
        Thread.sleep(sleepSeconds * 1000L);
    }
}
