package org.jccl.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jccl.Config;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.MemoryType;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The SPI's registration and one-sided parts, written once ({@link OneSidedScenarios}) and run over
 * every transport by a small subclass each: it names the transport, its settings, what it declares
 * it can do, and whether its ranks are threads of this JVM (the default) or processes. A transport
 * without one-sided support passes only by refusing every call with its name (TCP); the declared
 * capabilities are checked first, so a transport cannot pass by claiming less than it should.
 *
 * <p>Every test gets a fresh directory under /dev/shm as {@code JCCL_SHM_DIR}, and after the ranks
 * closed their endpoints it must be empty: no ring, doorbell or region file is left behind, whatever
 * the scenario left registered.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
public abstract class OneSidedConformance {
    private static final SecureRandom RANDOM = new SecureRandom();

    /** This test's JCCL_SHM_DIR. */
    protected Path dir;

    /** The transport under test. */
    protected abstract Transport transport();

    /** The settings its ranks use; {@code dir} is this test's private JCCL_SHM_DIR. */
    protected abstract Map<String, String> settings(Path dir);

    /** Whether the transport declares registration and one-sided puts ({@code supportsPut}, {@code canAllocate}). */
    protected abstract boolean oneSided();

    /** Whether it registers memory of the process itself ({@code canRegister(HOST)}). */
    protected abstract boolean registersProcessMemory();

    /**
     * Whether a put into a region its owner deregistered is refused by name (LOCAL, SHM: they can tell; the default).
     * RDMA transports (UCX) cannot see a peer's deregistration without a message, which the SPI allows: they run a
     * variant that stops short of that put.
     */
    protected boolean seesRemoteDeregistration() {
        return true;
    }

    /** Runs {@code scenario} on {@code n} ranks: threads of this JVM unless a subclass runs processes. */
    protected void runRanks(int n, String scenario) throws Exception {
        threads(n, OneSidedScenarios.BY_NAME.get(scenario), null);
    }

    static Config config(Map<String, String> settings) {
        Config c = Config.defaults();
        for (Map.Entry<String, String> e : settings.entrySet()) {
            c = c.with(e.getKey(), e.getValue());
        }
        return c;
    }

    /**
     * Runs {@code body} on {@code n} rank threads, each with its own endpoint of the transport in one
     * communicator, connected to every other. {@code hostIds[r]} is rank r's host identity as every rank
     * sees it (null: one host for all). Every endpoint is closed at the end; the first failure is thrown.
     */
    protected void threads(int n, OneSidedScenarios.Body body, String[] hostIds) throws Exception {
        Transport t = transport();
        Config cfg = config(settings(dir));
        byte[] comm = random16();
        byte[] secret = random16();
        SpiRig[] rigs = new SpiRig[n];
        try {
            for (int r = 0; r < n; r++) {
                rigs[r] = SpiRig.open(t, comm, secret, r, n, cfg);
            }
            PeerInfo[] infos = new PeerInfo[n];
            long pid = ProcessHandle.current().pid();
            for (int r = 0; r < n; r++) {
                infos[r] = rigs[r].info(t, hostIds == null ? "testhost-boot" : hostIds[r], pid, "test-jvm");
            }
            for (SpiRig rig : rigs) {
                rig.setPeers(infos);
            }
            List<Throwable> errors = new ArrayList<>();
            Thread[] threads = new Thread[n];
            for (int r = 0; r < n; r++) {
                SpiRig rig = rigs[r];
                threads[r] = Thread.ofPlatform().name("spi-rank-" + r).start(() -> {
                    try {
                        rig.connectAll();
                        body.run(rig);
                    } catch (Throwable e) {
                        synchronized (errors) {
                            errors.add(new AssertionError("rank " + rig.rank() + ": " + e, e));
                        }
                        // Abort the others (as a communicator would): their waits end at once instead of at the deadline.
                        for (SpiRig other : rigs) {
                            other.close();
                        }
                    }
                });
            }
            long deadline = System.nanoTime() + (SpiRig.DEADLINE_MILLIS + 30_000) * 1_000_000;
            for (Thread th : threads) {
                th.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
                if (th.isAlive()) {
                    StringBuilder stack = new StringBuilder();
                    for (StackTraceElement e : th.getStackTrace()) {
                        stack.append("\n  at ").append(e);
                    }
                    errors.add(new AssertionError(th.getName() + " did not finish in time:" + stack));
                }
            }
            if (!errors.isEmpty()) {
                Throwable first = errors.get(0);
                errors.stream().skip(1).forEach(first::addSuppressed);
                if (first instanceof Exception e) {
                    throw e;
                }
                throw (Error) first;
            }
        } finally {
            for (SpiRig rig : rigs) {
                if (rig != null) {
                    rig.close();
                }
            }
        }
    }

    static byte[] random16() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return b;
    }

    @BeforeEach
    void makeDir() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "jccl-onesided-");
    }

    @AfterEach
    void nothingLeftBehind() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            List<Path> left = s.toList();
            for (Path p : left) {
                Files.deleteIfExists(p);
            }
            assertEquals(List.of(), left, "files left in JCCL_SHM_DIR after every endpoint closed");
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void capabilitiesAreAsDeclared() throws Exception {
        threads(2, rig -> {
            Endpoint ep = rig.endpoint();
            Connection c = rig.connection(1 - rig.rank());
            assertEquals(transport().name(), ep.transportName());
            assertEquals(oneSided(), ep.canAllocate(), "canAllocate");
            assertEquals(oneSided(), c.supportsPut(), "supportsPut");
            assertEquals(registersProcessMemory(), ep.canRegister(MemoryType.HOST), "canRegister(HOST)");
            assertEquals(false, ep.canRegister(MemoryType.CUDA), "canRegister(CUDA): no CPU transport takes device memory");
            assertEquals(EnumSet.of(MemoryType.HOST), ep.memoryTypes());
            assertEquals(EnumSet.of(MemoryType.HOST), c.memoryTypes());
            if (oneSided()) {
                // Device memory is refused as unsupported, by name, even where host memory is taken.
                org.jccl.spi.OneSidedUnsupportedException e = assertThrows(org.jccl.spi.OneSidedUnsupportedException.class,
                        () -> ep.register(0x10000, 4096, MemoryType.CUDA));
                assertTrue(e.getMessage().startsWith(transport().name() + " does not support registration of CUDA memory"), e.getMessage());
                assertThrows(IllegalArgumentException.class, () -> ep.allocate(-1));
                assertEquals(0, ep.allocate(0).length()); // left registered: closed with the endpoint
            }
        }, null);
    }

    @Test
    void putAtOffsetsFlushThenNotify() throws Exception {
        runRanks(3, "putAtOffsetsFlushThenNotify");
    }

    @Test
    void putOutOfBoundsIsRefusedBeforeAnyByteMoves() throws Exception {
        runRanks(2, "putOutOfBounds");
    }

    @Test
    void deregisterThenPut() throws Exception {
        runRanks(2, seesRemoteDeregistration() ? "deregisterThenPut" : "deregisterUnseenThenClose");
    }

    @Test
    void keyOnTheWrongConnection() throws Exception {
        runRanks(3, "keyOnTheWrongConnection");
    }

    @Test
    void closeWhileRegisteredLeavesNothing() throws Exception {
        runRanks(3, "closeWhileRegistered");
    }

    @Test
    void registerProcessMemory() throws Exception {
        runRanks(2, "registerProcessMemory");
    }
}
