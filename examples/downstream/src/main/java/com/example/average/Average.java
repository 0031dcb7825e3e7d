package com.example.average;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.ReduceOp;

/**
 * Every rank contributes a vector filled with {@code rank + 1}; after an all-reduce (sum) every
 * element on every rank must be {@code 1 + 2 + ... + size}. Exits 1 when one is not.
 *
 * <ul>
 *   <li>{@code Average} joins the job its launcher describes (jccl run, torchrun, mpirun, srun):
 *       {@code jccl run -np 4 --cp target/classes com.example.average.Average};</li>
 *   <li>{@code Average local N} runs N ranks as threads of this JVM ({@code Jccl.initLocal}).</li>
 * </ul>
 */
public final class Average {
    private static final int COUNT = 1 << 16;

    private Average() {
    }

    public static void main(String[] args) throws InterruptedException, ExecutionException {
        boolean ok;
        if (args.length == 2 && args[0].equals("local")) {
            int n = Integer.parseInt(args[1]);
            List<Communicator> comms = Jccl.initLocal(n);
            ExecutorService threads = Executors.newFixedThreadPool(n);
            try {
                List<Future<Boolean>> results = new ArrayList<>();
                for (Communicator comm : comms) {
                    results.add(threads.submit(() -> {
                        try (comm) {
                            return sumOnEveryRank(comm);
                        }
                    }));
                }
                ok = true;
                for (Future<Boolean> r : results) {
                    ok &= r.get();
                }
            } finally {
                threads.shutdown();
            }
        } else if (args.length == 0) {
            try (Communicator comm = Jccl.init(Config.fromEnvironment())) {
                ok = sumOnEveryRank(comm);
            }
        } else {
            System.err.println("usage: Average            (one rank of a launched job)");
            System.err.println("       Average local N    (N ranks as threads of this JVM)");
            System.exit(2);
            return;
        }
        System.exit(ok ? 0 : 1);
    }

    /** One rank's all-reduce and its check; prints one line. */
    static boolean sumOnEveryRank(Communicator comm) {
        float[] data = new float[COUNT];
        Arrays.fill(data, comm.rank() + 1);
        comm.allReduce(data, ReduceOp.SUM);
        float expected = comm.size() * (comm.size() + 1) / 2f;
        for (int i = 0; i < COUNT; i++) {
            if (data[i] != expected) {
                System.out.println("rank " + comm.rank() + " of " + comm.size() + ": element " + i + " is " + data[i]
                        + ", expected " + expected + ": WRONG");
                return false;
            }
        }
        System.out.println("rank " + comm.rank() + " of " + comm.size() + ": sum " + expected + " in all " + COUNT
                + " elements: right");
        return true;
    }
}
