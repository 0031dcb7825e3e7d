package org.jccl.testing;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.jccl.Config;
import org.jccl.internal.transport.local.LocalTransport;
import org.jccl.spi.Connection;
import org.jccl.spi.Endpoint;
import org.jccl.spi.LinkCosts;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;
import org.jccl.spi.TransportContext;

/**
 * A transport that signals its work only through a file descriptor, as UCX's worker event fd does
 * ({@link Endpoint#wakeFd}): ranks of one JVM, messages carried by LocalTransport's endpoint (opened under
 * this name), but a peer's send, instead of waking the receiving runtime's selector, writes a byte into the
 * receiving endpoint's pipe; {@link Endpoint#armWakeFd} drains it (and says "work pending" when it found
 * any). Its connections have no channels, so a waiting rank that blocks is woken by the runtime's watcher
 * of the descriptor, or not at all until its timed select runs out. Registered for ServiceLoader in this
 * module's test resources; off unless a test turns it on ({@link #enable}); priority -1, before LOCAL.
 */
public final class FdWakeTransport implements Transport {
    public static final String NAME = "TESTFD";

    private static final AtomicBoolean ENABLED = new AtomicBoolean();
    private static final AtomicLong SIGNALS = new AtomicLong();
    private static final AtomicLong ARMS = new AtomicLong();

    private final LocalTransport local = new LocalTransport();

    /** Turns the transport on or off for communicators made from now on, and zeroes the counts. */
    public static void enable(boolean on) {
        ENABLED.set(on);
        SIGNALS.set(0);
        ARMS.set(0);
    }

    /** Bytes written into the endpoints' pipes (peers' sends) since {@link #enable}. */
    public static long signals() {
        return SIGNALS.get();
    }

    /** Times the runtime armed an endpoint's descriptor before blocking (and found no work pending) since {@link #enable}. */
    public static long arms() {
        return ARMS.get();
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return -1;
    }

    @Override
    public boolean isEnabled(Config config) {
        return ENABLED.get();
    }

    @Override
    public LinkCosts costs() {
        return LocalTransport.COSTS;
    }

    @Override
    public Endpoint open(TransportContext ctx) throws IOException {
        Pipe pipe = new Pipe();
        try {
            return new FdEndpoint(local.open(new LocalAlias(NAME, ctx, pipe::signal)), pipe);
        } catch (RuntimeException e) {
            pipe.close();
            throw e;
        }
    }

    @Override
    public boolean canConnect(PeerInfo self, PeerInfo peer) {
        return self.processId().equals(peer.processId()) && self.hostHash().equals(peer.hostHash()) && peer.addresses().containsKey(NAME);
    }

    /** LocalTransport's endpoint with the pipe as its wake descriptor. */
    private static final class FdEndpoint implements Endpoint {
        private final Endpoint inner;
        private final Pipe pipe;

        FdEndpoint(Endpoint inner, Pipe pipe) {
            this.inner = inner;
            this.pipe = pipe;
        }

        @Override
        public byte[] address() {
            return inner.address();
        }

        @Override
        public Connection connect(int peerRank) throws IOException {
            return inner.connect(peerRank);
        }

        @Override
        public void prepare(int[] peers) throws IOException {
            inner.prepare(peers);
        }

        @Override
        public int wakeFd() {
            return pipe.readFd;
        }

        @Override
        public boolean armWakeFd() {
            if (pipe.drain()) {
                return false; // a peer sent since the last look: progress first
            }
            ARMS.incrementAndGet();
            return true;
        }

        @Override
        public String transportName() {
            return NAME;
        }

        @Override
        public void close() {
            try {
                inner.close();
            } finally {
                pipe.close();
            }
        }
    }

    /** A non-blocking pipe(2) through FFM: the read end is the wake descriptor. */
    private static final class Pipe {
        private static final Linker LINKER = Linker.nativeLinker();
        private static final MethodHandle PIPE2 = handle("pipe2", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
        private static final MethodHandle WRITE = handle("write",
                FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        private static final MethodHandle READ = handle("read",
                FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        private static final MethodHandle CLOSE = handle("close", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        private static final int O_NONBLOCK = 04000;

        final int readFd;
        final int writeFd;
        private final AtomicBoolean closed = new AtomicBoolean();

        @SuppressWarnings("restricted")
        private static MethodHandle handle(String name, FunctionDescriptor fd) {
            return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), fd);
        }

        Pipe() throws IOException {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment fds = a.allocate(8, 4);
                if ((int) PIPE2.invokeExact(fds, O_NONBLOCK) != 0) {
                    throw new IOException("pipe2 failed");
                }
                readFd = fds.get(ValueLayout.JAVA_INT, 0);
                writeFd = fds.get(ValueLayout.JAVA_INT, 4);
            } catch (IOException | RuntimeException | Error e) {
                throw e;
            } catch (Throwable t) {
                throw new IOException(t);
            }
        }

        /** One byte in: the descriptor becomes readable (a full pipe is readable already). */
        void signal() {
            if (closed.get()) {
                return;
            }
            try (Arena a = Arena.ofConfined()) {
                long n = (long) WRITE.invokeExact(writeFd, a.allocate(1), 1L);
                if (n == 1) {
                    SIGNALS.incrementAndGet();
                }
            } catch (Throwable t) {
                throw new IllegalStateException(t);
            }
        }

        /** Empties the pipe; true when it held anything. */
        boolean drain() {
            boolean any = false;
            try (Arena a = Arena.ofConfined()) {
                MemorySegment buf = a.allocate(256);
                while ((long) READ.invokeExact(readFd, buf, 256L) > 0) {
                    any = true;
                }
            } catch (Throwable t) {
                throw new IllegalStateException(t);
            }
            return any;
        }

        void close() {
            if (closed.compareAndSet(false, true)) {
                try {
                    int r = (int) CLOSE.invokeExact(writeFd);
                    r = (int) CLOSE.invokeExact(readFd);
                } catch (Throwable t) {
                    throw new IllegalStateException(t);
                }
            }
        }
    }
}
