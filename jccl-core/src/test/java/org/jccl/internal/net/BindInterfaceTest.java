package org.jccl.internal.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.ConnectException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclId;
import org.jccl.ReduceOp;
import org.jccl.testing.Ranks;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Listening sockets bind only the interface {@code JCCL_SOCKET_IFNAME} selects, never the wildcard:
 * with a non-loopback interface selected, every port the job listens on (bootstrap root and TCP data
 * listeners, found through procfs as a port scanner would) is bound to that interface's address, and
 * the same port on loopback refuses connections.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BindInterfaceTest {

    /** The first interface that is up, not loopback, and has an IPv4 address. */
    private static Optional<Interfaces.Nic> external() {
        return Interfaces.systemInterfaces().stream()
                .filter(n -> n.up() && !n.loopback() && n.addresses().stream().anyMatch(a -> a instanceof Inet4Address))
                .findFirst();
    }

    @Test
    void everyListenerBindsTheSelectedInterfaceOnly() throws Exception {
        Optional<Interfaces.Nic> nic = external();
        assumeTrue(nic.isPresent(), "needs a non-loopback interface that is up with an IPv4 address; this machine has none");
        String name = nic.get().name();
        InetAddress address = nic.get().addresses().stream().filter(a -> a instanceof Inet4Address).findFirst().orElseThrow();
        Config config = Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1")
                .with("JCCL_SOCKET_IFNAME", name).with("JCCL_SOCKET_FAMILY", "AF_INET").with("JCCL_INIT_TIMEOUT", "30")
                .with("JCCL_DUMP_DIR", java.nio.file.Files.createTempDirectory("jccl-bind").toString());

        Set<InetSocketAddress> before = ListeningSockets.tcpListeners();
        JcclId id = JcclId.create(config);
        Set<InetSocketAddress> rootOnly = new HashSet<>(ListeningSockets.tcpListeners());
        rootOnly.removeAll(before);
        assertEquals(Set.of(new InetSocketAddress(address, id.rootAddress().getPort())), rootOnly,
                "the bootstrap root listens on " + name + "'s address only");
        // That root serves no rendezvous here: it gives up at its (short) init deadline.

        List<Communicator> comms = Jccl.initLocal(2, config);
        try {
            Ranks.run(comms, java.time.Duration.ofSeconds(60), c -> {
                int[] a = {c.rank() + 1};
                c.allReduce(Buffer.of(a), ReduceOp.SUM);
                assertEquals(3, a[0]);
            });
            Set<InetSocketAddress> data = new HashSet<>(ListeningSockets.tcpListeners());
            data.removeAll(before);
            data.removeAll(rootOnly);
            // `jccl status` endpoints are loopback-only by design (asked from the same host); every other listener is on the NIC
            Set<InetSocketAddress> status = new HashSet<>();
            try (java.util.stream.Stream<java.nio.file.Path> files = java.nio.file.Files.list(java.nio.file.Path.of(config.raw("JCCL_DUMP_DIR")))) {
                for (java.nio.file.Path f : files.filter(x -> x.getFileName().toString().startsWith("jccl-status-")).toList()) {
                    for (String l : java.nio.file.Files.readAllLines(f)) {
                        if (l.startsWith("port=")) {
                            status.add(new InetSocketAddress(InetAddress.getLoopbackAddress(), Integer.parseInt(l.substring(5))));
                        }
                    }
                }
            }
            assertEquals(2, status.size(), "one status endpoint per rank: " + status);
            assertTrue(data.containsAll(status), "status endpoints " + status + " listen on loopback: " + data);
            data.removeAll(status);
            assertEquals(2, data.size(), "one data listener per rank: " + data);
            for (InetSocketAddress l : data) {
                assertFalse(l.getAddress().isAnyLocalAddress(), "a wildcard listener: " + l);
                assertEquals(address, l.getAddress(), "listener " + l + " is not on " + name);
                InetSocketAddress loopbackSamePort = new InetSocketAddress(InetAddress.getLoopbackAddress(), l.getPort());
                assertThrows(ConnectException.class, () -> {
                    try (Socket s = new Socket()) {
                        s.connect(loopbackSamePort, 5_000);
                    }
                }, "port " + l.getPort() + " must not answer on loopback");
            }
        } finally {
            comms.forEach(Communicator::close);
        }
    }
}
