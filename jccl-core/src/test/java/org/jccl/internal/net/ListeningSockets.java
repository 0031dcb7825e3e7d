package org.jccl.internal.net;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * What this JVM has open on the network, read from procfs as a port scanner on the host would see
 * it: the TCP sockets it listens on ({@code /proc/net/tcp[6]} rows in state LISTEN whose inode is
 * one of {@code /proc/self/fd}'s sockets), and how many socket descriptors it holds. Linux only.
 */
public final class ListeningSockets {
    private static final String LISTEN = "0A";

    private ListeningSockets() {
    }

    /** Inodes of the sockets among this process's file descriptors. */
    static Set<String> socketInodes() throws IOException {
        Set<String> inodes = new HashSet<>();
        try (DirectoryStream<Path> fds = Files.newDirectoryStream(Path.of("/proc/self/fd"))) {
            for (Path fd : fds) {
                try {
                    String target = Files.readSymbolicLink(fd).toString();
                    if (target.startsWith("socket:[")) {
                        inodes.add(target.substring(8, target.length() - 1));
                    }
                } catch (IOException e) {
                    // The descriptor was closed while listing: not ours to count.
                }
            }
        }
        return inodes;
    }

    /** Number of socket descriptors this process holds (TCP, UDP and Unix). */
    public static int socketCount() throws IOException {
        return socketInodes().size();
    }

    /** The local addresses of the TCP sockets this process listens on. */
    public static Set<InetSocketAddress> tcpListeners() throws IOException {
        Set<String> mine = socketInodes();
        Set<InetSocketAddress> out = new LinkedHashSet<>();
        for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
            Path p = Path.of(table);
            if (!Files.exists(p)) {
                continue;
            }
            List<String> lines = Files.readAllLines(p);
            for (String line : lines.subList(1, lines.size())) {
                String[] f = line.trim().split("\\s+");
                if (f.length < 10 || !f[3].equals(LISTEN) || !mine.contains(f[9])) {
                    continue;
                }
                String[] hostPort = f[1].split(":");
                out.add(new InetSocketAddress(address(hostPort[0]), Integer.parseInt(hostPort[1], 16)));
            }
        }
        return out;
    }

    /** procfs prints the address as 32-bit words in host (little-endian) order. */
    private static InetAddress address(String hex) throws IOException {
        byte[] b = new byte[hex.length() / 2];
        for (int word = 0; word < b.length / 4; word++) {
            for (int i = 0; i < 4; i++) {
                int pos = word * 8 + (3 - i) * 2;
                b[word * 4 + i] = (byte) Integer.parseInt(hex.substring(pos, pos + 2), 16);
            }
        }
        return InetAddress.getByAddress(b);
    }
}
