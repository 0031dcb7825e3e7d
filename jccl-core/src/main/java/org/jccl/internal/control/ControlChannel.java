package org.jccl.internal.control;

import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jccl.JcclException;
import org.jccl.internal.log.Log;
import org.jccl.internal.net.WireChannel;

/**
 * The control channel's I/O agent: one thread with one selector over the control connections (and
 * over whatever else registers on it: the status endpoint), {@link ControlWire} framing, queued
 * writes, and tasks handed over by other threads. No policy: every frame, lost connection, write
 * backlog and tick goes to the {@link Handler}, which decides.
 *
 * <p>Shaped as an agent (Agrona's {@code Agent}): {@link #doWork()} handles what the last wait
 * found ready, then the queued tasks, then the tick, and returns how much it did; {@link #idle}
 * waits on the selector for up to one tick (new tasks wake it; it returns at once when a key is
 * ready, so it does not look at the work count); {@link #roleName()} names the thread. The duty
 * cycle is: ready keys, tasks, tick, wait, and so on until {@link #stop()}; then the tasks still
 * queued run and {@link Handler#onClose()} shuts down.
 *
 * <p>Threading: the agent's thread owns the connections and the selector; {@link #execute},
 * {@link #runAndWait}, {@link #wakeup} and {@link #stop} are for any thread.
 */
final class ControlChannel {

    /** Queued, unwritten bytes to one peer above which it counts as reading nothing ({@link Handler#onBacklog}). */
    static final long MAX_OUT_BYTES = 4L << 20;

    /** What the agent reports; called on the agent's thread. */
    interface Handler {
        /** A whole frame from {@code c} read at {@code at}; returns whether to go on reading {@code c}. */
        boolean onFrame(Conn c, int type, ByteBuffer body, long at);

        /** {@code c} closed or broke at {@code at} (its socket is closed already). */
        void onLost(Conn c, long at);

        /** {@code c} queued more than {@link #MAX_OUT_BYTES} unwritten at {@code at}: its peer reads nothing. */
        void onBacklog(Conn c, long at);

        /** {@code c}, an authenticated peer, sent a frame that breaks the format ({@code e} says how). */
        void onMalformed(Conn c, RuntimeException e);

        /** Once per duty cycle, after the ready keys and the tasks. */
        void onTick(long now);

        /** The duty cycle ended (stopped, or the thread failed): close everything. */
        void onClose();
    }

    /** Another channel registered on the agent's selector (the status endpoint's); must not throw. */
    @FunctionalInterface
    interface KeyHandler {
        void ready(SelectionKey key);
    }

    /** One control connection (to the hub, or at the hub to one rank). */
    static final class Conn {
        final int peer;
        /** "rank 3 (host b, pid 881)", for errors about its frames. */
        final String name;
        final SocketChannel ch;
        /** What frames are read from and written to: the socket, or TLS over it ({@code JCCL_TLS=1}). */
        final WireChannel w;
        /** When the connection was made ({@code System.nanoTime()}). */
        final long connectedAt;
        final ByteBuffer header = ByteBuffer.allocate(ControlWire.HEADER);
        ByteBuffer payload;
        final ArrayDeque<ByteBuffer> out = new ArrayDeque<>();
        long outBytes;
        SelectionKey key;

        Conn(int peer, String name, WireChannel w) {
            this.peer = peer;
            this.name = name;
            this.ch = w.socket();
            this.w = w;
            this.connectedAt = System.nanoTime();
        }
    }

    private final String role;
    private final int rank;
    private final String comm;
    private final long tickMs;
    private final Selector selector;
    private final Conn[] conns;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final Thread thread;
    private Handler handler;
    private boolean tls;
    private volatile boolean stopped;

    /**
     * Opens the selector; {@code conns} (index = peer rank at the hub, 0 elsewhere; null where there
     * is none) is filled by the caller before {@link #attach()}.
     */
    ControlChannel(String comm, int rank, long tickMs, Conn[] conns) throws IOException {
        this.comm = comm;
        this.rank = rank;
        this.role = "jccl-ctl-" + comm + "-r" + rank;
        this.tickMs = tickMs;
        this.conns = conns;
        this.selector = Selector.open();
        this.thread = new Thread(this::run, role);
        this.thread.setDaemon(true);
    }

    /** The name of the agent's thread: {@code jccl-ctl-<comm>-r<rank>}. */
    String roleName() {
        return role;
    }

    /** Registers every connection of the star (non-blocking, TCP_NODELAY, read interest). */
    void attach() throws IOException {
        for (Conn c : conns) {
            if (c != null) {
                c.ch.configureBlocking(false);
                c.ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
                c.key = c.ch.register(selector, SelectionKey.OP_READ, c);
            }
        }
    }

    /** Registers another channel (non-blocking already) on the selector. */
    SelectionKey register(SelectableChannel ch, int ops, KeyHandler h) throws IOException {
        return ch.register(selector, ops, h);
    }

    /**
     * Starts the agent's thread with {@code handler}; {@code tls}: the connections run TLS, and the
     * thread first reads what came with the handshake's last records.
     */
    void start(Handler handler, boolean tls) {
        this.handler = handler;
        this.tls = tls;
        thread.start();
    }

    boolean stopped() {
        return stopped;
    }

    /** The duty cycle ends after the current step (any thread; see {@link #wakeup}). */
    void stop() {
        stopped = true;
    }

    void wakeup() {
        selector.wakeup();
    }

    /** Runs {@code task} on the agent's thread, soon (any thread). */
    void execute(Runnable task) {
        tasks.add(task);
        selector.wakeup();
    }

    /** Runs {@code r} on the agent's thread and waits for it, up to 200 ms (on the agent's thread: at once). */
    void runAndWait(Runnable r) {
        if (Thread.currentThread() == thread) {
            r.run();
            return;
        }
        CountDownLatch done = new CountDownLatch(1);
        tasks.add(() -> {
            try {
                r.run();
            } finally {
                done.countDown();
            }
        });
        selector.wakeup();
        try {
            done.await(200, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ------------------------------------------------------------------------------------------ the duty cycle

    private void run() {
        try {
            onStart();
            while (true) {
                int work = doWork();
                if (stopped) {
                    break;
                }
                idle(work);
            }
        } catch (IOException | RuntimeException e) {
            if (!stopped) {
                Log.warn(Log.Subsys.NET, rank, "comm " + comm + ": control thread failed: " + e);
            }
        } finally {
            Runnable t;
            while ((t = tasks.poll()) != null) {
                t.run();
            }
            handler.onClose();
        }
    }

    private void onStart() {
        if (tls) {
            // Frames that arrived with the handshake's last TLS records are already in the channel: the selector will not
            // report them.
            for (Conn c : conns) {
                if (c != null && !stopped) {
                    read(c);
                }
            }
        }
    }

    /** The keys the last wait found ready, then the queued tasks, then the tick; returns keys plus tasks handled. */
    int doWork() {
        int work = 0;
        Iterator<SelectionKey> it = selector.selectedKeys().iterator();
        while (it.hasNext()) {
            SelectionKey k = it.next();
            it.remove();
            if (!k.isValid()) {
                continue;
            }
            work++;
            if (k.attachment() instanceof Conn c) {
                if (k.isReadable()) {
                    read(c);
                }
                if (k.isValid() && k.isWritable()) {
                    flush(c);
                }
            } else if (k.attachment() instanceof KeyHandler h) {
                h.ready(k);
            }
        }
        if (stopped) {
            return work;
        }
        Runnable t;
        while ((t = tasks.poll()) != null) {
            t.run();
            work++;
        }
        if (stopped) {
            return work;
        }
        handler.onTick(System.nanoTime());
        return work;
    }

    /** Waits for a ready key, a task or the next tick. */
    void idle(int workCount) throws IOException {
        selector.select(tickMs);
    }

    // ------------------------------------------------------------------------------------------ I/O

    /** Writes {@code frame} to {@code c}, or queues what does not go at once; a connection that breaks is lost. */
    void send(Conn c, ByteBuffer frame) {
        if (!c.ch.isOpen()) {
            return;
        }
        if (c.out.isEmpty()) {
            try {
                c.w.write(frame);
                // Done when the frame is written and (TLS) no record of it waits in the channel.
                if (!frame.hasRemaining() && c.w.flush()) {
                    return;
                }
            } catch (IOException | JcclException e) {
                lost(c);
                return;
            }
        }
        c.out.add(frame);
        c.outBytes += frame.remaining();
        if (c.outBytes > MAX_OUT_BYTES) {
            handler.onBacklog(c, System.nanoTime());
            return;
        }
        if (c.key != null && c.key.isValid()) {
            c.key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
        }
    }

    private void flush(Conn c) {
        try {
            while (!c.out.isEmpty()) {
                ByteBuffer b = c.out.peek();
                int before = b.remaining();
                c.w.write(b);
                c.outBytes -= before - b.remaining();
                if (b.hasRemaining()) {
                    return;
                }
                c.out.poll();
            }
            if (!c.w.flush()) {
                return; // TLS records still wait for the socket: stay interested in writing
            }
            c.key.interestOps(SelectionKey.OP_READ);
        } catch (IOException | JcclException e) {
            lost(c);
        }
    }

    private void read(Conn c) {
        try {
            while (true) {
                if (c.payload == null) {
                    int n = c.w.read(c.header);
                    if (n < 0) {
                        lost(c);
                        return;
                    }
                    if (c.header.hasRemaining()) {
                        if (n == 0) {
                            return;
                        }
                        continue; // read until nothing comes: TLS may hold more records than the socket reports
                    }
                    int len = ControlWire.payloadLength(c.header, c.name);
                    c.payload = ByteBuffer.allocate(len);
                }
                if (c.payload.hasRemaining()) {
                    int n = c.w.read(c.payload);
                    if (n < 0) {
                        lost(c);
                        return;
                    }
                    if (c.payload.hasRemaining()) {
                        if (n == 0) {
                            return;
                        }
                        continue;
                    }
                }
                int type = c.header.get(1) & 0xFF;
                ByteBuffer body = c.payload.flip();
                c.header.clear();
                c.payload = null;
                if (!handler.onFrame(c, type, body, System.nanoTime())) {
                    return;
                }
            }
        } catch (IOException e) {
            lost(c);
        } catch (JcclException | java.nio.BufferUnderflowException e) {
            handler.onMalformed(c, e);
        }
    }

    private void lost(Conn c) {
        closeQuietly(c.ch);
        handler.onLost(c, System.nanoTime());
    }

    /** Closes {@code c}'s socket (it stays registered until the selector drops the key). */
    void close(Conn c) {
        closeQuietly(c.ch);
    }

    /** Writes what is queued on every connection (best effort, up to 100 ms in all), then closes them. */
    void closeConnections() {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100);
        for (Conn c : conns) {
            if (c == null) {
                continue;
            }
            while (!c.out.isEmpty() && c.ch.isOpen() && System.nanoTime() < deadline) {
                try {
                    if (c.w.write(c.out.peek()) == 0) {
                        Thread.onSpinWait();
                    }
                    if (!c.out.peek().hasRemaining()) {
                        c.out.poll();
                    }
                } catch (IOException | RuntimeException e) {
                    break;
                }
            }
            try {
                // TLS: the records of the last frames may still wait in the channel.
                while (c.ch.isOpen() && !c.w.flush() && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
            } catch (IOException | RuntimeException e) {
                // closing either way
            }
            closeQuietly(c.ch);
        }
    }

    /** Closes the selector (the last step of a shutdown). */
    void closeSelector() {
        try {
            selector.close();
        } catch (IOException ignored) {
            // closing
        }
    }

    static void closeQuietly(java.io.Closeable c) {
        try {
            c.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }
}
