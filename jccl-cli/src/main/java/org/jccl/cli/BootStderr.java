package org.jccl.cli;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Takes this JVM's stderr back from the filter {@code bin/jccl} started it with.
 *
 * <p>A JVM started with {@code --add-modules jdk.incubator.vector} (the Vector API reduction kernels)
 * prints {@code WARNING: Using incubator modules: jdk.incubator.vector} while it boots, before any
 * of our code runs, and no JDK option silences it. {@code bin/jccl} therefore starts the JVM with
 * file descriptor 2 on a pipe into a filter that drops exactly that line, keeps the real stderr on
 * another descriptor and names it with {@code -Djccl.bootStderrFd=N}. {@link #restore()} makes
 * descriptor 2 that real stderr again ({@code dup2}): from then on the JVM writes to the terminal or
 * file directly (no process in between, so nothing is reordered or lost when the JVM exits) and the
 * filter sees the end of its input and exits.
 *
 * <p>If the property is absent (the jar run by hand, a test), nothing happens. If the call fails,
 * stderr stays on the filter, which passes every other line on: output is the same, only slower.
 */
final class BootStderr {

    /** The system property {@code bin/jccl} sets to the descriptor of the real stderr. */
    static final String PROPERTY = "jccl.bootStderrFd";

    private static final int STDERR = 2;

    private BootStderr() {
    }

    /**
     * Points descriptor 2 at the descriptor named by {@value #PROPERTY} and closes that one.
     *
     * @return true when stderr was taken back, false when there was nothing to do or it failed
     */
    static boolean restore() {
        String value = System.getProperty(PROPERTY);
        if (value == null) {
            return false;
        }
        int fd;
        try {
            fd = Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
            return false;
        }
        if (fd <= STDERR) {
            return false;
        }
        try {
            Linker linker = Linker.nativeLinker();
            FunctionDescriptor intIntInt = FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT);
            MethodHandle dup2 = linker.downcallHandle(linker.defaultLookup().find("dup2").orElseThrow(), intIntInt);
            MethodHandle close = linker.downcallHandle(linker.defaultLookup().find("close").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
            // What is buffered goes to the filter, in order, before the switch.
            System.err.flush();
            int r = (int) dup2.invokeExact(fd, STDERR);
            if (r != STDERR) {
                return false;
            }
            int ignored = (int) close.invokeExact(fd);
            return true;
        } catch (Throwable e) {
            // No native access, no libc: the filter stays in the path and passes everything else on.
            return false;
        }
    }
}
