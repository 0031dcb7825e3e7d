package org.jccl.internal.control;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jccl.internal.control.ControlChannel.Conn;
import org.jccl.internal.net.WireChannel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The channel agent over a real loopback connection, with a handler that only records: frames
 * arrive whole and in order however the bytes are split, on the agent's thread; what it sends
 * reaches the peer; a frame that breaks the format is reported as malformed, a closed connection as
 * lost; it ticks while idle, runs handed-over tasks, and stops with one close.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ControlChannelTest {

    private final BlockingQueue<String> events = new LinkedBlockingQueue<>();
    private final AtomicInteger ticks = new AtomicInteger();
    private final AtomicInteger closes = new AtomicInteger();
    private volatile Thread handlerThread;
    private SocketChannel peer;
    private ControlChannel channel;
    private Conn conn;

    private final ControlChannel.Handler recorder = new ControlChannel.Handler() {
        @Override
        public boolean onFrame(Conn c, int type, ByteBuffer body, long at) {
            handlerThread = Thread.currentThread();
            byte[] b = new byte[body.remaining()];
            body.get(b);
            events.add("frame " + c.peer + " type " + type + " body " + java.util.HexFormat.of().formatHex(b));
            return true;
        }

        @Override
        public void onLost(Conn c, long at) {
            events.add("lost " + c.peer + " open " + c.ch.isOpen());
        }

        @Override
        public void onBacklog(Conn c, long at) {
            events.add("backlog " + c.peer);
        }

        @Override
        public void onMalformed(Conn c, RuntimeException e) {
            events.add("malformed " + c.peer + ": " + e.getMessage());
        }

        @Override
        public void onTick(long now) {
            ticks.incrementAndGet();
        }

        @Override
        public void onClose() {
            closes.incrementAndGet();
            channel.closeConnections();
            channel.closeSelector();
        }
    };

    @BeforeEach
    void connect() throws IOException {
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            peer = SocketChannel.open(server.getLocalAddress());
            SocketChannel accepted = server.accept();
            Conn[] conns = new Conn[1];
            channel = new ControlChannel("c0ffee", 1, 20, conns);
            conn = new Conn(0, "rank 0 (host test, pid 1)", WireChannel.plain(accepted));
            conns[0] = conn;
            channel.attach();
            channel.start(recorder, false);
        }
    }

    @AfterEach
    void stop() throws IOException {
        channel.stop();
        channel.wakeup();
        peer.close();
    }

    private static byte[] frameBytes(int type, byte[] payload) {
        ByteBuffer f = ControlWire.frame(type, payload.length);
        f.put(payload);
        ByteBuffer sealed = ControlWire.seal(f);
        byte[] b = new byte[sealed.remaining()];
        sealed.get(b);
        return b;
    }

    @Test
    void framesSplitAnywhereArriveWholeInOrderOnTheAgentThread() throws Exception {
        byte[] a = frameBytes(ControlWire.HEARTBEAT, new byte[0]);
        byte[] b = frameBytes(ControlWire.BYE, new byte[] {0, 0, 0, 0, 0, 0, 0, 42});
        ByteBuffer both = ByteBuffer.allocate(a.length + b.length).put(a).put(b).flip();
        while (both.hasRemaining()) {
            ByteBuffer piece = both.slice().limit(Math.min(3, both.remaining()));
            both.position(both.position() + piece.remaining());
            while (piece.hasRemaining()) {
                peer.write(piece);
            }
            Thread.sleep(5);
        }
        assertEquals("frame 0 type " + ControlWire.HEARTBEAT + " body ", events.poll(10, TimeUnit.SECONDS));
        assertEquals("frame 0 type " + ControlWire.BYE + " body 000000000000002a", events.poll(10, TimeUnit.SECONDS));
        assertEquals(channel.roleName(), handlerThread.getName());
        assertEquals("jccl-ctl-c0ffee-r1", channel.roleName());
    }

    @Test
    void whatTheAgentSendsReachesThePeer() throws Exception {
        byte[] expected = frameBytes(ControlWire.GONE, new byte[] {0, 2, 'h', 'i'});
        channel.execute(() -> channel.send(conn, ByteBuffer.wrap(expected)));
        ByteBuffer got = ByteBuffer.allocate(expected.length);
        peer.socket().setSoTimeout(10_000);
        java.io.InputStream in = peer.socket().getInputStream();
        while (got.hasRemaining()) {
            int x = in.read();
            assertTrue(x >= 0, "the peer's stream ended early");
            got.put((byte) x);
        }
        assertArrayEquals(expected, got.array());
    }

    @Test
    void aFrameThatBreaksTheFormatIsReportedAsMalformed() throws Exception {
        byte[] bad = frameBytes(ControlWire.HEARTBEAT, new byte[0]);
        bad[0] = 9; // version
        peer.write(ByteBuffer.wrap(bad));
        String e = events.poll(10, TimeUnit.SECONDS);
        assertNotNull(e);
        assertTrue(e.startsWith("malformed 0: control frame from rank 0 (host test, pid 1) has version 9, expected "), e);
    }

    @Test
    void aConnectionClosedByThePeerIsLostAfterTheFramesBeforeIt() throws Exception {
        peer.write(ByteBuffer.wrap(frameBytes(ControlWire.HEARTBEAT, new byte[0])));
        peer.close();
        assertEquals("frame 0 type " + ControlWire.HEARTBEAT + " body ", events.poll(10, TimeUnit.SECONDS));
        assertEquals("lost 0 open false", events.poll(10, TimeUnit.SECONDS), "the agent closes the socket before it reports the loss");
    }

    @Test
    void itTicksWhileIdleRunsTasksAndClosesOnce() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (ticks.get() < 5 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertTrue(ticks.get() >= 5, "ticks every 20 ms while idle: " + ticks.get());
        AtomicInteger ran = new AtomicInteger();
        channel.runAndWait(ran::incrementAndGet);
        assertEquals(1, ran.get(), "runAndWait ran the task on the agent's thread before returning");
        channel.stop();
        channel.wakeup();
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (closes.get() == 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(1, closes.get());
        assertNull(events.poll(), "no frame, loss or malformed report: " + events);
        assertTrue(!conn.ch.isOpen(), "closed by the handler's onClose");
    }
}
