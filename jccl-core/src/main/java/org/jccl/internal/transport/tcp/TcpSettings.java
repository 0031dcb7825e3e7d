package org.jccl.internal.transport.tcp;

import java.net.InetAddress;
import java.time.Duration;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.net.Tls;

/**
 * The TCP transport's settings, read and checked once when an endpoint opens (Aeron's
 * {@code Context.conclude()}): every bad value fails there, before a port is held, and the transport
 * reads fields afterwards, never the configuration.
 *
 * @param sockets sockets per peer and direction: {@code JCCL_SOCKET_NTHREADS x JCCL_NSOCKS_PERTHREAD}, at most {@link
 *        TcpWire#MAX_SOCKETS} in all (half of it each way when split)
 * @param socketBuffer SO_SNDBUF/SO_RCVBUF in bytes ({@code JCCL_SOCKET_BUFFER}); 0 leaves the kernel's autotuning
 * @param connectTimeout how long a connection to a peer may take ({@code JCCL_CONNECT_TIMEOUT})
 * @param checksum CRC32C over every stripe ({@code JCCL_CHECKSUM})
 * @param tls TLS for the connections ({@code JCCL_TLS}), or null
 * @param bindAddress the address to listen on ({@code JCCL_SOCKET_IFNAME}, {@code JCCL_SOCKET_FAMILY})
 * @param threads {@code JCCL_SOCKET_NTHREADS}
 * @param offload {@code JCCL_SOCKET_OFFLOAD}: 1 on, 0 off, -1 auto (see {@link #streamThreads})
 * @param split {@code JCCL_SOCKET_SPLIT}: each direction gets {@code sockets} sockets of its own
 */
record TcpSettings(int sockets, int socketBuffer, Duration connectTimeout, boolean checksum, Tls tls, InetAddress bindAddress,
        int threads, int offload, boolean split) {

    /**
     * Reads and checks the TCP settings of {@code config}.
     *
     * @throws ConfigException naming the variable, its value and what is allowed
     */
    static TcpSettings conclude(Config config) {
        int threads = Settings.SOCKET_NTHREADS.getInt(config);
        int perThread = Settings.NSOCKS_PERTHREAD.getInt(config);
        boolean split = Settings.SOCKET_SPLIT.getBool(config);
        int max = split ? TcpWire.MAX_SOCKETS / 2 : TcpWire.MAX_SOCKETS;
        return new TcpSettings(Math.min(max, threads * perThread), (int) Settings.SOCKET_BUFFER.getLong(config),
                Settings.CONNECT_TIMEOUT.getDuration(config), Settings.CHECKSUM.getBool(config), Tls.fromConfig(config),
                Interfaces.selectAddress(config), threads, Settings.SOCKET_OFFLOAD.getInt(config), split);
    }

    /**
     * Stream threads per connection, or 0 (the operation thread drives the sockets), for a process with
     * {@code localRanks} ranks of its communicator on its host (unknown: -1, counted as 1) and {@code cpus}
     * CPUs it may use. Auto turns them on only when more than one is asked for and every local rank's
     * operation thread and stream threads have a CPU each: with fewer, spinning operation threads starve
     * the stream threads (8 B took 320 us instead of 6 with 1 + 1 threads per rank on 2 CPUs).
     */
    int streamThreads(int localRanks, int cpus) {
        boolean on = offload == 1 || (offload == -1 && threads > 1 && cpus >= (long) Math.max(1, localRanks) * (threads + 1));
        return on ? Math.min(threads, sockets) : 0;
    }
}
