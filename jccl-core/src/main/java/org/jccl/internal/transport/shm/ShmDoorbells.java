package org.jccl.internal.transport.shm;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.jccl.JcclException;
import org.jccl.JcclTimeoutException;
import org.jccl.internal.log.Log;
import org.jccl.spi.TransportContext;

/**
 * An endpoint's doorbells: a Unix-domain socket per peer pair (the lower rank connects to the higher
 * one's listener {@code jccl-shm-<comm>-<nonce>-<pid>.sock}, sends its rank and the communicator id);
 * the listener's name is unlinked as soon as every lower peer has connected. The socket carries only
 * wake-up bytes, never data (see {@link ShmConnection}). Without a listener (it could not be bound)
 * the peers poll.
 */
final class ShmDoorbells {
    private final TransportContext ctx;
    private final int rank;
    /** {@code jccl-shm-<comm>}: the start of every file name of this communicator. */
    private final String prefix;
    /** Doorbell sockets by peer (see ShmConnection), and this endpoint's listening one until prepare ends. */
    private final SocketChannel[] doorbells;
    private ServerSocketChannel listener;
    private Path listenerPath;

    ShmDoorbells(TransportContext ctx, Path dir, String prefix, String nonce) {
        this.ctx = ctx;
        this.rank = ctx.rank();
        this.prefix = prefix;
        this.doorbells = new SocketChannel[ctx.size()];
        openListener(dir, nonce, ProcessHandle.current().pid());
    }

    /** The doorbell listener, a Unix-domain socket in the directory; without it the peers poll (selector timeout). */
    private void openListener(Path dir, String nonce, long pid) {
        Path p = dir.resolve(prefix + "-" + nonce + "-" + pid + ".sock");
        try {
            ServerSocketChannel l = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            try {
                l.bind(UnixDomainSocketAddress.of(p), 256);
                l.configureBlocking(false);
            } catch (IOException | RuntimeException e) {
                l.close();
                throw e;
            }
            listener = l;
            listenerPath = p;
        } catch (IOException | RuntimeException e) {
            Log.warn(Log.Subsys.SHM, rank, "SHM: no doorbell socket at " + p + " (" + e + "): blocked ranks wake by timeout");
        }
    }

    /** Whether this endpoint listens for doorbells (published in its address). */
    boolean listening() {
        return listener != null;
    }

    /** The doorbell socket with {@code peer}, or null (no doorbell: that pair polls). */
    SocketChannel of(int peer) {
        return doorbells[peer];
    }

    /**
     * Step 3 of {@link ShmEndpoint#prepare}: doorbell sockets with every peer that has a listener too
     * (lower rank connects), then the listener is closed and its name removed.
     */
    void connect(int[] peers, long timeoutNanos) throws IOException {
        if (listener == null) {
            return;
        }
        long start = System.nanoTime();
        byte[] id = Arrays.copyOf(ctx.commId(), 16);
        int expected = 0;
        for (int p : peers) {
            ShmEndpoint.PeerAddress a = ShmEndpoint.PeerAddress.parse(ctx.peer(p));
            if (!a.doorbell()) {
                continue;
            }
            if (p < rank) {
                expected++;
                continue;
            }
            Path path = a.dir().resolve(prefix + "-" + a.nonce() + "-" + ctx.peer(p).pid() + ".sock");
            SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            try {
                ch.connect(UnixDomainSocketAddress.of(path));
                ByteBuffer hello = ByteBuffer.allocate(20).putInt(rank).put(id).flip();
                while (hello.hasRemaining()) {
                    ch.write(hello);
                }
                ch.configureBlocking(false);
            } catch (IOException e) {
                ch.close();
                throw new IOException("rank " + rank + ": cannot connect the SHM doorbell of " + ctx.peer(p).describe() + " at " + path
                        + ": " + e.getMessage(), e);
            }
            doorbells[p] = ch;
        }
        while (expected > 0) {
            SocketChannel ch = listener.accept();
            if (ch == null) {
                if (System.nanoTime() - start > timeoutNanos) {
                    throw new JcclTimeoutException("rank " + rank + ": " + expected + " lower SHM peer(s) did not connect their doorbell within "
                            + timeoutNanos / 1_000_000_000L + " s (JCCL_CONNECT_TIMEOUT)", null);
                }
                if (ctx.isStopping()) {
                    throw new JcclException(org.jccl.ErrorCode.ABORTED, "rank " + rank + ": communicator stopped while connecting SHM doorbells",
                            null);
                }
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new JcclException(org.jccl.ErrorCode.ABORTED, "rank " + rank + ": interrupted while connecting SHM doorbells", e);
                }
                continue;
            }
            ch.configureBlocking(false);
            ByteBuffer hello = ByteBuffer.allocate(20);
            long helloDeadline = System.nanoTime() + 2_000_000_000L;
            while (hello.hasRemaining() && System.nanoTime() < helloDeadline) {
                int n = ch.read(hello);  // non-blocking: a silent stranger cannot stall us
                if (n < 0) {
                    break;
                }
                if (n == 0) {
                    Thread.onSpinWait();
                    Thread.yield();
                }
            }
            hello.flip();
            int from = hello.remaining() == 20 ? hello.getInt() : -1;
            byte[] got = new byte[16];
            if (from >= 0) {
                hello.get(got);
            }
            if (from < 0 || from >= rank || !Arrays.equals(got, id) || doorbells[from] != null) {
                // Not one of ours (a stranger on a world-writable directory, or another communicator): ignore it.
                ch.close();
                continue;
            }
            ch.configureBlocking(false);
            doorbells[from] = ch;
            expected--;
        }
        closeListener();
    }

    void closeListener() {
        if (listener != null) {
            try {
                listener.close();
                Files.deleteIfExists(listenerPath);
            } catch (IOException e) {
                Log.warn(Log.Subsys.SHM, rank, "SHM: cannot remove " + listenerPath + ": " + e);
            }
            listener = null;
        }
    }

    /** Closes the listener (and removes its name) and every doorbell socket. */
    void close() {
        closeListener();
        for (SocketChannel d : doorbells) {
            if (d != null) {
                try {
                    d.close();
                } catch (IOException ignored) {
                    // closing anyway
                }
            }
        }
    }
}
