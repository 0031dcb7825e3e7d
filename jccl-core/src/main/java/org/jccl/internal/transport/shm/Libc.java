package org.jccl.internal.transport.shm;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

/**
 * The one gate to libc (STYLE.md item 7): {@code open}, {@code posix_fallocate} and {@code close},
 * looked up once. Used only to reserve the pages of a shared-memory file up front: on tmpfs,
 * {@code posix_fallocate} fails with ENOSPC when the file system is full, where touching an
 * unreserved page of a mapping would kill the JVM with SIGBUS.
 *
 * <p>When the handles cannot be made (native access denied, no libc) {@link #available()} is false
 * and callers fall back to writing zeros through a FileChannel (as safe, slower).
 */
final class Libc {
    private Libc() {
    }

    // Linux values (x86-64 and aarch64 agree).
    private static final int O_RDWR = 2;
    private static final int O_CREAT = 0100;
    private static final int O_EXCL = 0200;
    private static final int O_CLOEXEC = 02000000;
    static final int ENOSPC = 28;

    private static final MethodHandle OPEN;
    private static final MethodHandle FALLOCATE;
    private static final MethodHandle CLOSE;
    private static final String UNAVAILABLE;

    static {
        MethodHandle open = null;
        MethodHandle fallocate = null;
        MethodHandle close = null;
        String why = null;
        try {
            Linker linker = Linker.nativeLinker();
            SymbolLookup libc = linker.defaultLookup();
            open = downcall(linker, libc, "open", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT,
                    ValueLayout.JAVA_INT), Linker.Option.firstVariadicArg(2));
            fallocate = downcall(linker, libc, "posix_fallocate", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                    ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
            close = downcall(linker, libc, "close", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        } catch (RuntimeException | LinkageError e) {
            // IllegalCallerException when the JVM runs with --illegal-native-access=deny and without
            // --enable-native-access=ALL-UNNAMED (or the jccl module): the fallback still reserves safely.
            why = e.toString();
            open = null;
        }
        OPEN = open;
        FALLOCATE = fallocate;
        CLOSE = close;
        UNAVAILABLE = why;
    }

    @SuppressWarnings("restricted")
    private static MethodHandle downcall(Linker linker, SymbolLookup libc, String name, FunctionDescriptor fd, Linker.Option... options) {
        MemorySegment sym = libc.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc has no " + name));
        return linker.downcallHandle(sym, fd, options);
    }

    /** Whether the libc calls can be made. */
    static boolean available() {
        return OPEN != null;
    }

    /** Why they cannot (for the log), or null. */
    static String unavailableReason() {
        return UNAVAILABLE;
    }

    /**
     * Creates {@code path} (it must not exist, mode 0600) and reserves {@code bytes} for it.
     *
     * @return 0, or the errno of posix_fallocate (ENOSPC: the file system is full); the file exists either way
     * @throws IOException when the file cannot be created (errno unknown: open's is not captured)
     */
    static int createReserved(Path path, long bytes) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            int fd = (int) OPEN.invokeExact(a.allocateFrom(path.toString()), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd < 0) {
                throw new IOException("cannot create " + path + " (open failed; does the directory exist and is it writable?)");
            }
            try {
                return (int) FALLOCATE.invokeExact(fd, 0L, bytes);
            } finally {
                int ignored = (int) CLOSE.invokeExact(fd);
            }
        } catch (IOException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("libc call failed", t);
        }
    }
}
