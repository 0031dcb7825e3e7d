package org.jccl.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.ErrorCode;
import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.Work;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * abort() as the issue promises it, over the in-JVM, TCP and SHM transports: called from another
 * thread while callers are blocked in a collective that cannot complete, each abort() returns
 * within 1 s, every blocked caller gets ABORTED, and afterwards the JVM holds no more file
 * descriptors (/proc/self/fd), jccl threads or jccl files in /dev/shm than before the communicators
 * were made; abort() again and close() are harmless. And Work.join(Duration) that times out leaves
 * the communicator working.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AbortReleasesResourcesTest {

    static Config config(String transport) {
        Config base = Config.defaults().with("JCCL_INIT_TIMEOUT", "30");
        return switch (transport) {
            case "LOCAL" -> base;
            case "TCP" -> base.with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1").with("JCCL_SOCKET_IFNAME", "lo");
            case "SHM" -> base.with("JCCL_LOCAL_DISABLE", "1");
            default -> throw new IllegalArgumentException(transport);
        };
    }

    static int openFds() throws IOException {
        try (Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
            return (int) s.count();
        }
    }

    static Set<String> fdTargets() {
        Set<String> out = new TreeSet<>();
        try (Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
            for (Path p : s.toList()) {
                try {
                    out.add(Files.readSymbolicLink(p).toString());
                } catch (IOException e) {
                    // closed meanwhile
                }
            }
        } catch (IOException e) {
            out.add("(cannot list: " + e + ")");
        }
        return out;
    }

    static List<String> jcclThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .filter(n -> n.startsWith("jccl")).sorted().collect(Collectors.toList());
    }

    static Set<String> shmFiles() throws IOException {
        Path dir = Path.of("/dev/shm");
        if (!Files.isDirectory(dir)) {
            return Set.of();
        }
        try (Stream<Path> s = Files.list(dir)) {
            // only this JVM's files (their names carry the creator's pid): other jobs on the host come and go
            String pid = Long.toString(ProcessHandle.current().pid());
            return s.map(p -> p.getFileName().toString())
                    .filter(n -> n.startsWith("jccl") && (n.contains("-" + pid + "-") || n.contains("-" + pid + ".")))
                    .collect(Collectors.toCollection(TreeSet::new));
        }
    }

    /** One cycle: 3 ranks, a working all-reduce, ranks 0 and 1 blocked in an all-reduce rank 2 never joins, abort from this thread. */
    static void cycle(String transport) throws Exception {
        List<Communicator> cs = Jccl.initLocal(3, config(transport));
        try {
            Ranks.run(cs, Duration.ofSeconds(30), c -> {
                int[] x = {c.rank() + 1};
                c.allReduce(Buffer.of(x), ReduceOp.SUM);
                assertArrayEquals(new int[] {6}, x);
            });
            List<Thread> callers = new ArrayList<>();
            JcclException[] caught = new JcclException[2];
            CountDownLatch entered = new CountDownLatch(2);
            for (int r = 0; r < 2; r++) {
                Communicator c = cs.get(r);
                int rank = r;
                Thread t = new Thread(() -> {
                    entered.countDown();
                    caught[rank] = assertThrows(JcclException.class, () -> c.allReduce(new float[4096], ReduceOp.SUM));
                }, "blocked-caller-" + r);
                t.start();
                callers.add(t);
            }
            assertTrue(entered.await(10, TimeUnit.SECONDS));
            Thread.sleep(300); // both are inside the all-reduce, waiting for rank 2
            for (Communicator c : cs) {
                long t0 = System.nanoTime();
                c.abort();
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                assertTrue(ms < 1_000, transport + ": abort() of rank " + c.rank() + " took " + ms + " ms (bound: 1 s)");
            }
            for (Thread t : callers) {
                t.join(2_000);
                assertFalse(t.isAlive(), t.getName() + " still blocked 2 s after abort()");
            }
            // rank 0 is aborted first: its caller learns that; rank 1's caller may first see rank 0 go away
            assertEquals(ErrorCode.ABORTED, caught[0].code(), caught[0].toString());
            assertTrue(caught[0].getMessage().contains("rank 0") && caught[0].getMessage().contains("was aborted by abort()"),
                    caught[0].getMessage());
            assertTrue(caught[1].code() == ErrorCode.ABORTED || caught[1].code() == ErrorCode.PEER_FAILED, caught[1].toString());
            assertTrue(caught[1].getMessage().startsWith("rank 1: "), caught[1].getMessage());
            for (Communicator c : cs) {
                c.abort(); // idempotent
                c.close(); // safe after abort
                c.close();
            }
        } finally {
            cs.forEach(Communicator::abort);
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    void abortIsBoundedAndReleasesFdsThreadsAndShmFiles(String transport) throws Exception {
        cycle(transport); // warm-up: classes loaded, jars opened, lazily created JVM threads started
        awaitQuiet();
        int fds = openFds();
        Set<String> fdTargets = fdTargets();
        List<String> threads = jcclThreads();
        Set<String> shm = shmFiles();

        cycle(transport);

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < deadline && (openFds() > fds || jcclThreads().size() > threads.size())) {
            Thread.sleep(50);
        }
        Set<String> nowTargets = fdTargets();
        nowTargets.removeAll(fdTargets);
        assertTrue(openFds() <= fds, transport + ": " + openFds() + " open fds after abort, " + fds + " before; new: " + nowTargets);
        assertTrue(jcclThreads().size() <= threads.size(), transport + ": jccl threads before " + threads + ", after " + jcclThreads());
        Set<String> leftover = new TreeSet<>(shmFiles());
        leftover.removeAll(shm);
        assertTrue(leftover.isEmpty(), transport + ": files left in /dev/shm: " + leftover);
    }

    private static void awaitQuiet() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < deadline && !jcclThreads().isEmpty()) {
            Thread.sleep(50);
        }
    }

    /** A timed join that gives up does not harm the communicator: the operation completes later and the next one works. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LOCAL", "TCP", "SHM"})
    void timedOutJoinLeavesTheCommunicatorWorking(String transport) {
        List<Communicator> cs = Jccl.initLocal(2, config(transport));
        try {
            CountDownLatch late = new CountDownLatch(1);
            Ranks.run(cs, Duration.ofSeconds(30), c -> {
                long[] x = {c.rank() + 1, 10};
                if (c.rank() == 0) {
                    Work w = c.allReduceAsync(Buffer.of(x), Buffer.of(x), ReduceOp.SUM);
                    assertFalse(w.join(Duration.ofMillis(100)), "completed without rank 1");
                    late.countDown();
                    assertTrue(w.join(Duration.ofSeconds(20)));
                } else {
                    assertTrue(late.await(20, TimeUnit.SECONDS));
                    c.allReduce(Buffer.of(x), ReduceOp.SUM);
                }
                assertArrayEquals(new long[] {3, 20}, x);
                int[] y = {c.rank()};
                c.allReduce(Buffer.of(y), ReduceOp.MAX);
                assertArrayEquals(new int[] {1}, y);
            });
            cs.forEach(Communicator::close);
        } finally {
            cs.forEach(Communicator::abort);
        }
    }
}
