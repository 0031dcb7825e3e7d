package org.jccl.internal.transport.shm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Locale;

/**
 * Not a test: the yardstick of docs/PERFORMANCE.md's same-host sittings ("PP2"), what one cache
 * line costs between two processes at this moment. Two processes map one /dev/shm file and
 * ping-pong a counter with {@code setRelease}/{@code getAcquire} (what the shared collective
 * segment does), 1 M round trips per line of output, optionally with {@code Thread.onSpinWait()}
 * (x86 PAUSE) in the wait loop. Rank 0 prints the mean round trip.
 * <pre>
 * ./mvnw -q -B -o -pl jccl-core test-compile
 * CP=jccl-core/target/classes:jccl-core/target/test-classes; C=org.jccl.internal.transport.shm.ShmRoundTrip
 * taskset -c 1 java -cp $CP $C 1 /dev/shm/rt [pause] &amp; taskset -c 0 java -cp $CP $C 0 /dev/shm/rt [pause]; rm /dev/shm/rt
 * </pre>
 */
public final class ShmRoundTrip {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private ShmRoundTrip() {
    }

    public static void main(String[] args) throws Exception {
        int me = Integer.parseInt(args[0]);
        Path file = Path.of(args[1]);
        boolean pause = args.length > 2 && args[2].equals("pause");
        MemorySegment m;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            if (me == 0) {
                ch.truncate(8192);
            }
            Thread.sleep(200); // the other process opens the same file; rank 0 sized it
            m = ch.map(FileChannel.MapMode.READ_WRITE, 0, 8192, Arena.global());
        }
        long mine = me * 128L;
        long his = (1 - me) * 128L;
        int n = 1_000_000;
        for (int rep = 0; rep < 5; rep++) {
            long t0 = System.nanoTime();
            long base = (long) rep * n * 2;
            for (int i = 0; i < n; i++) {
                long v = base + 2L * i + 1;
                if (me == 0) {
                    LONG.setRelease(m, mine, v);
                }
                while ((long) LONG.getAcquire(m, his) < v) {
                    if (pause) {
                        Thread.onSpinWait();
                    }
                }
                if (me == 1) {
                    LONG.setRelease(m, mine, v);
                }
            }
            if (me == 0) {
                System.out.printf(Locale.ROOT, "round trip %.3f us%n", (System.nanoTime() - t0) / 1e3 / n);
            }
        }
    }
}
