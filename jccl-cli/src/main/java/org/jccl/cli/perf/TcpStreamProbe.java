package org.jccl.cli.perf;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

/**
 * What TCP carries on this host with no collective on top: the ceiling that jccl's TCP numbers are
 * read against ({@code scripts/tcp-ceiling.sh}). Plain Java NIO, blocking sockets, one thread per
 * socket and direction, like iperf3 -P N but without needing iperf3 on the machine.
 *
 * <pre>
 *   java -cp jccl-cli.jar org.jccl.cli.perf.TcpStreamProbe oneway N [SECONDS] [ADDRESS]
 *   java -cp jccl-cli.jar org.jccl.cli.perf.TcpStreamProbe bidir  N [SECONDS] [ADDRESS]
 * </pre>
 *
 * {@code oneway}: N streams from one side to the other; prints the sum in GB/s (10^9 bytes/s).
 * {@code bidir}: N streams each way at once (what a 2-rank all-reduce needs: every rank sends and
 * receives at the same time); prints GB/s per direction. Each writer sends 1 MiB writes from a direct
 * buffer; each reader reads into its own 1 MiB direct buffer and counts. 0.5 s of warm-up, then
 * SECONDS (default 3) timed. ADDRESS defaults to 127.0.0.1.
 */
public final class TcpStreamProbe {

    private static final int BUF = 1 << 20;

    private TcpStreamProbe() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2 || !(args[0].equals("oneway") || args[0].equals("bidir"))) {
            System.err.println("usage: TcpStreamProbe oneway|bidir STREAMS [SECONDS] [ADDRESS]");
            System.exit(2);
        }
        boolean bidir = args[0].equals("bidir");
        int streams = Integer.parseInt(args[1]);
        double seconds = args.length > 2 ? Double.parseDouble(args[2]) : 3.0;
        InetAddress addr = InetAddress.getByName(args.length > 3 ? args[3] : "127.0.0.1");
        if (streams < 1 || streams > 256 || seconds <= 0) {
            System.err.println("TcpStreamProbe: STREAMS must be 1..256 and SECONDS > 0");
            System.exit(2);
        }
        double[] gbps = run(streams, bidir, seconds, addr);
        System.out.printf("tcp-probe %s streams=%d seconds=%.1f address=%s GB/s=%.2f%s%n", args[0], streams, seconds,
                addr.getHostAddress(), gbps[0], bidir ? String.format(" (per direction; other direction %.2f)", gbps[1]) : "");
    }

    /** Returns GB/s received by side B (and by side A when bidirectional). */
    static double[] run(int streams, boolean bidir, double seconds, InetAddress addr) throws Exception {
        int sockets = bidir ? 2 * streams : streams;
        List<SocketChannel[]> pairs = new ArrayList<>();
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(addr, 0), sockets);
            for (int i = 0; i < sockets; i++) {
                SocketChannel c = SocketChannel.open(server.getLocalAddress());
                SocketChannel s = server.accept();
                for (SocketChannel ch : new SocketChannel[] {c, s}) {
                    ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
                }
                pairs.add(new SocketChannel[] {c, s});
            }
        }
        AtomicBoolean stop = new AtomicBoolean();
        LongAdder toB = new LongAdder();
        LongAdder toA = new LongAdder();
        List<Thread> threads = new ArrayList<>();
        CountDownLatch started = new CountDownLatch(2 * sockets);
        for (int i = 0; i < sockets; i++) {
            // Socket i: A writes, B reads for i < streams; B writes, A reads for the others (bidir).
            boolean aToB = i < streams;
            SocketChannel writer = aToB ? pairs.get(i)[0] : pairs.get(i)[1];
            SocketChannel reader = aToB ? pairs.get(i)[1] : pairs.get(i)[0];
            LongAdder count = aToB ? toB : toA;
            threads.add(Thread.ofPlatform().daemon().name("probe-w" + i).start(() -> write(writer, stop, started)));
            threads.add(Thread.ofPlatform().daemon().name("probe-r" + i).start(() -> read(reader, count, stop, started)));
        }
        started.await();
        Thread.sleep(500);
        long b0 = toB.sum();
        long a0 = toA.sum();
        long t0 = System.nanoTime();
        Thread.sleep((long) (seconds * 1000));
        long b1 = toB.sum();
        long a1 = toA.sum();
        long t1 = System.nanoTime();
        stop.set(true);
        for (SocketChannel[] p : pairs) {
            for (SocketChannel ch : p) {
                try {
                    ch.close();
                } catch (IOException ignored) {
                    // shutting down
                }
            }
        }
        for (Thread t : threads) {
            t.join(5000);
        }
        double secs = (t1 - t0) / 1e9;
        return new double[] {(b1 - b0) / secs / 1e9, (a1 - a0) / secs / 1e9};
    }

    private static void write(SocketChannel ch, AtomicBoolean stop, CountDownLatch started) {
        ByteBuffer b = ByteBuffer.allocateDirect(BUF);
        byte[] fill = new byte[BUF];
        Arrays.fill(fill, (byte) 0x5a);
        b.put(fill).flip();
        started.countDown();
        try {
            while (!stop.get()) {
                b.clear();
                while (b.hasRemaining()) {
                    ch.write(b);
                }
            }
        } catch (IOException e) {
            if (!stop.get()) {
                System.err.println("TcpStreamProbe: write failed: " + e);
            }
        }
    }

    private static void read(SocketChannel ch, LongAdder count, AtomicBoolean stop, CountDownLatch started) {
        ByteBuffer b = ByteBuffer.allocateDirect(BUF);
        started.countDown();
        try {
            while (!stop.get()) {
                b.clear();
                int n = ch.read(b);
                if (n < 0) {
                    return;
                }
                count.add(n);
            }
        } catch (IOException e) {
            if (!stop.get()) {
                System.err.println("TcpStreamProbe: read failed: " + e);
            }
        }
    }
}
