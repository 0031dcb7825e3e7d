package org.jccl.internal.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.jccl.internal.util.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The wake descriptor of a transport without Java channels (UCX's worker event fd), played by a
 * real pipe: an event wakes the operation thread once per arming, never while unarmed, and closing
 * stops the watcher.
 */
@Timeout(30)
class FdWakerTest {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle PIPE = handle("pipe", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
    private static final MethodHandle WRITE = handle("write",
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
    private static final MethodHandle READ = handle("read",
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
    private static final MethodHandle CLOSE = handle("close", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    @SuppressWarnings("restricted")
    private static MethodHandle handle(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), fd);
    }

    private int readFd;
    private int writeFd;

    @BeforeEach
    void pipe() throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fds = a.allocate(8, 4);
            assertEquals(0, (int) PIPE.invokeExact(fds));
            readFd = fds.get(ValueLayout.JAVA_INT, 0);
            writeFd = fds.get(ValueLayout.JAVA_INT, 4);
        }
    }

    @AfterEach
    void closePipe() throws Throwable {
        int r = (int) CLOSE.invokeExact(readFd);
        r = (int) CLOSE.invokeExact(writeFd);
    }

    /** The transport's event: the descriptor becomes readable. */
    private void event() throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            assertEquals(1L, (long) WRITE.invokeExact(writeFd, a.allocate(1), 1L));
        }
    }

    /** The transport's progress drains what signalled it (as ucp_worker_progress does). */
    private void drain() throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            assertEquals(1L, (long) READ.invokeExact(readFd, a.allocate(1), 1L));
        }
    }

    @Test
    void anEventWakesTheArmedOperationThreadOncePerArming() throws Throwable {
        Semaphore woken = new Semaphore(0);
        try (FdWaker w = new FdWaker("TEST", "c0ffee00", 0, readFd, woken::release)) {
            w.armed();
            assertFalse(woken.tryAcquire(300, TimeUnit.MILLISECONDS), "no event, no wake-up");
            event();
            assertTrue(woken.tryAcquire(5, TimeUnit.SECONDS), "the event woke the operation thread");
            // Still readable (not drained yet) but not re-armed: the watcher must not wake (or spin) again.
            assertFalse(woken.tryAcquire(300, TimeUnit.MILLISECONDS), "one wake-up per arming");
            drain();
            w.armed();
            event();
            assertTrue(woken.tryAcquire(5, TimeUnit.SECONDS), "re-armed, the next event wakes it again");
            assertEquals(2, w.wakeups());
        }
    }

    @Test
    void anEventBeforeArmingWakesAtTheArming() throws Throwable {
        Semaphore woken = new Semaphore(0);
        try (FdWaker w = new FdWaker("TEST", "c0ffee00", 0, readFd, woken::release)) {
            event();
            assertFalse(woken.tryAcquire(300, TimeUnit.MILLISECONDS), "unarmed: the operation thread is busy and progresses anyway");
            w.armed();
            assertTrue(woken.tryAcquire(5, TimeUnit.SECONDS), "armed over a readable descriptor: woken at once");
        }
    }

    @Test
    void closeStopsTheWatcherWithinOnePoll() throws Throwable {
        Semaphore woken = new Semaphore(0);
        FdWaker w = new FdWaker("TEST", "c0ffee00", 0, readFd, woken::release);
        w.armed();
        long t0 = System.nanoTime();
        w.close();
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(2), "close() waited too long for the watcher");
        assertTrue(Thread.getAllStackTraces().keySet().stream().noneMatch(t -> t.getName().startsWith("jccl-fd-TEST-c0ffee00") && t.isAlive()),
                "the watcher thread still runs");
        event();
        assertFalse(woken.tryAcquire(300, TimeUnit.MILLISECONDS), "closed: no wake-up");
    }

    @Test
    void pollSaysWhenADescriptorIsNotOpen() {
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> Poll.readable(1 << 20, 10));
        assertTrue(e.getMessage().contains("not open"), e.getMessage());
    }
}
