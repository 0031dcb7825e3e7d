package org.jccl.internal.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.jccl.ErrorCode;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * jccl's TCPStore client against a real torch TCPStore (python3 with torch; skipped without) in
 * whatever dialect that torch speaks, and against a minimal stand-in for the torch 2.x dialects this
 * machine's torch cannot serve ({@link FakeTorchStore}).
 */
@Timeout(120)
class TcpStoreClientTest {

    private static long in(long seconds) {
        return System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void talksWithARealTorchStoreBothWaysAndNeverStallsIt() throws Exception {
        String python = TorchPython.find();
        assumeTrue(python != null, TorchPython.MISSING);
        try (TorchPython.Peer torch = new TorchPython.Peer(python)) {
            InetSocketAddress at = new InetSocketAddress(InetAddress.getLoopbackAddress(), torch.port);
            try (TcpStoreClient c = TcpStoreClient.connect(at, "a torch " + torch.version + " store", in(30))) {
                // torch 1.x is legacy (1.13 tested); which 2.x release moved to which dialect is not pinned down here.
                if (torch.versionNumber() < 200) {
                    assertEquals(TcpStoreClient.Dialect.LEGACY, c.dialect(), "torch " + torch.version);
                }
                // The probes of the other dialects left the store serving: torch's own client still works.
                assertEquals("OK", torch.command("set fromtorch hello-from-torch"));
                // torch's client prefixes its keys with "/".
                assertArrayEquals(utf8("hello-from-torch"), c.waitAndGet("/fromtorch", in(10)));
                c.set("/fromjava", utf8("hello-from-jccl"));
                assertEquals("GOT hello-from-jccl", torch.command("get fromjava"));
            }
            // A wait that times out gives up cleanly: null, in about the time given, and the store serves on.
            try (TcpStoreClient c = TcpStoreClient.connect(at, "a torch store", in(30))) {
                long t0 = System.nanoTime();
                assertNull(c.waitAndGet("/never", System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500)));
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                assertTrue(ms >= 450 && ms < 10_000, ms + " ms");
            }
            assertEquals("OK", torch.command("set after-timeout yes"));
            assertEquals("GOT yes", torch.command("get after-timeout"));
        }
    }

    @ParameterizedTest(name = "ping={0} libuv={1}")
    @CsvSource({"true,true", "true,false", "false,true", "false,false"})
    void speaksTheValidatedDialectsOfNewerTorch(boolean ping, boolean libuv) throws Exception {
        long saved = TcpStoreClient.probeMillis;
        TcpStoreClient.probeMillis = 1_000; // the libuv server ignores a wrong first query: the probe waits this long
        try (FakeTorchStore store = new FakeTorchStore(ping, libuv, false);
             TcpStoreClient c = TcpStoreClient.connect(store.address(), "a fake torch 2.x store", in(30))) {
            assertEquals(ping ? TcpStoreClient.Dialect.VALIDATED_PING : TcpStoreClient.Dialect.VALIDATED, c.dialect());
            c.set("jccl/k", utf8("v1"));
            assertArrayEquals(utf8("v1"), c.waitAndGet("jccl/k", in(10)));
            assertArrayEquals(utf8("v1"), store.value("jccl/k"), "the server holds what the client set, under that exact key");
            try (TcpStoreClient other = TcpStoreClient.connect(store.address(), "a fake torch 2.x store", in(30))) {
                Thread setter = Thread.ofPlatform().start(() -> {
                    try {
                        Thread.sleep(200);
                        c.set("jccl/later", utf8("v2"));
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                });
                assertArrayEquals(utf8("v2"), other.waitAndGet("jccl/later", in(10)), "a waiter wakes when the key is set");
                setter.join();
            }
        } finally {
            TcpStoreClient.probeMillis = saved;
        }
    }

    @Test
    void aServerThatAnswersNoDialectIsNamed() throws Exception {
        long saved = TcpStoreClient.probeMillis;
        TcpStoreClient.probeMillis = 300;
        try (FakeTorchStore store = new FakeTorchStore(true, false, true)) {
            JcclException e = assertThrows(JcclException.class, () -> TcpStoreClient.connect(store.address(), "the store", in(30)));
            assertEquals(ErrorCode.PROTOCOL, e.code());
            assertTrue(e.getMessage().contains("does not answer as PyTorch's TCPStore in any dialect jccl speaks")
                    && e.getMessage().contains("JCCL_COMM_ID"), e.getMessage());
        } finally {
            TcpStoreClient.probeMillis = saved;
        }
    }

    @Test
    void nothingListeningTimesOutNamingTheStore() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        InetSocketAddress at = new InetSocketAddress(InetAddress.getLoopbackAddress(), port);
        JcclTimeoutException e = assertThrows(JcclTimeoutException.class,
                () -> TcpStoreClient.connect(at, "torchrun's TCPStore at MASTER_ADDR:MASTER_PORT=x:1", in(1)));
        assertTrue(e.getMessage().startsWith("cannot reach torchrun's TCPStore at MASTER_ADDR:MASTER_PORT=x:1"), e.getMessage());
    }
}
