package org.jccl.internal.util;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The one gate to {@code poll(2)} on a raw file descriptor (STYLE.md item 7): the wait of a transport
 * whose work is signalled through a file descriptor rather than a Java channel (UCX's worker event fd).
 * When the handle cannot be made (native access denied) {@link #available()} is false and says why.
 */
public final class Poll {
    private Poll() {
    }

    // Linux values (x86-64 and aarch64 agree).
    private static final short POLLIN = 0x001;
    private static final short POLLERR = 0x008;
    private static final short POLLHUP = 0x010;
    private static final short POLLNVAL = 0x020;
    private static final int EINTR = 4;

    /** struct pollfd { int fd; short events; short revents; } */
    private static final long PFD_SIZE = 8;

    private static final MethodHandle POLL;
    private static final String UNAVAILABLE;

    static {
        MethodHandle poll = null;
        String why = null;
        try {
            Linker linker = Linker.nativeLinker();
            poll = downcall(linker, linker.defaultLookup(), "poll",
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
        } catch (RuntimeException | LinkageError e) {
            why = "native access is denied to jccl (run java with " + NativeAccess.flag() + "): " + e;
        }
        POLL = poll;
        UNAVAILABLE = why;
    }

    @SuppressWarnings("restricted")
    private static MethodHandle downcall(Linker linker, SymbolLookup libc, String name, FunctionDescriptor fd) {
        MemorySegment sym = libc.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc has no " + name));
        return linker.downcallHandle(sym, fd, Linker.Option.captureCallState("errno"));
    }

    /** Whether {@link #readable} can be called. */
    public static boolean available() {
        return POLL != null;
    }

    /** Why it cannot, or null. */
    public static String unavailableReason() {
        return UNAVAILABLE;
    }

    /**
     * Waits up to {@code timeoutMillis} for {@code fd} to become readable.
     *
     * @return true when it is readable, false when the time ran out (or a signal interrupted the wait)
     * @throws IllegalStateException when the descriptor is not open, or hung up or in error: the
     *         message names the descriptor and what poll reported
     */
    public static boolean readable(int fd, int timeoutMillis) {
        if (POLL == null) {
            throw new IllegalStateException("poll(2) is not available: " + UNAVAILABLE);
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment pfd = a.allocate(PFD_SIZE, 4);
            pfd.set(ValueLayout.JAVA_INT, 0, fd);
            pfd.set(ValueLayout.JAVA_SHORT, 4, POLLIN);
            MemorySegment state = a.allocate(Linker.Option.captureStateLayout());
            int n = (int) POLL.invokeExact(state, pfd, 1L, timeoutMillis);
            if (n < 0) {
                int errno = state.get(ValueLayout.JAVA_INT, Linker.Option.captureStateLayout().byteOffset(
                        java.lang.foreign.MemoryLayout.PathElement.groupElement("errno")));
                if (errno == EINTR) {
                    return false;
                }
                throw new IllegalStateException("poll(2) on file descriptor " + fd + " failed: errno " + errno);
            }
            if (n == 0) {
                return false;
            }
            short revents = pfd.get(ValueLayout.JAVA_SHORT, 6);
            if ((revents & POLLNVAL) != 0) {
                throw new IllegalStateException("file descriptor " + fd + " is not open (poll(2): POLLNVAL)");
            }
            if ((revents & POLLIN) != 0) {
                return true;
            }
            if ((revents & (POLLERR | POLLHUP)) != 0) {
                throw new IllegalStateException("file descriptor " + fd + " is " + ((revents & POLLHUP) != 0 ? "hung up" : "in error")
                        + " (poll(2) revents 0x" + Integer.toHexString(revents) + ")");
            }
            return false;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("poll(2) on file descriptor " + fd + " failed: " + t, t);
        }
    }
}
